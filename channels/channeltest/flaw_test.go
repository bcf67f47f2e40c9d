package channeltest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels/channeltest"
)

// flawEnv switches a defect on in the example adapter of TestFlawed.
const flawEnv = "CHANNELTEST_FLAW"

// TestFlawed runs the suite against the example adapter with a defect. It
// only runs as the child process of TestSuiteCatchesFlaws, which expects it
// to fail.
func TestFlawed(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		t.Skip("run by TestSuiteCatchesFlaws")
	}
	channeltest.Run(t, exampleHarness(flaw))
}

// TestSuiteCatchesFlaws checks that the suite has teeth: each defect of
// the example adapter fails the subtest meant to catch it, without
// crashing the run.
func TestSuiteCatchesFlaws(t *testing.T) {
	t.Parallel()
	if os.Getenv(flawEnv) != "" {
		t.Skip("in the child process")
	}
	flaws := []struct{ flaw, subtest, says string }{
		{"lenient-config", "descriptor", "New accepted the malformed config"},
		{"drops-subject", "send", "the provider received subject null"},
		{"not-idempotent", "idempotent", "made 2 provider messages"},
		{"unstable-id", "inbound", "a repeat delivery got ProviderID"},
		{"unsigned", "signature", "ParseWebhook accepted a request with a broken signature"},
		{"panic", "malformed", "panicked"},
		{"unclassified", "errors/rate-limited", "errors.Is(err, channels.ErrTransient) = false"},
		{"anonymous-errors", "errors/rejected", "does not name the channel"},
		{"provision-plain-error", "provision", "is not a *channels.ConfigError naming the field"},
		{"deprovision-noop", "deprovision", "still has the connection's setup"},
		{"poll-nil-on-failure", "poll", "Poll returned nil after emit failed"},
		{"poll-acks-failed", "poll", "Poll had not emitted the message \"Polled message two: its first emit fails.\""},
		{"typing-drops-reply", "typing", "the provider saw no typing indicator on message"},
		{"typing-every-lease", "typing", "TypingEvery() = 10s"},
		{"respond-unsigned", "respond", "Respond answered a handshake with a broken signature"},
		{"respond-swallows", "respond", "Respond answered an ordinary inbound request itself"},
		{"respond-panic", "respond", "panicked"},
		{"route-unsigned", "app", "Route accepted an app-level event with a broken signature"},
		{"route-wrong-key", "app", "Route gave the keys"},
		{"other-tenant", "app", "returned another tenant's message"},
		{"parse-trusts-app", "app", "ParseWebhook accepted an app-level event with a broken signature"},
	}
	for _, tt := range flaws {
		t.Run(tt.flaw, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFlawed$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), flawEnv+"="+tt.flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed an adapter with the flaw %q:\n%s", tt.flaw, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFlawed/"+tt.subtest+" ") {
				t.Errorf("flaw %q did not fail subtest %q:\n%s", tt.flaw, tt.subtest, out)
			}
			if !strings.Contains(string(out), tt.says) {
				t.Errorf("flaw %q: the output does not say %q:\n%s", tt.flaw, tt.says, out)
			}
			if strings.Contains(string(out), "panic: ") {
				t.Errorf("flaw %q crashed the run:\n%s", tt.flaw, out)
			}
		})
	}
}

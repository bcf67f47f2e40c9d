package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cliKey is a key as `comm keys --json` prints it.
type cliKey struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Display   string  `json:"display"`
	Name      *string `json:"name"`
	Current   bool    `json:"current"`
	RevokedAt *string `json:"revoked_at"`
	APIKey    string  `json:"api_key"`
}

func keysJSON(t *testing.T, bin, dir string, env []string) []cliKey {
	t.Helper()
	out, errOut, code := run(t, bin, dir, env, "keys", "--json")
	if code != 0 {
		t.Fatalf("keys --json: %d %s", code, errOut)
	}
	var ks []cliKey
	if err := json.Unmarshal([]byte(out), &ks); err != nil {
		t.Fatalf("keys --json: %v: %s", err, out)
	}
	return ks
}

var shownKey = regexp.MustCompile(`(?m)^  (comm_sandbox_\S+)$`)

// TestCLIKeys runs `comm keys`, `comm keys create` and `comm keys revoke`
// with a sandbox key against the real binary, and `comm account`, which a
// sandbox key is refused.
func TestCLIKeys(t *testing.T) {
	bin := binary(t)
	srv := start(t, bin, t.TempDir())
	dir := t.TempDir()
	clean := []string{"COMM_API_KEY=", "COMM_BASE_URL="}
	if _, errOut, code := run(t, bin, dir, clean, "sandbox", "keys", "--base-url", srv.base); code != 0 {
		t.Fatalf("sandbox: %d %s", code, errOut)
	}

	// The table: one key, the one in use.
	out, errOut, code := run(t, bin, dir, clean, "keys")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !regexp.MustCompile(`ID\s+KIND\s+DISPLAY\s+NAME\s+LAST USED\s+REVOKED`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^\*\s+key_\S+\s+sandbox\s+comm_sandbox_…\S{4}\s+-\s+\S+\s+-$`).MatchString(lines[1]) {
		t.Fatalf("keys: %d\n%s\n%s", code, out, errOut)
	}
	first := keysJSON(t, bin, dir, clean)
	if len(first) != 1 || !first[0].Current || first[0].Kind != "sandbox" || first[0].APIKey != "" {
		t.Fatalf("keys --json: %+v", first)
	}
	env, _ := os.ReadFile(filepath.Join(dir, ".env"))
	if strings.Contains(out, strings.TrimPrefix(regexp.MustCompile(`COMM_API_KEY=\S+`).FindString(string(env)), "COMM_API_KEY=")) {
		t.Fatalf("keys shows the key itself: %s", out)
	}

	// create prints the key once, with the warning.
	out, errOut, code = run(t, bin, dir, clean, "keys", "create", "--name", "ci")
	m := shownKey.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "shown only this once") || !strings.Contains(out, `"ci"`) {
		t.Fatalf("keys create: %d\n%s\n%s", code, out, errOut)
	}
	ciKey := m[1]
	out, errOut, code = run(t, bin, dir, clean, "keys", "create", "--json")
	var second cliKey
	if code != 0 || json.Unmarshal([]byte(out), &second) != nil || !strings.HasPrefix(second.APIKey, "comm_sandbox_") ||
		second.Name != nil || !strings.Contains(errOut, "only this once") {
		t.Fatalf("keys create --json: %d\n%s\n%s", code, out, errOut)
	}

	// The new key works, and is the current one for itself.
	withCI := []string{"COMM_API_KEY=" + ciKey, "COMM_BASE_URL=" + srv.base}
	ks := keysJSON(t, bin, dir, withCI)
	if len(ks) != 3 || ks[0].ID != first[0].ID || ks[0].Current || !ks[1].Current || ks[1].Name == nil || *ks[1].Name != "ci" {
		t.Fatalf("keys with the new key: %+v", ks)
	}
	out, _, _ = run(t, bin, dir, clean, "keys", "list")
	if !regexp.MustCompile(`(?m)^\s+` + ks[1].ID + `\s+sandbox\s+\S+\s+ci\s+\S+\s+-$`).MatchString(out) {
		t.Errorf("keys list lacks the ci key as used and live:\n%s", out)
	}

	// revoke: the key stops working at once.
	out, errOut, code = run(t, bin, dir, clean, "keys", "revoke", ks[1].ID)
	if code != 0 || !strings.Contains(out, "Revoked key "+ks[1].ID) || strings.Contains(out, "key in use") {
		t.Fatalf("keys revoke: %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := run(t, bin, dir, withCI, "keys"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Errorf("keys with the revoked key: %d %s", code, errOut)
	}
	out, _, _ = run(t, bin, dir, clean, "keys")
	if !regexp.MustCompile(`(?m)^\s+` + ks[1].ID + `\s+.*\s\d{4}-\d\d-\d\dT\S+$`).MatchString(out) {
		t.Errorf("keys does not show the revocation:\n%s", out)
	}
	// Revoking the key in use says so.
	own := []string{"COMM_API_KEY=" + second.APIKey, "COMM_BASE_URL=" + srv.base}
	if out, errOut, code := run(t, bin, dir, own, "keys", "revoke", second.ID); code != 0 || !strings.Contains(out, "key in use") {
		t.Errorf("revoking the key in use: %d\n%s\n%s", code, out, errOut)
	}
	var revoked cliKey
	out, _, code = run(t, bin, dir, clean, "keys", "revoke", second.ID, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &revoked) != nil || revoked.RevokedAt == nil || revoked.ID != second.ID {
		t.Errorf("revoking again: %d %s", code, out)
	}

	// The last working key cannot be revoked: exit 1 saying why.
	if out, errOut, code := run(t, bin, dir, clean, "keys", "revoke", first[0].ID); code != 1 || out != "" ||
		!strings.Contains(errOut, "last working key") || !strings.Contains(errOut, "409") {
		t.Errorf("revoking the last key: %d\n%s\n%s", code, out, errOut)
	}

	// A sandbox key has no account: exit 1 with the way out.
	for _, args := range [][]string{{"account"}, {"account", "--json"}} {
		out, errOut, code := run(t, bin, dir, clean, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "no account for this key (403 forbidden)") ||
			!strings.Contains(errOut, "sandbox key") || !strings.Contains(errOut, "comm login") {
			t.Errorf("%v with a sandbox key: %d\n%s\n%s", args, code, out, errOut)
		}
	}

	// Exit codes.
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{[]string{"keys", "revoke", "key_nope"}, clean, 1, "not_found"},
		{[]string{"keys", "revoke"}, clean, 2, "one key id"},
		{[]string{"keys", "revoke", "a", "b"}, clean, 2, "one key id"},
		{[]string{"keys", "create", "extra"}, clean, 2, "no arguments"},
		{[]string{"keys", "frobnicate"}, clean, 2, "unknown keys command"},
		{[]string{"account", "extra"}, clean, 2, "no arguments"},
		{[]string{"keys", "create", "--name", "two\nlines"}, clean, 1, "invalid_parameter"},
	} {
		_, errOut, code := run(t, bin, dir, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d (want %d): %s", tc.args, code, tc.code, errOut)
		}
	}
	for _, args := range [][]string{{"keys"}, {"account"}} {
		if _, errOut, code := run(t, bin, t.TempDir(), clean, args...); code != 3 || !strings.Contains(errOut, "COMM_API_KEY") {
			t.Errorf("%v without a key: exit %d: %s", args, code, errOut)
		}
	}
	help, _, _ := run(t, bin, dir, clean, "help")
	for _, want := range []string{"comm account", "comm keys", "revoke ID"} {
		if !strings.Contains(help, want) {
			t.Errorf("usage lacks %q:\n%s", want, help)
		}
	}
	srv.stop(t)
}

// accountAnswer is GET /v1/account of a signed-in key, as the gateway
// answers it.
const accountAnswer = `{"account":{"id":"acct_1","issuer":"https://idp.test","subject":"u1","email":"ann@example.com","name":"Ann",
	"created_at":"2026-01-02T03:04:05Z"},"currency":"USD","balance_micros":99750000,"balance":"99.75",
	"ledger":[{"id":"cre_1","kind":"grant","amount_micros":100000000,"amount":"100.00","description":"Welcome credit for signing in",
	"project_id":null,"created_at":"2026-01-02T03:04:05Z"},{"id":"cre_2","kind":"debit","amount_micros":-250000,"amount":"-0.25",
	"description":"SMS to +15550100","project_id":"proj_x","created_at":"2026-01-03T00:00:00Z"}],
	"projects":[{"id":"proj_x","name":"carried over","connections":2,"last_seq":41,"created_at":"2026-01-01T00:00:00Z"}]}`

// signedInGateway fakes what a signed-in key sees: the device flow
// approving at the second poll, the project and (withAccount) the account.
func signedInGateway(t *testing.T, withAccount bool) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/auth/device/start", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"user_code": "BCDF-GHJK", "device_code": "dev_x",
			"verification_uri_complete": "http://" + r.Host + "/device?code=BCDF-GHJK", "interval": 1})
	})
	mux.HandleFunc("POST /v1/auth/device/token", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"status": "approved", "api_key": "comm_SIGNEDIN", "base_url": "http://" + r.Host})
	})
	mux.HandleFunc("GET /v1/project", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"id": "proj_x", "name": "carried over"})
	})
	if withAccount {
		mux.HandleFunc("GET /v1/account", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer comm_SIGNEDIN" {
				t.Errorf("account fetched with %q, want the new key", r.Header.Get("Authorization"))
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(accountAnswer))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestCLILoginAccount: after writing the signed-in key, `comm login` shows
// the account fetched with it, and goes without when the fetch fails.
func TestCLILoginAccount(t *testing.T) {
	bin := binary(t)
	clean := []string{"COMM_API_KEY=", "COMM_BASE_URL="}
	for _, withAccount := range []bool{true, false} {
		srv := signedInGateway(t, withAccount)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".env"), []byte("COMM_API_KEY=comm_sandbox_old\nCOMM_BASE_URL="+srv.URL+"\n"), 0o600)
		out, errOut, code := run(t, bin, dir, clean, "login", "--no-browser")
		if code != 0 || !strings.Contains(out, "Signed in. Project proj_x (carried over)") {
			t.Fatalf("login: %d\n%s\n%s", code, out, errOut)
		}
		const line = "Account: Ann <ann@example.com>; balance USD 99.75."
		if strings.Contains(out, line) != withAccount || strings.Contains(out, "Account:") != withAccount {
			t.Errorf("login (account served: %v):\n%s", withAccount, out)
		}
		if env, _ := os.ReadFile(filepath.Join(dir, ".env")); !strings.Contains(string(env), "COMM_API_KEY=comm_SIGNEDIN") {
			t.Errorf(".env after login:\n%s", env)
		}
	}
}

// TestCLIAccount: `comm account` prints who, the balance, the ledger and
// the projects of a signed-in key (the gateway is a fake: a signed-in key
// needs a browser sign-in), or the answer as it is with --json.
func TestCLIAccount(t *testing.T) {
	bin := binary(t)
	srv := signedInGateway(t, true)
	env := []string{"COMM_API_KEY=comm_SIGNEDIN", "COMM_BASE_URL=" + srv.URL}
	out, errOut, code := run(t, bin, t.TempDir(), env, "account")
	if code != 0 {
		t.Fatalf("account: %d %s", code, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Account acct_1: Ann <ann@example.com> \(signed in with https://idp.test\)$`),
		regexp.MustCompile(`(?m)^Balance: USD 99.75$`),
		regexp.MustCompile(`(?m)^\s+DATE\s+KIND\s+AMOUNT\s+PROJECT\s+DESCRIPTION$`),
		regexp.MustCompile(`(?m)^\s+2026-01-02T03:04:05Z\s+grant\s+USD 100.00\s+-\s+Welcome credit for signing in$`),
		regexp.MustCompile(`(?m)^\s+2026-01-03T00:00:00Z\s+debit\s+USD -0.25\s+proj_x\s+SMS to \+15550100$`),
		regexp.MustCompile(`(?m)^\s+ID\s+NAME\s+CONNECTIONS\s+LAST SEQ\s+CREATED$`),
		regexp.MustCompile(`(?m)^\s+proj_x\s+carried over\s+2\s+41\s+2026-01-01T00:00:00Z$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("account lacks %s:\n%s", want, out)
		}
	}
	out, _, code = run(t, bin, t.TempDir(), env, "account", "--json")
	var a struct {
		Account struct {
			Email string `json:"email"`
		} `json:"account"`
		BalanceMicros int64             `json:"balance_micros"`
		Ledger        []json.RawMessage `json:"ledger"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.Account.Email != "ann@example.com" || a.BalanceMicros != 99750000 || len(a.Ledger) != 2 {
		t.Errorf("account --json: %d %s", code, out)
	}
}

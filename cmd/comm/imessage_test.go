package main_test

import (
	"bytes"
	"os/exec"
	"testing"
)

// TestServeIMessageRelays: --imessage-relays (COMM_IMESSAGE_RELAYS) and
// --imessage-follow are listed, and a bad relay list stops serve naming
// the variable and the element.
func TestServeIMessageRelays(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--imessage-relays", "COMM_IMESSAGE_RELAYS", "--imessage-follow", "COMM_IMESSAGE_FOLLOW", "Apple ID"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, c := range []struct{ env, want string }{
		{`COMM_IMESSAGE_RELAYS={"url":"https://mac.example"}`, "COMM_IMESSAGE_RELAYS (--imessage-relays): not a JSON array"},
		{`COMM_IMESSAGE_RELAYS=[{"url":"https://mac.example","password":"pw","address":"+15550001111"},{"url":"mac.example","password":"pw","address":"a@icloud.com"}]`,
			"COMM_IMESSAGE_RELAYS (--imessage-relays): element 1: url"},
		{`COMM_IMESSAGE_RELAYS=[{"url":"https://mac.example","password":"pw","address":"555"}]`, "element 0 (https://mac.example): address"},
	} {
		cmd := exec.Command(bin, "serve")
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Environ(), c.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte(c.want)) {
			t.Errorf("%s: %v %s, want a refusal containing %q", c.env, err, out, c.want)
		}
	}
}

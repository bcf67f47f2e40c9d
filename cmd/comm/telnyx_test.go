package main_test

import (
	"bytes"
	"os/exec"
	"testing"
)

// TestServeTelnyxFlag: --telnyx-api-url (COMM_TELNYX_API_URL) is listed
// with its default, and a value that is not an http(s) URL stops serve
// naming the flag.
func TestServeTelnyxFlag(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--telnyx-api-url", "COMM_TELNYX_API_URL", "https://api.telnyx.com/v2"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, c := range []struct {
		args []string
		env  string
	}{
		{args: []string{"serve", "--telnyx-api-url", "ftp://api.telnyx.com/v2"}},
		{args: []string{"serve"}, env: "COMM_TELNYX_API_URL=api.telnyx.com"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = t.TempDir()
		if c.env != "" {
			cmd.Env = append(cmd.Environ(), c.env)
		}
		out, err := cmd.CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("--telnyx-api-url must be an http(s) URL")) {
			t.Errorf("%v %s: %v %s, want a refusal naming --telnyx-api-url", c.args, c.env, err, out)
		}
	}
}

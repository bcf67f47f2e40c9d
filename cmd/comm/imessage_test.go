package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
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

// TestCLIConnectIMessage: `comm connect imessage` prints the relay's
// address, the join code and the join link the gateway answered (the
// gateway is a fake: a signed-in key needs a browser sign-in).
func TestCLIConnectIMessage(t *testing.T) {
	bin := binary(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/connections", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in map[string]any
		if json.Unmarshal(body, &in) != nil || in["channel"] != "imessage" || r.Header.Get("Authorization") != "Bearer comm_SIGNEDIN" {
			t.Errorf("connect request %s (%s)", body, r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"conn_im1","channel":"imessage","provider":null,"status":"active","customer_id":"cus_1","agent_id":"agt_1",
			"name":null,"address":"agent@icloud.com","line":"agent@icloud.com","join_code":"K7Q2MX",
			"join_link":"sms:agent@icloud.com?&body=join%20K7Q2MX","webhook_url":null,"authorize_url":null,"created_at":"2026-11-26T16:00:00Z"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	out, errOut, code := run(t, bin, t.TempDir(), []string{"COMM_API_KEY=comm_SIGNEDIN", "COMM_BASE_URL=" + srv.URL}, "connect", "imessage")
	if code != 0 {
		t.Fatalf("connect imessage: %d %s", code, errOut)
	}
	for _, want := range []string{"Connected imessage: conn_im1 (active) agent@icloud.com",
		`People reach this connection by sending "join K7Q2MX" to agent@icloud.com (link: sms:agent@icloud.com?&body=join%20K7Q2MX)`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// run runs the comm binary in dir and returns stdout, stderr and the exit
// code.
func run(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestCLIQuickstart runs the quickstart as a new user would: start the
// gateway, create a sandbox (key written to .env), connect the test
// channel, let `comm listen --exec` answer a message, and read the stream.
func TestCLIQuickstart(t *testing.T) {
	bin := binary(t)
	srv := start(t, bin, t.TempDir())
	dir := t.TempDir()
	clean := []string{"COMM_API_KEY=", "COMM_BASE_URL="}

	out, errOut, code := run(t, bin, dir, clean, "sandbox", "quickstart", "--base-url", srv.base)
	if code != 0 || !strings.Contains(out, "Created project proj_") {
		t.Fatalf("sandbox: %d %s %s", code, out, errOut)
	}
	env, _ := os.ReadFile(filepath.Join(dir, ".env"))
	if !strings.Contains(string(env), "COMM_API_KEY=comm_sandbox_") || !strings.Contains(string(env), "COMM_BASE_URL="+srv.base) {
		t.Fatalf(".env: %s", env)
	}
	// A second sandbox would replace the key: refused without --force.
	if _, errOut, code := run(t, bin, dir, clean, "sandbox", "--base-url", srv.base); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("second sandbox: %d %s", code, errOut)
	}
	out, errOut, code = run(t, bin, dir, clean, "connect", "test", "--json")
	if code != 0 {
		t.Fatalf("connect: %d %s", code, errOut)
	}
	var conn struct{ ID string }
	json.Unmarshal([]byte(out), &conn)
	out, errOut, code = run(t, bin, dir, clean, "connections")
	if code != 0 || !strings.Contains(out, "WEBHOOK URL") || !strings.Contains(out, conn.ID) || !strings.Contains(out, "active") {
		t.Fatalf("connections: %d %s %s", code, out, errOut)
	}
	out, _, code = run(t, bin, dir, clean, "connections", "--json")
	var listed []struct {
		ID         string  `json:"id"`
		WebhookURL *string `json:"webhook_url"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 1 || listed[0].ID != conn.ID {
		t.Fatalf("connections --json: %d %s (%v)", code, out, err)
	}

	// The listener answers with its command's output.
	listen := exec.Command(bin, "listen", "--exec", "tr a-z A-Z")
	listen.Dir = dir
	listen.Env = append(os.Environ(), clean...)
	var lout bytes.Buffer
	listen.Stdout = &lout
	listen.Stderr = &lout
	if err := listen.Start(); err != nil {
		t.Fatal(err)
	}
	defer listen.Process.Kill()
	if _, errOut, code := run(t, bin, dir, clean, "inject", conn.ID, "--sender", "alice", "where is my order"); code != 0 {
		t.Fatalf("inject: %d %s", code, errOut)
	}
	deadline := time.Now().Add(15 * time.Second)
	var events string
	for time.Now().Before(deadline) {
		events, _, _ = run(t, bin, dir, clean, "events", "--type", "message.sent", "--json")
		if strings.Contains(events, "WHERE IS MY ORDER") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(events, `"type":"message.sent"`) || !strings.Contains(events, "WHERE IS MY ORDER") {
		t.Fatalf("no reply sent: %s\nlisten said: %s", events, lout.String())
	}
	listen.Process.Signal(os.Interrupt)
	listen.Wait()
	// The listener kept its cursor.
	if _, err := os.Stat(filepath.Join(dir, ".comm-cursor")); err != nil {
		t.Errorf("cursor file: %v", err)
	}
	// The table view lists the whole loop.
	out, _, code = run(t, bin, dir, clean, "events")
	for _, want := range []string{"SEQ", "connection.active", "message.received", "message.sent"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("events table lacks %q: %s", want, out)
		}
	}
	// Exit codes scripts can rely on.
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{[]string{"connect", "imessage"}, nil, 1, "payment_required"},
		{[]string{"reply", "msg_nope", "hi"}, nil, 1, "not_found"},
		{[]string{"events", "--limit", "0"}, nil, 2, "--limit"},
		{[]string{"send", "--to", "x"}, nil, 2, "required"},
		{[]string{"webhook", "frobnicate"}, nil, 2, "unknown webhook command"},
	} {
		_, errOut, code := run(t, bin, dir, append(clean, tc.env...), tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d (want %d): %s", tc.args, code, tc.code, errOut)
		}
	}
	// No key anywhere: exit 3 naming what is missing.
	if _, errOut, code := run(t, bin, t.TempDir(), clean, "events"); code != 3 || !strings.Contains(errOut, "COMM_API_KEY") {
		t.Errorf("no key: exit %d: %s", code, errOut)
	}
	// Webhooks from the command line.
	out, errOut, code = run(t, bin, dir, clean, "webhook", "set", "https://example.com/hook")
	if code != 0 || !strings.Contains(out, "Secret (shown once): whsec_") {
		t.Errorf("webhook set: %d %s %s", code, out, errOut)
	}
	if out, _, code := run(t, bin, dir, clean, "webhook", "get", "--json"); code != 0 || strings.Contains(out, "whsec_") {
		t.Errorf("webhook get: %d %s", code, out)
	}
	srv.stop(t)
}

// TestCLILogin runs `comm login` against a gateway speaking the spec's
// device flow (a fake until the sign-in issue lands): it shows the URL and
// code, polls, and replaces the sandbox key in .env.
func TestCLILogin(t *testing.T) {
	bin := binary(t)
	mux := http.NewServeMux()
	var started map[string]string
	mux.HandleFunc("POST /v1/auth/device/start", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&started)
		json.NewEncoder(w).Encode(map[string]any{"user_code": "BCDF-GHJK", "device_code": "dev_x",
			"verification_uri_complete": "http://" + r.Host + "/device?code=BCDF-GHJK", "interval": 1})
	})
	var polls int
	mux.HandleFunc("POST /v1/auth/device/token", func(w http.ResponseWriter, r *http.Request) {
		polls++
		if polls < 2 {
			json.NewEncoder(w).Encode(map[string]string{"status": "pending"})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"status": "approved", "api_key": "comm_SIGNEDIN", "base_url": "http://" + r.Host})
	})
	mux.HandleFunc("GET /v1/project", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"id": "proj_x", "name": "carried over"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("OTHER=1\nCOMM_API_KEY=comm_sandbox_old\nCOMM_BASE_URL="+srv.URL+"\n"), 0o600)
	out, errOut, code := run(t, bin, dir, []string{"COMM_API_KEY=", "COMM_BASE_URL="}, "login", "--no-browser")
	if code != 0 || !strings.Contains(out, "BCDF-GHJK") || !strings.Contains(out, "/device?code=BCDF-GHJK") || !strings.Contains(out, "Project proj_x") {
		t.Fatalf("login: %d\n%s\n%s", code, out, errOut)
	}
	if started["api_key"] != "comm_sandbox_old" {
		t.Errorf("device start got %v, want the sandbox key", started)
	}
	env, _ := os.ReadFile(filepath.Join(dir, ".env"))
	if !strings.Contains(string(env), "COMM_API_KEY=comm_SIGNEDIN") || strings.Contains(string(env), "comm_sandbox_old") || !strings.Contains(string(env), "OTHER=1") {
		t.Errorf(".env after login:\n%s", env)
	}
}

// versionLine is what comm version prints.
var versionLine = regexp.MustCompile(`^comm [0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?\n$`)

// TestCLIHelp: comm help lists every command, each command's --help shows
// its usage and flags and exits 0, and bad usage exits 2 saying what was
// wrong.
func TestCLIHelp(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	clean := []string{"COMM_API_KEY=", "COMM_BASE_URL="}
	help, _, code := run(t, bin, dir, clean, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	if out, errOut, code := run(t, bin, dir, clean, "version"); code != 0 || !versionLine.MatchString(out) {
		t.Errorf("version: exit %d, printed %q %q", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string // a command, as comm help lists it
		flag string   // one of its flags
	}{
		{[]string{"serve"}, "--listen"}, {[]string{"sandbox"}, "--base-url"}, {[]string{"connect"}, "--provider"},
		{[]string{"inject"}, "--sender"}, {[]string{"events"}, "--follow"}, {[]string{"listen"}, "--exec"},
		{[]string{"reply"}, "--json"}, {[]string{"send"}, "--connection"}, {[]string{"webhook", "set"}, "--secret"},
		{[]string{"webhook", "get"}, "--json"}, {[]string{"webhook", "delete"}, "--json"},
		{[]string{"webhook", "replay"}, "--from-seq"}, {[]string{"webhook", "attempts"}, "--json"},
		{[]string{"login"}, "--no-browser"}, {[]string{"account"}, "--json"}, {[]string{"keys", "list"}, "--json"},
		{[]string{"keys", "create"}, "--name"}, {[]string{"keys", "revoke"}, "--json"}, {[]string{"bench"}, "--what"},
	} {
		name := strings.Join(tc.args, " ")
		if !strings.Contains(help, "comm "+name) && !strings.Contains(help, "comm "+tc.args[0]+" ["+tc.args[len(tc.args)-1]+"]") {
			t.Errorf("help lacks %q:\n%s", name, help)
		}
		_, errOut, code := run(t, bin, dir, clean, append(tc.args, "--help")...)
		if code != 0 || !strings.Contains(errOut, "Usage: comm "+tc.args[0]) || !strings.Contains(errOut, "  "+tc.flag) {
			t.Errorf("%s --help: exit %d:\n%s", name, code, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"events", "--nope"}, "-nope"},
		{[]string{"serve", "--nope"}, "-nope"},
		{[]string{"serve", "extra"}, `"extra"`},
		{[]string{"bench", "--duration"}, "-duration"},
		{[]string{"webhook"}, "usage: comm webhook set URL"},
		{[]string{"events", "--limit", "many"}, "-limit"},
	} {
		_, errOut, code := run(t, bin, dir, clean, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d (want 2), want %q in:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	// A client command's flag with an environment variable: the flag wins
	// over the variable, the variable over the default.
	refused := func(env []string, args ...string) string {
		_, errOut, code := run(t, bin, t.TempDir(), env, append([]string{"sandbox"}, args...)...)
		if code != 1 {
			t.Errorf("sandbox %q with %q: exit %d: %s", args, env, code, errOut)
		}
		return errOut
	}
	if errOut := refused([]string{"COMM_BASE_URL=http://127.0.0.1:1"}); !strings.Contains(errOut, "127.0.0.1:1/") {
		t.Errorf("COMM_BASE_URL not used: %s", errOut)
	}
	if errOut := refused([]string{"COMM_BASE_URL=http://127.0.0.1:1"}, "--base-url", "http://127.0.0.1:2"); !strings.Contains(errOut, "127.0.0.1:2/") {
		t.Errorf("--base-url does not win over COMM_BASE_URL: %s", errOut)
	}
}

package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/comm-gateway/comm/store/storetest"
)

// binary builds comm once per test run.
func binary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "comm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var listening = regexp.MustCompile(`^comm: listening on (http://\S+) \(database: (.+)\)$`)

var receiving = regexp.MustCompile(`^comm: receiving mail for @\S+ on smtp://(\S+)$`)

type proc struct {
	cmd  *exec.Cmd
	base string
	db   string
	smtp string // host:port of the SMTP listener
	out  *bytes.Buffer
}

// start runs `comm serve` in dir with env and waits for its start line.
func start(t *testing.T, bin, dir string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--smtp-listen", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: &errOut}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		m := listening.FindStringSubmatch(l)
		if !ok || m == nil {
			cmd.Process.Kill()
			t.Fatalf("start line %q; stderr:\n%s", l, errOut.String())
		}
		p.base, p.db = m[1], m[2]
		if m := receiving.FindStringSubmatch(<-lines); m != nil {
			p.smtp = m[1]
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no start line; stderr:\n%s", errOut.String())
	}
	go func() {
		for range lines {
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v; stderr:\n%s", err, p.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

func call(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// refused runs serve expecting it to stop at start with an error, and
// returns what it printed.
func refused(t *testing.T, bin, dir string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--smtp-listen", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve was not refused (%v):\n%s", err, out)
	}
	return string(out)
}

// TestServeKeyCheck: the database keeps a check value of the encryption
// key it was first used with; a start with another key (given, or a new
// key file) is refused with an error naming the setting and the file.
func TestServeKeyCheck(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	p := start(t, bin, dir)
	if code, body := call(t, "GET", p.base+"/readyz", "", ""); code != 200 || !strings.Contains(string(body), `"encryption_key":"ok"`) {
		t.Errorf("readyz: %d %s", code, body)
	}
	p.stop(t)
	// stderr is no terminal: the log is JSON, a line per request.
	if out := p.out.String(); !strings.Contains(out, `"msg":"http"`) || !strings.Contains(out, `"route":"GET /readyz","status":200`) {
		t.Errorf("no JSON access line for GET /readyz in:\n%s", out)
	}
	p = start(t, bin, dir, "COMM_LOG_FORMAT=text")
	call(t, "GET", p.base+"/healthz", "", "")
	p.stop(t)
	if out := p.out.String(); !strings.Contains(out, `msg=http`) || !strings.Contains(out, `route="GET /healthz" status=200`) {
		t.Errorf("no text access line for GET /healthz in:\n%s", out)
	}
	keyFile := filepath.Join(dir, "comm-data", "encryption.key")
	out := refused(t, bin, dir, "COMM_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)))
	for _, want := range []string{"does not match", "--encryption-key", "COMM_ENCRYPTION_KEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("another key: the error lacks %q:\n%s", want, out)
		}
	}
	// The key file lost: a new one is made, and refused.
	if err := os.Rename(keyFile, keyFile+".kept"); err != nil {
		t.Fatal(err)
	}
	out = refused(t, bin, dir)
	for _, want := range []string{"does not match", "COMM_ENCRYPTION_KEY", filepath.Join("comm-data", "encryption.key")} {
		if !strings.Contains(out, want) {
			t.Errorf("a new key file: the error lacks %q:\n%s", want, out)
		}
	}
	if err := os.Rename(keyFile+".kept", keyFile); err != nil {
		t.Fatal(err)
	}
	start(t, bin, dir).stop(t)
}

// TestServeLifecycle starts the real binary on each engine, uses it with
// HTTP, stops it with SIGTERM, starts it again on the same database and
// finds everything still there.
func TestServeLifecycle(t *testing.T) {
	bin := binary(t)
	engines := map[string][]string{"sqlite": nil}
	if os.Getenv(storetest.EnvURL) != "" {
		engines["postgres"] = []string{"COMM_DATABASE_URL=" + storetest.Postgres(t).URL,
			"COMM_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))}
	}
	for name, env := range engines {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, bin, dir, env...)
			if !strings.HasPrefix(p.db, name) && !(name == "postgres" && strings.HasPrefix(p.db, "postgresql://")) {
				t.Errorf("start line names database %q", p.db)
			}
			if code, body := call(t, "GET", p.base+"/healthz", "", ""); code != 200 {
				t.Fatalf("healthz: %d %s", code, body)
			}
			code, body := call(t, "POST", p.base+"/v1/projects/sandbox", "", `{"name":"lifecycle"}`)
			if code != 201 {
				t.Fatalf("sandbox: %d %s", code, body)
			}
			var sb struct{ ProjectID, APIKey string }
			json.Unmarshal(body, &struct {
				P *string `json:"project_id"`
				K *string `json:"api_key"`
			}{&sb.ProjectID, &sb.APIKey})
			p.stop(t)

			// Second start on the same database: migrations change nothing,
			// the key and project are still there.
			p = start(t, bin, dir, env...)
			code, body = call(t, "GET", p.base+"/v1/project", sb.APIKey, "")
			if code != 200 || !strings.Contains(string(body), sb.ProjectID) {
				t.Fatalf("after restart: %d %s", code, body)
			}
			if code, body := call(t, "GET", p.base+"/v1/events", sb.APIKey, ""); code != 200 || string(body) != "[]" {
				t.Fatalf("events after restart: %d %s", code, body)
			}
			p.stop(t)
			if name == "sqlite" {
				if _, err := os.Stat(filepath.Join(dir, "comm-data", "comm.db")); err != nil {
					t.Errorf("default data dir: %v", err)
				}
			}
		})
	}
}

// TestServeConfig: flags, environment and .env all configure serve, and
// bad values are refused with a message naming them.
func TestServeConfig(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--listen", "COMM_LISTEN", "127.0.0.1:8080", "--database-url", "COMM_DATABASE_URL", "--data-dir", "COMM_DATA_DIR", "./comm-data",
		"--meta-app-id", "COMM_META_APP_ID", "--meta-verify-token", "COMM_META_API_URL",

		"--twilio-api-url", "COMM_TWILIO_API_URL", "--twilio-messaging-url", "--twilio-max-media-bytes",
		"--whatsapp-hosted-numbers", "COMM_WHATSAPP_HOSTED_NUMBERS", "COMM_META_API_URL (or COMM_META_GRAPH_URL)"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}

	// .env in the working directory picks the data dir.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("COMM_DATA_DIR=from-dotenv\n"), 0o600)
	p := start(t, bin, dir)
	if !strings.Contains(p.db, "from-dotenv") {
		t.Errorf(".env not read: database %q", p.db)
	}
	p.stop(t)

	// The environment wins over .env, a flag over both.
	p = start(t, bin, dir, "COMM_DATA_DIR=from-env")
	if !strings.Contains(p.db, "from-env") {
		t.Errorf("environment not read: database %q", p.db)
	}
	p.stop(t)

	for _, bad := range [][]string{
		{"serve", "--database-url", "mysql://x"},
		{"serve", "--sqlite-sync", "sometimes"},
		{"serve", "--writers", "many"},
		{"serve", "--nope"},
		{"serve", "--meta-app-id", "123", "--meta-app-secret", "abc"},
		{"serve", "--meta-api-url", "graph.facebook.com"},
		{"serve", "--twilio-api-url", "api.twilio.com"},
		{"serve", "--twilio-max-media-bytes", "0"},
		{"serve", "--whatsapp-hosted-max-media-bytes", "lots"},
	} {
		cmd := exec.Command(bin, bad...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%v: accepted", bad)
		}
		if len(out) == 0 {
			t.Errorf("%v: no message", bad)
		}
	}

	// Hosted WhatsApp: a bad number names the variable and the element;
	// numbers need the Meta app's secret; COMM_META_GRAPH_URL is
	// COMM_META_API_URL by another name, and the two may not disagree.
	const number = `{"phone_number_id":"106540352242922","display_number":"+15550001111","access_token":"EAAG0123456789abcdef"}`
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{`COMM_WHATSAPP_HOSTED_NUMBERS=[` + number + `,{"phone_number_id":"x"}]`}, []string{"COMM_WHATSAPP_HOSTED_NUMBERS", "element 2", "phone_number_id"}},
		{[]string{`COMM_WHATSAPP_HOSTED_NUMBERS=[` + number + `]`}, []string{"COMM_WHATSAPP_HOSTED_NUMBERS", "COMM_META_APP_SECRET"}},
		{[]string{"COMM_META_GRAPH_URL=graph.facebook.com"}, []string{"meta-api-url"}},
		{[]string{"COMM_LEASE=500ms"}, []string{"--lease", "at least 1s", "500ms"}},
		{[]string{"COMM_LEASE=soon"}, []string{"--lease", "duration", "soon"}},
		{[]string{"COMM_RATE_LIMIT_SYNC=fast"}, []string{"--rate-limit-sync", "or off", "fast"}},
		{[]string{"COMM_RATE_LIMIT_SYNC=5m"}, []string{"--rate-limit-sync", "between 10ms and 1m"}},
		{[]string{"COMM_EVENT_RETENTION=90"}, []string{"COMM_EVENT_RETENTION", `"90"`, "90d"}},
		{[]string{"COMM_META_API_URL=https://graph.facebook.com/v23.0", "COMM_META_GRAPH_URL=https://graph.facebook.com/v24.0"}, []string{"COMM_META_API_URL and COMM_META_GRAPH_URL"}},
	} {
		cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%v: accepted", c.env)
		}
		for _, w := range c.want {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("%v: the message does not say %q:\n%s", c.env, w, out)
			}
		}
	}
	// Numbers with the app's secret and verify token (no app id) serve
	// /hooks/whatsapp.
	p = start(t, bin, t.TempDir(), `COMM_WHATSAPP_HOSTED_NUMBERS=[`+number+`]`, "COMM_META_APP_SECRET=hostedsecret0123456789",
		"COMM_META_VERIFY_TOKEN=hosted-verify", "COMM_META_GRAPH_URL=http://127.0.0.1:1/v23.0")
	if code, body := call(t, "GET", p.base+"/hooks/whatsapp?hub.mode=subscribe&hub.verify_token=hosted-verify&hub.challenge=4711", "", ""); code != http.StatusOK || string(body) != "4711" {
		t.Errorf("/hooks/whatsapp verification: %d %s", code, body)
	}
	p.stop(t)
}

package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/comm-gateway/comm/client"
)

// keyRecorder is a stand-in gateway that records the Authorization header
// of GET /v1/project.
type keyRecorder struct {
	URL string
	mu  sync.Mutex
	got string
}

func newKeyRecorder(t *testing.T) *keyRecorder {
	k := &keyRecorder{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"proj_x"}`))
	}))
	t.Cleanup(hs.Close)
	k.URL = hs.URL
	return k
}

// key returns the key c sends.
func (k *keyRecorder) key(t *testing.T, c *client.Client) string {
	t.Helper()
	if _, err := c.Project(context.Background()); err != nil {
		t.Fatalf("Project: %v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.got
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConfigPrecedence: options, then WithDotEnv files, then the
// environment, then .env in the working directory, then the default; each
// variable on its own. The process environment is left alone.
func TestConfigPrecedence(t *testing.T) {
	rec := newKeyRecorder(t)
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv(client.EnvAPIKey, "")
	t.Setenv(client.EnvBaseURL, "")

	// Nothing anywhere: a clear error.
	_, err := client.New()
	if !errors.Is(err, client.ErrNoAPIKey) {
		t.Fatalf("New without a key: %v, want ErrNoAPIKey", err)
	}
	for _, word := range []string{"COMM_API_KEY", ".env", "WithAPIKey"} {
		if !strings.Contains(err.Error(), word) {
			t.Errorf("error %q does not mention %s", err, word)
		}
	}

	// .env in the working directory; the base URL defaults.
	writeFile(t, filepath.Join(dir, ".env"), "# comment\nCOMM_API_KEY=key-from-dotenv\nexport OTHER=1\n")
	c, err := client.New()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != client.DefaultBaseURL {
		t.Errorf("base URL %q, want the default %q", c.BaseURL(), client.DefaultBaseURL)
	}
	if v, ok := os.LookupEnv(client.EnvAPIKey); !ok || v != "" {
		t.Errorf("New changed the environment: COMM_API_KEY=%q", v)
	}
	if _, ok := os.LookupEnv("OTHER"); ok {
		t.Error("New loaded .env into the environment")
	}
	writeFile(t, filepath.Join(dir, ".env"), "COMM_API_KEY=key-from-dotenv\nCOMM_BASE_URL="+rec.URL+"/\n")
	c, err = client.New()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != rec.URL {
		t.Errorf("base URL %q, want %q from .env without its trailing slash", c.BaseURL(), rec.URL)
	}
	if got := rec.key(t, c); got != "key-from-dotenv" {
		t.Errorf("key %q, want the .env's", got)
	}

	// The environment beats .env, variable by variable.
	t.Setenv(client.EnvAPIKey, "key-from-env")
	c, err = client.New()
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.key(t, c); got != "key-from-env" || c.BaseURL() != rec.URL {
		t.Errorf("key %q base %q: want the environment's key and the .env's base URL", got, c.BaseURL())
	}

	// WithDotEnv beats the environment; options beat everything.
	other := filepath.Join(t.TempDir(), "agent.env")
	writeFile(t, other, "COMM_API_KEY='key-from-file'\n")
	c, err = client.New(client.WithDotEnv(other))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.key(t, c); got != "key-from-file" {
		t.Errorf("key %q, want WithDotEnv's", got)
	}
	c, err = client.New(client.WithDotEnv(other), client.WithAPIKey("key-from-option"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.key(t, c); got != "key-from-option" {
		t.Errorf("key %q, want WithAPIKey's", got)
	}
	if _, err := client.New(client.WithDotEnv(filepath.Join(dir, "missing.env"))); err == nil {
		t.Error("a missing WithDotEnv file is not an error")
	}

	// A bad base URL is refused, wherever it comes from.
	for _, u := range []string{"ftp://x", "localhost:8080", "http://", "http://h/?q=1"} {
		if _, err := client.New(client.WithBaseURL(u)); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
	c, err = client.New(client.WithBaseURL("https://comm.example.com/gateway/"))
	if err != nil || c.BaseURL() != "https://comm.example.com/gateway" {
		t.Errorf("base URL with a path: %v, %v", c, err)
	}
}

// TestDotEnvBesideExecutable: without a .env in the working directory,
// the one in the executable's directory is read.
func TestDotEnvBesideExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	path := filepath.Join(filepath.Dir(exe), ".env")
	if _, err := os.Stat(path); err == nil {
		t.Skipf("%s exists already", path)
	}
	if err := os.WriteFile(path, []byte("COMM_API_KEY=key-beside-exe\nCOMM_BASE_URL=http://exe.example:1\n"), 0o600); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	t.Cleanup(func() { os.Remove(path) })
	t.Chdir(t.TempDir())
	t.Setenv(client.EnvAPIKey, "")
	t.Setenv(client.EnvBaseURL, "")
	c, err := client.New()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://exe.example:1" {
		t.Errorf("base URL %q, want the one beside the executable", c.BaseURL())
	}

	// The working directory's .env wins, variable by variable.
	writeFile(t, ".env", "COMM_BASE_URL=http://wd.example:2\n")
	if c, err = client.New(); err != nil || c.BaseURL() != "http://wd.example:2" {
		t.Errorf("New: %v; base URL %q, want the working directory's", err, c.BaseURL())
	}
}

// TestMalformedDotEnv: a .env that cannot be parsed is an error naming it,
// not a silent fallback.
func TestMalformedDotEnv(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(client.EnvAPIKey, "")
	writeFile(t, ".env", "COMM_API_KEY=\"unterminated\n")
	_, err := client.New()
	if err == nil || !strings.Contains(err.Error(), ".env") {
		t.Errorf("New with a malformed .env: %v", err)
	}
}

// TestCreateSandboxBaseURLFromEnv: CreateSandbox needs no key, and takes
// the base URL from the environment when given none.
func TestCreateSandboxBaseURLFromEnv(t *testing.T) {
	var gotAuth, gotBody string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		b := make([]byte, 100)
		n, _ := r.Body.Read(b)
		gotBody = string(b[:n])
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"project_id":"proj_1","api_key":"comm_sandbox_1","customer_id":"cus_1","agent_id":"agt_1"}`))
	}))
	defer hs.Close()
	t.Chdir(t.TempDir())
	t.Setenv(client.EnvAPIKey, "")
	t.Setenv(client.EnvBaseURL, hs.URL)
	sb, err := client.CreateSandbox(context.Background(), "", "my agent")
	if err != nil {
		t.Fatal(err)
	}
	if sb.APIKey != "comm_sandbox_1" || gotAuth != "" || gotBody != `{"name":"my agent"}` {
		t.Errorf("sandbox %+v; Authorization %q; body %q", sb, gotAuth, gotBody)
	}
}

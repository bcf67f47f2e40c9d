package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/joho/godotenv"
	"github.com/oauth2-proxy/mockoidc"
)

// chromium finds the browser the test drives: COMM_TEST_CHROMIUM, else
// chromium, chromium-browser or google-chrome on PATH. It skips the test
// when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COMM_TEST_CHROMIUM"); p != "" {
		full, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("COMM_TEST_CHROMIUM=%s: %v", p, err)
		}
		return full
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: install chromium (Debian: apt-get install chromium), or set COMM_TEST_CHROMIUM to the browser's path")
	return ""
}

// browserOptions are the flags of a headless Chromium on this machine.
func browserOptions(t *testing.T, chrome string, w, h int) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		// CI containers have a small /dev/shm.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
	}
}

// loginURL is the page `comm login` prints: <base>/device?code=XXXX-XXXX.
var loginURL = regexp.MustCompile(`(http://\S+/device\?code=([A-Z0-9]{4}-[A-Z0-9]{4}))`)

// lockedBuffer collects the output of a process read on another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLoginInBrowser signs in as a person does: `comm login --no-browser`
// prints a URL, a real (headless) Chromium opens it, signs in at an OpenID
// provider (mockoidc) and approves; the command then writes the signed-in
// key over the same project into .env.
func TestLoginInBrowser(t *testing.T) {
	chrome := chromium(t)
	began := time.Now()
	bin := binary(t)

	// mockoidc is mockoidc.Run() plus a record of the redirect_uri comm
	// sends: mockoidc redirects to any, a real provider only to the one
	// registered (BaseURL + "/device/callback").
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var redirects []string
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.AuthorizationEndpoint {
				mu.Lock()
				redirects = append(redirects, r.URL.Query().Get("redirect_uri"))
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	oc := m.Config()
	m.QueueUser(&mockoidc.MockUser{Subject: "ada-browser", Email: "ada@example.com", EmailVerified: true, PreferredUsername: "ada"})
	srv := start(t, bin, t.TempDir(), "COMM_BASE_URL=",
		"COMM_OIDC_ISSUER="+m.Issuer(), "COMM_OIDC_CLIENT_ID="+oc.ClientID, "COMM_OIDC_CLIENT_SECRET="+oc.ClientSecret)

	// A sandbox with a connection and a message.
	const name = "Ada's browser agent"
	code, body := call(t, "POST", srv.base+"/v1/projects/sandbox", "", `{"name":"`+name+`"}`)
	if code != 201 {
		t.Fatalf("sandbox: %d %s", code, body)
	}
	var sb struct {
		ProjectID string `json:"project_id"`
		APIKey    string `json:"api_key"`
	}
	if err := json.Unmarshal(body, &sb); err != nil || !strings.HasPrefix(sb.APIKey, "comm_sandbox_") {
		t.Fatalf("sandbox: %v %s", err, body)
	}
	code, body = call(t, "POST", srv.base+"/v1/connections", sb.APIKey, `{"channel":"test"}`)
	var conn struct{ ID string }
	if json.Unmarshal(body, &conn); code/100 != 2 || conn.ID == "" {
		t.Fatalf("connect: %d %s", code, body)
	}
	if code, body := call(t, "POST", srv.base+"/v1/connections/"+conn.ID+"/inbound", sb.APIKey, `{"sender":"ann","text":"hi"}`); code/100 != 2 {
		t.Fatalf("inbound: %d %s", code, body)
	}
	dir := t.TempDir()
	envPath := filepath.Join(dir, ".env")
	if err := os.WriteFile(envPath, []byte("COMM_API_KEY="+sb.APIKey+"\nCOMM_BASE_URL="+srv.base+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// comm login, reading its output until it shows the page to open.
	login := exec.Command(bin, "login", "--no-browser")
	login.Dir = dir
	login.Env = append(os.Environ(), "COMM_API_KEY=", "COMM_BASE_URL=")
	stdout, err := login.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut lockedBuffer
	login.Stderr = &errOut
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { login.Process.Kill() })
	found := make(chan []string, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if m := loginURL.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	var pageURL, userCode string
	select {
	case m := <-found:
		pageURL, userCode = m[1], m[2]
	case <-readDone:
		t.Fatalf("comm login ended without a URL:\n%s\nstderr:\n%s", out.String(), errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("comm login printed no URL:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	if !strings.HasPrefix(pageURL, srv.base+"/device?code=") || !strings.Contains(out.String(), userCode) {
		t.Fatalf("comm login shows %s, gateway is %s:\n%s", pageURL, srv.base, out.String())
	}

	// The browser. Each run has its own profile. The page flow has 60 s
	// (steps), so a hang fails the test; the browser itself lives a bit
	// longer (tab), to take a screenshot of where it got stuck.
	browserStart := time.Now()
	life, cancelLife := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelLife()
	var chromeOut lockedBuffer
	actx, cancelAlloc := chromedp.NewExecAllocator(life,
		append(browserOptions(t, chrome, 1000, 900), chromedp.CombinedOutput(&chromeOut))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()

	// Start the browser (the first run must not have a deadline of its
	// own: it would stop the browser), then give the pages their time.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start %s: %v\n%s", chrome, err, chromeOut.String())
	}
	ctx, cancelSteps := context.WithTimeout(tab, 60*time.Second)
	defer cancelSteps()

	shots := t.TempDir()
	screenshot := func(file string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("screenshot %s: %v", file, err)
			return
		}
		p := filepath.Join(shots, file)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
		if d := os.Getenv("COMM_TEST_SCREENSHOT_DIR"); d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, file), png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", filepath.Join(d, file))
		}
	}
	// failed ends the test with what the browser, comm login and comm
	// serve were showing.
	failed := func(step string, err error) {
		t.Helper()
		screenshot("failure.png")
		sctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		where, _ := chromedp.Run(sctx, chromedp.Location())
		text, _ := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("body")))
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("timed out (60 s for the pages)")
		}
		browserLog := chromeOut.String()
		if len(browserLog) > 4000 {
			browserLog = "..." + browserLog[len(browserLog)-4000:]
		}
		t.Fatalf("%s: %v\nbrowser at %s:\n%s\ncomm login:\n%s%s\ncomm serve:\n%s\nchromium:\n%s",
			step, err, where, text, out.String(), errOut.String(), srv.out.String(), browserLog)
	}
	mainText := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			failed("read the page", err)
		}
		return s
	}

	// The page of the code asks to sign in.
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(`a.button[href^="/device/signin"]`))); err != nil {
		failed("open "+pageURL, err)
	}
	if shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("p.code"))); err != nil {
		failed("read the code on the page", err)
	} else if strings.TrimSpace(shown) != userCode {
		failed("the page shows the code "+userCode, fmt.Errorf("it shows %q", shown))
	}
	// Before signing in, the page shows neither the request nor the forms.
	noForm, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('form[action="/device/approve"]') === null`))
	if err != nil {
		failed("look for the Approve form", err)
	}
	if txt := mainText(); !noForm || strings.Contains(txt, sb.ProjectID) {
		failed("before signing in", errors.New("the page shows the request"))
	}

	// Sign in: comm redirects to mockoidc, whose authorize endpoint
	// redirects straight back with a code for the queued user.
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil,
		chromedp.Click(chromedp.CSS(`a.button[href^="/device/signin"]`)))); err != nil {
		failed("sign in", err)
	}
	approve := chromedp.CSS(`form[action="/device/approve"] button[type="submit"]`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(approve)); err != nil {
		failed("the Approve button after signing in", err)
	}
	if where, err := chromedp.Run(ctx, chromedp.Location()); err != nil || where != pageURL {
		failed("back from the identity provider", errors.New("at "+where+", want "+pageURL))
	}
	mu.Lock()
	if want := srv.base + "/device/callback"; len(redirects) != 1 || redirects[0] != want {
		t.Errorf("redirect_uri sent to the identity provider: %q, want [%s]", redirects, want)
	}
	mu.Unlock()
	txt := mainText()
	for _, want := range []string{userCode, name, sb.ProjectID, "1 connection,", "ada@example.com", "Signed in as ada@example.com"} {
		if !strings.Contains(txt, want) {
			t.Errorf("approval page does not say %q:\n%s", want, txt)
		}
	}
	screenshot("confirm.png")

	// Approve.
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(approve))); err != nil {
		failed("approve", err)
	}
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || !strings.HasPrefix(title, "Approved") {
		failed("the result page", errors.New("title "+title))
	}
	txt = mainText()
	if want := "Approved. Return to your terminal; it now has a signed-in key for project " + name + " (" + sb.ProjectID + ")."; !strings.Contains(txt, want) {
		t.Errorf("result page does not say %q:\n%s", want, txt)
	}
	screenshot("done.png")
	cancelSteps()
	cancelTab()
	cancelAlloc()
	browserDone := time.Now()

	// comm login picks up the key on its next poll and exits.
	exited := make(chan error, 1)
	go func() {
		<-readDone
		exited <- login.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("comm login: %v\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("comm login did not finish after approval:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	t.Logf("comm login said:\n%s", out.String())
	if !strings.Contains(out.String(), sb.ProjectID) {
		t.Errorf("comm login output does not name project %s:\n%s", sb.ProjectID, out.String())
	}

	// .env: the signed-in key replaced the sandbox key.
	env, err := godotenv.Read(envPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(envPath)
	key := env["COMM_API_KEY"]
	if !strings.HasPrefix(key, "comm_") || strings.HasPrefix(key, "comm_sandbox_") || strings.Contains(string(raw), sb.APIKey) {
		t.Fatalf(".env after login:\n%s", raw)
	}
	if env["COMM_BASE_URL"] != srv.base {
		t.Errorf(".env COMM_BASE_URL %q, want %s", env["COMM_BASE_URL"], srv.base)
	}

	// The signed-in key is the same project, in an account with the credit.
	code, body = call(t, "GET", srv.base+"/v1/project", key, "")
	var pr struct{ ID string }
	if json.Unmarshal(body, &pr); code != 200 || pr.ID != sb.ProjectID {
		t.Errorf("GET /v1/project with the signed-in key: %d %s, want %s", code, body, sb.ProjectID)
	}
	code, body = call(t, "GET", srv.base+"/v1/account", key, "")
	var acct struct {
		Account struct{ Email string }
		Balance string
	}
	if json.Unmarshal(body, &acct); code != 200 || acct.Balance != "100.00" || acct.Account.Email != "ada@example.com" {
		t.Errorf("GET /v1/account with the signed-in key: %d %s", code, body)
	}
	t.Logf("browser %s (start to result page); whole test %s",
		browserDone.Sub(browserStart).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store/storetest"
)

// chromium finds the browser: COMM_TEST_CHROMIUM, else chromium,
// chromium-browser or google-chrome on PATH (as cmd/comm's browser test).
// It skips the test when there is none.
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

// TestPlaygroundRoutes: with Playground, GET /graphql/playground is the
// page and /graphql/playground/<file> its files; without, neither exists.
func TestPlaygroundRoutes(t *testing.T) {
	t.Parallel()
	cfg := storetest.SQLite(t)
	on := start(t, cfg, server.Options{Playground: true})
	for path, ctype := range map[string]string{
		"/graphql/playground":                 "text/html; charset=utf-8",
		"/graphql/playground/":                "text/html; charset=utf-8",
		"/graphql/playground/graphiql.min.js": "text/javascript; charset=utf-8",
		"/graphql/playground/playground.css":  "text/css; charset=utf-8",
	} {
		r := on.do(t, request{Path: path})
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != ctype || r.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d %q", path, r.Status, r.Header.Get("Content-Type"))
		}
	}
	if r := on.do(t, request{Path: "/graphql/playground/nope.js"}); r.Status != http.StatusNotFound {
		t.Errorf("GET /graphql/playground/nope.js: %d", r.Status)
	}
	if r := on.do(t, request{Method: http.MethodPost, Path: "/graphql/playground"}); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /graphql/playground: %d", r.Status)
	}
	off := start(t, storetest.SQLite(t), server.Options{})
	for _, path := range []string{"/graphql/playground", "/graphql/playground/graphiql.min.js"} {
		if r := off.do(t, request{Path: path}); r.Status != http.StatusNotFound {
			t.Errorf("without the playground, GET %s: %d", path, r.Status)
		}
	}
}

// watchCSP is run in the page before its scripts: it records what the
// Content-Security-Policy refused.
const watchCSP = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.effectiveDirective + " refused " + (e.blockedURI || "inline") + " " + (e.sample || ""));
});`

// TestPlaygroundInBrowser opens GraphiQL at /graphql/playground in a
// headless Chromium, as a person does: the page renders from the files
// embedded in the gateway (no request leaves it), the API key goes into
// the Headers tab, a query answers over HTTP and a subscription over the
// websocket, and the page's Content-Security-Policy refuses nothing.
func TestPlaygroundInBrowser(t *testing.T) {
	chrome := chromium(t)
	g := start(t, storetest.SQLite(t), server.Options{Playground: true, GraphQL: graph.Options{Introspection: true}})
	sb := g.newSandbox(t, "playground")
	want := g.project(t, sb.APIKey)

	life, cancelLife := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelLife()
	var chromeOut strings.Builder
	var outMu sync.Mutex
	actx, cancelAlloc := chromedp.NewExecAllocator(life,
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(writerFunc(func(p []byte) (int, error) {
			outMu.Lock()
			defer outMu.Unlock()
			return chromeOut.Write(p)
		})),
	)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()

	// Start the browser (the first run must not have a deadline of its
	// own), then give the steps their time.
	if err := chromedp.Do(tab); err != nil {
		outMu.Lock()
		defer outMu.Unlock()
		t.Fatalf("start %s: %v\n%s", chrome, err, chromeOut.String())
	}
	ctx, cancelSteps := context.WithTimeout(tab, 60*time.Second)
	defer cancelSteps()

	// What the page logs.
	var mu sync.Mutex
	var console []string
	messages := chromedp.Console(tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			console = append(console, m.String())
			mu.Unlock()
		}
	}()

	shots := os.Getenv("COMM_TEST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	screenshot := func(file string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("screenshot %s: %v", file, err)
			return
		}
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(shots, file)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	failed := func(step string, err error) {
		t.Helper()
		screenshot("playground-failure.png")
		sctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("body")))
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("timed out")
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: %v\npage text:\n%s\nconsole:\n%s", step, err, text, strings.Join(console, "\n"))
	}

	err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchCSP})
			return err
		}),
		chromedp.Navigate(g.URL+"/graphql/playground"),
		chromedp.WaitVisible(chromedp.CSS(".graphiql-container")),
		chromedp.Sleep(time.Second),
	)
	if err != nil {
		failed("open the page", err)
	}
	// Before the key is in, the page says where it goes.
	response := `document.querySelector(".graphiql-response .CodeMirror").CodeMirror.getValue()`
	hint, err := chromedp.Run(ctx, chromedp.Poll[string](response+`.includes("Headers tab") && `+response))
	if err != nil {
		failed("the hint before the key", err)
	}
	screenshot("playground-opened.png")

	// The key into the Headers tab (its CodeMirror editor, the one holding
	// the template), then run the default query { project { id } }.
	setHeaders := `(function () {
  for (const el of document.querySelectorAll(".graphiql-editor-tool .CodeMirror")) {
    if (el.CodeMirror.getValue().includes("Bearer comm_...")) {
      el.CodeMirror.setValue(JSON.stringify({Authorization: "Bearer " + ` + strconv.Quote(sb.APIKey) + `}, null, 2));
      return true;
    }
  }
  return false;
})()`
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](setHeaders)); err != nil || !ok {
		failed("type the key into the Headers tab", fmt.Errorf("found the editor %v: %w", ok, err))
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".graphiql-execute-button"))); err != nil {
		failed("run the query", err)
	}
	answer, err := chromedp.Run(ctx, chromedp.Poll[string](response+`.includes('"project"') && `+response))
	if err != nil {
		failed("the answer of { project { id } }", err)
	}
	var res struct {
		Data struct{ Project struct{ ID string } }
	}
	if err := json.Unmarshal([]byte(answer), &res); err != nil || res.Data.Project.ID != want.ID {
		failed("the answer of { project { id } }", fmt.Errorf("%q (%v), want project %s", answer, err, want.ID))
	}
	screenshot("playground-query.png")

	// The schema, with the key now in, and its docs.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[aria-label^="Re-fetch GraphQL schema"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label^="Show Documentation Explorer"]`)),
		chromedp.WaitVisible(chromedp.CSS(".graphiql-doc-explorer")),
	)
	if err != nil {
		failed("open the docs", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector(".graphiql-doc-explorer").innerText.includes("subscription")`)); err != nil {
		failed("the docs show the schema's root types", err)
	}
	screenshot("playground-docs.png")

	// A subscription over the websocket (the key in connection_init, from
	// the same Headers tab): the stored event of a connection, then a
	// message received while subscribed.
	r := g.post(t, sb.APIKey, "/v1/connections", `{"channel":"test"}`)
	var conn struct{ ID string }
	if json.Unmarshal(r.Body, &conn); r.Status != http.StatusCreated || conn.ID == "" {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	setQuery := `document.querySelector(".graphiql-query-editor .CodeMirror").CodeMirror.setValue("subscription {\n  events {\n    seq\n    type\n  }\n}\n")`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](setQuery)); err != nil {
		failed("write a subscription", err)
	}
	// GraphiQL parses the query 100 ms after an edit, and sends a
	// subscription by the parsed operation's type: give it the time a
	// person would take.
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond), chromedp.Click(chromedp.CSS(".graphiql-execute-button"))); err != nil {
		failed("run the subscription", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](response+`.includes('"events"')`)); err != nil {
		failed("the subscription's first event", err)
	}
	if r := g.post(t, sb.APIKey, "/v1/connections/"+conn.ID+"/inbound", `{"sender":"ann","text":"hi from the playground test"}`); r.Status/100 != 2 {
		t.Fatalf("inbound: %d %s", r.Status, r.Body)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](response+`.includes("message.received")`)); err != nil {
		failed("the subscription's live event", err)
	}
	screenshot("playground-subscription.png")

	// The settings dialog (radix-ui: a portal, focus guards, scroll lock).
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[aria-label="Open settings dialog"]`)),
		chromedp.WaitVisible(chromedp.CSS(".graphiql-dialog")),
	)
	if err != nil {
		failed("open the settings", err)
	}
	screenshot("playground-settings.png")
	// Its scroll lock is a <style> element with the page's nonce: the
	// browser applied it (a refused one has no rules).
	locked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`[...document.querySelectorAll("style")].some(s => s.nonce && s.sheet && s.sheet.cssRules.length > 0) && getComputedStyle(document.body).overflow === "hidden"`))
	if err != nil || !locked {
		failed("the dialog's scroll lock", fmt.Errorf("not applied (%v)", err))
	}

	// The key stayed out of the browser's storage, which holds the
	// history of operations.
	history, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem("graphiql:queries") || ""`))
	if err != nil || !strings.Contains(history, "subscription") {
		failed("the history in localStorage", fmt.Errorf("%q (%v)", history, err))
	}
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`Object.keys(localStorage).some(k => localStorage.getItem(k).includes(`+strconv.Quote(sb.APIKey)+`))`))
	if err != nil || stored {
		keys, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Object.keys(localStorage).filter(k => localStorage.getItem(k).includes(`+strconv.Quote(sb.APIKey)+`)).map(k => k + "=" + localStorage.getItem(k))`))
		failed("localStorage", fmt.Errorf("holds the key: %v %q (%v)", stored, keys, err))
	}

	// Nothing came from elsewhere, and the CSP refused nothing.
	foreign, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`performance.getEntriesByType("resource").map(e => e.name).filter(u => !u.startsWith(location.origin + "/") && !u.startsWith("ws://" + location.host + "/"))`))
	if err != nil || len(foreign) > 0 {
		failed("the page's requests", fmt.Errorf("requests to other origins %q (%v)", foreign, err))
	}
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__csp`))
	if err != nil || len(refused) > 0 {
		failed("the Content-Security-Policy", fmt.Errorf("refused %q (%v)", refused, err))
	}
	mu.Lock()
	for _, m := range console {
		if strings.HasPrefix(m, "error") || strings.HasPrefix(m, "exception") {
			t.Errorf("console: %s", m)
		}
	}
	mu.Unlock()
	t.Logf("before the key: %s", hint)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
)

// cutProxy is a TCP proxy in front of the gateway, for the browser: cut
// closes every connection through it (the dashboard's websocket with
// them), and refuse makes it drop new connections at once, as a network
// that is down.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	frozen map[net.Conn]bool
	refuse bool
}

func newCutProxy(t *testing.T) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, conns: map[net.Conn]bool{}, frozen: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *cutProxy) base() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, target := p.refuse, p.target
		p.mu.Unlock()
		if refuse || target == "" {
			c.Close()
			continue
		}
		go p.pipe(c, target)
	}
}

func (p *cutProxy) pipe(c net.Conn, target string) {
	u, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(u, c); done <- struct{}{} }()
	go func() { p.copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	delete(p.frozen, c)
	delete(p.frozen, u)
	p.mu.Unlock()
}

// copy forwards src to dst; while src is frozen it holds what it read
// (the connection stays open and silent, as one a sleeping laptop's
// network lost).
func (p *cutProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 {
			p.mu.Lock()
			frozen, open := p.frozen[src], p.conns[src]
			p.mu.Unlock()
			if !open {
				return
			}
			if !frozen {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops forwarding on every open connection, without closing it.
func (p *cutProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.frozen[c] = true
	}
}

// cutFrozen closes the frozen connections (so the browser reuses none).
func (p *cutProxy) cutFrozen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.frozen {
		c.Close()
	}
}

// cut closes every open connection through the proxy.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) setRefuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

var bootJSON = regexp.MustCompile(`(?s)<script id="comm-boot" type="application/json">(.*?)</script>`)

type dashBoot struct {
	Account  struct{ ID, Email string }
	Projects []struct{ ID, Name string }
	CSRF     string
}

// signInHTTP signs a person in to the dashboard with a plain HTTP client
// (mockoidc's authorize endpoint redirects straight back) and answers the
// client, with its cookie, and the boot data of the dashboard.
func signInHTTP(t *testing.T, base string) (*http.Client, dashBoot) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := cl.Get(base + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`href="(/device/signin[^"]*)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no sign-in link on /dashboard: %s", b)
	}
	res, err = cl.Get(base + html.UnescapeString(string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	// A first sign-in: the dashboard asks for the account's first project.
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if csrf == nil || !strings.Contains(string(b), `action="/dashboard/projects"`) {
		t.Fatalf("after signing in, no form for a first project: %s %d:\n%s", res.Request.URL, res.StatusCode, b)
	}
	res, err = cl.PostForm(base+"/dashboard/projects", url.Values{"name": {"Bob's project"}, "csrf": {html.UnescapeString(string(csrf[1]))}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	bm := bootJSON.FindSubmatch(b)
	if res.Request.URL.Path != "/dashboard" || bm == nil {
		t.Fatalf("after signing in: %s %d:\n%s", res.Request.URL, res.StatusCode, b)
	}
	var boot dashBoot
	if err := json.Unmarshal(bm[1], &boot); err != nil {
		t.Fatal(err)
	}
	return cl, boot
}

// TestDashboardInBrowser drives the dashboard in a real headless Chromium
// against the real `comm serve`, signed in through an OpenID provider
// (mockoidc): the live feed (a message injected over REST shows within a
// second; a cut websocket resumes with no gap and no duplicate), a reply
// from a thread going queued → sent live, the webhook secret shown once,
// keys made and revoked, another account's project and a cross-origin
// request refused. Screenshots of the pages go to COMM_TEST_SCREENSHOTS
// (or a temporary directory).
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromium(t)
	began := time.Now()
	bin := binary(t)

	m, err := mockoidc.NewServer(nil)
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

	// The browser uses the dashboard through the proxy (sign-in comes
	// back to the gateway's own address: the session cookie is the host's,
	// whatever the port).
	proxy := newCutProxy(t)
	srv := start(t, bin, t.TempDir(), "COMM_BASE_URL=", "COMM_WEBHOOK_ALLOW_PRIVATE=true", "COMM_SPF_INCLUDE=spf.mail.example.net", "COMM_MX_HOST=mx.mail.example.net",
		"COMM_OIDC_ISSUER="+m.Issuer(), "COMM_OIDC_CLIENT_ID="+oc.ClientID, "COMM_OIDC_CLIENT_SECRET="+oc.ClientSecret)
	proxy.mu.Lock()
	proxy.target = strings.TrimPrefix(srv.base, "http://")
	proxy.mu.Unlock()
	base := proxy.base()

	// Another account, signed in over plain HTTP: its project is the one
	// the first account must not reach.
	m.QueueUser(&mockoidc.MockUser{Subject: "bob-dash", Email: "bob@example.com", EmailVerified: true, PreferredUsername: "bob"})
	bobClient, bob := signInHTTP(t, srv.base)
	if len(bob.Projects) != 1 {
		t.Fatalf("bob's boot: %+v", bob)
	}
	m.QueueUser(&mockoidc.MockUser{Subject: "ada-dash", Email: "ada@example.com", EmailVerified: true, PreferredUsername: "ada"})
	// And a sandbox project, which has no account.
	var sandbox struct {
		ProjectID string `json:"project_id"`
		APIKey    string `json:"api_key"`
	}
	do(t, srv.base, "", "POST", "/v1/projects/sandbox", `{"name":"sandbox"}`, 201, &sandbox)

	// The browser.
	life, cancelLife := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancelLife()
	var chromeOut lockedBuffer
	actx, cancelAlloc := chromedp.NewExecAllocator(life,
		append(browserOptions(t, chrome, 1280, 900), chromedp.CombinedOutput(&chromeOut))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start %s: %v\n%s", chrome, err, chromeOut.String())
	}
	ctx, cancelSteps := context.WithTimeout(tab, 90*time.Second)
	defer cancelSteps()

	shots := os.Getenv("COMM_TEST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	screenshot := func(file string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		// Let the page settle and paint first.
		chromedp.Run(sctx, chromedp.Evaluate[chromedp.Void](`new Promise(r => setTimeout(() => requestAnimationFrame(() => requestAnimationFrame(r)), 150))`, chromedp.EvalAwaitPromise))
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
	}
	failed := func(step string, err error) {
		t.Helper()
		screenshot("failure.png")
		sctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		where, _ := chromedp.Run(sctx, chromedp.Location())
		text, _ := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("body")))
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("timed out")
		}
		browserLog := chromeOut.String()
		if len(browserLog) > 4000 {
			browserLog = "..." + browserLog[len(browserLog)-4000:]
		}
		t.Fatalf("%s: %v\nbrowser at %s:\n%s\ncomm serve:\n%s\nchromium:\n%s", step, err, where, text, srv.out.String(), browserLog)
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			failed(step, err)
		}
	}
	eval := func(step, js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js, chromedp.EvalAwaitPromise))
		if err != nil {
			failed(step, err)
		}
		return v
	}
	// wait polls a JavaScript predicate.
	wait := func(step, js string, d time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[any](js, chromedp.WithPollingTimeout(d))); err != nil {
			failed(step, err)
		}
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// Sign in at /dashboard: the provider sends the browser back to the
	// dashboard, whose account got a project.
	run("open the dashboard", chromedp.Navigate(base+"/dashboard"), chromedp.WaitVisible(css(`a[href^="/device/signin"]`)))
	screenshot("signin.png")
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(css(`a[href^="/device/signin"]`)))); err != nil {
		failed("sign in", err)
	}
	run("the first project's form", chromedp.WaitVisible(css(`form[action="/dashboard/projects"] input[name=name]`)))
	screenshot("first-project.png")
	run("name the project", chromedp.SendKeys(css(`form[action="/dashboard/projects"] input[name=name]`), "Ada's agent"))
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil,
		chromedp.Click(css(`form[action="/dashboard/projects"] button[type=submit]`)))); err != nil {
		failed("create the first project", err)
	}
	run("the overview", chromedp.WaitVisible(css(`main .stats`)))
	// From now on, through the proxy.
	where, _ := chromedp.Run(ctx, chromedp.Location())
	run("through the proxy", chromedp.Navigate(base+"/dashboard"+where[strings.Index(where, "#"):]), chromedp.WaitVisible(css(`main .stats`)))
	boot := eval("read the boot data", `JSON.parse(document.getElementById('comm-boot').textContent)`).(map[string]any)
	projects := boot["projects"].([]any)
	if len(projects) == 0 {
		failed("the account's projects", errors.New("none"))
	}
	project := projects[0].(map[string]any)["id"].(string)
	if where, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(where, "#/p/"+project+"/overview") {
		failed("the hash route", errors.New("at "+where))
	}
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css("header"))); !strings.Contains(txt, "ada@example.com") {
		t.Errorf("the header does not name the account: %q", txt)
	}
	wait("the live feed connects", `document.querySelector('.feed-state.open') !== null`, 10*time.Second)
	screenshot("overview.png")

	// A key for the REST calls, made on the Keys page (shown once).
	run("keys page", chromedp.Navigate(base+"/dashboard#/p/"+project+"/keys"), chromedp.WaitVisible(css(`.page.keys form input`)))
	run("create a key", chromedp.SendKeys(css(`.page.keys form input`), "rest"), chromedp.Click(css(`.page.keys form button[type=submit]`)),
		chromedp.WaitVisible(css(`.once output.secret`)))
	key, err := chromedp.Run(ctx, chromedp.Text(css(`.once output.secret`)))
	if err != nil || !strings.HasPrefix(key, "comm_") {
		failed("the new key", fmt.Errorf("%q %v", key, err))
	}
	key = strings.TrimSpace(key)

	// A test connection and a message: the live feed shows it within a second.
	run("live events page", chromedp.Navigate(base+"/dashboard#/p/"+project+"/events"), chromedp.WaitVisible(css(`.vlist`)))
	var conn struct{ ID string }
	do(t, srv.base, key, "POST", "/v1/connections", `{"channel":"test"}`, 201, &conn)
	sent := time.Now()
	do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", `{"sender":"ann","text":"hello from ann"}`, 201, nil)
	wait("the message in the live feed", `[...document.querySelectorAll('.vlist .row')].some(r => r.textContent.includes('hello from ann'))`, 5*time.Second)
	if d := time.Since(sent); d > time.Second {
		t.Errorf("the message showed in the live feed after %s, want within 1 s", d)
	} else {
		t.Logf("message injected to shown in the live feed: %s", d.Round(time.Millisecond))
	}
	// Expand it with the keyboard and jump to its conversation.
	run("expand the event", chromedp.Focus(css(`.vlist .row:last-child .row-btn`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(css(`#event-detail pre.json`)))
	screenshot("events.png")
	run("open the conversation", chromedp.Click(css(`#event-detail a[href*="/conversations/"]`)), chromedp.WaitVisible(css(`ol.thread li.msg`)))

	// Reply from the page: queued, then sent, live.
	run("reply", chromedp.SendKeys(css(`form.reply textarea`), "hi ann, from the dashboard"), chromedp.Click(css(`form.reply button[type=submit]`)))
	wait("the reply is sent", `[...document.querySelectorAll('li.msg.out')].some(li => li.dataset.status === 'sent' && li.textContent.includes('from the dashboard'))`, 10*time.Second)
	if ok := eval("message.sent in the feed", `window.commDashboard.feed.events.some(e => e.type === 'message.sent')`); ok != true {
		t.Errorf("no message.sent in the live feed")
	}
	// Typing from the page: the conversation shows it.
	run("typing", chromedp.Click(css(`form.reply button.secondary`)))
	wait("typing shown", `document.querySelector('form.reply [role=status]') && document.querySelector('form.reply [role=status]').textContent.includes('Typing shown until')`, 5*time.Second)
	screenshot("thread.png")

	// An email with an attachment, through the SMTP listener: the thread
	// shows the sender's name, the authentication verdicts and a link to
	// the attachment that the session downloads.
	var inbox struct{ ID, Address string }
	do(t, srv.base, key, "POST", "/v1/connections", `{"channel":"email","name":"Support inbox"}`, 201, &inbox)
	mail := "From: Grace Hopper <grace@example.org>\nTo: " + inbox.Address + "\nSubject: Quarterly report\nMessage-ID: <q1@example.org>\n" +
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b1\n\n--b1\nContent-Type: text/plain; charset=utf-8\n\nHello, the report is attached.\n" +
		"--b1\nContent-Type: text/csv; name=report.csv\nContent-Disposition: attachment; filename=report.csv\n\nquarter,total\nQ1,42\n--b1--\n"
	if err := sendMail(srv.smtp, "grace@example.org", []string{inbox.Address}, mail); err != nil {
		t.Fatalf("send the email: %v", err)
	}
	run("conversations", chromedp.Navigate(base+"/dashboard#/p/"+project+"/conversations"))
	wait("the email's conversation", `[...document.querySelectorAll('a.conv')].some(a => a.textContent.includes('Hello, the report'))`, 10*time.Second)
	screenshot("conversations.png")
	eval("open it", `[...document.querySelectorAll('a.conv')].find(a => a.textContent.includes('Hello, the report')).click()`)
	run("the email thread", chromedp.WaitVisible(css(`ol.thread ul.attachments a`)), chromedp.Click(css(`details.email-details summary`)))
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css(`ol.thread li.msg`))); !strings.Contains(txt, "Grace Hopper") || !strings.Contains(txt, "SPF") || !strings.Contains(txt, "report.csv") {
		t.Errorf("the email shows: %q", txt)
	}
	got := eval("download the attachment", `fetch(document.querySelector('ol.thread ul.attachments a').href).then(r => r.text().then(b => r.status + ' ' + b))`)
	if g, _ := got.(string); !strings.HasPrefix(g, "200 quarter,total") {
		t.Errorf("the attachment link gives %q", got)
	}
	screenshot("thread-email.png")

	// Cut the websocket while events happen: the feed resumes after the
	// last seq shown, with no gap and no duplicate.
	run("back to the live events", chromedp.Navigate(base+"/dashboard#/p/"+project+"/events"), chromedp.WaitVisible(css(`.vlist .row`)))
	wait("live again", `document.querySelector('.feed-state.open') !== null`, 10*time.Second)
	proxy.setRefuse(true)
	proxy.cut()
	wait("the feed sees the cut", `document.querySelector('.feed-state.open') === null`, 5*time.Second)
	for i := range 5 {
		do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", fmt.Sprintf(`{"sender":"ann","text":"while cut %d"}`, i), 201, nil)
	}
	proxy.setRefuse(false)
	wait("the feed resumes", `window.commDashboard.feed.events.some(e => e.data.message && e.data.message.text === 'while cut 4')`, 20*time.Second)
	for i := range 3 {
		do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", fmt.Sprintf(`{"sender":"ann","text":"after %d"}`, i), 201, nil)
	}
	wait("after the cut", `[...document.querySelectorAll('.vlist .row')].some(r => r.textContent.includes('after 2'))`, 5*time.Second)
	// A socket gone silent (a laptop waking up: the connection is open
	// but nothing comes): when the browser says it is back online, the
	// app pings, gets no pong, drops the socket and resumes on a new one.
	proxy.freeze()
	for i := range 3 {
		do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", fmt.Sprintf(`{"sender":"ann","text":"while silent %d"}`, i), 201, nil)
	}
	woke := time.Now()
	eval("back online", `dispatchEvent(new Event('online'))`)
	wait("the feed resumes after a silent socket", `window.commDashboard.feed.events.some(e => e.data.message && e.data.message.text === 'while silent 2')`, 15*time.Second)
	t.Logf("silent socket: events shown %s after the browser came back online", time.Since(woke).Round(time.Millisecond))
	proxy.cutFrozen()
	var head struct {
		LastSeq int64 `json:"last_seq"`
	}
	do(t, srv.base, key, "GET", "/v1/project", "", 200, &head)
	seqs := eval("the seqs held", `window.commDashboard.feed.events.map(e => e.seq)`).([]any)
	for i, s := range seqs {
		if int64(s.(float64)) != int64(i+1) {
			t.Fatalf("the feed holds seqs %v: want 1..%d, no gap or duplicate", seqs, head.LastSeq)
		}
	}
	if int64(len(seqs)) != head.LastSeq {
		t.Errorf("the feed holds %d events, the stream has %d", len(seqs), head.LastSeq)
	}
	// And what the list shows is the same, in order.
	shown := eval("the seqs shown", `[...document.querySelectorAll('.vlist .row')].map(r => +r.dataset.seq).sort((a, b) => a - b)`).([]any)
	for i := 1; i < len(shown); i++ {
		if shown[i].(float64) != shown[i-1].(float64)+1 {
			t.Errorf("rows shown: %v", shown)
			break
		}
	}

	// Filter by type: only message.sent rows, and the option counts them.
	eval("filter", `(() => { const s = document.getElementById('live-type'); s.value = 'message.sent'; s.dispatchEvent(new Event('change')); })()`)
	wait("filtered", `(() => { const r = [...document.querySelectorAll('.vlist .row')]; return r.length === 1 && r[0].textContent.includes('message.sent'); })()`, 5*time.Second)
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css(".counts"))); !strings.HasPrefix(txt, "1 shown") {
		t.Errorf("counts while filtered: %q", txt)
	}
	eval("all types", `(() => { const s = document.getElementById('live-type'); s.value = ''; s.dispatchEvent(new Event('change')); })()`)
	// Pause: new events are held and counted; Follow shows them.
	run("pause", chromedp.Click(css(`button.follow`)))
	do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", `{"sender":"ann","text":"while paused"}`, 201, nil)
	wait("counted while paused", `document.querySelector('.counts').textContent.includes('1 new while paused')`, 5*time.Second)
	run("follow", chromedp.Click(css(`button.follow`)))
	wait("following again", `[...document.querySelectorAll('.vlist .row')].some(r => r.textContent.includes('while paused')) && !document.querySelector('.counts').textContent.includes('paused')`, 5*time.Second)

	// A page opens on the newest 200 events; older ones page back in from
	// the stream (the events query), before the oldest shown.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 55 {
				call(t, "POST", srv.base+"/v1/connections/"+conn.ID+"/inbound", key, fmt.Sprintf(`{"sender":"bulk","text":"bulk %d-%d"}`, w, i))
			}
		}()
	}
	wg.Wait()
	run("reload the live events", chromedp.Reload(), chromedp.WaitVisible(css(`.older button`)))
	wait("the newest 200", `window.commDashboard.feed.events.length === 200`, 10*time.Second)
	run("load older events", chromedp.Click(css(`.older button`)))
	wait("older events loaded", `window.commDashboard.feed.events[0].seq === 1`, 10*time.Second)
	seqs = eval("the seqs held", `window.commDashboard.feed.events.map(e => e.seq)`).([]any)
	for i, s := range seqs {
		if int64(s.(float64)) != int64(i+1) {
			t.Fatalf("after loading older events the feed holds %v", seqs)
		}
	}
	if b, _ := chromedp.Run(ctx, chromedp.AttributeValue(css(`button.follow`), "aria-pressed")); b.Value != "false" {
		t.Errorf("loading older events leaves the list following")
	}

	// Webhook: the generated secret is shown once.
	var gone atomic.Bool // the receiver answers 410 Gone: the gateway disables the webhook at once
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gone.Load() {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(204)
	}))
	defer hook.Close()
	run("webhook page", chromedp.Navigate(base+"/dashboard#/p/"+project+"/webhook"), chromedp.WaitVisible(css(`.page.webhook input[type=url]`)))
	run("set the webhook", chromedp.SendKeys(css(`.page.webhook input[type=url]`), hook.URL+"/events"),
		chromedp.Click(css(`.page.webhook form.stack button[type=submit]`)), chromedp.WaitVisible(css(`.once output.secret`)))
	secret, _ := chromedp.Run(ctx, chromedp.Text(css(`.once output.secret`)))
	if !strings.HasPrefix(strings.TrimSpace(secret), "whsec_") {
		t.Errorf("webhook secret shown: %q", secret)
	}
	// An event for it to deliver: the attempt shows, live.
	do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", `{"sender":"ann","text":"for the webhook"}`, 201, nil)
	wait("an attempt", `document.querySelector('.page.webhook table tbody tr') !== null`, 10*time.Second)
	screenshot("webhook-secret.png")
	run("reload the webhook page", chromedp.Reload(), chromedp.WaitVisible(css(`.page.webhook table`)))
	screenshot("webhook.png")
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css("main"))); strings.Contains(txt, strings.TrimSpace(secret)) || strings.Contains(txt, "not shown again") {
		t.Errorf("the secret is shown again after a reload")
	}
	// The receiver says 410 Gone: the page shows the webhook disabled, live,
	// and how to re-enable it; saving it again does.
	gone.Store(true)
	do(t, srv.base, key, "POST", "/v1/connections/"+conn.ID+"/inbound", `{"sender":"ann","text":"to a gone receiver"}`, 201, nil)
	wait("disabled", `document.querySelector('.page.webhook .warn[role=alert]') !== null`, 10*time.Second)
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css(".page.webhook .warn[role=alert]"))); !strings.Contains(txt, "save the webhook again") {
		t.Errorf("the disabled state says: %q", txt)
	}
	screenshot("webhook-disabled.png")
	gone.Store(false)
	run("re-enable", chromedp.Click(css(`.page.webhook form.stack button[type=submit]`)), chromedp.WaitVisible(css(`.once output.secret`)))
	wait("enabled again", `document.querySelector('.page.webhook .warn[role=alert]') === null && document.querySelector('.page.webhook dl.facts .b-good') !== null`, 10*time.Second)

	// Keys: make one, revoke it.
	run("keys page again", chromedp.Navigate(base+"/dashboard#/p/"+project+"/keys"), chromedp.WaitVisible(css(`.page.keys table`)))
	run("create another key", chromedp.SendKeys(css(`.page.keys form input`), "to revoke"), chromedp.Click(css(`.page.keys form button[type=submit]`)),
		chromedp.WaitVisible(css(`.once output.secret`)))
	revokeKey, _ := chromedp.Run(ctx, chromedp.Text(css(`.once output.secret`)))
	revokeKey = strings.TrimSpace(revokeKey)
	wait("the key in the list", `[...document.querySelectorAll('.page.keys tbody tr')].some(r => r.textContent.includes('to revoke'))`, 5*time.Second)
	if code, _ := call(t, "GET", srv.base+"/v1/project", revokeKey, ""); code != 200 {
		t.Errorf("the new key: %d", code)
	}
	eval("ask to revoke", `[...document.querySelectorAll('.page.keys tbody tr')].find(r => r.textContent.includes('to revoke')).querySelector('button.danger-outline').click()`)
	eval("confirm", `[...document.querySelectorAll('.page.keys tbody tr')].find(r => r.textContent.includes('to revoke')).querySelector('button.danger').click()`)
	wait("revoked", `[...document.querySelectorAll('.page.keys tbody tr')].some(r => r.textContent.includes('to revoke') && r.textContent.includes('revoked'))`, 5*time.Second)
	if code, _ := call(t, "GET", srv.base+"/v1/project", revokeKey, ""); code != 401 {
		t.Errorf("the revoked key: %d, want 401", code)
	}
	screenshot("keys.png")

	// Connections and credit.
	run("connections page", chromedp.Navigate(base+"/dashboard#/p/"+project+"/connections"), chromedp.WaitVisible(css(`.page.connections ul.cards li.conn`)))
	// A custom domain: its DNS records as zone lines.
	run("add a domain", chromedp.SendKeys(css(`.page.connections form.inline-form input`), "mail.example.com"),
		chromedp.Click(css(`.page.connections form.inline-form button[type=submit]`)), chromedp.WaitVisible(css(`.page.connections pre.zone`)))
	if zone, _ := chromedp.Run(ctx, chromedp.Text(css(`.page.connections pre.zone`))); !strings.Contains(zone, "mail.example.com") {
		t.Errorf("zone lines shown: %q", zone)
	}
	screenshot("connections.png")
	run("credit page", chromedp.Navigate(base+"/dashboard#/p/"+project+"/credit"), chromedp.WaitVisible(css(`.page.credit .balance`)))
	if txt, _ := chromedp.Run(ctx, chromedp.Text(css(".page.credit .balance"))); !strings.Contains(txt, "100.00") {
		t.Errorf("balance shown: %q", txt)
	}
	screenshot("credit.png")

	// A phone's width: the nav folds behind Menu.
	run("narrow", chromedp.EmulateViewport(375, 812), chromedp.Navigate(base+"/dashboard#/p/"+project+"/overview"), chromedp.WaitVisible(css(`.nav-toggle`)))
	if vis := eval("nav hidden", `getComputedStyle(document.getElementById('nav')).display`); vis != "none" {
		t.Errorf("nav at 375 px: display %v", vis)
	}
	if w := eval("no horizontal scroll", `document.documentElement.scrollWidth`); w.(float64) > 375 {
		t.Errorf("page is %v px wide at 375 px", w)
	}
	screenshot("overview-375.png")
	run("open the menu", chromedp.Click(css(`.nav-toggle`)), chromedp.WaitVisible(css(`nav.open a[href$="/events"]`)))
	screenshot("menu-375.png")
	run("live events at 375 px", chromedp.Click(css(`nav.open a[href$="/events"]`)), chromedp.WaitVisible(css(`.vlist .row`)))
	if w := eval("no horizontal scroll", `document.documentElement.scrollWidth`); w.(float64) > 375 {
		t.Errorf("the live events page is %v px wide at 375 px", w)
	}
	screenshot("events-375.png")
	run("wide again", chromedp.EmulateViewport(1280, 900))

	// Another account's project, and a sandbox project, through this
	// session: refused.
	for _, other := range []string{bob.Projects[0].ID, sandbox.ProjectID} {
		status := eval("another project", fmt.Sprintf(`fetch('/dashboard/graphql', {method: 'POST', headers: {'Content-Type': 'application/json',
			'X-Comm-Project': %q, 'X-CSRF-Token': JSON.parse(document.getElementById('comm-boot').textContent).csrf},
			body: JSON.stringify({query: '{ project { id name } }'})}).then(r => r.status)`, other))
		if s := status.(float64); s != 403 && s != 404 {
			t.Errorf("X-Comm-Project %s from ada's session: %v, want 403 or 404", other, s)
		}
	}
	// Bob's own session (Go HTTP with his cookie and CSRF token) does not
	// reach Ada's project either.
	req, _ := http.NewRequest("POST", srv.base+"/dashboard/graphql", strings.NewReader(`{"query":"{ project { id name } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Comm-Project", project)
	req.Header.Set("X-CSRF-Token", bob.CSRF)
	if res, err := bobClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 403 && res.StatusCode != 404 || strings.Contains(string(b), "Ada") {
			t.Errorf("bob's session on ada's project: %d %s", res.StatusCode, b)
		}
	}
	// The sandbox key does not work on the cookie path.
	req, _ = http.NewRequest("POST", srv.base+"/dashboard/graphql", strings.NewReader(`{"query":"{ project { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+sandbox.APIKey)
	req.Header.Set("X-Comm-Project", sandbox.ProjectID)
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode/100 == 2 {
		t.Errorf("a sandbox key on /dashboard/graphql: %d", res.StatusCode)
	}

	// A page on another origin posts to the dashboard's GraphQL with the
	// browser's cookie: refused, and nothing changes.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/ws" {
			// The dashboard's websocket from this origin: refused before
			// any subscription (the page records how it ended).
			fmt.Fprintf(w, `<!doctype html><title>ws</title><script>
const ws = new WebSocket(%q, 'graphql-transport-ws');
ws.onopen = () => ws.send(JSON.stringify({type: 'connection_init', payload: {project: %q, csrf: 'guess'}}));
ws.onmessage = (m) => { document.title = 'ws message ' + m.data; };
ws.onclose = (e) => { if (!document.title.startsWith('ws message')) document.title = 'ws closed ' + e.code; };
</script>`, "ws"+strings.TrimPrefix(base, "http")+"/dashboard/graphql", project)
			return
		}
		fmt.Fprintf(w, `<!doctype html><title>elsewhere</title><form id="f" method="post" enctype="text/plain" action="%s/dashboard/graphql">
<input type="hidden" name='{"query":"mutation { createAPIKey(name: \"csrf\") { id } }","x":"' value='"}'></form>
<script>document.getElementById('f').submit()</script>`, base)
	}))
	defer attacker.Close()
	run("the other origin's websocket", chromedp.Navigate(attacker.URL+"/ws"))
	wait("the websocket ends", `document.title.startsWith('ws closed') || document.title.startsWith('ws message')`, 10*time.Second)
	if title, _ := chromedp.Run(ctx, chromedp.Title()); !strings.HasPrefix(title, "ws closed") {
		t.Errorf("a websocket from another origin: %q", title)
	}
	run("the other origin's form", chromedp.Navigate(attacker.URL))
	wait("the form posted", `location.pathname === '/dashboard/graphql'`, 10*time.Second)
	txt, _ := chromedp.Run(ctx, chromedp.Text(css("body")))
	code, body := call(t, "GET", srv.base+"/v1/keys", key, "")
	if code != 200 || strings.Contains(string(body), `"csrf"`) || !strings.Contains(txt, "forbidden") {
		t.Errorf("after the cross-origin post (%q): keys %d %s", txt, code, body)
	}
	t.Logf("the cross-origin post got: %.200s", txt)

	// Sign out: back to the dashboard's sign-in page.
	run("the app again", chromedp.Navigate(base+"/dashboard#/p/"+project+"/overview"), chromedp.WaitVisible(css(`form.signout button`)))
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(css(`form.signout button`)))); err != nil {
		failed("sign out", err)
	}
	run("signed out", chromedp.WaitVisible(css(`a[href^="/device/signin"]`)))
	if where, _ := chromedp.Run(ctx, chromedp.Location()); !strings.Contains(where, "/dashboard") {
		t.Errorf("after signing out: at %s", where)
	}

	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}

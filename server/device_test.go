package server_test

import (
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// startWeb serves the gateway with BaseURL its real address (the sign-in
// links and the OIDC redirect URL), without the outbox worker.
func startWeb(t *testing.T, cfg store.Config, opts server.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts})
}

// webBrowser is a person's webBrowser: a cookie jar, redirects followed.
type webBrowser struct {
	t      *testing.T
	g      *gateway
	client *http.Client
}

func newWebBrowser(t *testing.T, g *gateway) *webBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &webBrowser{t: t, g: g, client: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// page is an HTML answer, after redirects.
type webPage struct {
	Status int
	URL    *url.URL
	Header http.Header
	Body   string
}

func (b *webBrowser) do(req *http.Request) webPage {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return webPage{Status: resp.StatusCode, URL: resp.Request.URL, Header: resp.Header, Body: string(body)}
}

// get opens a path of the gateway or a full URL.
func (b *webBrowser) get(target string) webPage {
	b.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.g.URL + target
	}
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post submits a form; header adds request headers (Origin, Sec-Fetch-Site).
func (b *webBrowser) post(path string, form url.Values, header ...string) webPage {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.g.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

var (
	webCSRFRE   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	webSignInRE = regexp.MustCompile(`href="(/device/signin\?code=[^"]+)"`)
)

// main is the content of the page, for failure messages.
func (p webPage) main() string {
	if _, after, ok := strings.Cut(p.Body, "<main>"); ok {
		before, _, _ := strings.Cut(after, "</main>")
		return before
	}
	return p.Body
}

func (p webPage) csrf(t *testing.T) string {
	t.Helper()
	m := webCSRFRE.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no csrf field on the page:\n%s", p.main())
	}
	return html.UnescapeString(m[1])
}

func (p webPage) want(t *testing.T, status int, texts ...string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("%s: status %d, want %d; page:\n%s", p.URL, p.Status, status, p.main())
	}
	if ct := p.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", p.URL, ct)
	}
	for _, s := range texts {
		if !strings.Contains(p.Body, s) {
			t.Errorf("%s: page does not say %q:\n%s", p.URL, s, p.main())
		}
	}
}

func (p webPage) wantNot(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(p.Body, s) {
			t.Errorf("%s: page says %q, it should not:\n%s", p.URL, s, p.main())
		}
	}
}

// webStart is the answer of POST /v1/auth/device/start.
type webStart = api.DeviceStart

func (g *gateway) webStart(t *testing.T, apiKey string) webStart {
	t.Helper()
	body := "{}"
	if apiKey != "" {
		body = `{"api_key":"` + apiKey + `"}`
	}
	resp := g.post(t, "", "/v1/auth/device/start", body)
	if resp.Status != http.StatusOK {
		t.Fatalf("device start: status %d, body %s", resp.Status, resp.Body)
	}
	var st webStart
	decodeJSON(t, resp.Body, &st)
	if st.VerificationURIComplete != g.URL+"/device?code="+url.QueryEscape(st.UserCode) {
		t.Fatalf("verification_uri_complete %q, base %s", st.VerificationURIComplete, g.URL)
	}
	return st
}

// webToken is the answer of POST /v1/auth/device/token.
type webToken = api.DeviceToken

func (g *gateway) webPoll(t *testing.T, deviceCode string) webToken {
	t.Helper()
	resp := g.post(t, "", "/v1/auth/device/token", `{"device_code":"`+deviceCode+`"}`)
	if resp.Status != http.StatusOK {
		t.Fatalf("device token: status %d, body %s", resp.Status, resp.Body)
	}
	var tok webToken
	decodeJSON(t, resp.Body, &tok)
	return tok
}

// webUndecided polls and wants the sign-in still open (pending, or
// slow_down since the test polls faster than the interval).
func (g *gateway) webUndecided(t *testing.T, deviceCode string) {
	t.Helper()
	if tok := g.webPoll(t, deviceCode); (tok.Status != account.DevicePending && tok.Status != account.DeviceSlowDown) || tok.APIKey != "" {
		t.Fatalf("poll: %+v, want pending", tok)
	}
}

// webAccountView is the body of GET /v1/account.
type webAccountView = api.AccountView

func (g *gateway) webAccount(t *testing.T, key string) webAccountView {
	t.Helper()
	resp := g.do(t, request{Path: "/v1/account", Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/account: status %d, body %s", resp.Status, resp.Body)
	}
	var a webAccountView
	decodeJSON(t, resp.Body, &a)
	return a
}

// oidcSignIn opens the page of a code, follows its sign-in button through
// the mock provider and back, and returns the page it lands on.
func (b *webBrowser) oidcSignIn(t *testing.T, st webStart) webPage {
	t.Helper()
	p := b.get(st.VerificationURIComplete)
	p.want(t, http.StatusOK, st.UserCode, "Sign in")
	m := webSignInRE.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no sign-in button:\n%s", p.Body)
	}
	p = b.get(html.UnescapeString(m[1]))
	if p.URL.Path != "/device" || p.URL.Query().Get("code") != st.UserCode {
		t.Fatalf("after signing in: at %s, want /device?code=%s; page:\n%s", p.URL, st.UserCode, p.Body)
	}
	return p
}

// TestDevicePageOIDC drives comm login's page end to end: a sandbox
// with history, sign-in at a mock OpenID provider, CSRF refusals, approval,
// the signed-in key over the same project, the credit granted once.
func TestDevicePageOIDC(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		m, err := mockoidc.Run()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		oc := m.Config()
		g := startWeb(t, cfg, server.Options{SignIn: server.SignInOptions{
			OIDCIssuer: oc.Issuer, OIDCClientID: oc.ClientID, OIDCClientSecret: oc.ClientSecret}})

		// A sandbox with a connection and a message.
		sb := g.newSandbox(t, "Ada's agent")
		conn := g.connectTest(t, sb.APIKey)
		g.inject(t, sb.APIKey, conn.ID, `{"sender":"a","text":"hi"}`)
		evs := g.events(t, sb.APIKey, "")
		sbProject := g.project(t, sb.APIKey)

		st := g.webStart(t, sb.APIKey)
		g.webUndecided(t, st.DeviceCode)

		user := &mockoidc.MockUser{Subject: "ada-1", Email: "ada@example.com", EmailVerified: true, PreferredUsername: "ada"}
		m.QueueUser(user)
		b := newWebBrowser(t, g)

		// Before signing in, the page shows the code, not the request.
		anon := b.get(st.VerificationURIComplete)
		anon.want(t, http.StatusOK, st.UserCode)
		anon.wantNot(t, sbProject.ID, "Approve")
		for _, h := range []string{"Content-Security-Policy", "X-Frame-Options"} {
			if anon.Header.Get(h) == "" {
				t.Errorf("page without %s", h)
			}
		}

		p := b.oidcSignIn(t, st)
		p.want(t, http.StatusOK, st.UserCode, "Ada&#39;s agent", sbProject.ID, "1 connection,",
			strconv.FormatInt(sbProject.LastSeq, 10)+" events so far", "127.0.0.1", "ada@example.com",
			`action="/device/approve"`, `action="/device/deny"`, "just now")
		csrf := p.csrf(t)
		code := st.UserCode

		// Without the token, with a wrong one, or from another site: 403,
		// nothing changes.
		b.post("/device/approve", url.Values{"code": {code}}).want(t, http.StatusForbidden)
		b.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf + "x"}}).want(t, http.StatusForbidden)
		b.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf}},
			"Sec-Fetch-Site", "cross-site").want(t, http.StatusForbidden)
		b.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf}},
			"Origin", "http://evil.example").want(t, http.StatusForbidden)
		// Another webBrowser's session has another token.
		other := newWebBrowser(t, g)
		other.get("/device").want(t, http.StatusOK)
		other.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf}}).want(t, http.StatusForbidden)
		g.webUndecided(t, st.DeviceCode)

		// Approve.
		done := b.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf}},
			"Sec-Fetch-Site", "same-origin", "Origin", g.URL)
		done.want(t, http.StatusOK, "Approved. Return to your terminal; it now has a signed-in key for project Ada&#39;s agent")
		tok := g.webPoll(t, st.DeviceCode)
		if tok.Status != account.DeviceApproved || !strings.HasPrefix(tok.APIKey, "comm_") || tok.BaseURL != g.URL {
			t.Fatalf("poll after approval: %+v", tok)
		}
		wantError(t, g.post(t, "", "/v1/auth/device/token", `{"device_code":"`+st.DeviceCode+`"}`), http.StatusConflict, "conflict", "")
		// Approving again is a conflict page; the page shows the state.
		b.post("/device/approve", url.Values{"code": {code}, "csrf": {csrf}}).want(t, http.StatusConflict, "already")
		b.get(st.VerificationURIComplete).want(t, http.StatusOK, "complete")

		// The signed-in key is the same project, history and connection.
		key := tok.APIKey
		if pr := g.project(t, key); pr.ID != sbProject.ID {
			t.Errorf("signed-in project %s, sandbox was %s", pr.ID, sbProject.ID)
		}
		if got := g.events(t, key, ""); len(got) != len(evs) || got[len(got)-1].Seq != evs[len(evs)-1].Seq {
			t.Errorf("signed-in events %v, sandbox had %v", got, evs)
		}
		var conns []connection
		g.get(t, key, "/v1/connections", &conns)
		if len(conns) != 1 || conns[0].ID != conn.ID {
			t.Errorf("signed-in connections %+v, want %s", conns, conn.ID)
		}
		acct := g.webAccount(t, key)
		if acct.Balance != "100.00" || len(acct.Ledger) != 1 || acct.Account.Email != "ada@example.com" ||
			acct.Account.Issuer != oc.Issuer || acct.Account.Subject != "ada-1" {
			t.Errorf("account %+v", acct)
		}

		// Paid channels: 402 with the sandbox key, not with the signed-in
		// one; the sandbox key still works for free channels.
		wantError(t, g.post(t, sb.APIKey, "/v1/connections", `{"channel":"x"}`), http.StatusPaymentRequired, "payment_required", "")
		if resp := g.post(t, key, "/v1/connections", `{"channel":"x"}`); resp.Status == http.StatusPaymentRequired {
			t.Errorf("signed-in key: connect x answers 402: %s", resp.Body)
		}
		g.connectTest(t, sb.APIKey)

		// The same person signs in again, in a new webBrowser, for a new
		// project: the credit is not granted twice.
		st2 := g.webStart(t, "")
		m.QueueUser(user)
		b2 := newWebBrowser(t, g)
		p2 := b2.oidcSignIn(t, st2)
		p2.want(t, http.StatusOK, "A new project will be created in your account")
		b2.post("/device/approve", url.Values{"code": {st2.UserCode}, "csrf": {p2.csrf(t)}}).
			want(t, http.StatusOK, "Approved. Return to your terminal")
		tok2 := g.webPoll(t, st2.DeviceCode)
		if tok2.Status != account.DeviceApproved || tok2.APIKey == "" {
			t.Fatalf("second poll: %+v", tok2)
		}
		acct2 := g.webAccount(t, tok2.APIKey)
		if acct2.Account.ID != acct.Account.ID || acct2.Balance != "100.00" || len(acct2.Ledger) != 1 || len(acct2.Projects) != 2 {
			t.Errorf("after a second sign-in: %+v (first %+v)", acct2, acct)
		}
		if pr := g.project(t, tok2.APIKey); pr.ID == sbProject.ID {
			t.Errorf("second sign-in without a key reused project %s", pr.ID)
		}
	})
}

// TestDevicePageDeny: denying on the page tells the command line.
func TestDevicePageDeny(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startWeb(t, cfg, server.Options{SignIn: server.SignInOptions{LocalPassword: "s3cret", LoopbackListener: true}})
		sb := g.newSandbox(t, "deny me")
		st := g.webStart(t, sb.APIKey)
		b := newWebBrowser(t, g)
		p := b.get(st.VerificationURIComplete)
		p = b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {p.csrf(t)}, "password": {"s3cret"}})
		p.want(t, http.StatusOK, "Local operator", `action="/device/deny"`)
		// Signing in starts a new session: the old token is dead.
		csrf := p.csrf(t)
		b.post("/device/deny", url.Values{"code": {st.UserCode}, "csrf": {csrf}}).want(t, http.StatusOK, "Denied")
		if tok := g.webPoll(t, st.DeviceCode); tok.Status != account.DeviceDenied || tok.APIKey != "" {
			t.Fatalf("poll after deny: %+v", tok)
		}
		b.get(st.VerificationURIComplete).want(t, http.StatusOK, "was denied")
		b.post("/device/approve", url.Values{"code": {st.UserCode}, "csrf": {csrf}}).want(t, http.StatusConflict, "already denied")
		if tok := g.webPoll(t, st.DeviceCode); tok.Status != account.DeviceDenied {
			t.Fatalf("poll after approving a denied sign-in: %+v", tok)
		}
		// Signing out ends the session's right to decide.
		b.post("/device/signout", url.Values{"csrf": {csrf}}).want(t, http.StatusOK)
		st2 := g.webStart(t, "")
		p = b.get(st2.VerificationURIComplete)
		p.want(t, http.StatusOK, "Local operator sign-in")
		p.wantNot(t, `action="/device/approve"`)
		b.post("/device/approve", url.Values{"code": {st2.UserCode}, "csrf": {p.csrf(t)}}).want(t, http.StatusUnauthorized)
		g.webUndecided(t, st2.DeviceCode)
	})
}

// TestDevicePageCodes: malformed and unknown codes get messages, and too many
// wrong codes a 429.
func TestDevicePageCodes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startWeb(t, cfg, server.Options{SignIn: server.SignInOptions{LocalPassword: "pw", LoopbackListener: true}})
		b := newWebBrowser(t, g)
		form := b.get("/device")
		form.want(t, http.StatusOK, `name="code"`, `method="get"`)
		// Not no-referrer: that makes browsers send "Origin: null" on the
		// page's POSTs, refused over plain HTTP (found by the browser test).
		if rp := form.Header.Get("Referrer-Policy"); rp != "same-origin" {
			t.Errorf("Referrer-Policy %q, want same-origin", rp)
		}
		b.get("/device?code=HELLO-123").want(t, http.StatusBadRequest, "is not a sign-in code", `name="code"`)
		b.get("/device?code=BCDF").want(t, http.StatusBadRequest, "8 letters")
		b.get("/device?code="+url.QueryEscape("<script>")).want(t, http.StatusBadRequest, "&lt;script&gt;")

		st := g.webStart(t, "")
		// Case, spaces and dashes do not matter.
		typed := strings.ToLower(strings.ReplaceAll(st.UserCode, "-", " "))
		b.get("/device?code="+url.QueryEscape(typed)).want(t, http.StatusOK, st.UserCode)

		wrong := "BCDF-GHJK"
		if wrong == st.UserCode {
			wrong = "BCDF-GHJL"
		}
		for i := range 10 {
			p := b.get("/device?code=" + wrong)
			if p.Status != http.StatusNotFound {
				t.Fatalf("wrong code %d: status %d", i+1, p.Status)
			}
			if i == 0 {
				p.want(t, http.StatusNotFound, "No sign-in with this code")
			}
		}
		p := b.get("/device?code=" + wrong)
		p.want(t, http.StatusTooManyRequests, "Too many wrong codes")
		if p.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// Now even the right code waits, from this address.
		b.get(st.VerificationURIComplete).want(t, http.StatusTooManyRequests)
		// Malformed codes are refused before any lookup, and not counted.
		b.get("/device?code=AEIOU").want(t, http.StatusBadRequest)

		// Behind https the cookies are Secure; always HttpOnly, SameSite=Lax.
		rec := httptest.NewRecorder()
		server.New(g.Svc, server.Options{BaseURL: "https://comm.example"}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/device", nil))
		if c := rec.Header().Get("Set-Cookie"); !strings.Contains(c, "; Secure") || !strings.Contains(c, "HttpOnly") ||
			!strings.Contains(c, "SameSite=Lax") || !strings.Contains(c, "Path=/;") {
			t.Errorf("session cookie %q", c)
		}
		if c := b.get("/device").Header; c.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q", c.Get("Cache-Control"))
		}
	})
}

// TestLocalSignIn: the operator password (or the printed token) signs in
// on a loopback listener; a wrong one does not; without a loopback
// listener the local sign-in is refused.
func TestLocalSignIn(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startWeb(t, cfg, server.Options{SignIn: server.SignInOptions{
			LocalPassword: "correct horse", LocalToken: "tok-0123456789abcdef", LoopbackListener: true}})
		sb := g.newSandbox(t, "local")
		st := g.webStart(t, sb.APIKey)
		b := newWebBrowser(t, g)
		p := b.get(st.VerificationURIComplete)
		p.want(t, http.StatusOK, "Local operator sign-in — no identity provider is configured on this gateway", `type="password"`)
		csrf := p.csrf(t)

		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {"wrong"}}).
			want(t, http.StatusUnauthorized, "Wrong password")
		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {""}}).
			want(t, http.StatusUnauthorized)
		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "password": {"correct horse"}}).
			want(t, http.StatusForbidden)
		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {"correct horse"}},
			"Sec-Fetch-Site", "cross-site").want(t, http.StatusForbidden)
		b.get(st.VerificationURIComplete).wantNot(t, `action="/device/approve"`)

		p = b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {"correct horse"}})
		p.want(t, http.StatusOK, "Local operator", `action="/device/approve"`, sb.ProjectID)
		if p.URL.Query().Get("code") != st.UserCode {
			t.Errorf("after local sign-in at %s", p.URL)
		}
		p = b.post("/device/approve", url.Values{"code": {st.UserCode}, "csrf": {p.csrf(t)}})
		p.want(t, http.StatusOK, "Approved")
		tok := g.webPoll(t, st.DeviceCode)
		if tok.Status != account.DeviceApproved {
			t.Fatalf("poll: %+v", tok)
		}
		if a := g.webAccount(t, tok.APIKey); a.Account.Issuer != "local" || a.Account.Subject != "operator" || a.Balance != "100.00" {
			t.Errorf("local account %+v", a)
		}

		// The printed token works too, in another browser.
		st2 := g.webStart(t, "")
		b2 := newWebBrowser(t, g)
		p = b2.get(st2.VerificationURIComplete)
		b2.post("/device/signin/local", url.Values{"code": {st2.UserCode}, "csrf": {p.csrf(t)}, "password": {"tok-0123456789abcdef"}}).
			want(t, http.StatusOK, "Signed in as", "Local operator", `action="/device/approve"`)

		// Attempts are limited per IP.
		b3 := newWebBrowser(t, g)
		csrf3 := b3.get(st2.VerificationURIComplete).csrf(t)
		var last webPage
		for range 10 {
			last = b3.post("/device/signin/local", url.Values{"csrf": {csrf3}, "password": {"nope"}})
		}
		last.want(t, http.StatusTooManyRequests)
	})

	t.Run("not loopback", func(t *testing.T) {
		t.Parallel()
		g := startWeb(t, storetest.SQLite(t), server.Options{SignIn: server.SignInOptions{
			LocalPassword: "correct horse", LoopbackListener: false}})
		st := g.webStart(t, "")
		b := newWebBrowser(t, g)
		p := b.get(st.VerificationURIComplete)
		p.want(t, http.StatusOK, "not configured")
		p.wantNot(t, `type="password"`)
		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "password": {"correct horse"}}).
			want(t, http.StatusForbidden, "not configured")
		b.get(st.VerificationURIComplete).wantNot(t, "Signed in as")
		g.webUndecided(t, st.DeviceCode)
	})

	t.Run("allow remote", func(t *testing.T) {
		t.Parallel()
		g := startWeb(t, storetest.SQLite(t), server.Options{SignIn: server.SignInOptions{
			LocalPassword: "correct horse", LocalAllowRemote: true}})
		st := g.webStart(t, "")
		b := newWebBrowser(t, g)
		p := b.get(st.VerificationURIComplete)
		b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {p.csrf(t)}, "password": {"correct horse"}}).
			want(t, http.StatusOK, "Signed in as", `action="/device/approve"`)
	})
}

// TestDevicePageProviderDown: the gateway starts with an unreachable
// provider and says so when someone signs in.
func TestDevicePageProviderDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/oidc"
	ln.Close()
	g := startWeb(t, storetest.SQLite(t), server.Options{SignIn: server.SignInOptions{
		OIDCIssuer: issuer, OIDCClientID: "comm"}})
	st := g.webStart(t, "")
	b := newWebBrowser(t, g)
	p := b.get(st.VerificationURIComplete)
	p.want(t, http.StatusOK, "Sign in")
	b.get("/device/signin?code="+st.UserCode).want(t, http.StatusServiceUnavailable, "cannot be reached", issuer)
	// A callback without the sign-in cookie is refused.
	b.get("/device/callback?code=x&state=y").want(t, http.StatusBadRequest, "Start again")
}

// TestDevicePageWrongCodesPerAccount: wrong codes are counted per signed-in
// account as well as per IP, so moving to another address does not buy a
// signed-in person more guesses.
func TestDevicePageWrongCodesPerAccount(t *testing.T) {
	t.Parallel()
	g := startWeb(t, storetest.SQLite(t), server.Options{SignIn: server.SignInOptions{
		LocalPassword: "pw", LoopbackListener: true, WrongCodes: 4}})
	b := newWebBrowser(t, g)
	st := g.webStart(t, "")
	p := b.get(st.VerificationURIComplete)
	b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {p.csrf(t)}, "password": {"pw"}}).
		want(t, http.StatusOK, `action="/device/approve"`)
	// 127.0.0.2 is loopback too, but another client IP.
	from := func(ip string) {
		b.client.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	}
	from("127.0.0.1")
	for i := range 3 {
		if p := b.get("/device?code=BCDF-GHJK"); p.Status != http.StatusNotFound {
			t.Fatalf("wrong code %d from 127.0.0.1: %d", i+1, p.Status)
		}
	}
	from("127.0.0.2")
	if p := b.get("/device?code=BCDF-GHJK"); p.Status != http.StatusNotFound {
		t.Fatalf("4th wrong code, the first from 127.0.0.2: %d", p.Status)
	}
	p = b.get("/device?code=BCDF-GHJK")
	p.want(t, http.StatusTooManyRequests, "Too many wrong codes")
	// Another person at 127.0.0.2 (not signed in) still has guesses left.
	other := newWebBrowser(t, g)
	other.client.Transport = b.client.Transport
	if p := other.get("/device?code=BCDF-GHJK"); p.Status != http.StatusNotFound {
		t.Fatalf("anonymous visitor from 127.0.0.2: %d", p.Status)
	}
}

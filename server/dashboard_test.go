package server_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

var (
	bootRE          = regexp.MustCompile(`(?s)<script id="comm-boot" type="application/json">(.*?)</script>`)
	dashSignInRE    = regexp.MustCompile(`href="(/device/signin\?next=/dashboard)"`)
	dashAssetLinkRE = regexp.MustCompile(`(?:src|href)="(/dashboard/assets/[^"]+)"`)
)

type dashBoot struct {
	Account struct {
		ID, Email string
	} `json:"account"`
	Projects []struct {
		ID, Name string
	} `json:"projects"`
	CSRF string `json:"csrf"`
}

// dashSignIn signs b in at the dashboard through the mock provider as
// user, makes a first project named name, and returns the app's boot data.
func (b *webBrowser) dashSignIn(t *testing.T, m *mockoidc.MockOIDC, user *mockoidc.MockUser, name string) dashBoot {
	t.Helper()
	p := b.get("/dashboard")
	p.want(t, http.StatusOK, "Sign in to the dashboard", "comm login")
	link := dashSignInRE.FindStringSubmatch(p.Body)
	if link == nil {
		t.Fatalf("no sign-in button:\n%s", p.main())
	}
	m.QueueUser(user)
	p = b.get(html.UnescapeString(link[1]))
	p.want(t, http.StatusOK, "Your first project", `action="/dashboard/projects"`)
	if p.URL.Path != "/dashboard" {
		t.Fatalf("after signing in at %s", p.URL)
	}
	p = b.post("/dashboard/projects", url.Values{"name": {name}, "csrf": {p.csrf(t)}})
	if p.Status != http.StatusOK || p.URL.Path != "/dashboard" {
		t.Fatalf("new project: %d at %s:\n%s", p.Status, p.URL, p.Body)
	}
	if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("the app's CSP: %q", csp)
	}
	mm := bootRE.FindStringSubmatch(p.Body)
	if mm == nil {
		t.Fatalf("no boot data in the app's page:\n%s", p.Body)
	}
	var boot dashBoot
	if err := json.Unmarshal([]byte(mm[1]), &boot); err != nil {
		t.Fatalf("boot data %s: %v", mm[1], err)
	}
	if len(boot.Projects) != 1 || boot.Projects[0].Name != name || boot.CSRF == "" || boot.Account.Email != user.Email {
		t.Fatalf("boot data %+v", boot)
	}
	links := dashAssetLinkRE.FindAllStringSubmatch(p.Body, -1)
	if len(links) < 2 {
		t.Errorf("the app's page links %d assets", len(links))
	}
	for _, l := range links {
		a := b.get(l[1])
		if a.Status != http.StatusOK || a.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("asset %s: %d, Cache-Control %q", l[1], a.Status, a.Header.Get("Cache-Control"))
		}
	}
	return boot
}

// gql posts a GraphQL operation to the dashboard's endpoint; header adds
// or overrides request headers ("" deletes one).
func (b *webBrowser) gql(t *testing.T, project, csrf, query string, header ...string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, b.g.URL+"/dashboard/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Comm-Project", project)
	req.Header.Set("X-CSRF-Token", csrf)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	p := b.do(req)
	var out map[string]any
	if err := json.Unmarshal([]byte(p.Body), &out); err != nil {
		t.Fatalf("POST /dashboard/graphql: %d %s", p.Status, p.Body)
	}
	return p.Status, out
}

// errCode is the code of a REST-shaped error answer, or of a GraphQL
// answer's first error.
func errCode(out map[string]any) string {
	if e, ok := out["error"].(map[string]any); ok {
		c, _ := e["code"].(string)
		return c
	}
	if es, ok := out["errors"].([]any); ok && len(es) > 0 {
		ext, _ := es[0].(map[string]any)["extensions"].(map[string]any)
		c, _ := ext["code"].(string)
		return c
	}
	return ""
}

// TestDashboardAccess: the dashboard's session works only on the
// dashboard's endpoints, for the account's own projects, with its CSRF
// token, from its own origin; keys never work there, and signing out ends
// it at once, websocket included.
func TestDashboardAccess(t *testing.T) {
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

		ada := newWebBrowser(t, g)
		aBoot := ada.dashSignIn(t, m, &mockoidc.MockUser{Subject: "ada-1", Email: "ada@example.com", EmailVerified: true}, "Ada's agent")
		aProject := aBoot.Projects[0].ID
		bob := newWebBrowser(t, g)
		bBoot := bob.dashSignIn(t, m, &mockoidc.MockUser{Subject: "bob-1", Email: "bob@example.com", EmailVerified: true}, "Bob's agent")
		bProject := bBoot.Projects[0].ID

		// The session acts for the project: reads and writes.
		st, out := ada.gql(t, aProject, aBoot.CSRF, `{ project { id name } account { balance projects { id } } }`)
		if st != http.StatusOK || out["errors"] != nil {
			t.Fatalf("query: %d %v", st, out)
		}
		if got := out["data"].(map[string]any)["project"].(map[string]any)["id"]; got != aProject {
			t.Errorf("project %v, want %s", got, aProject)
		}
		st, out = ada.gql(t, aProject, aBoot.CSRF, `mutation { connect(input: {channel: "test"}) { id } }`)
		if st != http.StatusOK || out["errors"] != nil {
			t.Fatalf("connect: %d %v", st, out)
		}
		connID := out["data"].(map[string]any)["connect"].(map[string]any)["id"].(string)

		st, out = ada.gql(t, aProject, aBoot.CSRF, `mutation { a: injectInbound(connectionID: "`+connID+`", input: {sender: "ann", text: "first"}) { duplicate }
			b: injectInbound(connectionID: "`+connID+`", input: {sender: "ann", text: "second"}) { duplicate } }`)
		if st != http.StatusOK || out["errors"] != nil {
			t.Fatalf("inject: %d %v", st, out)
		}
		st, out = ada.gql(t, aProject, aBoot.CSRF, `{ conversations(first: 10, orderBy: {field: LAST_MESSAGE_AT, direction: DESC}) { edges { node { participant lastMessage { text direction } } } } }`)
		if b, _ := json.Marshal(out); st != http.StatusOK || !strings.Contains(string(b), `"lastMessage":{"direction":"inbound","text":"second"}`) {
			t.Errorf("conversations with their last message: %d %s", st, b)
		}

		refused := []struct {
			name       string
			b          *webBrowser
			project    string
			csrf       string
			header     []string
			status     int
			code       string
			wantAbsent bool
		}{
			{name: "another account's project", b: bob, project: aProject, csrf: bBoot.CSRF, status: 403, code: "forbidden"},
			{name: "another account's CSRF token", b: bob, project: bProject, csrf: aBoot.CSRF, status: 403, code: "forbidden"},
			{name: "no CSRF token", b: ada, project: aProject, status: 403, code: "forbidden"},
			{name: "no project", b: ada, csrf: aBoot.CSRF, status: 400, code: "invalid_parameter"},
			{name: "a malformed project", b: ada, project: "prj_../../x", csrf: aBoot.CSRF, status: 403, code: "forbidden"},
			{name: "a cross-site request", b: ada, project: aProject, csrf: aBoot.CSRF, header: []string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: "forbidden"},
			{name: "another origin", b: ada, project: aProject, csrf: aBoot.CSRF, header: []string{"Origin", "https://evil.example"}, status: 403, code: "forbidden"},
			{name: "no session", b: newWebBrowser(t, g), project: aProject, csrf: aBoot.CSRF, status: 401, code: "unauthenticated"},
		}
		for _, c := range refused {
			st, out := c.b.gql(t, c.project, c.csrf, `mutation { deleteConnection(id: "`+connID+`") }`, c.header...)
			if st != c.status || errCode(out) != c.code {
				t.Errorf("%s: %d %v, want %d %s", c.name, st, out, c.status, c.code)
			}
		}
		// A key never works on the dashboard's endpoint, nor the cookie on
		// the API's.
		sb := g.newSandbox(t, "sandbox")
		st, out = newWebBrowser(t, g).gql(t, sb.ProjectID, "", `{ project { id } }`, "Authorization", "Bearer "+sb.APIKey)
		if st != http.StatusUnauthorized {
			t.Errorf("a sandbox key on /dashboard/graphql: %d %v", st, out)
		}
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/graphql", strings.NewReader(`{"query":"{ project { id } }"}`))
		req.Header.Set("Content-Type", "application/json")
		if p := ada.do(req); p.Status != http.StatusUnauthorized {
			t.Errorf("the session cookie on /graphql: %d %s", p.Status, p.Body)
		}
		// Downloads: the session's own projects only.
		att := "/dashboard/projects/" + bProject + "/messages/msg_01m8cjx9q8zmnm9pzjr3tmygsc/attachments/att_01m8cjx9q8zmnm9pzjr3tmygsc"
		if p := ada.get(att); p.Status != http.StatusForbidden {
			t.Errorf("another account's attachment: %d %s", p.Status, p.Body)
		}
		if p := bob.get(att); p.Status != http.StatusNotFound {
			t.Errorf("an unknown attachment of one's own project: %d %s", p.Status, p.Body)
		}
		// Nothing refused was done.
		st, out = ada.gql(t, aProject, aBoot.CSRF, `{ connections { totalCount } }`)
		if n := out["data"].(map[string]any)["connections"].(map[string]any)["totalCount"]; st != 200 || n != float64(1) {
			t.Errorf("connections after the refusals: %d %v", st, out)
		}

		// The websocket: own origin only, project and CSRF token in
		// connection_init.
		wsURL := "ws" + strings.TrimPrefix(g.URL, "http") + "/dashboard/graphql"
		dial := func(b *webBrowser, origin string) (*wsClient, *http.Response, error) {
			hdr := http.Header{}
			u, _ := url.Parse(g.URL)
			for _, c := range b.client.Jar.Cookies(u) {
				hdr.Add("Cookie", c.Name+"="+c.Value)
			}
			if origin != "" {
				hdr.Set("Origin", origin)
			}
			d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
			ws, resp, err := d.Dial(wsURL, hdr)
			if err != nil {
				return nil, resp, err
			}
			t.Cleanup(func() { ws.Close() })
			return &wsClient{t: t, ws: ws}, resp, nil
		}
		for _, origin := range []string{"https://evil.example", ""} {
			if _, resp, err := dial(ada, origin); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("websocket with Origin %q: %v %v, want 403", origin, err, resp)
			}
		}
		init := func(c *wsClient, project, csrf string) {
			payload, _ := json.Marshal(map[string]string{"project": project, "csrf": csrf})
			if err := c.write(wsMsg{Type: "connection_init", Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
		c, _, err := dial(bob, g.URL)
		if err != nil {
			t.Fatal(err)
		}
		init(c, aProject, bBoot.CSRF)
		c.wantClosed(4403, "not a project of your account")

		c, _, err = dial(ada, g.URL)
		if err != nil {
			t.Fatal(err)
		}
		init(c, aProject, aBoot.CSRF)
		if m, err := c.next(10 * time.Second); err != nil || m.Type != "connection_ack" {
			t.Fatalf("connection_init: %v %+v", err, m)
		}
		if err := c.subscribe("1", `subscription { eventBatches(afterSeq: 0) { seq type } }`, nil); err != nil {
			t.Fatal(err)
		}
		if evs, _, err := c.events("1", 1); err != nil || evs[0].Type != "connection.active" {
			t.Fatalf("the live feed: %v %+v", err, evs)
		}

		// Signing out ends the session: its socket closes, its requests
		// are refused, even with the old cookie.
		old := ada.client.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(g.URL, "http://")})
		p := ada.post("/device/signout", url.Values{"csrf": {aBoot.CSRF}, "next": {"/dashboard"}})
		p.want(t, http.StatusOK, "Sign in to the dashboard")
		c.wantClosed(4403, "")
		replay := newWebBrowser(t, g)
		replay.client.Jar.SetCookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(g.URL, "http://")}, old)
		if st, out := replay.gql(t, aProject, aBoot.CSRF, `{ project { id } }`); st != http.StatusUnauthorized {
			t.Errorf("after signing out, the old cookie: %d %v", st, out)
		}

		// A session cookie from before the dashboard shared it (path
		// /device) does not shadow the new one on /device.
		cy := newWebBrowser(t, g)
		devURL, _ := url.Parse(g.URL + "/device")
		cy.client.Jar.SetCookies(devURL, []*http.Cookie{{Name: "comm_session", Value: "from.before", Path: "/device"}})
		cy.dashSignIn(t, m, &mockoidc.MockUser{Subject: "cy-1", Email: "cy@example.com", EmailVerified: true}, "Cy's agent")
		cy.get("/device").want(t, http.StatusOK, "Signed in as cy@example.com")
		for _, c := range cy.client.Jar.Cookies(devURL) {
			if c.Value == "from.before" {
				t.Errorf("the old /device cookie was not expired")
			}
		}
	})
}

package server_test

// Regression tests of issue 12's server items: abuse limits (item 5), key
// management after a project moved into an account (item 11), and the
// smaller items (sign-out, trusted proxies, NUL in API text).

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// doFrom is g.do with extra request headers (X-Forwarded-For).
func (g *gateway) doFrom(t *testing.T, method, path, key, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, g.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		r.Header.Set("Content-Type", jsonCT)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// wantLimited checks a 429 in the JSON error shape with a Retry-After of
// at least one second.
func wantLimited(t *testing.T, what string, r response) {
	t.Helper()
	wantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("%s: Retry-After %q", what, r.Header.Get("Retry-After"))
	}
}

func loopbackProxy() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// TestSandboxCreationLimit: with the default limit, one client IP creates
// 100 sandboxes, and the 101st within the hour is a 429 with Retry-After;
// another client IP (through a trusted proxy) is unaffected.
func TestSandboxCreationLimit(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{TrustedProxies: loopbackProxy()})
		body := `{"name":"flood"}`
		t0 := time.Now()
		created := 0
		var last response
		for range server.DefaultSandboxesPerHour + 50 {
			last = g.doFrom(t, http.MethodPost, "/v1/projects/sandbox", "", body, "X-Forwarded-For", "198.51.100.1")
			if last.Status != http.StatusCreated {
				break
			}
			created++
		}
		t.Logf("one client IP: %d sandboxes created in %s, then %d", created, time.Since(t0).Round(time.Millisecond), last.Status)
		if created != server.DefaultSandboxesPerHour {
			t.Fatalf("%d sandboxes created before the limit, want %d", created, server.DefaultSandboxesPerHour)
		}
		wantLimited(t, "the 101st sandbox", last)
		if s, _ := strconv.Atoi(last.Header.Get("Retry-After")); s > 60 {
			t.Errorf("Retry-After %d s: a token comes back every 36 s", s)
		}
		if r := g.doFrom(t, http.MethodPost, "/v1/projects/sandbox", "", body, "X-Forwarded-For", "198.51.100.2"); r.Status != http.StatusCreated {
			t.Errorf("another client IP: %d %s", r.Status, r.Body)
		}
		// Without X-Forwarded-For the client is the proxy: a budget of
		// its own.
		if r := g.doFrom(t, http.MethodPost, "/v1/projects/sandbox", "", body); r.Status != http.StatusCreated {
			t.Errorf("the proxy itself: %d %s", r.Status, r.Body)
		}
	})

	// IPv6 clients draw on the budget of their /64.
	t.Run("ipv6", func(t *testing.T) {
		t.Parallel()
		g := start(t, storetest.SQLite(t), server.Options{TrustedProxies: loopbackProxy(), SandboxesPerHour: 2})
		post := func(ip string) response {
			return g.doFrom(t, http.MethodPost, "/v1/projects/sandbox", "", `{"name":"v6"}`, "X-Forwarded-For", ip)
		}
		for _, ip := range []string{"2001:db8::1", "2001:db8::ffff:2"} {
			if r := post(ip); r.Status != http.StatusCreated {
				t.Fatalf("%s: %d %s", ip, r.Status, r.Body)
			}
		}
		wantLimited(t, "a third address of the same /64", post("2001:db8::3"))
		if r := post("2001:db8:0:1::1"); r.Status != http.StatusCreated {
			t.Errorf("another /64: %d %s", r.Status, r.Body)
		}
	})
}

// TestKeyWriteLimit: a key writing over its budget gets 429 with
// Retry-After on REST and rate_limited on a GraphQL mutation (each
// mutation field counts); reads go on, and another key is unaffected.
func TestKeyWriteLimit(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{WritesPerSecond: 1, WriteBurst: 5})
		a, b := g.newSandbox(t, "a"), g.newSandbox(t, "b")
		for i := range 5 {
			if r := g.post(t, a.APIKey, "/v1/keys", `{"name":"k`+strconv.Itoa(i)+`"}`); r.Status != http.StatusCreated {
				t.Fatalf("write %d: %d %s", i+1, r.Status, r.Body)
			}
		}
		wantLimited(t, "REST write over the budget", g.post(t, a.APIKey, "/v1/keys", `{"name":"over"}`))
		wantLimited(t, "DELETE over the budget", g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/conn_x", Key: a.APIKey}))
		res := g.gql(t, a.APIKey, `mutation { createAPIKey(name: "over") { id } }`, nil)
		e := gqlFail(t, res, "", "rate_limited", "")
		if n, _ := e.Extensions["retry_after"].(float64); n < 1 {
			t.Errorf("GraphQL rate_limited without retry_after: %s", res.Body)
		}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("GraphQL rate_limited: Retry-After %q", res.Header.Get("Retry-After"))
		}
		if r := g.do(t, request{Path: "/v1/keys", Key: a.APIKey}); r.Status != http.StatusOK {
			t.Errorf("a read while limited: %d %s", r.Status, r.Body)
		}
		// Another key is unaffected, and one operation of 3 aliased
		// mutations takes 3 tokens.
		g.gqlOK(t, b.APIKey, `mutation { x: createAPIKey(name: "x") { id } y: createAPIKey(name: "y") { id } z: createAPIKey(name: "z") { id } }`, nil, &json.RawMessage{})
		gqlFail(t, g.gql(t, b.APIKey, `mutation { x: createAPIKey(name: "x") { id } y: createAPIKey(name: "y") { id } z: createAPIKey(name: "z") { id } }`, nil), "", "rate_limited", "")
		if r := g.post(t, b.APIKey, "/v1/keys", `{"name":"b"}`); r.Status != http.StatusCreated {
			t.Errorf("B's fourth write (2 tokens left): %d %s", r.Status, r.Body)
		}

		// Over a websocket, the same executor and the same budget: A's
		// bucket is drained, and the operation needs 3 tokens (one
		// refills per second).
		for range 10 {
			if g.post(t, a.APIKey, "/v1/keys", `{"name":"drain"}`).Status == http.StatusTooManyRequests {
				break
			}
		}
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(g.URL, "http")+"/graphql",
			http.Header{"Sec-WebSocket-Protocol": {live.ProtocolTransportWS}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": a.APIKey}})
		var m struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := ws.ReadJSON(&m); err != nil || m.Type != "connection_ack" {
			t.Fatalf("init: %v %+v", err, m)
		}
		ws.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query": `mutation { x: createAPIKey(name: "ws") { id } y: createAPIKey(name: "ws") { id } z: createAPIKey(name: "ws") { id } }`}})
		for m.Type != "next" && m.Type != "error" {
			if err := ws.ReadJSON(&m); err != nil {
				t.Fatalf("mutation over the socket: %v", err)
			}
		}
		if !strings.Contains(string(m.Payload), `"rate_limited"`) {
			t.Errorf("mutation over the socket over the budget: %s %s", m.Type, m.Payload)
		}
	})
}

// TestSandboxConnectionCap: a project without an account holds a bounded
// number of live connections; deleting one makes room.
func TestSandboxConnectionCap(t *testing.T) {
	t.Parallel()
	g := startWith(t, storetest.SQLite(t), server.Options{}, messaging.Options{SandboxConnections: 3})
	sb := g.newSandbox(t, "cap")
	var first connection
	for i := range 3 {
		c := g.connectTest(t, sb.APIKey)
		if i == 0 {
			first = c
		}
	}
	r := g.post(t, sb.APIKey, "/v1/connections", `{"channel":"test"}`)
	if e := wantError(t, r, http.StatusConflict, "conflict", ""); !strings.Contains(e.Error.Message, "at most 3 connections") {
		t.Errorf("message %q", e.Error.Message)
	}
	if r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + first.ID, Key: sb.APIKey}); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	g.connectTest(t, sb.APIKey)
}

// TestKeyManagementAfterSignIn (item 11): once a sandbox project moved
// into an account, its sandbox key lists, creates and revokes no keys (on
// REST and GraphQL), and a project cannot revoke its last working key.
func TestKeyManagementAfterSignIn(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})

		// A sandbox project alone: its only key cannot be revoked.
		lone := g.newSandbox(t, "lone")
		var ks []struct {
			ID         string  `json:"id"`
			Kind       string  `json:"kind"`
			Display    string  `json:"display"`
			Name       *string `json:"name"`
			Current    bool    `json:"current"`
			CreatedAt  string  `json:"created_at"`
			LastUsedAt *string `json:"last_used_at"`
			RevokedAt  *string `json:"revoked_at"`
		}
		g.get(t, lone.APIKey, "/v1/keys", &ks)
		r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + ks[0].ID, Key: lone.APIKey})
		if e := wantError(t, r, http.StatusConflict, "conflict", ""); !strings.Contains(e.Error.Message, "last working key") {
			t.Errorf("message %q", e.Error.Message)
		}
		gqlFail(t, g.gql(t, lone.APIKey, `mutation($id: ID!) { revokeAPIKey(id: $id) { id } }`, map[string]any{"id": ks[0].ID}), "revokeAPIKey", "conflict", "")
		if p := g.project(t, lone.APIKey); p.ID != lone.ProjectID {
			t.Fatal("the lone key stopped working")
		}

		// Sign in carrying a sandbox project over.
		sb := g.newSandbox(t, "moved")
		signed := g.signIn(t, sb, account.Identity{Issuer: "i", Subject: "km", Email: "km@example.com"})
		g.get(t, signed, "/v1/keys", &ks)
		var signedID, sandboxID string
		for _, k := range ks {
			if k.Current {
				signedID = k.ID
			} else {
				sandboxID = k.ID
			}
		}
		if signedID == "" || sandboxID == "" {
			t.Fatalf("keys %+v", ks)
		}
		for _, c := range []struct {
			name string
			r    response
		}{
			{"list", g.do(t, request{Path: "/v1/keys", Key: sb.APIKey})},
			{"create", g.post(t, sb.APIKey, "/v1/keys", `{"name":"sneaky"}`)},
			{"revoke", g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + signedID, Key: sb.APIKey})},
		} {
			if e := wantError(t, c.r, http.StatusForbidden, "forbidden", ""); !strings.Contains(e.Error.Message, "signed-in key") {
				t.Errorf("%s: message %q", c.name, e.Error.Message)
			}
		}
		gqlFail(t, g.gql(t, sb.APIKey, `mutation { createAPIKey(name: "sneaky") { id apiKey } }`, nil), "createAPIKey", "forbidden", "")
		gqlFail(t, g.gql(t, sb.APIKey, `mutation($id: ID!) { revokeAPIKey(id: $id) { id } }`, map[string]any{"id": signedID}), "revokeAPIKey", "forbidden", "")
		gqlFail(t, g.gql(t, sb.APIKey, `{ apiKeys { id } }`, nil), "apiKeys", "forbidden", "")
		// The signed-in key still works; the sandbox key still reads and
		// writes the project's data.
		if p := g.project(t, signed); p.ID != sb.ProjectID {
			t.Fatalf("signed-in key after the attempts: %+v", p)
		}
		g.connectTest(t, sb.APIKey)

		// The last signed-in key cannot revoke itself; the sandbox key
		// does not count, as it cannot manage keys.
		r = g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + signedID, Key: signed})
		wantError(t, r, http.StatusConflict, "conflict", "")
		// With a second signed-in key, the first may go, and the sandbox
		// key may be revoked by a signed-in one.
		var nk api.NewKey
		resp := g.post(t, signed, "/v1/keys", `{"name":"second"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		if decodeJSON(t, resp.Body, &nk); nk.APIKey == "" {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		if r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + sandboxID, Key: signed}); r.Status != http.StatusOK {
			t.Fatalf("revoking the sandbox key: %d %s", r.Status, r.Body)
		}
		if r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + signedID, Key: nk.APIKey}); r.Status != http.StatusOK {
			t.Fatalf("revoking the first signed-in key with the second: %d %s", r.Status, r.Body)
		}
		r = g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + nk.ID, Key: nk.APIKey})
		wantError(t, r, http.StatusConflict, "conflict", "")
	})
}

// TestSignOutEndsSession: after signing out, a copy of the old session
// cookie no longer signs anyone in (it is revoked in the database).
func TestSignOutEndsSession(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startWeb(t, cfg, server.Options{SignIn: server.SignInOptions{LocalPassword: "correct horse", LoopbackListener: true}})
		st := g.webStart(t, "")
		b := newWebBrowser(t, g)
		p := b.get(st.VerificationURIComplete)
		p = b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {p.csrf(t)}, "password": {"correct horse"}})
		p.want(t, http.StatusOK, "Signed in as", `action="/device/approve"`)
		oldCSRF := p.csrf(t)
		u, _ := url.Parse(g.URL + "/device")
		var old *http.Cookie
		for _, c := range b.client.Jar.Cookies(u) {
			if c.Name == "comm_session" {
				old = c
			}
		}
		if old == nil {
			t.Fatal("no session cookie after signing in")
		}

		b.post("/device/signout", url.Values{"csrf": {oldCSRF}}).want(t, http.StatusOK)
		b.get(st.VerificationURIComplete).wantNot(t, "Signed in as")

		// An attacker replays the old cookie (and its csrf token).
		replay := newWebBrowser(t, g)
		replay.client.Jar.SetCookies(u, []*http.Cookie{{Name: old.Name, Value: old.Value, Path: "/device"}})
		replay.get(st.VerificationURIComplete).wantNot(t, "Signed in as", `action="/device/approve"`)
		replay.post("/device/approve", url.Values{"code": {st.UserCode}, "csrf": {oldCSRF}}).wantNot(t, "Approved")
		g.webUndecided(t, st.DeviceCode)
	})
}

// TestTrustedProxies: X-Forwarded-For is believed only from a trusted
// proxy, so one client's wrong codes do not lock out others behind the
// same proxy, and a spoofed header from an untrusted peer changes nothing;
// the local sign-in refuses a request a loopback proxy forwarded from
// elsewhere.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	wrongCodes := func(t *testing.T, g *gateway, from string) int {
		b := newWebBrowser(t, g)
		req, _ := http.NewRequest(http.MethodGet, g.URL+"/device?code=BCDF-GHJK", nil)
		req.Header.Set("X-Forwarded-For", from)
		return b.do(req).Status
	}
	t.Run("behind a trusted proxy", func(t *testing.T) {
		t.Parallel()
		g := startWeb(t, storetest.SQLite(t), server.Options{TrustedProxies: loopbackProxy(),
			SignIn: server.SignInOptions{LocalPassword: "pw", LoopbackListener: true, WrongCodes: 3}})
		for i := range 3 {
			// The rightmost address not of a trusted proxy is the client;
			// what it claims further left is not believed.
			if s := wrongCodes(t, g, "198.51.100."+strconv.Itoa(i)+", 203.0.113.5, 127.0.0.1"); s != http.StatusNotFound {
				t.Fatalf("wrong code %d: %d", i+1, s)
			}
		}
		if s := wrongCodes(t, g, "203.0.113.5"); s != http.StatusTooManyRequests {
			t.Errorf("4th wrong code of the same client: %d", s)
		}
		if s := wrongCodes(t, g, "203.0.113.6"); s != http.StatusNotFound {
			t.Errorf("another client behind the proxy: %d, want 404 (not locked out)", s)
		}
	})
	t.Run("untrusted peer", func(t *testing.T) {
		t.Parallel()
		g := startWeb(t, storetest.SQLite(t), server.Options{
			SignIn: server.SignInOptions{LocalPassword: "pw", LoopbackListener: true, WrongCodes: 3}})
		for i := range 3 {
			wrongCodes(t, g, "203.0.113."+strconv.Itoa(i))
		}
		if s := wrongCodes(t, g, "203.0.113.99"); s != http.StatusTooManyRequests {
			t.Errorf("a spoofed X-Forwarded-For escaped the limit: %d", s)
		}
	})
	t.Run("local sign-in through a loopback proxy", func(t *testing.T) {
		t.Parallel()
		for _, trusted := range [][]netip.Prefix{nil, loopbackProxy()} {
			g := startWeb(t, storetest.SQLite(t), server.Options{TrustedProxies: trusted,
				SignIn: server.SignInOptions{LocalPassword: "correct horse", LoopbackListener: true}})
			st := g.webStart(t, "")
			b := newWebBrowser(t, g)
			csrf := b.get(st.VerificationURIComplete).csrf(t)
			for _, h := range [][]string{{"X-Forwarded-For", "203.0.113.7"}, {"X-Forwarded-For", "127.0.0.1, 203.0.113.7"},
				{"Forwarded", "for=203.0.113.7"}, {"X-Real-Ip", "203.0.113.7"}} {
				b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {"correct horse"}}, h...).
					want(t, http.StatusForbidden, "only from the machine")
			}
			b.get(st.VerificationURIComplete).wantNot(t, "Signed in as")
			// From this machine, directly, it works.
			b.post("/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {csrf}, "password": {"correct horse"}}).
				want(t, http.StatusOK, "Signed in as")
		}
	})
}

// TestNULInAPIText: U+0000 anywhere in a JSON body or a GraphQL string
// input is a 400 / invalid_parameter naming the field, not a 500 on
// PostgreSQL; nothing is stored.
func TestNULInAPIText(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "nul")
		c := g.connectTest(t, sb.APIKey)
		for _, tc := range []struct{ path, body, param string }{
			{"/v1/connections/" + c.ID + "/inbound", `{"sender":"alice","text":"a\u0000b"}`, "text"},
			{"/v1/connections/" + c.ID + "/inbound", `{"sender":"al\u0000ice","text":"hi"}`, "sender"},
			{"/v1/connections", `{"channel":"test","name":"n\u0000"}`, "name"},
			{"/v1/connections", `{"channel":"test","config":{"to":["x","y\u0000"]}}`, "config.to[1]"},
			{"/v1/keys", `{"name":"\u0000"}`, "name"},
			{"/v1/projects/sandbox", `{"name":"x\u0000y"}`, "name"},
		} {
			wantError(t, g.post(t, sb.APIKey, tc.path, tc.body), http.StatusBadRequest, "invalid_parameter", tc.param)
		}
		// A backslash followed by "u0000" is text, not NUL.
		if r := g.post(t, sb.APIKey, "/v1/connections/"+c.ID+"/inbound", `{"sender":"alice","text":"a\\u0000b"}`); r.Status != http.StatusCreated && r.Status != http.StatusOK {
			t.Errorf("escaped backslash: %d %s", r.Status, r.Body)
		}
		// GraphQL: as a variable and as a literal.
		inject := `mutation($c: ID!, $in: InjectInput!) { injectInbound(connectionID: $c, input: $in) { duplicate } }`
		gqlFail(t, g.gql(t, sb.APIKey, inject, map[string]any{"c": c.ID, "in": map[string]any{"sender": "bob", "text": "a\x00b"}}),
			"injectInbound", "invalid_parameter", "in.text")
		gqlFail(t, g.gql(t, sb.APIKey, `mutation($c: ID!) { injectInbound(connectionID: $c, input: {sender: "bob", subject: "a\u0000b"}) { duplicate } }`,
			map[string]any{"c": c.ID}), "injectInbound", "invalid_parameter", "input.subject")
		gqlFail(t, g.gql(t, sb.APIKey, `mutation { createAPIKey(name: "a\u0000b") { id } }`, nil), "createAPIKey", "invalid_parameter", "name")
		// Nothing was stored: the one inbound message is the escaped
		// backslash's.
		if n := count(t, g.DB, "SELECT count(*) FROM messages"); n != 1 {
			t.Errorf("%d messages stored, want 1", n)
		}
		var ks []json.RawMessage
		g.get(t, sb.APIKey, "/v1/keys", &ks)
		if len(ks) != 1 {
			t.Errorf("%d keys after the refusals, want 1", len(ks))
		}
	})
}

// TestKeysEverBounded: a project cannot grow its list of keys without
// bound by making and revoking keys: after MaxKeysEver keys (revoked ones
// count) another is refused with 409, and the list stays that long.
func TestKeysEverBounded(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), server.Options{})
	sb := g.newSandbox(t, "many keys")
	// Revoked keys made earlier, written straight to the database.
	if _, err := g.DB.W.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO api_keys (id, created_at, project_id, hash, kind, display, revoked_at)
		SELECT printf('key_old%06d', i), datetime('now'), ?, randomblob(32), 'sandbox', 'comm_sandbox_...old', datetime('now') FROM n`,
		messaging.MaxKeysEver-2, sb.ProjectID); err != nil {
		t.Fatal(err)
	}
	g.newKey(t, sb.APIKey) // the last one allowed
	r := g.do(t, request{Method: "POST", Path: "/v1/keys", Key: sb.APIKey, ContentType: "application/json", Body: `{}`})
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "revoked ones count") {
		t.Fatalf("key %d: %d %s, want 409", messaging.MaxKeysEver+1, r.Status, r.Body)
	}
	r = g.do(t, request{Method: "GET", Path: "/v1/keys", Key: sb.APIKey})
	var ks []json.RawMessage
	if err := json.Unmarshal(r.Body, &ks); err != nil || len(ks) != messaging.MaxKeysEver {
		t.Fatalf("the list: %d keys (%v), want %d", len(ks), err, messaging.MaxKeysEver)
	}
}

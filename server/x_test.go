package server_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/channels/x/xtest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// xPeer is the person who writes to the connected X account.
const xPeer = "2244994945"

func xOptions(fake *xtest.Server, webhooks bool) x.Options {
	o := x.Options{APIURL: fake.URL, AuthorizeURL: fake.AuthorizeURL, ClientID: fake.ClientID, ClientSecret: fake.ClientSecret,
		ConsumerSecret: fake.ConsumerSecret, PollInterval: 50 * time.Millisecond}
	if webhooks {
		o.BearerToken = fake.BearerToken
		o.InsecureWebhooks = true // the fake listens on http with a port
	}
	return o
}

// xInstall connects X with a signed-in key and has u approve the install
// at the fake: pending with an authorize_url carrying the PKCE challenge,
// then the callback makes the connection active.
func (g *gateway) xInstall(t *testing.T, fake *xtest.Server, key string, u *xtest.User) connection {
	t.Helper()
	var pending connection
	resp := g.post(t, key, "/v1/connections", `{"channel":"x"}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect x: %d %s", resp.Status, resp.Body)
	}
	decodeJSON(t, resp.Body, &pending)
	if pending.Status != "pending" || pending.AuthorizeURL == nil || !strings.HasPrefix(*pending.AuthorizeURL, fake.AuthorizeURL) {
		t.Fatalf("connection %s: want pending with X's authorize URL", resp.Body)
	}
	au, _ := url.Parse(*pending.AuthorizeURL)
	if au.Query().Get("code_challenge") == "" || au.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("authorize URL %s has no S256 code_challenge", *pending.AuthorizeURL)
	}
	approved, err := fake.Authorize(*pending.AuthorizeURL, u)
	if err != nil {
		t.Fatal(err)
	}
	if r := g.xFollow(t, approved); r.Status != http.StatusOK {
		t.Fatalf("approved: %d %s", r.Status, r.Body)
	}
	var c connection
	g.get(t, key, "/v1/connections/"+pending.ID, &c)
	if c.Status != "active" || c.Address == nil || *c.Address != "@"+u.Username {
		t.Fatalf("after the callback: %+v", c)
	}
	return c
}

// xFollow follows the fake's redirect to the gateway's callback.
func (g *gateway) xFollow(t *testing.T, redirect string) response {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil || !strings.HasPrefix(redirect, g.URL+"/oauth/x/callback") {
		t.Fatalf("redirect %q (%v): want the gateway's callback", redirect, err)
	}
	return g.do(t, request{Path: u.RequestURI()})
}

// TestXWebhook drives an X connection in webhook mode through HTTP
// against the fake X: a sandbox key gets 402; with a signed-in key the
// install (denied, then approved: connection.authorized,
// connection.active) registers the app's webhook at /hooks/x (the fake's
// CRC answered) and subscribes the account to dm.received; a signed
// delivery becomes message.received (a redelivery and a forged one store
// nothing); a reply reaches the fake; an X Chat event stores nothing; a
// send to an encrypted peer fails with the X Chat reason; oauth.revoke
// revokes the connection.
func TestXWebhook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := xtest.NewServer()
		t.Cleanup(fake.Close)
		u := fake.NewUser("agentsmith")
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, x: xOptions(fake, true)})
		sb := g.newSandbox(t, "x")
		wantError(t, g.post(t, sb.APIKey, "/v1/connections", `{"channel":"x"}`), http.StatusPaymentRequired, "payment_required", "")
		key := signedInKey(t, g, sb.ProjectID)

		resp := g.post(t, key, "/v1/connections", `{"channel":"x"}`)
		var first connection
		decodeJSON(t, resp.Body, &first)
		denied, err := fake.Deny(*first.AuthorizeURL)
		if err != nil {
			t.Fatal(err)
		}
		if r := g.xFollow(t, denied); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "access_denied") {
			t.Fatalf("denied: %d %s", r.Status, r.Body)
		}
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + first.ID, Header: map[string]string{"Authorization": "Bearer " + key}}); r.Status/100 != 2 {
			t.Fatalf("delete the denied connection: %d %s", r.Status, r.Body)
		}

		conn := g.xInstall(t, fake, key, u)
		var types []string
		for _, e := range g.events(t, key, "") {
			if strings.HasPrefix(e.Type, "connection.") {
				types = append(types, e.Type)
			}
		}
		if got := strings.Join(types, ","); !strings.HasSuffix(got, "connection.authorized,connection.active") {
			t.Fatalf("events %v, want connection.authorized, connection.active", types)
		}
		hooks := fake.Webhooks()
		if len(hooks) != 1 || hooks[0].URL != g.URL+"/hooks/x" || !hooks[0].Valid {
			t.Fatalf("webhooks at X: %+v, want %s/hooks/x, valid", hooks, g.URL)
		}
		if subs := fake.Subscriptions(u.ID); len(subs) != 1 || subs[0].EventType != "dm.received" || subs[0].WebhookID != hooks[0].ID {
			t.Fatalf("subscriptions at X: %+v", subs)
		}

		// X's CRC, answered at /hooks/x.
		crc := g.do(t, request{Path: "/hooks/x?crc_token=tok-123"})
		if crc.Status != http.StatusOK || !strings.Contains(string(crc.Body), x.Sign(fake.ConsumerSecret, []byte("tok-123"))) {
			t.Fatalf("CRC: %d %s", crc.Status, crc.Body)
		}

		ev := u.Receive(xPeer, "hello from X & co")
		body := xtest.DMReceived(u.ID, ev)
		for range 2 { // a redelivery stores nothing new
			if n, err := fake.Push(t.Context(), u.ID, "dm.received", body); err != nil || n != 1 {
				t.Fatalf("push: %d %v", n, err)
			}
		}
		forged := g.do(t, request{Method: "POST", Path: "/hooks/x", ContentType: "application/json", Body: string(body),
			Header: map[string]string{x.SignatureHeader: x.Sign("not-the-secret", body)}})
		wantError(t, forged, http.StatusUnauthorized, "unauthenticated", "")
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != xPeer || in.Text != "hello from X & co" {
			t.Fatalf("received %+v", in)
		}

		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Hi from comm"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if sent := u.Sent(); len(sent) != 1 || sent[0].RecipientID != xPeer || sent[0].Text != "Hi from comm" {
			t.Fatalf("X got %+v", sent)
		}

		// X Chat: nothing stored; a send to an encrypted peer fails for good.
		if n, err := fake.Push(t.Context(), u.ID, "chat.received", xtest.ChatReceived(u.ID, xPeer)); err != nil || n != 0 {
			// (no chat.received subscription: nothing is pushed)
			t.Fatalf("chat push: %d %v", n, err)
		}
		chat := xtest.ChatReceived(u.ID, xPeer)
		hdr := http.Header{}
		fake.Sign(hdr, chat)
		r := g.do(t, request{Method: "POST", Path: "/hooks/x", ContentType: "application/json", Body: string(chat),
			Header: map[string]string{x.SignatureHeader: hdr.Get(x.SignatureHeader)}})
		if r.Status != http.StatusOK {
			t.Fatalf("chat.received: %d %s", r.Status, r.Body)
		}
		if n := len(g.events(t, key, "type=message.received")); n != 1 {
			t.Fatalf("%d message.received events after an X Chat event, want 1", n)
		}
		u.ReachableByChatOnly("3333333333")
		failed := g.queue(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"3333333333","text":"hi"}`)
		m := g.waitMessage(t, key, failed.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if m.Error == nil || !strings.Contains(*m.Error, "end-to-end encrypted X Chat conversations are not supported") {
			t.Fatalf("send to an X Chat peer: %+v", m)
		}
		wantError(t, g.post(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"@someone","text":"hi"}`),
			http.StatusBadRequest, "invalid_parameter", "to")

		// The person revokes the app at X: oauth.revoke revokes, once.
		revoke := xtest.OAuthRevoke(u.ID)
		fake.Sign(hdr, revoke)
		for range 2 {
			r = g.do(t, request{Method: "POST", Path: "/hooks/x", ContentType: "application/json", Body: string(revoke),
				Header: map[string]string{x.SignatureHeaderOAuth2: hdr.Get(x.SignatureHeaderOAuth2)}})
			if r.Status != http.StatusOK {
				t.Fatalf("oauth.revoke: %d %s", r.Status, r.Body)
			}
		}
		if n := len(g.events(t, key, "type=connection.revoked")); n != 1 {
			t.Fatalf("%d connection.revoked events, want 1", n)
		}
	})
}

// TestXPollingRefresh drives an X connection without webhooks (no bearer
// token): DMs are polled from /2/dm_events, each stored once, across a
// restart too; the session refreshes the short-lived token, X rotates it
// (the old tokens stop working), and a second gateway on the same
// database sends with the stored tokens.
func TestXPollingRefresh(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := xtest.NewServer()
		t.Cleanup(fake.Close)
		u := fake.NewUser("poller")
		fake.SetExpiresIn(3)
		opts := xOptions(fake, false)
		opts.RefreshMargin = 2 * time.Second
		// Both gateways share the key that seals the configurations.
		box, err := sealed.New(bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, x: opts, svc: messaging.Options{Box: box}})
		sb := g.newSandbox(t, "x")
		key := signedInKey(t, g, sb.ProjectID)
		g.xInstall(t, fake, key, u)
		if len(fake.Webhooks()) != 0 {
			t.Fatalf("webhooks registered without a bearer token: %+v", fake.Webhooks())
		}

		u.Receive(xPeer, "polled one")
		u.Receive(xPeer, "polled two")
		waitFor(t, "two polled messages", func() bool { return len(g.events(t, key, "type=message.received")) >= 2 })

		// Refreshes rotate the tokens; then a long-lived one is issued.
		waitFor(t, "a refresh", func() bool { return fake.Refreshed() >= 1 })
		fake.SetExpiresIn(3600)
		n := fake.Refreshed()
		waitFor(t, "a refresh to a long-lived token", func() bool { return fake.Refreshed() > n })
		time.Sleep(300 * time.Millisecond) // several polls: nothing new
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 2 {
			t.Fatalf("%d message.received events, want 2 (no duplicates)", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Text != "polled one" || in.Sender != xPeer {
			t.Fatalf("first polled %+v", in)
		}

		// Another process on the same database: it polls on from the
		// stored cursor and sends with the stored (rotated) tokens.
		g.Stop()
		g2 := startGateway(t, cfg, setup{outbox: true, sessions: true, x: opts, svc: messaging.Options{Box: box}})
		u.Receive(xPeer, "polled three")
		waitFor(t, "the third message after the restart", func() bool { return len(g2.events(t, key, "type=message.received")) >= 3 })
		time.Sleep(300 * time.Millisecond)
		if n := len(g2.events(t, key, "type=message.received")); n != 3 {
			t.Fatalf("%d message.received events after the restart, want 3", n)
		}
		out := g2.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"sent by the second gateway"}`)
		g2.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if sent := u.Sent(); len(sent) != 1 || sent[0].Text != "sent by the second gateway" {
			t.Fatalf("X got %+v", sent)
		}
	})
}

// TestXRevoked: a refresh X refuses (the grant was revoked) revokes the
// connection (connection.revoked) and its session stops.
func TestXRevoked(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := xtest.NewServer()
		t.Cleanup(fake.Close)
		u := fake.NewUser("revoker")
		fake.SetExpiresIn(3)
		opts := xOptions(fake, false)
		opts.RefreshMargin = 2 * time.Second
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, x: opts})
		sb := g.newSandbox(t, "x")
		key := signedInKey(t, g, sb.ProjectID)
		conn := g.xInstall(t, fake, key, u)
		u.Revoke()
		waitFor(t, "connection.revoked", func() bool { return len(g.events(t, key, "type=connection.revoked")) == 1 })
		var c connection
		g.get(t, key, "/v1/connections/"+conn.ID, &c)
		if c.Status != "revoked" {
			t.Fatalf("connection %+v, want revoked", c)
		}
	})
}

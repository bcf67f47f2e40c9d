package x_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/channels/x/xtest"
)

// TestCRCVector checks the CRC answer with X's own example (channels.md
// §13 vector 4), at the app-level webhook.
func TestCRCVector(t *testing.T) {
	t.Parallel()
	const secret = "z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu"
	d := x.Descriptor(x.Options{ClientID: "id", ClientSecret: "other", ConsumerSecret: secret})
	r := httptest.NewRequest(http.MethodGet, "/hooks/x?crc_token=9b4507b3-9040-4669-9ca3-6b94edb50553", nil)
	keys, resp, err := d.App.Route(r, nil)
	if err != nil || len(keys) != 0 || resp == nil {
		t.Fatalf("Route(CRC) = %v, %v, %v", keys, resp, err)
	}
	if want := `{"response_token":"sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="}`; string(resp.Body) != want {
		t.Errorf("CRC answer %s, want %s", resp.Body, want)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("CRC Content-Type %q", resp.Header.Get("Content-Type"))
	}
	// Without a consumer secret the client secret answers.
	d = x.Descriptor(x.Options{ClientID: "id", ClientSecret: secret})
	if _, resp, _ := d.App.Route(r, nil); !strings.Contains(string(resp.Body), "Cytd4Sq") {
		t.Errorf("CRC with the client secret: %s", resp.Body)
	}
}

// TestDescriptorUnconfigured: without the operator's app the channel is
// known but not available (501).
func TestDescriptorUnconfigured(t *testing.T) {
	t.Parallel()
	d := x.Descriptor(x.Options{})
	if d.Channel != "x" || d.Tier != channels.Paid || d.New != nil || d.App != nil {
		t.Fatalf("descriptor %+v: want x, paid, no New, no App", d)
	}
}

// memCredentials is a channels.Credentials in memory, shared by the
// adapters of "several replicas".
type memCredentials struct {
	mu  sync.Mutex
	raw json.RawMessage
}

func (m *memCredentials) Load(context.Context) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(json.RawMessage(nil), m.raw...), nil
}

func (m *memCredentials) Save(_ context.Context, raw json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.raw = append(json.RawMessage(nil), raw...)
	return nil
}

func (m *memCredentials) config(t *testing.T) x.Config {
	t.Helper()
	raw, _ := m.Load(t.Context())
	var c x.Config
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func newAdapter(t *testing.T, opts x.Options, id string, raw json.RawMessage, creds channels.Credentials) *x.Adapter {
	t.Helper()
	a, err := x.New(t.Context(), opts, channels.Connection{ID: id, Config: raw, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*x.Adapter).Close() })
	return a.(*x.Adapter)
}

// TestInstall runs the OAuth 2.0 flow with PKCE against the fake: the
// authorize URL carries the challenge of the connection's verifier, the
// code exchange proves it, and the account becomes the address and
// routing key. A refused code is a ConfigError on "code"; another
// connection's verifier does not match.
func TestInstall(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agentsmith")
	a := newAdapter(t, options(srv), "conn_1", json.RawMessage(`{}`), nil)
	if !a.NeedsInstall() {
		t.Fatal("an empty config does not wait for an install")
	}
	const redirect = "https://comm.example/oauth/x/callback"
	auth := a.AuthorizeURL("state-1", redirect)
	q, _ := url.Parse(auth)
	for k, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "state": "state-1",
		"scope": "dm.read dm.write users.read offline.access tweet.read", "redirect_uri": redirect} {
		if got := q.Query().Get(k); got != want {
			t.Errorf("authorize URL %s = %q, want %q", k, got, want)
		}
	}
	if v := x.PKCEVerifier(srv.ClientSecret, "conn_1"); len(v) != 43 || v == x.PKCEVerifier(srv.ClientSecret, "conn_2") {
		t.Errorf("PKCE verifier %q: want 43 characters, different per connection", v)
	}
	back, err := srv.Authorize(auth, u)
	if err != nil {
		t.Fatal(err)
	}
	bq, _ := url.Parse(back)
	if _, err := newAdapter(t, options(srv), "conn_2", nil, nil).Install(t.Context(), bq.Query().Get("code"), redirect); err == nil {
		t.Fatal("another connection's verifier was accepted")
	}
	// The code was spent by the failed attempt (as X's are): approve again.
	back, _ = srv.Authorize(auth, u)
	bq, _ = url.Parse(back)
	got, err := a.Install(t.Context(), bq.Query().Get("code"), redirect)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if got.Address != "@agentsmith" || got.RouteKey != u.ID {
		t.Errorf("Install gave address %q key %q, want @agentsmith %s", got.Address, got.RouteKey, u.ID)
	}
	var cfg x.Config
	if err := json.Unmarshal(got.Config, &cfg); err != nil || cfg.AccessToken == "" || cfg.RefreshToken == "" || cfg.ExpiresAt.IsZero() || cfg.Since.IsZero() {
		t.Errorf("installed config %s (%v)", got.Config, err)
	}
	_, err = a.Install(t.Context(), "code-unknown", redirect)
	var ce *channels.ConfigError
	if !errors.As(err, &ce) || ce.Field != "code" {
		t.Errorf("a refused code: %v, want a ConfigError on code", err)
	}
}

// poll runs Poll until the returned stop is called; emitted messages go to
// the channel.
func poll(t *testing.T, a *x.Adapter) (<-chan channels.Inbound, func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan channels.Inbound, 100)
	done := make(chan error, 1)
	go func() {
		done <- a.Poll(ctx, func(ins ...channels.Inbound) error {
			for _, in := range ins {
				ch <- in
			}
			return nil
		})
	}()
	return ch, func() error { cancel(); return <-done }
}

// TestRefresh: the session refreshes before expiry, X rotates the refresh
// token, the new tokens are saved; another replica's adapter, holding the
// old access token, gets 401 on a send, loads the stored tokens and
// sends. A refresh X refuses revokes the connection.
func TestRefresh(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	srv.SetExpiresIn(3)
	u := srv.NewUser("agent")
	access, refresh, exp := srv.Tokens(u)
	creds := &memCredentials{}
	creds.raw, _ = json.Marshal(x.Config{AccessToken: access, RefreshToken: refresh, ExpiresAt: exp, UserID: u.ID, Username: "agent"})
	opts := options(srv)
	opts.RefreshMargin = 2 * time.Second
	opts.PollInterval = time.Hour
	owner := newAdapter(t, opts, "conn_r", creds.raw, creds)
	other := newAdapter(t, opts, "conn_r", creds.raw, creds)
	_, stop := poll(t, owner)
	// The fake counts the refresh when it answers; the adapter saves the
	// rotated tokens after it reads the answer, so wait for the save.
	deadline := time.Now().Add(10 * time.Second)
	saved := creds.config(t)
	for (srv.Refreshed() < 1 || saved.AccessToken == access) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		saved = creds.config(t)
	}
	if srv.Refreshed() < 1 {
		t.Fatal("no refresh before expiry")
	}
	if saved.AccessToken == access || saved.RefreshToken == refresh {
		t.Fatalf("the rotated tokens were not saved: %+v", saved)
	}
	res, err := other.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: "from the other replica"})
	if err != nil || res.ProviderID == "" {
		t.Fatalf("send with a refreshed-elsewhere token: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Poll after its context ended: %v", err)
	}

	// Revoked at X: the next refresh is refused, and the session ends
	// with ErrRevoked (the gateway marks the connection revoked).
	u.Revoke()
	done := make(chan error, 1)
	go func() { done <- owner.Poll(t.Context(), func(...channels.Inbound) error { return nil }) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Poll went on after the grant was revoked")
	}
	if !errors.Is(err, channels.ErrRevoked) {
		t.Fatalf("Poll after the grant was revoked: %v, want ErrRevoked", err)
	}
	if _, err := other.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: "revoked"}); !errors.Is(err, channels.ErrRevoked) {
		t.Errorf("send with a revoked grant: %v, want ErrRevoked", err)
	}
}

// TestPollCursor: polling emits each DM once across sessions (the cursor
// is saved), skips the account's own DMs and history before the install.
func TestPollCursor(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agent")
	u.Receive(peer, "before the install")
	time.Sleep(1100 * time.Millisecond)
	access, refresh, exp := srv.Tokens(u)
	creds := &memCredentials{}
	creds.raw, _ = json.Marshal(x.Config{AccessToken: access, RefreshToken: refresh, ExpiresAt: exp, UserID: u.ID, Username: "agent",
		Since: time.Now().UTC().Truncate(time.Second)})
	a := newAdapter(t, options(srv), "conn_p", creds.raw, creds)
	ch, stop := poll(t, a)
	u.Receive(peer, "one")
	if _, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: "my own"}); err != nil {
		t.Fatal(err)
	}
	u.Receive(peer, "two")
	var got []string
	for len(got) < 2 {
		select {
		case in := <-ch:
			got = append(got, in.Text)
			if in.ThreadKey != x.Conversation(peer, u.ID) || in.Sender != peer {
				t.Errorf("polled %+v", in)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("polled %q, want one and two", got)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got[0] != "one" || got[1] != "two" {
		t.Errorf("polled %q, want [one two]", got)
	}
	// A new process (another adapter from the stored config) goes on
	// after the cursor.
	b := newAdapter(t, options(srv), "conn_p", json.RawMessage(`{"access_token":"at-stale"}`), creds)
	ch, stop = poll(t, b)
	u.Receive(peer, "three")
	select {
	case in := <-ch:
		if in.Text != "three" {
			t.Errorf("after a restart polled %q first, want three", in.Text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing polled after a restart")
	}
	stop()
}

// TestWebhookEvents: chat.received is dropped (X Chat cannot be read),
// oauth.revoke revokes, the legacy Account Activity shape parses, own
// sends are dropped, and an unsigned request is refused.
func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agent")
	a := newAdapter(t, options(srv), "conn_w", userConfig(t, srv, u), nil)
	parse := func(body []byte) ([]channels.Inbound, error) {
		r := srv.SignedRequest(appURL, body)
		return a.ParseWebhook(r, body)
	}
	if ins, err := parse(xtest.ChatReceived(u.ID, peer)); err != nil || len(ins) != 0 {
		t.Errorf("chat.received: %v %v, want nothing", ins, err)
	}
	e := u.Receive(peer, "legacy shape")
	if ins, err := parse(xtest.AccountActivity(u.ID, e)); err != nil || len(ins) != 1 || ins[0].Text != "legacy shape" || ins[0].ProviderID != e.ID {
		t.Errorf("account activity: %+v %v", ins, err)
	}
	own := xtest.Event{ID: "1900000000000000999", SenderID: u.ID, RecipientID: peer, Text: "mine"}
	if ins, err := parse(xtest.DMReceived(u.ID, own)); err != nil || len(ins) != 0 {
		t.Errorf("own DM: %+v %v", ins, err)
	}
	if _, err := parse(xtest.OAuthRevoke(u.ID)); !errors.Is(err, channels.ErrRevoked) {
		t.Errorf("oauth.revoke: %v, want ErrRevoked", err)
	}
	if ins, err := parse(xtest.OAuthRevoke("42")); err != nil || len(ins) != 0 {
		t.Errorf("another account's oauth.revoke: %v %v", ins, err)
	}
	body := xtest.DMReceived(u.ID, e)
	r := httptest.NewRequest(http.MethodPost, appURL, nil)
	r.Header.Set(x.SignatureHeader, x.Sign("wrong", body))
	if _, err := a.ParseWebhook(r, body); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("wrong legacy signature: %v", err)
	}
	// Only the OAuth 2.0 header, made with the client secret, verifies too.
	r = httptest.NewRequest(http.MethodPost, appURL, nil)
	r.Header.Set(x.SignatureHeaderOAuth2, x.Sign(srv.ClientSecret, body))
	if ins, err := a.ParseWebhook(r, body); err != nil || len(ins) != 1 {
		t.Errorf("OAuth 2.0 signature only: %v %v", ins, err)
	}
}

// TestSendRules: the recipient's form, @names refused with a clear error,
// X Chat refused permanently (a chat conversation, or X refusing an
// encrypted peer), replies in a conversation go to the other participant.
func TestSendRules(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agent")
	a := newAdapter(t, options(srv), "conn_s", userConfig(t, srv, u), nil)
	if got, err := a.Address(" 2244994945 "); err != nil || got != "2244994945" {
		t.Errorf("Address(id) = %q, %v", got, err)
	}
	if _, err := a.Address("@XDevelopers"); err == nil || !strings.Contains(err.Error(), "numeric X user id") {
		t.Errorf("Address(@name) = %v, want a clear refusal", err)
	}
	xchat := "end-to-end encrypted X Chat conversations are not supported (no Go implementation of X's Chat encryption)"
	_, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer + ":" + u.ID, Text: "hi"})
	if !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), xchat) {
		t.Errorf("send to an X Chat conversation: %v", err)
	}
	u.ReachableByChatOnly("3333333333")
	_, err = a.Send(t.Context(), channels.Outbound{To: "3333333333", ThreadKey: "3333333333", Text: "hi"})
	if !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), xchat) {
		t.Errorf("send to a peer X refuses as encrypted: %v", err)
	}
	res, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: x.Conversation(u.ID, peer), Text: "reply"})
	if err != nil {
		t.Fatal(err)
	}
	sent := u.Sent()
	if len(sent) != 1 || sent[0].RecipientID != peer || sent[0].ID != res.ProviderID {
		t.Errorf("sent %+v (provider id %s)", sent, res.ProviderID)
	}
	long := strings.Repeat("a", x.MaxText+5)
	if _, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: long}); err != nil {
		t.Fatal(err)
	}
	if n := len(u.Sent()); n != 3 {
		t.Errorf("a text over MaxText went out as %d DMs, want 2", n-1)
	}
}

// TestRateLimitReset: a 429 carries X's reset time as the retry delay.
func TestRateLimitReset(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agent")
	a := newAdapter(t, options(srv), "conn_l", userConfig(t, srv, u), nil)
	u.FailNext(xtest.EndpointSend, xtest.RateLimited(30))
	_, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: "hi"})
	if d := channels.RetryAfter(err); !errors.Is(err, channels.ErrTransient) || d < 28*time.Second || d > 31*time.Second {
		t.Errorf("429: %v (retry after %s), want transient, about 30 s", err, d)
	}
}

// TestAppCredentialsRefused: X refusing the operator's client credentials
// is the operator's to fix: the install fails permanently (not a bad
// code), and a refresh does not revoke the connection.
func TestAppCredentialsRefused(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	u := srv.NewUser("agent")
	opts := options(srv)
	opts.ClientSecret = "not-the-secret"
	a := newAdapter(t, opts, "conn_c", userConfig(t, srv, u), nil)
	_, err := a.Install(t.Context(), "code-1", "https://comm.example/oauth/x/callback")
	var ce *channels.ConfigError
	if errors.As(err, &ce) || !errors.Is(err, channels.ErrPermanent) || errors.Is(err, channels.ErrRevoked) ||
		!strings.Contains(err.Error(), "COMM_X_CLIENT_SECRET") {
		t.Errorf("install with wrong app credentials: %v", err)
	}
}

// TestExpiredToken: a send with an access token that expired before the
// session refreshed it fails transiently (the outbox retries), and does
// not revoke the connection.
func TestExpiredToken(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	srv.SetExpiresIn(1)
	u := srv.NewUser("agent")
	creds := &memCredentials{raw: userConfig(t, srv, u)}
	a := newAdapter(t, options(srv), "conn_e", creds.raw, creds)
	time.Sleep(1100 * time.Millisecond)
	_, err := a.Send(t.Context(), channels.Outbound{To: peer, ThreadKey: peer, Text: "late"})
	if !errors.Is(err, channels.ErrTransient) || errors.Is(err, channels.ErrRevoked) {
		t.Fatalf("send with an expired token: %v, want transient", err)
	}
}

// TestWebhookHealth: in webhook mode the session revalidates the app's
// webhook when X marked it invalid (a CRC the gateway answers).
func TestWebhookHealth(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	opts := options(srv)
	opts.BearerToken = srv.BearerToken
	opts.InsecureWebhooks = true // the fake listens on http with a port
	d := x.Descriptor(opts)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, resp, err := d.App.Route(r, nil); err == nil && resp != nil {
			w.Write(resp.Body)
			return
		}
		http.Error(w, "no", http.StatusBadRequest)
	}))
	t.Cleanup(gw.Close)
	u := srv.NewUser("agent")
	a, err := x.New(t.Context(), opts, channels.Connection{ID: "conn_h", Config: userConfig(t, srv, u), WebhookURL: gw.URL + "/hooks/x/conn_h"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.(*x.Adapter).Close() })
	if _, err := a.(channels.Provisioner).Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	hooks := srv.Webhooks()
	if len(hooks) != 1 || hooks[0].URL != gw.URL+"/hooks/x" {
		t.Fatalf("webhooks %+v", hooks)
	}
	srv.Invalidate(hooks[0].ID)
	_, stop := poll(t, a.(*x.Adapter))
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Webhooks()[0].Valid && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if !srv.Webhooks()[0].Valid {
		t.Fatal("the invalid webhook was not revalidated")
	}
}

// TestWebhookURLAccepted: X registers only https URLs without a port, so
// a gateway whose base URL is anything else polls.
func TestWebhookURLAccepted(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]bool{
		"https://comm.example.com/hooks/x/conn_1":      true,
		"https://comm.example.com:8443/hooks/x/conn_1": false,
		"http://comm.example.com/hooks/x/conn_1":       false,
		"http://127.0.0.1:8080/hooks/x/conn_1":         false,
		"":                                             false,
	} {
		if got := x.WebhookURLAccepted(u); got != want {
			t.Errorf("WebhookURLAccepted(%q) = %v, want %v", u, got, want)
		}
	}
}

package channeltest_test

// This file is the template for an adapter's conformance test: a small
// adapter of a made-up HTTP provider ("example"), the fake provider it is
// tested against (an httptest server speaking the provider's protocol,
// signatures included), and the Harness that ties them together. A real
// adapter lives in its own package with the fake in its test files (or in
// channeltest, when other packages need it too).

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
)

func TestExample(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, exampleHarness(""))
}

// exampleAppSecret is the example provider app's own secret, an operator
// setting: it signs the app-level webhook, where the provider sends the
// events of every workspace that installed the app.
const exampleAppSecret = "appsec_example"

func exampleHarness(flaw string) channeltest.Harness {
	return channeltest.Harness{
		Descriptor: channels.Descriptor{Channel: "example", Tier: channels.Free,
			New: func(ctx context.Context, c channels.Connection) (channels.Adapter, error) {
				a, err := newExample(ctx, c)
				switch {
				case err != nil && flaw == "lenient-config":
					return &exampleAdapter{flaw: flaw, client: &http.Client{}}, nil
				case err != nil:
					return nil, err
				}
				a.flaw = flaw
				a.appSecret = exampleAppSecret
				return a, nil
			},
			App: exampleApp{secret: exampleAppSecret, flaw: flaw},
		},
		Fake: newExampleFake,
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`),
			json.RawMessage(`{"base_url":"http://127.0.0.1:1","token":"t"}`),
			json.RawMessage(`{"base_url":"not a url","token":"t","signing_secret":"s"}`),
			json.RawMessage(`{"base_url":"http://127.0.0.1:1","token":"t","signing_secret":"s","extra":1}`),
		},
		Idempotent: true,
		Subject:    true,
		HTML:       true,
	}
}

// The adapter.

// exampleConfig is the connection configuration of the example provider.
type exampleConfig struct {
	// BaseURL is the provider's API root; tests point it at the fake.
	BaseURL string `json:"base_url"`
	// Token authenticates our calls.
	Token string `json:"token"`
	// SigningSecret verifies the provider's webhooks.
	SigningSecret string `json:"signing_secret"`
	// Team is the workspace the token belongs to; Provision fills it in.
	// The app-level webhook routes the workspace's events by it.
	Team string `json:"team,omitempty"`
}

type exampleAdapter struct {
	cfg        exampleConfig
	webhookURL string
	client     *http.Client
	flaw       string // a defect switched on to check the suite catches it
	// appSecret verifies app-level webhook requests (exampleApp's), which
	// the gateway hands to ParseWebhook too.
	appSecret string

	mu    sync.Mutex
	after int // the last event seq emit accepted
}

var (
	_ channels.Typer           = (*exampleAdapter)(nil)
	_ channels.WebhookReceiver = (*exampleAdapter)(nil)
	_ channels.Closer          = (*exampleAdapter)(nil)
	_ channels.Provisioner     = (*exampleAdapter)(nil)
	_ channels.Deprovisioner   = (*exampleAdapter)(nil)
	_ channels.Poller          = (*exampleAdapter)(nil)
	_ channels.Responder       = (*exampleAdapter)(nil)
	_ channels.TypingRefresher = (*exampleAdapter)(nil)
	_ channels.AppWebhook      = exampleApp{}
)

func newExample(_ context.Context, c channels.Connection) (*exampleAdapter, error) {
	var cfg exampleConfig
	dec := json.NewDecoder(bytes.NewReader(c.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("example: config: %w", err)
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil || !u.IsAbs():
		return nil, fmt.Errorf("example: config: base_url %q is not an absolute URL", cfg.BaseURL)
	case cfg.Token == "":
		return nil, errors.New("example: config: token is required")
	case cfg.SigningSecret == "":
		return nil, errors.New("example: config: signing_secret is required")
	}
	return &exampleAdapter{cfg: cfg, webhookURL: c.WebhookURL, client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}, nil
}

type exampleMessage struct {
	ID      string  `json:"id,omitempty"`
	From    string  `json:"from,omitempty"`
	To      string  `json:"to,omitempty"`
	Thread  string  `json:"thread,omitempty"`
	Text    string  `json:"text"`
	Subject *string `json:"subject,omitempty"`
	HTML    *string `json:"html,omitempty"`
	ReplyTo string  `json:"reply_to,omitempty"`
}

func (a *exampleAdapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if msg.To == "" {
		return channels.SendResult{}, a.classify("send", 0, "no recipient", channels.ErrPermanent)
	}
	m := exampleMessage{To: msg.To, Thread: msg.ThreadKey, Text: msg.Text, Subject: msg.Subject, HTML: msg.HTML, ReplyTo: msg.InReplyTo}
	if a.flaw == "drops-subject" {
		m.Subject = nil
	}
	key := msg.MessageID
	if a.flaw == "not-idempotent" {
		key = ""
	}
	var res struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, "send", "/v1/messages", key, m, &res); err != nil {
		return channels.SendResult{}, err
	}
	return channels.SendResult{ProviderID: res.ID}, nil
}

// Typing shows the indicator on the message answered (reply_to), as
// WhatsApp does.
func (a *exampleAdapter) Typing(ctx context.Context, t channels.Typing) error {
	m := exampleMessage{To: t.To, Thread: t.ThreadKey, ReplyTo: t.InReplyTo}
	if a.flaw == "typing-drops-reply" {
		m.ReplyTo = ""
	}
	return a.call(ctx, "typing", "/v1/typing", "", m, nil)
}

// TypingEvery: the example provider's indicator fades after 5 s.
func (a *exampleAdapter) TypingEvery() time.Duration {
	if a.flaw == "typing-every-lease" {
		return 10 * time.Second
	}
	return 4 * time.Second
}

// Provision checks the token, registers the connection's webhook URL and
// keeps the token's workspace, which routes the app-level webhook's events
// to the connection.
func (a *exampleAdapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	var me struct {
		Address string `json:"address"`
		Team    string `json:"team"`
	}
	err := a.do(ctx, http.MethodGet, "provision", "/v1/me", "", nil, &me)
	if errors.Is(err, channels.ErrPermanent) && strings.Contains(err.Error(), "401") && a.flaw != "provision-plain-error" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "token", Msg: "the example provider rejected the token"}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	if err := a.call(ctx, "provision", "/v1/webhook", "", map[string]string{"url": a.webhookURL}, nil); err != nil {
		return channels.Provisioned{}, err
	}
	if me.Team == "" {
		return channels.Provisioned{}, errors.New("example: provision: the provider named no team")
	}
	cfg := a.cfg
	cfg.Team = me.Team
	config, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("example: provision: %w", err)
	}
	return channels.Provisioned{Config: config, Address: me.Address, RouteKey: me.Team}, nil
}

// Deprovision removes the webhook registration.
func (a *exampleAdapter) Deprovision(ctx context.Context) error {
	if a.flaw == "deprovision-noop" {
		return nil
	}
	return a.do(ctx, http.MethodDelete, "deprovision", "/v1/webhook", "", nil, nil)
}

// Poll long-polls the provider's event feed from the last accepted event.
func (a *exampleAdapter) Poll(ctx context.Context, emit channels.Emit) error {
	for ctx.Err() == nil {
		a.mu.Lock()
		after := a.after
		a.mu.Unlock()
		var res struct {
			Events []struct {
				Seq     int            `json:"seq"`
				Message exampleMessage `json:"message"`
			} `json:"events"`
		}
		if err := a.do(ctx, http.MethodGet, "poll", fmt.Sprintf("/v1/events?after=%d", after), "", nil, &res); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, ev := range res.Events {
			m := ev.Message
			if a.flaw == "poll-acks-failed" {
				a.mu.Lock()
				a.after = ev.Seq
				a.mu.Unlock()
			}
			err := emit(channels.Inbound{ProviderID: m.ID, ThreadKey: m.Thread, Sender: m.From, Text: m.Text})
			if err != nil {
				if a.flaw == "poll-nil-on-failure" {
					return nil
				}
				return fmt.Errorf("example: poll: storing %s: %v: %w", m.ID, err, channels.ErrTransient)
			}
			a.mu.Lock()
			a.after = ev.Seq
			a.mu.Unlock()
		}
	}
	return nil
}

// call posts body to the provider and classifies what goes wrong.
func (a *exampleAdapter) call(ctx context.Context, op, path, key string, body, out any) error {
	return a.do(ctx, http.MethodPost, op, path, key, body, out)
}

// do makes a request (with a JSON body unless nil) and classifies what
// goes wrong.
func (a *exampleAdapter) do(ctx context.Context, method, op, path, key string, body, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return a.classify(op, 0, err.Error(), channels.ErrPermanent)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.cfg.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return a.classify(op, 0, err.Error(), channels.ErrPermanent)
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return a.classify(op, 0, err.Error(), channels.ErrTransient)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return a.classify(op, resp.StatusCode, err.Error(), channels.ErrTransient)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		class := channels.ErrPermanent
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			class = channels.ErrTransient
		}
		return a.classify(op, resp.StatusCode, e.Error.Message, class)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return a.classify(op, resp.StatusCode, "malformed answer: "+err.Error(), channels.ErrTransient)
	}
	return nil
}

func (a *exampleAdapter) classify(op string, status int, detail string, class error) error {
	where := "example: " + op
	if a.flaw == "anonymous-errors" {
		where = op
	}
	if status != 0 {
		detail = fmt.Sprintf("%d %s: %s", status, http.StatusText(status), detail)
	}
	if a.flaw == "unclassified" {
		return fmt.Errorf("%s: %s", where, detail)
	}
	return fmt.Errorf("%s: %s: %w", where, detail, class)
}

// exampleSign is the provider's signature: hex HMAC-SHA256 of the body.
func exampleSign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// exampleVerify checks the signature header over what is signed.
func exampleVerify(header, secret string, signed []byte) bool {
	return secret != "" && hmac.Equal([]byte(header), []byte(exampleSign(secret, signed)))
}

// Respond answers the provider's check of the connection's webhook URL: a
// GET with a challenge, signed with the connection's secret, answered with
// the challenge (as Meta's hub.challenge). Everything else is not a
// handshake.
func (a *exampleAdapter) Respond(r *http.Request, _ []byte) (*channels.Response, error) {
	if r.Method != http.MethodGet {
		if a.flaw == "respond-swallows" {
			return &channels.Response{}, nil
		}
		return nil, nil
	}
	challenge := r.URL.Query().Get("challenge")
	if a.flaw == "respond-panic" && challenge == "" {
		_ = challenge[0]
	}
	if challenge == "" {
		return nil, nil
	}
	if a.flaw != "respond-unsigned" && !exampleVerify(r.Header.Get("X-Example-Signature"), a.cfg.SigningSecret, []byte(challenge)) {
		return nil, fmt.Errorf("example: webhook check: %w", channels.ErrSignature)
	}
	return &channels.Response{Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte(challenge)}, nil
}

// ParseWebhook takes the connection's own webhook (signed with its secret)
// and the app-level webhook's requests the gateway routed to it (signed
// with the app's secret; it keeps only its own workspace's events).
func (a *exampleAdapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	appLevel := r.Header.Get("X-Example-App-Signature") != ""
	if a.flaw != "unsigned" {
		ok := exampleVerify(r.Header.Get("X-Example-Signature"), a.cfg.SigningSecret, body)
		if appLevel {
			ok = a.flaw == "parse-trusts-app" || exampleVerify(r.Header.Get("X-Example-App-Signature"), a.appSecret, body)
		}
		if !ok {
			return nil, fmt.Errorf("example: webhook: %w", channels.ErrSignature)
		}
	}
	if a.flaw == "panic" && len(body) == 0 {
		_ = body[0]
	}
	var ev struct {
		Event   string          `json:"event"`
		Team    string          `json:"team"`
		Message *exampleMessage `json:"message"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("example: webhook: %w", err)
	}
	if ev.Event != "message" {
		return nil, nil // delivery receipts and the like
	}
	if appLevel && a.flaw != "other-tenant" && (a.cfg.Team == "" || ev.Team != a.cfg.Team) {
		return nil, nil // another workspace's event
	}
	m := ev.Message
	if m == nil || m.ID == "" || m.From == "" {
		return nil, errors.New("example: webhook: message without id or sender")
	}
	id := m.ID
	if a.flaw == "unstable-id" {
		id = fmt.Sprintf("%s-%p", m.ID, &ev)
	}
	return []channels.Inbound{{ProviderID: id, ThreadKey: m.Thread, Sender: m.From, Subject: m.Subject, Text: m.Text, HTML: m.HTML}}, nil
}

func (a *exampleAdapter) Close() error {
	a.client.CloseIdleConnections()
	return nil
}

// exampleApp is the example provider app's webhook (/hooks/example), where
// the provider sends the events of every workspace, signed with the app's
// secret: X-Example-App-Signature over the body. It answers the
// provider's URL check (url_verification, as Slack's) itself.
type exampleApp struct {
	secret string
	flaw   string
}

func (app exampleApp) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if app.flaw != "route-unsigned" && !exampleVerify(r.Header.Get("X-Example-App-Signature"), app.secret, body) {
		return nil, nil, fmt.Errorf("example: app webhook: %w", channels.ErrSignature)
	}
	var ev struct {
		Event     string         `json:"event"`
		Challenge string         `json:"challenge"`
		Team      string         `json:"team"`
		Message   exampleMessage `json:"message"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, nil, fmt.Errorf("example: app webhook: %w", err)
	}
	switch ev.Event {
	case "url_verification":
		return nil, &channels.Response{Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte(ev.Challenge)}, nil
	case "message":
		if ev.Team == "" {
			return nil, nil, errors.New("example: app webhook: message without team")
		}
		if app.flaw == "route-wrong-key" {
			return []string{ev.Message.From}, nil, nil
		}
		return []string{ev.Team}, nil, nil
	}
	return nil, nil, nil
}

// The fake provider.

type exampleFake struct {
	srv    *httptest.Server
	token  string
	secret string
	// teams holds the workspace of each token the fake accepts: token's,
	// and another workspace's.
	teams map[string]string

	// events is the feed Poll reads; wake is closed when it grows.
	events []exampleMessage
	wake   chan struct{}
	hooks  map[string]string // token -> the registered webhook URL

	mu      sync.Mutex
	sent    []channels.Outbound
	byKey   map[string]string // idempotency key -> message id
	typings []channels.Typing
	fail    channeltest.Failure // the next send's failure; 0 for none
}

func newExampleFake(t *testing.T) *channeltest.Fake {
	p := &exampleFake{token: "tok_123", secret: "whsec_example", byKey: map[string]string{}, wake: make(chan struct{}),
		teams: map[string]string{"tok_123": "T1001", "tok_456": "T2002"}, hooks: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	cfg, _ := json.Marshal(exampleConfig{BaseURL: p.srv.URL, Token: p.token, SigningSecret: p.secret})
	bad, _ := json.Marshal(exampleConfig{BaseURL: p.srv.URL, Token: "tok_revoked", SigningSecret: p.secret})
	other, _ := json.Marshal(exampleConfig{BaseURL: p.srv.URL, Token: "tok_456", SigningSecret: "whsec_other"})
	return &channeltest.Fake{
		Config:        cfg,
		BadCredential: bad,
		OtherTenant:   other,
		RouteKey:      p.teams[p.token],
		Handshake: func(*testing.T) (*http.Request, channels.Response) {
			r := httptest.NewRequest(http.MethodGet, "/hooks/example/conn_channeltest?challenge=ch_4711", nil)
			r.Header.Set("X-Example-Signature", exampleSign(p.secret, []byte("ch_4711")))
			return r, channels.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte("ch_4711")}
		},
		AppInbound: func(t *testing.T, team string, m channels.Inbound) *http.Request {
			body, err := json.Marshal(map[string]any{"event": "message", "team": team, "message": exampleMessage{
				ID: m.ProviderID, From: m.Sender, Thread: "dm:" + m.Sender, Text: m.Text,
			}})
			if err != nil {
				t.Fatal(err)
			}
			return appWebhook(body)
		},
		AppHandshake: func(*testing.T) (*http.Request, channels.Response) {
			return appWebhook([]byte(`{"event":"url_verification","challenge":"ch_app_42"}`)),
				channels.Response{Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte("ch_app_42")}
		},
		AppTamper: func(_ *testing.T, r *http.Request) *http.Request {
			r.Header.Set("X-Example-App-Signature", exampleSign("not the app secret", nil))
			return r
		},
		TypingNeedsMessage: true,
		WebhookURL:         "https://comm.example/hooks/example/conn_channeltest",
		To:                 "+15550001",
		Queue: func(_ *testing.T, m channels.Inbound) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.events = append(p.events, exampleMessage{ID: m.ProviderID, From: m.Sender, Thread: "dm:" + m.Sender, Text: m.Text})
			close(p.wake)
			p.wake = make(chan struct{})
		},
		Provisioned: func(*testing.T) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.hooks[p.token] != ""
		},
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			p.mu.Lock()
			defer p.mu.Unlock()
			return append([]channels.Outbound(nil), p.sent...)
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			p.mu.Lock()
			defer p.mu.Unlock()
			return append([]channels.Typing(nil), p.typings...)
		},
		Inbound: func(t *testing.T, m channels.Inbound) *http.Request {
			body, err := json.Marshal(map[string]any{"event": "message", "message": exampleMessage{
				ID: m.ProviderID, From: m.Sender, Thread: "dm:" + m.Sender, Text: m.Text, Subject: m.Subject, HTML: m.HTML,
			}})
			if err != nil {
				t.Fatal(err)
			}
			return p.webhook(body)
		},
		Raw: func(_ *testing.T, body []byte) *http.Request { return p.webhook(body) },
		Tamper: func(_ *testing.T, r *http.Request) *http.Request {
			r.Header.Set("X-Example-Signature", exampleSign("not the secret", nil))
			return r
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.fail = kind
			return "+15550001", exampleFailures[kind].message
		},
	}
}

// appWebhook is a request to the app-level webhook carrying body, signed
// with the app's secret.
func appWebhook(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/example", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Example-App-Signature", exampleSign(exampleAppSecret, body))
	return r
}

// webhook is a signed webhook request carrying body.
func (p *exampleFake) webhook(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/example/conn_channeltest", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Example-Signature", exampleSign(p.secret, body))
	return r
}

var exampleFailures = map[channeltest.Failure]struct {
	status  int
	message string
}{
	channeltest.RateLimited:  {http.StatusTooManyRequests, "slow down"},
	channeltest.Unavailable:  {http.StatusServiceUnavailable, "down for maintenance"},
	channeltest.Timeout:      {0, ""},
	channeltest.Rejected:     {http.StatusBadRequest, "recipient does not exist"},
	channeltest.Unauthorized: {http.StatusUnauthorized, "token revoked"},
}

func (p *exampleFake) serve(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	problem := func(status int, msg string) {
		answer(status, map[string]any{"error": map[string]string{"message": msg}})
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	team, ok := p.teams[token]
	if !ok {
		problem(http.StatusUnauthorized, "bad token")
		return
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/me":
		answer(http.StatusOK, map[string]string{"address": "+15559999", "team": team})
		return
	case "POST /v1/webhook":
		var hook struct {
			URL string `json:"url"`
		}
		if err := json.NewDecoder(r.Body).Decode(&hook); err != nil || hook.URL == "" {
			problem(http.StatusBadRequest, "url is required")
			return
		}
		p.mu.Lock()
		p.hooks[token] = hook.URL
		p.mu.Unlock()
		answer(http.StatusOK, map[string]bool{"ok": true})
		return
	case "DELETE /v1/webhook":
		p.mu.Lock()
		delete(p.hooks, token)
		p.mu.Unlock()
		answer(http.StatusOK, map[string]bool{"ok": true})
		return
	case "GET /v1/events":
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		timeout := time.After(time.Second)
		for {
			p.mu.Lock()
			if after < len(p.events) {
				var evs []map[string]any
				for i, m := range p.events[after:] {
					evs = append(evs, map[string]any{"seq": after + i + 1, "message": m})
				}
				p.mu.Unlock()
				answer(http.StatusOK, map[string]any{"events": evs})
				return
			}
			wake := p.wake
			p.mu.Unlock()
			select {
			case <-wake:
			case <-timeout:
				answer(http.StatusOK, map[string]any{"events": []any{}})
				return
			case <-r.Context().Done():
				return
			}
		}
	}
	var m exampleMessage
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		problem(http.StatusBadRequest, err.Error())
		return
	}
	switch r.URL.Path {
	case "/v1/typing":
		p.mu.Lock()
		p.typings = append(p.typings, channels.Typing{To: m.To, ThreadKey: m.Thread, InReplyTo: m.ReplyTo})
		p.mu.Unlock()
		answer(http.StatusOK, map[string]bool{"ok": true})
	case "/v1/messages":
		p.mu.Lock()
		fail := p.fail
		p.fail = 0
		p.mu.Unlock()
		if fail == channeltest.Timeout {
			<-r.Context().Done()
			return
		}
		if fail != 0 {
			problem(exampleFailures[fail].status, exampleFailures[fail].message)
			return
		}
		if m.To == "" {
			problem(http.StatusBadRequest, "to is required")
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if id, ok := p.byKey[key]; ok && key != "" {
			answer(http.StatusOK, map[string]string{"id": id})
			return
		}
		id := fmt.Sprintf("ex_%d", len(p.sent)+1)
		p.byKey[key] = id
		p.sent = append(p.sent, channels.Outbound{To: m.To, ThreadKey: m.Thread, Text: m.Text, Subject: m.Subject, HTML: m.HTML, InReplyTo: m.ReplyTo})
		answer(http.StatusOK, map[string]string{"id": id})
	default:
		problem(http.StatusNotFound, "no such method")
	}
}

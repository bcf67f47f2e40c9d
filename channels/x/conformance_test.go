package x_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/channels/x/xtest"
)

// appURL is the app-level webhook the fake's deliveries name (never
// dialled by them).
const appURL = "https://comm.example/hooks/x"

// peer is the person the tests talk to.
const peer = "2244994945"

func options(srv *xtest.Server) x.Options {
	return x.Options{APIURL: srv.URL, AuthorizeURL: srv.AuthorizeURL, ClientID: srv.ClientID, ClientSecret: srv.ClientSecret,
		ConsumerSecret: srv.ConsumerSecret, PollInterval: 20 * time.Millisecond}
}

// TestConformancePolling runs the suite against connections without a
// public URL: inbound is polled from /2/dm_events (and app-level webhook
// deliveries still parse).
func TestConformancePolling(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: x.Descriptor(options(srv)),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, "") },
		BadConfigs: badConfigs,
	})
}

// TestConformanceWebhook runs the suite against connections whose
// inbound comes by webhook: Provision registers the app's webhook (the
// fake's CRC reaches a loopback stand-in of the gateway's /hooks/x) and
// subscribes to dm.received; Deprovision unsubscribes. The adapter's Poll
// only refreshes tokens in this mode, so the suite sees it without Poll
// (its refresh is tested in x_test.go).
func TestConformanceWebhook(t *testing.T) {
	t.Parallel()
	srv := xtest.NewServer()
	t.Cleanup(srv.Close)
	opts := options(srv)
	opts.BearerToken = srv.BearerToken
	opts.InsecureWebhooks = true // the fake listens on http with a port
	d := x.Descriptor(opts)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, resp, err := d.App.Route(r, nil)
		if err != nil || resp == nil {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp.Body)
	}))
	t.Cleanup(gateway.Close)
	inner := d.New
	d.New = func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
		a, err := inner(ctx, conn)
		if err != nil {
			return nil, err
		}
		return &webhookOnly{a.(*x.Adapter)}, nil
	}
	channeltest.Run(t, channeltest.Harness{
		Descriptor: d,
		Fake: func(t *testing.T) *channeltest.Fake {
			return newFake(t, srv, gateway.URL+"/hooks/x/conn_channeltest")
		},
	})
}

// webhookOnly is the adapter without its Poll (token refresh).
type webhookOnly struct{ a *x.Adapter }

func (w *webhookOnly) Send(ctx context.Context, m channels.Outbound) (channels.SendResult, error) {
	return w.a.Send(ctx, m)
}
func (w *webhookOnly) Address(to string) (string, error) { return w.a.Address(to) }
func (w *webhookOnly) Provision(ctx context.Context) (channels.Provisioned, error) {
	return w.a.Provision(ctx)
}
func (w *webhookOnly) Deprovision(ctx context.Context) error { return w.a.Deprovision(ctx) }
func (w *webhookOnly) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	return w.a.ParseWebhook(r, body)
}
func (w *webhookOnly) Close() error { return w.a.Close() }

var badConfigs = []json.RawMessage{
	json.RawMessage(`{"access_token":"a b"}`),
	json.RawMessage(`{"refresh_token":"rt-1"}`),
	json.RawMessage(`{"access_token":"at-1","user_id":"12ab"}`),
	json.RawMessage(`{"access_token":"at-1","username":"no spaces please"}`),
	json.RawMessage(`{"access_token":"at-1","cursor":"x"}`),
	json.RawMessage(`{"access_token":"at-1","extra":1}`),
	json.RawMessage(`{"access_token":7}`),
}

// fake is one subtest's accounts and the event ids it gave the suite's
// tokens.
type fake struct {
	srv   *xtest.Server
	users map[string]*xtest.User

	mu  sync.Mutex
	ids map[string]string // suite token -> event id
}

func (f *fake) id(token string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.ids[token]
	if !ok {
		id = strconv.Itoa(1800000000000000000 + len(f.ids) + 1)
		f.ids[token] = id
	}
	return id
}

func config(t *testing.T, v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func userConfig(t *testing.T, srv *xtest.Server, u *xtest.User) json.RawMessage {
	access, refresh, exp := srv.Tokens(u)
	return config(t, x.Config{AccessToken: access, RefreshToken: refresh, ExpiresAt: exp, UserID: u.ID, Username: u.Username})
}

func newFake(t *testing.T, srv *xtest.Server, webhookURL string) *channeltest.Fake {
	u := srv.NewUser("agent" + strconv.Itoa(int(time.Now().UnixNano()%100000)))
	other := srv.NewUser("other")
	f := &fake{srv: srv, users: map[string]*xtest.User{u.ID: u, other.ID: other}, ids: map[string]string{}}
	deliver := func(to *xtest.User, m channels.Inbound) []byte {
		return xtest.DMReceived(to.ID, to.ReceiveWithID(f.id(m.ProviderID), m.Sender, m.Text))
	}
	tamper := func(_ *testing.T, r *http.Request) *http.Request {
		r.Header.Set(x.SignatureHeader, "sha256=AAAA")
		r.Header.Set(x.SignatureHeaderOAuth2, "sha256=AAAA")
		return r
	}
	fk := &channeltest.Fake{
		Config:        userConfig(t, srv, u),
		WebhookURL:    webhookURL,
		To:            peer,
		BadCredential: config(t, x.Config{AccessToken: "at-revoked", UserID: u.ID}),
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, e := range u.Sent() {
				out = append(out, channels.Outbound{To: e.RecipientID, ThreadKey: e.ConversationID, Text: e.Text})
			}
			return out
		},
		Inbound: func(_ *testing.T, m channels.Inbound) *http.Request {
			return srv.SignedRequest(appURL, deliver(u, m))
		},
		Raw:    func(_ *testing.T, body []byte) *http.Request { return srv.SignedRequest(appURL, body) },
		Tamper: tamper,
		Queue:  func(_ *testing.T, m channels.Inbound) { u.ReceiveWithID(f.id(m.ProviderID), m.Sender, m.Text) },
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var fl xtest.Failure
			detail := ""
			switch kind {
			case channeltest.RateLimited:
				fl, detail = xtest.RateLimited(7), "429"
			case channeltest.Unavailable:
				fl, detail = xtest.Unavailable, "503"
			case channeltest.Timeout:
				fl = xtest.Hang
			case channeltest.Rejected:
				fl, detail = xtest.Forbidden, "You cannot send messages to this user."
			case channeltest.Unauthorized:
				fl, detail = xtest.Unauthorized, "401"
			default:
				return "", ""
			}
			u.FailNext(xtest.EndpointSend, fl)
			return peer, detail
		},
		RouteKey:    u.ID,
		OtherTenant: userConfig(t, srv, other),
		AppInbound: func(t *testing.T, key string, m channels.Inbound) *http.Request {
			to := f.users[key]
			if to == nil {
				t.Fatalf("x fake: no user %q", key)
			}
			return srv.SignedRequest(appURL, deliver(to, m))
		},
		AppTamper: tamper,
	}
	if webhookURL != "" {
		fk.Provisioned = func(*testing.T) bool { return len(srv.Subscriptions(u.ID)) > 0 }
	}
	return fk
}

package meta_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/meta/metatest"
)

// TestConformance runs the suite for both channels, with the operator's
// app (app-level webhook, install) and with the caller's own app.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, channel := range []string{meta.Facebook, meta.Instagram} {
		for _, operator := range []bool{true, false} {
			name := channel + "/own-app"
			if operator {
				name = channel + "/operator-app"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := metatest.NewServer()
				t.Cleanup(srv.Close)
				opts := meta.Options{APIURL: srv.APIURL}
				if operator {
					opts = operatorOptions(srv)
				}
				d := meta.FacebookDescriptor(opts)
				if channel == meta.Instagram {
					d = meta.InstagramDescriptor(opts)
				}
				bad := []json.RawMessage{
					json.RawMessage(`{"page_id":"123","page_access_token":"EAAPshort"}`),
					json.RawMessage(`{"page_id":"12a","page_access_token":"EAAP0123456789abcdef","app_secret":"0123456789abcdef"}`),
					json.RawMessage(`{"page_id":"123","page_access_token":"EAAP0123456789abcdef","app_secret":"has space 0123456789"}`),
					json.RawMessage(`{"page_id":"123","page_access_token":"EAAP0123456789abcdef"}`),
					json.RawMessage(`{"page_access_token":"EAAP0123456789abcdef","app_secret":"0123456789abcdef"}`),
					json.RawMessage(`{"page_id":123}`),
					json.RawMessage(`{"page_id":"123","extra":1}`),
					json.RawMessage(`{"page_id":"123","page_access_token":"EAAP0123456789abcdef","app":"someone-else"}`),
					json.RawMessage(`{"page_id":"123","page_access_token":"EAAP0123456789abcdef","app_secret":"0123456789abcdef","verify_token":"has space"}`),
				}
				if !operator {
					bad = append(bad, json.RawMessage(`{}`), json.RawMessage(`{"page_id":"123"}`))
				}
				if channel == meta.Facebook {
					bad = append(bad, json.RawMessage(`{"ig_id":"123"}`))
				}
				channeltest.Run(t, channeltest.Harness{
					Descriptor: d,
					Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, channel, operator) },
					BadConfigs: bad,
				})
			})
		}
	}
}

func operatorOptions(srv *metatest.Server) meta.Options {
	return meta.Options{APIURL: srv.APIURL, DialogURL: srv.DialogURL, AppID: srv.AppID, AppSecret: srv.AppSecret, VerifyToken: srv.VerifyToken}
}

// fake gives the suite's tokens mids.
type fake struct {
	mu   sync.Mutex
	mids map[string]string
}

func (f *fake) mid(token string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mids[token]
	if !ok {
		m = fmt.Sprintf("m_suite%04d_%s", len(f.mids)+1, strings.ReplaceAll(token, "-", ""))
		f.mids[token] = m
	}
	return m
}

func config(t *testing.T, v map[string]any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// tenant is a Page (and its Instagram account) of the fake, as one
// connection sees it.
type tenant struct {
	page    *metatest.Page
	routeID string
	config  json.RawMessage
	secret  string
}

func newTenant(t *testing.T, srv *metatest.Server, channel string, operator bool, name string) tenant {
	user := srv.NewUser(name)
	page := user.NewPage(name + " Page")
	tn := tenant{page: page, routeID: page.ID, secret: page.AppSecret}
	if channel == meta.Instagram {
		tn.routeID = page.LinkInstagram(strings.ToLower(name))
	}
	cfg := map[string]any{"page_id": page.ID, "page_access_token": page.Token, "app_secret": page.AppSecret, "verify_token": "own-verify-" + name}
	if channel == meta.Instagram {
		cfg["ig_id"] = tn.routeID
	}
	if operator {
		cfg = map[string]any{"app": meta.AppOperator, "page_id": page.ID, "page_access_token": page.OperatorToken}
		if channel == meta.Instagram {
			cfg["ig_id"] = tn.routeID
		}
		tn.secret = srv.AppSecret
	}
	tn.config = config(t, cfg)
	return tn
}

func newFake(t *testing.T, srv *metatest.Server, channel string, operator bool) *channeltest.Fake {
	hookURL := "https://comm.example/hooks/" + channel + "/conn_channeltest"
	appURL := "https://comm.example/hooks/" + channel
	object := "page"
	if channel == meta.Instagram {
		object = "instagram"
	}
	one := newTenant(t, srv, channel, operator, "Acme")
	person := one.page.Person(channel == meta.Instagram)
	f := &fake{mids: map[string]string{}}
	body := func(id string, m channels.Inbound) []byte {
		return metatest.Batch(object, metatest.Entry{ID: id, Messaging: []metatest.Event{
			metatest.Message{Sender: m.Sender, Recipient: id, MID: f.mid(m.ProviderID), Text: m.Text}.Event()}})
	}
	verify := "own-verify-Acme"
	if operator {
		verify = srv.VerifyToken
	}
	var badCfg map[string]any
	_ = json.Unmarshal(one.config, &badCfg)
	badCfg["page_access_token"] = "EAAPrevoked0000000000000000"
	tamper := func(_ *testing.T, r *http.Request) *http.Request {
		if r.Method == http.MethodGet {
			q := r.URL.Query()
			q.Set("hub.verify_token", "not-the-token")
			r.URL.RawQuery = q.Encode()
			return r
		}
		r.Header.Set(meta.SignatureHeader, "sha256="+strings.Repeat("0", 64))
		return r
	}
	fk := &channeltest.Fake{
		Config:        one.config,
		WebhookURL:    hookURL,
		To:            person,
		BadCredential: config(t, badCfg),
		RetryAfter:    time.Minute,
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, m := range one.page.Sent() {
				out = append(out, channels.Outbound{To: m.Recipient, ThreadKey: m.Recipient, Text: m.Text})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, ty := range one.page.Typings() {
				if ty.Action == "typing_on" {
					out = append(out, channels.Typing{To: ty.Recipient, ThreadKey: ty.Recipient})
				}
			}
			return out
		},
		Inbound: func(_ *testing.T, m channels.Inbound) *http.Request {
			return metatest.SignedRequest(hookURL, one.secret, body(one.routeID, m))
		},
		Raw: func(_ *testing.T, b []byte) *http.Request {
			return metatest.SignedRequest(hookURL, one.secret, b)
		},
		Tamper: tamper,
		Handshake: func(*testing.T) (*http.Request, channels.Response) {
			return metatest.Verification(hookURL, verify, "1158201444"), channels.Response{Body: []byte("1158201444")}
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var fl metatest.Failure
			detail := ""
			switch kind {
			case channeltest.RateLimited:
				fl, detail = metatest.RateLimited(613, 1), "code 613"
			case channeltest.Unavailable:
				fl, detail = metatest.Unavailable, "code 2"
			case channeltest.Timeout:
				fl = metatest.Hang
			case channeltest.Rejected:
				fl, detail = metatest.NoSuchUser, "No matching user found"
			case channeltest.Unauthorized:
				fl, detail = metatest.TokenExpired, "code 190"
			default:
				return "", ""
			}
			one.page.FailNext(fl)
			return person, detail
		},
	}
	if operator {
		two := newTenant(t, srv, channel, operator, "Globex")
		tenants := map[string]tenant{one.routeID: one, two.routeID: two}
		fk.RouteKey = one.routeID
		fk.OtherTenant = two.config
		fk.AppInbound = func(t *testing.T, key string, m channels.Inbound) *http.Request {
			if _, ok := tenants[key]; !ok {
				t.Fatalf("meta fake: no tenant %q", key)
			}
			return metatest.SignedRequest(appURL, srv.AppSecret, body(key, m))
		}
		fk.AppHandshake = func(*testing.T) (*http.Request, channels.Response) {
			return metatest.Verification(appURL, srv.VerifyToken, "app-challenge-1"), channels.Response{Body: []byte("app-challenge-1")}
		}
		fk.AppTamper = tamper
		if channel == meta.Facebook {
			fk.Provisioned = func(*testing.T) bool { return len(one.page.Subscribed()) > 0 }
		}
	}
	return fk
}

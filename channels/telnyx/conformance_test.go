package telnyx_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
)

// hookURL is the connection's public ingress in the tests; the fake never
// dials it (Account.Request builds the request).
const hookURL = "https://comm.example/hooks/sms/conn_channeltest"

// person is the phone number the tests talk to.
const person = "+15550100001"

// TestConformance runs the suite: one fake Telnyx for all subtests, an
// account of its own per subtest.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := telnyxtest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: telnyx.Descriptor(telnyx.Options{APIURL: srv.APIURL}),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`),
			json.RawMessage(`{"api_key":"","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"+15551234567"}`),
			json.RawMessage(`{"api_key":"KEY with spaces","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"+15551234567"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","from":"+15551234567"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"not base64!","from":"+15551234567"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"AAAA","from":"+15551234567"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ="}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"5551234567"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","messaging_profile_id":"../x"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"+15551234567","configure_webhooks":"no"}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"+15551234567","extra":1}`),
			json.RawMessage(`{"api_key":"KEY0123456789","public_key":"ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=","from":"+15551234567"} {}`),
		},
	})
}

func newFake(t *testing.T, srv *telnyxtest.Server) *channeltest.Fake {
	acct := srv.NewAccount()
	cfg, _ := json.Marshal(map[string]any{"api_key": acct.APIKey, "public_key": acct.PublicKey, "from": acct.Number})
	bad, _ := json.Marshal(map[string]any{"api_key": "KEYREVOKED0000000000", "public_key": acct.PublicKey, "from": acct.Number})
	build := func(t *testing.T, m channels.Inbound) []byte {
		return acct.Event(telnyx.EventReceived, acct.Received(&telnyxtest.Inbound{ID: m.ProviderID, From: m.Sender, Text: m.Text}), 1)
	}
	request := func(t *testing.T, body []byte) *http.Request {
		r, err := acct.Request(t.Context(), hookURL, body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return &channeltest.Fake{
		Config:        cfg,
		WebhookURL:    hookURL,
		To:            person,
		BadCredential: bad,
		RetryAfter:    7 * time.Second,
		Provisioned:   func(*testing.T) bool { return acct.Webhook() == hookURL },
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, s := range acct.Sent() {
				out = append(out, channels.Outbound{To: s.To, ThreadKey: s.To, Text: s.Text})
			}
			return out
		},
		Inbound: func(t *testing.T, m channels.Inbound) *http.Request { return request(t, build(t, m)) },
		Raw:     func(t *testing.T, body []byte) *http.Request { return request(t, body) },
		Tamper: func(_ *testing.T, r *http.Request) *http.Request {
			// The signature of another moment.
			ts, _ := strconv.ParseInt(r.Header.Get(telnyxtest.TimestampHeader), 10, 64)
			r.Header.Set(telnyxtest.TimestampHeader, strconv.FormatInt(ts+1, 10))
			return r
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var f telnyxtest.Failure
			switch kind {
			case channeltest.RateLimited:
				f = telnyxtest.TooManyRequests(7)
			case channeltest.Unavailable:
				f = telnyxtest.ServerError
			case channeltest.Timeout:
				f = telnyxtest.Hang
			case channeltest.Rejected:
				f = telnyxtest.InvalidTo
			case channeltest.Unauthorized:
				f = telnyxtest.Unauthorized
			default:
				return "", ""
			}
			acct.FailNext(f)
			return person, f.Title
		},
	}
}

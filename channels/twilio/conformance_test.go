package twilio_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
)

// person is who the tests talk to; number is the account's own.
const (
	person = "+15557654321"
	number = "+15550001111"
)

func hookURL(channel string) string {
	return "https://comm.example/hooks/" + channel + "/conn_channeltest"
}

func TestConformanceSMS(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, harness(t, twilio.SMS))
}

func TestConformanceWhatsApp(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, harness(t, twilio.WhatsApp))
}

func opts(srv *twiliotest.Server) twilio.Options {
	return twilio.Options{APIURL: srv.URL, MessagingURL: srv.URL, CallTimeout: 10 * time.Second}
}

func harness(t *testing.T, channel string) channeltest.Harness {
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	const ac = `"account_sid":"AC0123456789abcdef0123456789abcdef"`
	return channeltest.Harness{
		Descriptor: twilio.Descriptor(channel, opts(srv)),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, channel) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`),
			json.RawMessage(`{` + ac + `}`),
			json.RawMessage(`{"account_sid":"AC12","auth_token":"0123456789abcdef0123456789abcdef","from":"+15550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"","from":"+15550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"has spaces in it, not a token","from":"+15550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef","from":"5550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef","from":"+15550001111","extra":1}`),
			json.RawMessage(`{` + ac + `,"api_key_sid":"SK0123456789abcdef0123456789abcdef","api_key_secret":"abcdefabcdefabcdefabcdef","from":"+15550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef","api_key_sid":"SK0123456789abcdef0123456789abcdef","from":"+15550001111"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef","from":"+15550001111","configure_webhooks":"no"}`),
			json.RawMessage(`{` + ac + `,"auth_token":"0123456789abcdef0123456789abcdef","from":"+15550001111"} {}`),
		},
	}
}

// fake is one subtest's account and the sids it gave the suite's tokens.
type fake struct {
	acct    *twiliotest.Account
	channel string

	mu   sync.Mutex
	sids map[string]string // suite token -> MessageSid
}

func newFake(t *testing.T, srv *twiliotest.Server, channel string) *channeltest.Fake {
	f := &fake{acct: srv.NewAccount(), channel: channel, sids: map[string]string{}}
	f.acct.AddNumber(number)
	from := number
	if channel == twilio.WhatsApp {
		from = "whatsapp:" + number
	}
	cfg, _ := json.Marshal(map[string]any{"account_sid": f.acct.SID, "auth_token": f.acct.AuthToken, "from": from})
	bad, _ := json.Marshal(map[string]any{"account_sid": f.acct.SID, "auth_token": strings.Repeat("0", 32), "from": from})
	hook := hookURL(channel)
	return &channeltest.Fake{
		Config:             cfg,
		WebhookURL:         hook,
		To:                 person,
		BadCredential:      bad,
		RetryAfter:         7 * time.Second,
		TypingNeedsMessage: channel == twilio.WhatsApp,
		Provisioned: func(*testing.T) bool {
			n, _ := f.acct.Number(number)
			return n.SMSURL == hook
		},
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, m := range f.acct.Sent() {
				to := strings.TrimPrefix(m.To, "whatsapp:")
				out = append(out, channels.Outbound{To: to, ThreadKey: to, Text: m.Body})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, ty := range f.acct.Typings() {
				out = append(out, channels.Typing{To: ty.To, ThreadKey: ty.To, InReplyTo: ty.MessageID})
			}
			return out
		},
		Inbound: func(t *testing.T, m channels.Inbound) *http.Request {
			r, err := f.acct.Request(t.Context(), hook, f.params(m))
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Raw: func(t *testing.T, body []byte) *http.Request {
			p, err := url.ParseQuery(string(body))
			if err != nil {
				p = nil
			}
			r, err := f.acct.Request(t.Context(), hook, p)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Tamper: func(_ *testing.T, r *http.Request) *http.Request {
			r.Header.Set("X-Twilio-Signature", "bm90IHRoZSBzaWduYXR1cmU=")
			return r
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var fl twiliotest.Failure
			switch kind {
			case channeltest.RateLimited:
				fl = twiliotest.RateLimited
			case channeltest.Unavailable:
				fl = twiliotest.Unavailable
			case channeltest.Timeout:
				fl = twiliotest.Hang
			case channeltest.Rejected:
				fl = twiliotest.InvalidTo
			case channeltest.Unauthorized:
				fl = twiliotest.AuthFailed
			default:
				return "", ""
			}
			f.acct.FailNext(twiliotest.OpMessage, fl)
			detail := ""
			if fl.Code != 0 {
				detail = fmt.Sprint(fl.Code)
			}
			return person, detail
		},
	}
}

// nextSID numbers the MessageSids of every subtest's inbound messages.
var nextSID atomic.Uint64

// params are the webhook parameters delivering m: the suite's token picks
// the MessageSid, so a repeat is Twilio's retry of the same message.
func (f *fake) params(m channels.Inbound) url.Values {
	f.mu.Lock()
	sid, ok := f.sids[m.ProviderID]
	if !ok {
		// Unique across the subtests, which share one fake server and
		// run in parallel: the server keeps inbound messages by sid.
		sid = fmt.Sprintf("SM%032x", nextSID.Add(1))
		f.sids[m.ProviderID] = sid
	}
	f.mu.Unlock()
	return f.acct.Params(twiliotest.Incoming{SID: sid, From: m.Sender, To: number, Body: m.Text, WhatsApp: f.channel == twilio.WhatsApp})
}

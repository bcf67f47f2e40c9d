package telegram_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
)

// hookURL is the connection's public ingress in the tests; the fake never
// dials it (Fake.Inbound builds the request).
const hookURL = "https://comm.example/hooks/telegram/conn_channeltest"

// person is the Telegram user the tests talk to (a private chat's id is
// the user's id).
const person = 4242

// TestConformanceWebhook runs the suite against a webhook-mode connection:
// one fake Bot API for all subtests, a bot of its own per subtest.
func TestConformanceWebhook(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, harness(t, telegram.ModeWebhook))
}

// TestConformancePolling runs the suite against a polling-mode connection
// (the webhook subtests skip; the poll subtest runs).
func TestConformancePolling(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, harness(t, telegram.ModePolling))
}

func harness(t *testing.T, mode string) channeltest.Harness {
	srv := telegramtest.NewServer()
	t.Cleanup(srv.Close)
	return channeltest.Harness{
		Descriptor: telegram.Descriptor(telegram.Options{APIURL: srv.URL, PollTimeout: 2 * time.Second}),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, mode) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`),
			json.RawMessage(`{"bot_token":""}`),
			json.RawMessage(`{"bot_token":"no-colon"}`),
			json.RawMessage(`{"bot_token":"123:ABC/../../x"}`),
			json.RawMessage(`{"bot_token":"abc:ABC"}`),
			json.RawMessage(`{"bot_token":123}`),
			json.RawMessage(`{"bot_token":"123:ABC","mode":"carrier-pigeon"}`),
			json.RawMessage(`{"bot_token":"123:ABC","extra":1}`),
			json.RawMessage(`{"bot_token":"123:ABC","secret_token":"has space"}`),
			json.RawMessage(`{"bot_token":"123:ABC"} {}`),
		},
		BodyUnsigned: "Telegram authenticates webhooks with a shared secret in a header; the body is not signed",
	}
}

// fake is one subtest's bot and the ids it gave the suite's tokens.
type fake struct {
	bot *telegramtest.Bot

	mu  sync.Mutex
	ids map[string]int64 // suite token -> message id (and update id)
}

func newFake(t *testing.T, srv *telegramtest.Server, mode string) *channeltest.Fake {
	f := &fake{bot: srv.NewBot("comm_test_bot"), ids: map[string]int64{}}
	cfg := map[string]any{"bot_token": f.bot.Token, "mode": mode}
	webhookURL := ""
	if mode == telegram.ModeWebhook {
		webhookURL = hookURL
		// As if provisioned: the bot's webhook and the stored secret.
		secret := "conformance_secret-" + strconv.FormatInt(f.bot.ID, 10)
		f.bot.SetWebhook(telegramtest.Webhook{URL: hookURL, SecretToken: secret, AllowedUpdates: []string{"message"}})
		cfg["secret_token"] = secret
	}
	raw, _ := json.Marshal(cfg)
	bad, _ := json.Marshal(map[string]any{"bot_token": "999999:not-a-token-of-this-server", "mode": mode})
	chat := strconv.Itoa(person)
	fk := &channeltest.Fake{
		Config:        raw,
		WebhookURL:    webhookURL,
		To:            chat,
		BadCredential: bad,
		RetryAfter:    7 * time.Second,
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, s := range f.bot.Sent() {
				out = append(out, channels.Outbound{To: s.ChatID, ThreadKey: s.ChatID, Text: s.Text})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, a := range f.bot.Actions() {
				if a.Action == "typing" {
					out = append(out, channels.Typing{To: a.ChatID, ThreadKey: a.ChatID})
				}
			}
			return out
		},
		Inbound: func(t *testing.T, m channels.Inbound) *http.Request {
			r, _, err := f.bot.WebhookRequest(t.Context(), f.update(t, m))
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Raw: func(t *testing.T, body []byte) *http.Request {
			r, _, err := f.bot.WebhookRequest(t.Context(), telegramtest.Update{})
			if err != nil {
				t.Fatal(err)
			}
			r.Body = http.NoBody
			return r // the suite puts body in
		},
		Tamper: func(_ *testing.T, r *http.Request) *http.Request {
			r.Header.Set(telegram.SecretHeader, "not-the-secret")
			return r
		},
		Queue: func(t *testing.T, m channels.Inbound) { f.bot.Queue(f.update(t, m)) },
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var fl telegramtest.Failure
			switch kind {
			case channeltest.RateLimited:
				fl = telegramtest.TooManyRequests(7)
			case channeltest.Unavailable:
				fl = telegramtest.BadGateway
			case channeltest.Timeout:
				fl = telegramtest.Hang
			case channeltest.Rejected:
				fl = telegramtest.ChatNotFound
			case channeltest.Unauthorized:
				fl = telegramtest.Unauthorized
			default:
				return "", ""
			}
			f.bot.FailNext("sendMessage", fl)
			return chat, fl.Description
		},
	}
	if mode == telegram.ModeWebhook {
		fk.Provisioned = func(*testing.T) bool { return f.bot.Webhook().URL == hookURL }
	}
	return fk
}

// update is the Update delivering m: the suite's token picks the message
// and update ids, so a repeat is Telegram's retry of the same update.
func (f *fake) update(t *testing.T, m channels.Inbound) telegramtest.Update {
	from, err := strconv.ParseInt(m.Sender, 10, 64)
	if err != nil {
		t.Fatalf("telegram fake: sender %q is not a user id", m.Sender)
	}
	f.mu.Lock()
	id, ok := f.ids[m.ProviderID]
	if !ok {
		id = int64(len(f.ids) + 1)
		f.ids[m.ProviderID] = id
	}
	f.mu.Unlock()
	u := telegramtest.TextMessage(from, m.Text)
	u.UpdateID = 500000 + id
	u.Message.MessageID = id
	return u
}

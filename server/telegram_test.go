package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// startTelegramTLS serves a gateway whose public base URL is https (as
// behind a TLS-terminating proxy), so Telegram connections take the
// webhook mode, with the Telegram channel pointed at fake.
func startTelegramTLS(t *testing.T, cfg store.Config, fake *telegramtest.Server) (g *gateway, base string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "https://" + ln.Addr().String()
	g = startGateway(t, cfg, setup{outbox: true,
		server:   server.Options{BaseURL: base},
		telegram: telegram.Options{APIURL: fake.URL}})
	tls := httptest.NewUnstartedServer(g.Front)
	tls.Listener.Close()
	tls.Listener = ln
	tls.StartTLS()
	t.Cleanup(tls.Close)
	return g, base
}

// telegramConnection is the connection part of a 201 from connecting a
// bot.
type telegramConnection struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Address    *string `json:"address"`
	WebhookURL *string `json:"webhook_url"`
}

// received is the message of a message.received event.
type received struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Sender         string `json:"sender"`
	Text           string `json:"text"`
}

func receivedOf(t *testing.T, e event) received {
	t.Helper()
	var d struct {
		Message received `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Message
}

// TestTelegramWebhook drives a Telegram bot in webhook mode end to end
// against the fake Bot API: connect (getMe, setWebhook with the
// connection's URL and a secret), inbound through /hooks/telegram/{id}
// (the secret checked, a redelivery stored once), typing, a reply with
// reply_parameters, 429 retry_after honoured, a blocked bot failing with
// its reason, and delete (deleteWebhook).
func TestTelegramWebhook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := telegramtest.NewServer()
		t.Cleanup(fake.Close)
		bot := fake.NewBot("comm_webhook_bot")
		g, base := startTelegramTLS(t, cfg, fake)
		key := g.newSandbox(t, "telegram").APIKey

		// A token Telegram refuses: 400 naming the field, nothing stored.
		e := wantError(t, g.post(t, key, "/v1/connections", `{"channel":"telegram","config":{"bot_token":"123:not-a-real-token"}}`),
			http.StatusBadRequest, "invalid_parameter", "config.bot_token")
		if !strings.Contains(e.Error.Message, "rejected") {
			t.Errorf("bad token message %q does not say the token was rejected", e.Error.Message)
		}
		wantError(t, g.post(t, key, "/v1/connections", `{"channel":"telegram","config":{}}`),
			http.StatusBadRequest, "invalid_parameter", "config.bot_token")

		resp := g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"telegram","config":{"bot_token":%q}}`, bot.Token))
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		if strings.Contains(string(resp.Body), bot.Token) {
			t.Fatalf("the connection shows the bot token: %s", resp.Body)
		}
		var conn telegramConnection
		if err := json.Unmarshal(resp.Body, &conn); err != nil {
			t.Fatal(err)
		}
		wantURL := base + "/hooks/telegram/" + conn.ID
		if conn.Status != "active" || conn.Address == nil || *conn.Address != "@comm_webhook_bot" ||
			conn.WebhookURL == nil || *conn.WebhookURL != wantURL {
			t.Fatalf("connection %s: want active, @comm_webhook_bot, webhook_url %s", resp.Body, wantURL)
		}
		hook := bot.Webhook()
		if hook.URL != *conn.WebhookURL || len(hook.SecretToken) < 16 || len(hook.AllowedUpdates) == 0 {
			t.Fatalf("setWebhook got %+v, want the connection's URL with a secret and allowed_updates", hook)
		}

		// A person writes; Telegram POSTs the update to the webhook.
		u, err := bot.Incoming(context.Background(), telegramtest.TextMessage(4242, "hello bot"))
		if err != nil {
			t.Fatalf("deliver: %v", err)
		}
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != "4242" || in.Text != "hello bot" {
			t.Fatalf("received %+v", in)
		}

		// Telegram retries the same update: nothing new.
		if status, err := bot.Deliver(context.Background(), u); err != nil || status != http.StatusOK {
			t.Fatalf("redelivery: %d %v", status, err)
		}
		// A request without the secret, or with a wrong one: 401, nothing stored.
		for _, secret := range []string{"", "wrong-secret"} {
			body, _ := json.Marshal(telegramtest.TextMessage(4242, "forged"))
			r := g.do(t, request{Method: "POST", Path: "/hooks/telegram/" + conn.ID, ContentType: "application/json",
				Body: string(body), Header: map[string]string{telegram.SecretHeader: secret}})
			wantError(t, r, http.StatusUnauthorized, "unauthenticated", "")
		}
		// Another channel's path, an unknown connection: 404.
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/email/" + conn.ID, Body: "{}"}), http.StatusNotFound, "not_found", "")
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/telegram/conn_01aaaaaaaaaaaaaaaaaaaaaaaa", Body: "{}"}), http.StatusNotFound, "not_found", "")
		if n := len(g.events(t, key, "type=message.received")); n != 1 {
			t.Fatalf("%d message.received events after a redelivery and forged requests, want 1", n)
		}

		// Typing, then a reply: sendChatAction, then sendMessage answering
		// the message.
		if r := g.post(t, key, "/v1/messages/"+in.ID+"/typing", ""); r.Status != http.StatusOK {
			t.Fatalf("typing: %d %s", r.Status, r.Body)
		}
		if acts := bot.Actions(); len(acts) == 0 || acts[0].Action != "typing" || acts[0].ChatID != "4242" {
			t.Fatalf("chat actions %+v, want typing in 4242", acts)
		}
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Hi! How can I help?"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := bot.Sent()
		if len(sent) != 1 || sent[0].Text != "Hi! How can I help?" || sent[0].ChatID != "4242" || sent[0].ReplyTo != u.Message.MessageID {
			t.Fatalf("sendMessage got %+v, want the reply to message %d", sent, u.Message.MessageID)
		}

		// 429 with retry_after: the outbox waits as asked, then sends.
		bot.FailNext("sendMessage", telegramtest.TooManyRequests(1))
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"after the rate limit"}`)
		m := g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if m.Attempts < 2 {
			t.Errorf("rate-limited reply sent after %d attempt(s), want a retry", m.Attempts)
		}

		// The person blocked the bot: failed at once, saying so.
		bot.FailNext("sendMessage", telegramtest.Blocked)
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"are you there?"}`)
		m = g.waitMessage(t, key, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if m.Error == nil || !strings.Contains(*m.Error, "blocked") || m.Attempts != 1 {
			t.Errorf("blocked reply: error %v after %d attempt(s), want a reason naming the block after 1", m.Error, m.Attempts)
		}

		// Deleting the connection removes the webhook.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + conn.ID, Key: key}); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if h := bot.Webhook(); h.URL != "" {
			t.Errorf("webhook after delete: %+v, want none", h)
		}
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/telegram/" + conn.ID, Body: "{}",
			Header: map[string]string{telegram.SecretHeader: hook.SecretToken}}), http.StatusNotFound, "not_found", "")
	})
}

// TestTelegramPolling: on a gateway without a public https URL a bot
// polls getUpdates (one session, run by the session worker), and its
// messages arrive in order, once.
func TestTelegramPolling(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := telegramtest.NewServer()
		t.Cleanup(fake.Close)
		bot := fake.NewBot("comm_polling_bot")
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, telegram: telegram.Options{APIURL: fake.URL, PollTimeout: time.Second}})
		key := g.newSandbox(t, "telegram").APIKey
		resp := g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"telegram","config":{"bot_token":%q}}`, bot.Token))
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		var conn telegramConnection
		if err := json.Unmarshal(resp.Body, &conn); err != nil {
			t.Fatal(err)
		}
		if conn.WebhookURL != nil || bot.Webhook().URL != "" {
			t.Fatalf("polling connection %s has a webhook (%+v)", resp.Body, bot.Webhook())
		}
		for _, text := range []string{"one", "two", "three"} {
			bot.Queue(telegramtest.TextMessage(99, text))
		}
		deadline := time.Now().Add(15 * time.Second)
		var texts []string
		for time.Now().Before(deadline) {
			texts = texts[:0]
			for _, e := range g.events(t, key, "type=message.received") {
				texts = append(texts, receivedOf(t, e).Text)
			}
			if len(texts) >= 3 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if strings.Join(texts, ",") != "one,two,three" {
			t.Fatalf("received %q, want one, two, three", texts)
		}
		// Confirmed to Telegram on the next getUpdates.
		gatewaytest.WaitFor(t, "the updates to be confirmed", 10*time.Second, func() bool { return bot.Pending() == 0 })

		// The token is revoked at @BotFather: the session stops and the
		// connection says so, once.
		bot.Revoke()
		gatewaytest.WaitFor(t, "connection.revoked", 15*time.Second, func() bool {
			return len(g.events(t, key, "type=connection.revoked")) == 1
		})
		var got connection
		g.get(t, key, "/v1/connections/"+conn.ID, &got)
		if got.Status != "revoked" {
			t.Errorf("status after the token was revoked: %q", got.Status)
		}
		time.Sleep(time.Second)
		if n := len(g.events(t, key, "type=connection.revoked")); n != 1 {
			t.Errorf("%d connection.revoked events, want 1", n)
		}
	})
}

// TestSentProviderIDTaken: when a provider answers a send with an id that
// another message of the connection already has (here the fake numbers
// the bot's messages apart from the person's), the reply is recorded as
// sent, once, without that id: it is never sent to the person again.
func TestSentProviderIDTaken(t *testing.T) {
	t.Parallel()
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	bot := fake.NewBot("comm_reuse_bot")
	g, _ := startTelegramTLS(t, storetest.SQLite(t), fake)
	key := g.newSandbox(t, "reuse").APIKey
	r := g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"telegram","config":{"bot_token":%q}}`, bot.Token))
	if r.Status != http.StatusCreated {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	var conn telegramConnection
	if err := json.Unmarshal(r.Body, &conn); err != nil {
		t.Fatal(err)
	}
	// Posted past the fake, which would otherwise number the chat's
	// messages in one sequence as Telegram does: its own sends start at
	// 1 too.
	u := telegramtest.TextMessage(5150, "hi")
	u.UpdateID, u.Message.MessageID, u.Message.Date = 1, 1, time.Now().Unix()
	body, _ := json.Marshal(u)
	if r := g.do(t, request{Method: "POST", Path: "/hooks/telegram/" + conn.ID, ContentType: "application/json", Body: string(body),
		Header: map[string]string{telegram.SecretHeader: bot.Webhook().SecretToken}}); r.Status != http.StatusOK {
		t.Fatalf("hook: %d %s", r.Status, r.Body)
	}
	in := receivedOf(t, g.events(t, key, "type=message.received")[0])
	out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"hello"}`)
	m := g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
	time.Sleep(500 * time.Millisecond)
	if n := len(bot.Sent()); n != 1 || m.Attempts != 1 {
		t.Fatalf("sent %d time(s) in %d attempt(s), want once", n, m.Attempts)
	}
	if n := len(g.events(t, key, "type=message.sent")); n != 1 {
		t.Fatalf("%d message.sent events, want 1", n)
	}
}

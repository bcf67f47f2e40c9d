package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

const (
	imRelayPassword = "relay-secret-password"
	imRelayAddress  = "agent@icloud.com"
	imPerson        = "+15551230000"
)

// connectIMessage connects imessage with a signed-in key.
func connectIMessage(t *testing.T, g *gateway, key, name string) connection {
	t.Helper()
	r := g.post(t, key, "/v1/connections", `{"channel":"imessage","name":"`+name+`"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("connect imessage: %d %s", r.Status, r.Body)
	}
	var c connection
	decodeJSON(t, r.Body, &c)
	return c
}

// TestIMessageRelay drives the iMessage channel end to end against a fake
// BlueBubbles relay with its Private API on: a signed-in project connects
// (the relay's address, a join code, an sms: join link), the webhook is
// registered on the relay once with a secret in the URL, a forged event is
// refused, a person who has not joined is told how to, "join <code>"
// binds them, their message becomes message.received, a reply goes out
// with selectedMessageGuid and the message's id as tempGuid, typing
// reaches the chat, delivered and read receipts update the reply, and
// with the relay down a send is retried until it fails (message.failed).
func TestIMessageRelay(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		relay := bluebubblestest.NewServer(imRelayPassword, imRelayAddress)
		t.Cleanup(relay.Close)
		relay.SetPrivateAPI(true)
		clk := &clock{}
		g := startGateway(t, cfg, setup{outbox: true, svc: messaging.Options{Now: clk.now},
			imessage: imessage.Options{Relays: []imessage.Relay{{URL: relay.URL, Password: imRelayPassword, Address: imRelayAddress}},
				CallTimeout: 2 * time.Second}})
		ctx := context.Background()

		// A sandbox key: 402.
		sb := g.newSandbox(t, "imessage")
		wantError(t, g.post(t, sb.APIKey, "/v1/connections", `{"channel":"imessage"}`), http.StatusPaymentRequired, "payment_required", "")
		key := signedInKey(t, g, sb.ProjectID)
		c := connectIMessage(t, g, key, "Concierge")
		if c.Address == nil || *c.Address != imRelayAddress || c.Line == nil || *c.Line != imRelayAddress || c.JoinCode == nil {
			t.Fatalf("connection %+v: want the relay's address, line and a join code", c)
		}
		code := *c.JoinCode
		if want := "sms:" + imRelayAddress + "?&body=join%20" + code; c.JoinLink == nil || *c.JoinLink != want {
			t.Errorf("join link %v, want %s", c.JoinLink, want)
		}
		other := g.newSandbox(t, "other")
		c2 := connectIMessage(t, g, signedInKey(t, g, other.ProjectID), "Other")
		if *c2.JoinCode == code || *c2.Line != imRelayAddress {
			t.Errorf("second connection %+v", c2)
		}

		// One registration for both, with the relay's id and secret.
		hooks := relay.Webhooks()
		if len(hooks) != 1 || !strings.HasPrefix(hooks[0].URL, g.URL+"/hooks/imessage?") ||
			!slices.Equal(hooks[0].Events, []string{"new-message", "updated-message"}) {
			t.Fatalf("relay webhooks %+v, want one at %s/hooks/imessage?relay=…&secret=…", hooks, g.URL)
		}
		hook, _ := url.Parse(hooks[0].URL)
		if len(hook.Query().Get("secret")) < 32 || hook.Query().Get("relay") == "" {
			t.Fatalf("webhook URL %s lacks the relay or a long secret", hooks[0].URL)
		}
		forged := hook.Query()
		forged.Set("secret", strings.Repeat("a", len(forged.Get("secret"))))
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/imessage?" + forged.Encode(), ContentType: "application/json",
			Body: string(bluebubblestest.Event("new-message", relay.Incoming(bluebubblestest.Incoming{From: imPerson, Text: "forged"})))}),
			http.StatusUnauthorized, "unauthenticated", "")

		push := func(text string) bluebubblestest.Message {
			t.Helper()
			m := relay.Incoming(bluebubblestest.Incoming{From: imPerson, Text: text})
			if err := relay.PushAll(ctx, "new-message", m); err != nil {
				t.Fatalf("push %q: %v", text, err)
			}
			return m
		}
		answers := func() []string {
			var out []string
			for _, s := range relay.Sent() {
				if s.ChatGUID == "iMessage;-;"+imPerson && !strings.HasPrefix(s.TempGUID, "msg_") {
					out = append(out, s.Text)
				}
			}
			return out
		}

		// Not joined: told how, nothing stored.
		push("hello?")
		if ans := answers(); len(ans) != 1 || !strings.Contains(ans[0], "join") {
			t.Fatalf("answers %q, want one saying how to join", ans)
		}
		// Join, then a message.
		push("join " + strings.ToLower(code))
		if ans := answers(); len(ans) != 2 || !strings.Contains(ans[1], "Concierge") {
			t.Fatalf("answers %q, want a confirmation naming Concierge", ans)
		}
		if bs := bindingsOf(t, g, key, c.ID); len(bs) != 1 || bs[0] != imPerson {
			t.Fatalf("bindings %q, want [%s]", bs, imPerson)
		}
		first := push("Hi, I need a table for two")
		var in received
		for _, e := range g.events(t, key, "type=message.received") {
			in = receivedOf(t, e)
		}
		if in.Text != "Hi, I need a table for two" || in.Sender != imPerson {
			t.Fatalf("received %+v", in)
		}

		// A reply: private API, selectedMessageGuid, tempGuid the message id.
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Of course! What time?"}`)
		sent := g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if sent.SentAt == nil {
			t.Errorf("the reply was sent without sent_at: %+v", sent)
		}
		last := relay.Sent()[len(relay.Sent())-1]
		if last.Text != "Of course! What time?" || last.Method != "private-api" || last.SelectedMessageGUID != first.GUID ||
			last.TempGUID != out.ID || last.ChatGUID != "iMessage;-;"+imPerson {
			t.Fatalf("the relay sent %+v for %+v", last, sent)
		}

		// Typing in the chat.
		if r := g.post(t, key, "/v1/messages/"+in.ID+"/typing", ""); r.Status != http.StatusOK {
			t.Fatalf("typing: %d %s", r.Status, r.Body)
		}
		if ty := relay.Typings(); len(ty) != 1 || ty[0] != "iMessage;-;"+imPerson {
			t.Errorf("typings %q", ty)
		}

		// Delivered, then read.
		if err := relay.Delivered(ctx, last.GUID); err != nil {
			t.Fatal(err)
		}
		if m := g.message(t, key, out.ID); m.Delivery == nil || m.Delivery.State != "delivered" {
			t.Errorf("after delivered: %+v", m.Delivery)
		}
		if err := relay.Read(ctx, last.GUID); err != nil {
			t.Fatal(err)
		}
		if m := g.message(t, key, out.ID); m.Delivery == nil || m.Delivery.State != "read" {
			t.Errorf("after read: %+v", m.Delivery)
		}

		// The relay goes down: retried, then failed.
		relay.SetDown(bluebubblestest.Unavailable)
		down := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Still there?"}`)
		deadline := time.Now().Add(60 * time.Second)
		var m message
		for {
			m = g.message(t, key, down.ID)
			if m.Status == "failed" || time.Now().After(deadline) {
				break
			}
			clk.advance(11 * time.Minute)
			time.Sleep(200 * time.Millisecond)
		}
		if m.Status != "failed" || m.Attempts != messaging.MaxAttempts || m.Error == nil || !strings.Contains(*m.Error, "relay agent@icloud.com") {
			t.Fatalf("with the relay down: status %s after %d attempts, error %v; want failed after %d naming the relay", m.Status, m.Attempts, m.Error, messaging.MaxAttempts)
		}
		failed := g.events(t, key, "type=message.failed")
		if len(failed) != 1 || !strings.Contains(string(failed[0].Data), down.ID) {
			t.Errorf("message.failed events: %d", len(failed))
		}
		relay.SetDown(bluebubblestest.Up)
	})
}

// TestIMessageFollow: a gateway following the relays (no webhook on
// them) polls each relay's messages in its app session; a join and a
// message reach the project.
func TestIMessageFollow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		relay := bluebubblestest.NewServer(imRelayPassword, imRelayAddress)
		t.Cleanup(relay.Close)
		g := startGateway(t, cfg, setup{outbox: true, sessions: true,
			imessage: imessage.Options{Relays: []imessage.Relay{{URL: relay.URL, Password: imRelayPassword, Address: imRelayAddress}},
				Follow: true, PollInterval: 50 * time.Millisecond, CallTimeout: 2 * time.Second}})
		sb := g.newSandbox(t, "follow")
		key := signedInKey(t, g, sb.ProjectID)
		c := connectIMessage(t, g, key, "Follower")
		if len(relay.Webhooks()) != 0 {
			t.Fatalf("a webhook was registered while following: %+v", relay.Webhooks())
		}
		// The session has started when it asks the relay for messages.
		waitFor(t, "the session's first query", func() bool { return relay.Calls("POST /api/v1/message/query") >= 2 })
		relay.Incoming(bluebubblestest.Incoming{From: imPerson, Text: "join " + *c.JoinCode})
		waitFor(t, "the join", func() bool { return len(bindingsOf(t, g, key, c.ID)) == 1 })
		relay.Incoming(bluebubblestest.Incoming{From: imPerson, Text: "polled hello"})
		waitFor(t, "the message", func() bool { return slices.Contains(receivedTexts(t, g, key), "polled hello") })
	})
}

// TestIMessageRelayPassword: a relay that refuses the operator's password
// is the operator's problem: connecting answers 502 provider_unavailable
// saying so, not a 400 about the caller's config, and stores nothing.
func TestIMessageRelayPassword(t *testing.T) {
	t.Parallel()
	cfg := storetest.SQLite(t)
	relay := bluebubblestest.NewServer(imRelayPassword, imRelayAddress)
	t.Cleanup(relay.Close)
	g := startGateway(t, cfg, setup{imessage: imessage.Options{Relays: []imessage.Relay{{URL: relay.URL, Password: "an-old-password", Address: imRelayAddress}}}})
	sb := g.newSandbox(t, "imessage")
	key := signedInKey(t, g, sb.ProjectID)
	e := wantError(t, g.post(t, key, "/v1/connections", `{"channel":"imessage"}`), http.StatusBadGateway, "provider_unavailable", "")
	if !strings.Contains(e.Error.Message, "refused the password") || strings.Contains(e.Error.Message, "an-old-password") {
		t.Errorf("message %q: want it to say the relay refused the password, without the password", e.Error.Message)
	}
	var conns []connection
	g.get(t, key, "/v1/connections", &conns)
	if len(conns) != 0 || len(relay.Webhooks()) != 0 {
		t.Errorf("after the refusal: %d connections, %d webhooks", len(conns), len(relay.Webhooks()))
	}
}

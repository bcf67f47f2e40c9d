package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestEveryEndpoint drives every typed method against the real gateway,
// on both engines: the whole agent loop, lists, webhooks, deletes.
func TestEveryEndpoint(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		ctx := context.Background()
		p := newProject(t, g, "")
		sb := p.Sandbox
		if !strings.HasPrefix(sb.APIKey, "comm_sandbox_") || !strings.HasPrefix(sb.ProjectID, "proj_") {
			t.Fatalf("sandbox %+v", sb)
		}

		pr, err := p.Project(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pr.ID != sb.ProjectID || pr.CustomerID != sb.CustomerID || pr.AgentID != sb.AgentID || pr.LastSeq != 0 {
			t.Errorf("project %+v, sandbox %+v", pr, sb)
		}

		conn := p.connectTest(t)
		if conn.Channel != "test" || conn.Status != "active" || conn.CustomerID != sb.CustomerID {
			t.Errorf("connection %+v", conn)
		}
		conns, err := p.Connections(ctx, "", 0)
		if err != nil || len(conns) != 1 || conns[0].ID != conn.ID {
			t.Fatalf("Connections: %+v, %v", conns, err)
		}
		if more, err := p.Connections(ctx, conn.ID, 10); err != nil || len(more) != 0 {
			t.Errorf("Connections after the last: %+v, %v", more, err)
		}
		got, err := p.Connection(ctx, conn.ID)
		if err != nil || got.ID != conn.ID || !got.CreatedAt.Equal(conn.CreatedAt) {
			t.Errorf("Connection: %+v, %v", got, err)
		}

		// A long poll returns as soon as the event commits.
		polled := make(chan []client.Event, 1)
		go func() {
			evs, err := p.EventsWait(ctx, 1, 10, client.EventMessageReceived, 30*time.Second)
			if err != nil {
				t.Errorf("EventsWait: %v", err)
			}
			polled <- evs
		}()
		time.Sleep(50 * time.Millisecond)
		subj := "Order 42"
		in, err := p.Inject(ctx, conn.ID, client.InjectRequest{Sender: "alice@example.com", Text: "Where is my order?",
			Subject: subj, ID: "provider-1"})
		if err != nil {
			t.Fatal(err)
		}
		if in.Direction != client.DirectionInbound || in.Status != client.StatusReceived {
			t.Errorf("injected %+v", in)
		}
		select {
		case evs := <-polled:
			if len(evs) != 1 || evs[0].Type != client.EventMessageReceived {
				t.Fatalf("long poll answered %+v", evs)
			}
			m, err := p.MessageOf(&evs[0])
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != in.ID || m.ConversationID != in.ConversationID || m.ConnectionID != conn.ID || m.Channel != "test" ||
				m.Sender != "alice@example.com" || m.Text != "Where is my order?" || m.Subject != subj || m.HTML != "" ||
				m.CustomerID != sb.CustomerID || m.AgentID != sb.AgentID {
				t.Errorf("inbound message %+v", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the long poll did not answer when the event committed")
		}
		// A duplicate delivery stores nothing new.
		dup, err := p.Inject(ctx, conn.ID, client.InjectRequest{Sender: "alice@example.com", Text: "Where is my order?", ID: "provider-1"})
		if err != nil || dup.ID != in.ID {
			t.Errorf("duplicate inject: %+v, %v", dup, err)
		}

		evs, err := p.Events(ctx, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Seq != 1 || evs[0].Type != client.EventConnectionActive || evs[1].Seq != 2 {
			t.Fatalf("events %+v", evs)
		}
		if evs, err := p.Events(ctx, 0, 1, ""); err != nil || len(evs) != 1 {
			t.Errorf("Events limit 1: %d events, %v", len(evs), err)
		}
		if evs, err := p.Events(ctx, 2, 0, ""); err != nil || len(evs) != 0 || evs == nil {
			t.Errorf("Events at the head: %#v, %v (want an empty, non-nil page)", evs, err)
		}

		convs, err := p.Conversations(ctx, conn.ID, "", 0)
		if err != nil || len(convs) != 1 || convs[0].ID != in.ConversationID || convs[0].Participant != "alice@example.com" {
			t.Fatalf("Conversations: %+v, %v", convs, err)
		}
		if all, err := p.Conversations(ctx, "", "", 5); err != nil || len(all) != 1 {
			t.Errorf("all Conversations: %+v, %v", all, err)
		}

		st, err := p.Typing(ctx, in.ID)
		if err != nil || st.ConversationID != in.ConversationID || time.Until(st.TypingUntil) <= 0 {
			t.Fatalf("Typing: %+v, %v", st, err)
		}
		conv, err := p.Conversation(ctx, in.ConversationID)
		if err != nil || !conv.Typing || conv.TypingUntil == nil {
			t.Errorf("Conversation while typing: %+v, %v", conv, err)
		}

		reply, err := p.Reply(ctx, in.ID, client.ReplyRequest{Text: "It ships tomorrow."})
		if err != nil {
			t.Fatal(err)
		}
		if reply.Direction != client.DirectionOutbound || reply.InReplyTo == nil || *reply.InReplyTo != in.ID ||
			reply.Subject == nil || *reply.Subject != "Re: "+subj {
			t.Errorf("reply %+v", reply)
		}
		sent, err := p.EventsWait(ctx, 2, 0, client.EventMessageSent, 10*time.Second)
		if err != nil || len(sent) != 1 {
			t.Fatalf("message.sent: %+v, %v", sent, err)
		}
		var se client.MessageEvent
		if err := sent[0].Decode(&se); err != nil || se.Message.ID != reply.ID || se.Message.Status != client.StatusSent {
			t.Errorf("message.sent data %s: %v", sent[0].Data, err)
		}
		if m, err := p.Message(ctx, reply.ID); err != nil || m.Status != client.StatusSent || m.SentAt == nil {
			t.Errorf("Message of the reply: %+v, %v", m, err)
		}
		if conv, err := p.Conversation(ctx, in.ConversationID); err != nil || conv.Typing {
			t.Errorf("the reply did not end typing: %+v, %v", conv, err)
		}

		out, err := p.Send(ctx, client.SendRequest{ConnectionID: conn.ID, To: "bob@example.com", Text: "Hello Bob"})
		if err != nil || out.Status != client.StatusQueued || out.Recipient == nil || *out.Recipient != "bob@example.com" {
			t.Fatalf("Send: %+v, %v", out, err)
		}
		if sent, err := p.EventsWait(ctx, sent[0].Seq, 0, client.EventMessageSent, 10*time.Second); err != nil || len(sent) != 1 {
			t.Fatalf("message.sent of the proactive message: %+v, %v", sent, err)
		}

		msgs, err := p.Messages(ctx, in.ConversationID, "", 0)
		if err != nil || len(msgs) != 2 || msgs[0].ID != in.ID || msgs[1].ID != reply.ID {
			t.Fatalf("Messages: %+v, %v", msgs, err)
		}
		if rest, err := p.Messages(ctx, in.ConversationID, in.ID, 1); err != nil || len(rest) != 1 || rest[0].ID != reply.ID {
			t.Errorf("Messages after the first: %+v, %v", rest, err)
		}

		// Webhooks: registration, generated secret, cursor, replay, attempts.
		if _, err := p.GetWebhook(ctx); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("GetWebhook before registration: %v, want ErrNotFound", err)
		}
		wh, err := p.SetWebhook(ctx, "https://agent.example.com/comm", "")
		if err != nil {
			t.Fatal(err)
		}
		head, _ := p.Project(ctx)
		if !strings.HasPrefix(wh.Secret, "whsec_") || wh.Status != "active" || wh.Cursor != head.LastSeq {
			t.Errorf("SetWebhook: %+v (head %d)", wh, head.LastSeq)
		}
		wh, err = p.SetWebhook(ctx, "https://agent.example.com/comm2", "my secret, long and varied enough", client.WebhookFromSeq(1))
		if err != nil || wh.Cursor != 1 || wh.Secret != "" || wh.URL != "https://agent.example.com/comm2" {
			t.Errorf("SetWebhook from seq 1: %+v, %v", wh, err)
		}
		if wh, err := p.GetWebhook(ctx); err != nil || wh.Cursor != 1 || wh.Secret != "" {
			t.Errorf("GetWebhook: %+v, %v", wh, err)
		}
		if wh, err := p.ReplayWebhook(ctx, 0); err != nil || wh.Cursor != 0 {
			t.Errorf("ReplayWebhook: %+v, %v", wh, err)
		}
		if as, err := p.WebhookAttempts(ctx, "", 0); err != nil || as == nil {
			t.Errorf("WebhookAttempts: %+v, %v", as, err)
		}
		if err := p.DeleteWebhook(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.DeleteWebhook(ctx); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("second DeleteWebhook: %v, want ErrNotFound", err)
		}

		if err := p.DeleteConnection(ctx, conn.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Connection(ctx, conn.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("Connection after delete: %v, want ErrNotFound", err)
		}
		if _, err := p.Message(ctx, in.ID); err != nil {
			t.Errorf("messages stay readable after the connection is deleted: %v", err)
		}
	})
}

// TestTypedErrors: the gateway's error bodies become *client.Error values
// that errors.Is matches by code.
func TestTypedErrors(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	ctx := context.Background()
	p := newProject(t, g, "")

	// 402: a paid channel with the sandbox key; then the same call with
	// the signed-in key passes the tier (and meets the missing adapter).
	_, err := p.ConnectIMessage(ctx)
	if !errors.Is(err, client.ErrPaymentRequired) {
		t.Fatalf("ConnectIMessage with a sandbox key: %v, want ErrPaymentRequired", err)
	}
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusPaymentRequired || e.Code != "payment_required" ||
		!strings.Contains(e.Message, "sign") || !strings.HasPrefix(e.RequestID, "req_") {
		t.Errorf("402 error %#v", e)
	}
	if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("%v matches another code's sentinel", err)
	}
	signed, err := client.New(client.WithAPIKey(signedInKey(t, g, p.Sandbox.ProjectID)), client.WithBaseURL(g.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signed.ConnectIMessage(ctx); !errors.Is(err, client.ErrNotImplemented) {
		t.Errorf("ConnectIMessage signed in: %v, want ErrNotImplemented (the tier passed; no adapter yet)", err)
	}

	// 404.
	_, err = p.Message(ctx, "msg_01J00000000000000000000000")
	if !errors.As(err, &e) || !errors.Is(err, client.ErrNotFound) || e.Status != http.StatusNotFound {
		t.Errorf("unknown message: %v", err)
	}
	if _, err := p.Conversation(ctx, "conv_x/../../v1/project"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an id with slashes stays one path segment: %v", err)
	}

	// 400 with the parameter named.
	for _, tc := range []struct {
		call  func() error
		param string
	}{
		{func() error { _, err := p.Events(ctx, 0, 5000, ""); return err }, "limit"},
		{func() error { _, err := p.Events(ctx, -1, 0, ""); return err }, "after_seq"},
		{func() error { _, err := p.Events(ctx, 0, 0, "message.nonsense"); return err }, "type"},
		{func() error { _, err := p.Connect(ctx, client.ConnectRequest{Channel: "pigeon"}); return err }, "channel"},
		{func() error { _, err := p.Connections(ctx, "", 501); return err }, "limit"},
		{func() error { _, err := p.SetWebhook(ctx, "http://10.0.0.1/hook", "s"); return err }, "url"},
	} {
		err := tc.call()
		if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalid) || e.Status != http.StatusBadRequest || e.Param != tc.param {
			t.Errorf("want a 400 invalid_parameter naming %q, got %v", tc.param, err)
		}
	}

	// 401 with a bad key, on REST and in Listen.
	bad, err := client.New(client.WithAPIKey("comm_sandbox_nonsense"), client.WithBaseURL(g.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Project(ctx); !errors.Is(err, client.ErrUnauthenticated) || !errors.As(err, &e) || e.Status != 401 {
		t.Errorf("bad key: %v, want ErrUnauthenticated", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = bad.Listen(lctx, func(context.Context, *client.InboundMessage) error { return nil }, client.WithoutCursorStore())
	if !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("Listen with a bad key: %v, want ErrUnauthenticated at once", err)
	}

	// An error answer without the JSON body (a proxy's) still gets a code.
	px := newProxy(t, g.URL)
	px.set(nil, func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		return true
	})
	viaProxy, _ := client.New(client.WithAPIKey(p.Sandbox.APIKey), client.WithBaseURL(px.URL), client.WithRetries(0))
	if _, err := viaProxy.Project(ctx); !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &e) || e.Status != 502 {
		t.Errorf("a proxy's 502: %v, want ErrUnavailable", err)
	}
}

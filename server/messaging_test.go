package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/apikey"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// connection is a connection as the API shows it.
type connection = api.Connection

// message is a message as the API shows it.
type message = api.Message

// conversation is a conversation as the API shows it.
type conversation = api.Conversation

// typingState is the answer to POST /v1/messages/{id}/typing.
type typingState = api.TypingState

// The keys of the event payloads, sorted.
var (
	scopeKeys    = []string{"agent_id", "customer_id", "message"}
	receivedKeys = []string{"channel", "connection_id", "conversation_id", "html", "id", "sender", "subject", "text"}
	outboundKeys = sorted(append([]string{"attempts", "error", "in_reply_to", "recipient", "sent_at", "status"}, receivedKeys...))
)

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

const jsonCT = "application/json"

// post sends a JSON body.
func (g *gateway) post(t *testing.T, key, path, body string) response {
	t.Helper()
	return g.do(t, request{Method: http.MethodPost, Path: path, Key: key, ContentType: jsonCT, Body: body})
}

// get fetches path and decodes a 200 answer into v.
func (g *gateway) get(t *testing.T, key, path string, v any) {
	t.Helper()
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", path, resp.Status, resp.Body)
	}
	decodeJSON(t, resp.Body, v)
}

// connectTest makes a test connection.
func (g *gateway) connectTest(t *testing.T, key string) connection {
	t.Helper()
	resp := g.post(t, key, "/v1/connections", `{"channel":"test"}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect test: status %d, body %s", resp.Status, resp.Body)
	}
	var c connection
	decodeJSON(t, resp.Body, &c)
	return c
}

// inject delivers an inbound message and wants 201.
func (g *gateway) inject(t *testing.T, key, connID, body string) message {
	t.Helper()
	resp := g.post(t, key, "/v1/connections/"+connID+"/inbound", body)
	if resp.Status != http.StatusCreated {
		t.Fatalf("inject %s: status %d, body %s", body, resp.Status, resp.Body)
	}
	var m message
	decodeJSON(t, resp.Body, &m)
	return m
}

// queue posts an outbound message (a reply or a send) and wants 202.
func (g *gateway) queue(t *testing.T, key, path, body string) message {
	t.Helper()
	resp := g.post(t, key, path, body)
	if resp.Status != http.StatusAccepted {
		t.Fatalf("POST %s %s: status %d, body %s", path, body, resp.Status, resp.Body)
	}
	var m message
	decodeJSON(t, resp.Body, &m)
	if m.Direction != "outbound" || m.Status != "queued" || m.Attempts != 0 || m.SentAt != nil {
		t.Errorf("POST %s answered %+v, want a queued outbound message", path, m)
	}
	return m
}

func (g *gateway) message(t *testing.T, key, id string) message {
	t.Helper()
	var m message
	g.get(t, key, "/v1/messages/"+id, &m)
	return m
}

// waitMessage polls a message until done accepts it.
func (g *gateway) waitMessage(t *testing.T, key, id string, what string, done func(message) bool) message {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := g.message(t, key, id)
		if done(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s is not %s after 15s: %+v", id, what, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEvent long-polls the stream after seq until an event of type typ
// about message msgID arrives.
func (g *gateway) waitEvent(t *testing.T, key string, after int64, typ, msgID string) event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range g.events(t, key, fmt.Sprintf("after_seq=%d&type=%s&wait=5", after, typ)) {
			after = e.Seq
			if eventMessageID(t, e) == msgID {
				return e
			}
		}
	}
	t.Fatalf("no %s event for %s after 15s", typ, msgID)
	return event{}
}

func eventMessageID(t *testing.T, e event) string {
	t.Helper()
	var d struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %d: %v", e.Seq, err)
	}
	return d.Message.ID
}

// keys returns the sorted keys of a JSON object.
func keys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v", raw, err)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// messageEvent splits a message event's data, checking its keys: the
// scope and exactly want in the message.
func messageEvent(t *testing.T, e event, want []string) (scope map[string]json.RawMessage, msg map[string]any) {
	t.Helper()
	if got := keys(t, e.Data); !slices.Equal(got, scopeKeys) {
		t.Errorf("%s data keys %v, want %v", e.Type, got, scopeKeys)
	}
	json.Unmarshal(e.Data, &scope)
	if got := keys(t, scope["message"]); !slices.Equal(got, want) {
		t.Errorf("%s message keys %v, want exactly %v", e.Type, got, want)
	}
	json.Unmarshal(scope["message"], &msg)
	return scope, msg
}

// same reports whether a and b encode to the same JSON.
func same(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func str(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// countEvents counts a project's events of a type in the database.
func countEvents(t *testing.T, g *gateway, projectID, typ string) int64 {
	t.Helper()
	return count(t, g.DB, "SELECT COUNT(*) FROM events WHERE project_id = ? AND type = ?", projectID, typ)
}

// rows counts a project's rows of the tenant tables, and its events.
func rows(t *testing.T, g *gateway, projectID string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"connections", "conversations", "messages", "events"} {
		out[table] = count(t, g.DB, "SELECT COUNT(*) FROM "+table+" WHERE project_id = ?", projectID)
	}
	return out
}

// signedInKey gives a project a signed-in key, as the device flow will.
func signedInKey(t *testing.T, g *gateway, projectID string) string {
	t.Helper()
	key := apikey.New(apikey.SignedInPrefix)
	hash, err := apikey.Parse(key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenant.WithProject(context.Background(), projectID)
	_, err = g.Log.Write(ctx, projectID, func(tx *stream.Tx) error {
		return tx.Client().APIKey.Create().SetHash(hash[:]).SetKind(entapikey.KindSignedIn).
			SetDisplay(apikey.Display(key)).Exec(tx.Context())
	})
	if err != nil {
		t.Fatalf("signed-in key: %v", err)
	}
	return key
}

// TestMessagingLoop drives the whole loop through the HTTP server: connect,
// inbound, message.received, typing, reply, message.sent, the conversation.
func TestMessagingLoop(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "loop")
		key := sb.APIKey
		began := time.Now()

		// Connect.
		resp := g.post(t, key, "/v1/connections", `{"channel":"test","name":"front desk"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: status %d, body %s", resp.Status, resp.Body)
		}
		var conn connection
		decodeJSON(t, resp.Body, &conn)
		if err := ident.Check(conn.ID, ident.Connection); err != nil {
			t.Errorf("connection id %q: %v", conn.ID, err)
		}
		if conn.Channel != "test" || conn.Provider != nil || conn.Status != "active" ||
			conn.CustomerID != sb.CustomerID || conn.AgentID != sb.AgentID ||
			conn.Name == nil || *conn.Name != "front desk" {
			t.Errorf("connection %+v: want an active test connection in the project's default scope", conn)
		}
		if conn.CreatedAt.Location() != time.UTC || conn.CreatedAt.Before(began.Add(-time.Minute)) {
			t.Errorf("created_at %v is not a recent UTC time", conn.CreatedAt)
		}
		var got connection
		g.get(t, key, "/v1/connections/"+conn.ID, &got)
		if !same(got, conn) {
			t.Errorf("GET connection = %+v, want %+v", got, conn)
		}

		evs := g.events(t, key, "")
		if len(evs) != 1 || evs[0].Seq != 1 || evs[0].Type != stream.ConnectionActive {
			t.Fatalf("events after connecting: %+v, want one connection.active", evs)
		}
		if k := keys(t, evs[0].Data); !slices.Equal(k, []string{"agent_id", "connection", "customer_id"}) {
			t.Errorf("connection.active keys %v", k)
		}
		var active struct {
			CustomerID string     `json:"customer_id"`
			AgentID    string     `json:"agent_id"`
			Connection connection `json:"connection"`
		}
		decodeJSON(t, evs[0].Data, &active)
		if active.CustomerID != sb.CustomerID || active.AgentID != sb.AgentID || !same(active.Connection, conn) {
			t.Errorf("connection.active data %s, want the connection %+v", evs[0].Data, conn)
		}

		// Inbound.
		in := g.inject(t, key, conn.ID, `{"sender":"alice@example.com","text":"hello, agent","id":"prov-1"}`)
		if err := ident.Check(in.ID, ident.Message); err != nil {
			t.Errorf("message id %q: %v", in.ID, err)
		}
		if err := ident.Check(in.ConversationID, ident.Conversation); err != nil {
			t.Errorf("conversation id %q: %v", in.ConversationID, err)
		}
		if in.Direction != "inbound" || in.Status != "received" || in.Sender != "alice@example.com" ||
			in.Text != "hello, agent" || in.ConnectionID != conn.ID || in.Channel != "test" ||
			in.Subject != nil || in.HTML != nil || in.InReplyTo != nil || in.Error != nil {
			t.Errorf("inbound message %+v", in)
		}

		evs = g.events(t, key, "after_seq=1")
		if len(evs) != 1 || evs[0].Seq != 2 || evs[0].Type != stream.MessageReceived {
			t.Fatalf("events after inbound: %+v, want one message.received at seq 2", evs)
		}
		scope, msg := messageEvent(t, evs[0], receivedKeys)
		if str(scope["customer_id"]) != sb.CustomerID || str(scope["agent_id"]) != sb.AgentID {
			t.Errorf("message.received scope %s", evs[0].Data)
		}
		wantMsg := map[string]any{
			"id": in.ID, "conversation_id": in.ConversationID, "connection_id": conn.ID, "channel": "test",
			"sender": "alice@example.com", "subject": nil, "text": "hello, agent", "html": nil,
		}
		if fmt.Sprint(msg) != fmt.Sprint(wantMsg) {
			t.Errorf("message.received message %v, want %v", msg, wantMsg)
		}

		// Typing.
		resp = g.do(t, request{Method: http.MethodPost, Path: "/v1/messages/" + in.ID + "/typing", Key: key})
		if resp.Status != http.StatusOK {
			t.Fatalf("typing: status %d, body %s", resp.Status, resp.Body)
		}
		var ts typingState
		decodeJSON(t, resp.Body, &ts)
		if ts.ConversationID != in.ConversationID || time.Until(ts.TypingUntil) < 2*time.Second || time.Until(ts.TypingUntil) > time.Minute {
			t.Errorf("typing answered %+v", ts)
		}
		var conv conversation
		g.get(t, key, "/v1/conversations/"+in.ConversationID, &conv)
		if !conv.Typing || conv.TypingUntil == nil || !conv.TypingUntil.Equal(ts.TypingUntil) {
			t.Errorf("conversation after typing: %+v, want typing until %v", conv, ts.TypingUntil)
		}

		// Reply.
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"hello, alice"}`)
		if out.ConversationID != in.ConversationID || out.ConnectionID != conn.ID || out.Recipient == nil ||
			*out.Recipient != "alice@example.com" || out.InReplyTo == nil || *out.InReplyTo != in.ID || out.Text != "hello, alice" {
			t.Errorf("reply %+v", out)
		}
		sent := g.waitEvent(t, key, 2, stream.MessageSent, out.ID)
		scope, msg = messageEvent(t, sent, outboundKeys)
		if str(scope["customer_id"]) != sb.CustomerID || str(scope["agent_id"]) != sb.AgentID {
			t.Errorf("message.sent scope %s", sent.Data)
		}
		if msg["status"] != "sent" || msg["attempts"] != float64(1) || msg["error"] != nil || msg["sent_at"] == nil ||
			msg["recipient"] != "alice@example.com" || msg["in_reply_to"] != in.ID || msg["text"] != "hello, alice" ||
			msg["conversation_id"] != in.ConversationID || msg["connection_id"] != conn.ID || msg["channel"] != "test" {
			t.Errorf("message.sent message %v", msg)
		}
		m := g.message(t, key, out.ID)
		if m.Status != "sent" || m.SentAt == nil || m.Attempts != 1 || m.Error != nil {
			t.Errorf("reply after delivery: %+v", m)
		}

		// The conversation: typing ended, both messages oldest first.
		g.get(t, key, "/v1/conversations/"+in.ConversationID, &conv)
		if conv.Typing || conv.TypingUntil != nil || conv.ConnectionID != conn.ID || conv.Participant != "alice@example.com" {
			t.Errorf("conversation after the reply: %+v, want typing false", conv)
		}
		var ms []message
		g.get(t, key, "/v1/conversations/"+in.ConversationID+"/messages", &ms)
		if len(ms) != 2 || ms[0].ID != in.ID || ms[1].ID != out.ID {
			t.Fatalf("conversation messages %+v, want the inbound then the reply", ms)
		}
		if ms[1].Status != "sent" || ms[0].Direction != "inbound" || ms[1].Direction != "outbound" {
			t.Errorf("conversation messages %+v", ms)
		}
		var convs []conversation
		g.get(t, key, "/v1/conversations", &convs)
		if len(convs) != 1 || convs[0].ID != in.ConversationID {
			t.Errorf("conversations %+v", convs)
		}
		g.get(t, key, "/v1/conversations?connection_id="+conn.ID, &convs)
		if len(convs) != 1 || convs[0].ID != in.ConversationID {
			t.Errorf("conversations of %s: %+v", conn.ID, convs)
		}
		var conns []connection
		g.get(t, key, "/v1/connections", &conns)
		if len(conns) != 1 || !same(conns[0], conn) {
			t.Errorf("connections %+v", conns)
		}
		// The whole stream: connection.active, message.received, message.sent.
		evs = g.events(t, key, "")
		if len(evs) != 3 || evs[2].Type != stream.MessageSent {
			t.Errorf("stream %+v", evs)
		}
	})
}

// TestDeleteConnection: a deleted connection is gone from reads, takes no
// inbound, and its messages can no longer be answered; its conversations
// stay readable.
func TestDeleteConnection(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		key := g.newSandbox(t, "delete").APIKey
		conn := g.connectTest(t, key)
		keep := g.connectTest(t, key)
		in := g.inject(t, key, conn.ID, `{"sender":"bob","text":"hi"}`)

		resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + conn.ID, Key: key})
		if resp.Status != http.StatusNoContent || len(resp.Body) != 0 {
			t.Fatalf("delete: status %d, body %q", resp.Status, resp.Body)
		}
		wantError(t, g.do(t, request{Path: "/v1/connections/" + conn.ID, Key: key}), 404, "not_found", "")
		wantError(t, g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + conn.ID, Key: key}), 404, "not_found", "")
		var conns []connection
		g.get(t, key, "/v1/connections", &conns)
		if len(conns) != 1 || conns[0].ID != keep.ID {
			t.Errorf("connections after delete: %+v, want only %s", conns, keep.ID)
		}
		wantError(t, g.post(t, key, "/v1/connections/"+conn.ID+"/inbound", `{"sender":"bob","text":"again"}`), 404, "not_found", "")
		wantError(t, g.post(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"too late"}`), 409, "conflict", "")
		wantError(t, g.do(t, request{Method: http.MethodPost, Path: "/v1/messages/" + in.ID + "/typing", Key: key}), 409, "conflict", "")
		resp = g.post(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"bob","text":"x"}`, conn.ID))
		if resp.Status != 400 && resp.Status != 404 {
			t.Errorf("send through a deleted connection: status %d, body %s", resp.Status, resp.Body)
		}

		var ms []message
		g.get(t, key, "/v1/conversations/"+in.ConversationID+"/messages", &ms)
		if len(ms) != 1 || ms[0].ID != in.ID {
			t.Errorf("messages of a deleted connection's conversation: %+v", ms)
		}
		if m := g.message(t, key, in.ID); m.ID != in.ID {
			t.Errorf("message %+v", m)
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM messages WHERE connection_id = ?", conn.ID); n != 1 {
			t.Errorf("%d messages of the deleted connection, want 1", n)
		}
	})
}

// TestConnectTiers: paid channels need a signed-in key (402 before
// anything else), paid channels without an adapter answer 501, free
// channels name the config they miss, unknown
// channels and providers 400; refused requests store nothing.
func TestConnectTiers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "tiers")
		signed := signedInKey(t, g, sb.ProjectID)
		before := rows(t, g, sb.ProjectID)

		paid := []string{
			`{"channel":"x"}`,
			`{"channel":"imessage"}`,
			`{"channel":"whatsapp","provider":"hosted"}`,
			`{"channel":"x","customer_id":"not-an-id"}`,
			`{"channel":"imessage","config":{"anything":true}}`,
		}
		// Every free channel has its adapter: a sandbox key passes the
		// tier and the adapter names the missing config.
		free := []struct{ body, param string }{
			{`{"channel":"sms","provider":"twilio"}`, "config.account_sid"},
			{`{"channel":"whatsapp","provider":"twilio"}`, "config.account_sid"},
			{`{"channel":"sms","provider":"telnyx"}`, "config.api_key"},
			{`{"channel":"facebook"}`, "config.page_access_token"},
			{`{"channel":"instagram"}`, "config.page_access_token"},
		}
		for _, c := range free {
			t.Run("sandbox "+c.body, func(t *testing.T) {
				t.Parallel()
				wantError(t, g.post(t, sb.APIKey, "/v1/connections", c.body), http.StatusBadRequest, "invalid_parameter", c.param)
			})
		}
		for _, body := range paid {
			t.Run("sandbox "+body, func(t *testing.T) {
				t.Parallel()
				e := wantError(t, g.post(t, sb.APIKey, "/v1/connections", body), http.StatusPaymentRequired, "payment_required", "")
				if !strings.Contains(e.Error.Message, "comm login") || !strings.Contains(e.Error.Message, "sign") {
					t.Errorf("402 message %q does not tell the caller to sign in with `comm login`", e.Error.Message)
				}
			})
			// With the signed-in key the tier passes; there is no adapter yet.
			if !strings.Contains(body, "customer_id") && !strings.Contains(body, "config") {
				t.Run("signed in "+body, func(t *testing.T) {
					t.Parallel()
					wantError(t, g.post(t, signed, "/v1/connections", body), http.StatusNotImplemented, "not_implemented", "")
				})
			}
		}
		invalid := []struct{ name, body, param, mention string }{
			{"unknown channel", `{"channel":"pigeon"}`, "channel", "telegram"},
			{"unknown channel lists test", `{"channel":"carrier-pigeon"}`, "channel", "test"},
			{"channel in the wrong case", `{"channel":"Test"}`, "channel", ""},
			{"missing channel", `{}`, "channel", "email"},
			{"empty channel", `{"channel":""}`, "channel", ""},
			{"sms without provider", `{"channel":"sms"}`, "provider", "twilio"},
			{"whatsapp without provider", `{"channel":"whatsapp"}`, "provider", "hosted"},
			{"unknown sms provider", `{"channel":"sms","provider":"vonage"}`, "provider", "telnyx"},
			{"provider on a channel without providers", `{"channel":"test","provider":"twilio"}`, "provider", ""},
			{"customer_id malformed", `{"channel":"test","customer_id":"cus_nope"}`, "customer_id", ""},
			{"customer_id of the wrong kind", fmt.Sprintf(`{"channel":"test","customer_id":%q}`, sb.AgentID), "customer_id", ""},
			{"agent_id malformed", `{"channel":"test","agent_id":"garbage"}`, "agent_id", ""},
			{"agent_id of the wrong kind", fmt.Sprintf(`{"channel":"test","agent_id":%q}`, sb.CustomerID), "agent_id", ""},
			{"name too long", `{"channel":"test","name":"` + strings.Repeat("n", 201) + `"}`, "name", ""},
			{"name with a control character", `{"channel":"test","name":"a\u0007b"}`, "name", ""},
			{"config on the test channel", `{"channel":"test","config":{"token":"x"}}`, "config", ""},
		}
		for _, c := range invalid {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				e := wantError(t, g.post(t, sb.APIKey, "/v1/connections", c.body), http.StatusBadRequest, "invalid_parameter", c.param)
				if c.mention != "" && !strings.Contains(e.Error.Message, c.mention) {
					t.Errorf("message %q does not mention %q", e.Error.Message, c.mention)
				}
			})
		}
		t.Cleanup(func() {
			// After the parallel cases: nothing was stored, no event appended.
			if after := rows(t, g, sb.ProjectID); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("refused connects changed the project: %v, had %v", after, before)
			}
			// An explicit scope is kept; empty config values are accepted.
			cus, agt := ident.New(ident.Customer), ident.New(ident.Agent)
			resp := g.post(t, sb.APIKey, "/v1/connections",
				fmt.Sprintf(`{"channel":"test","customer_id":%q,"agent_id":%q,"config":{}}`, cus, agt))
			if resp.Status != http.StatusCreated {
				t.Fatalf("connect with a scope: status %d, body %s", resp.Status, resp.Body)
			}
			var c connection
			decodeJSON(t, resp.Body, &c)
			if c.CustomerID != cus || c.AgentID != agt {
				t.Errorf("connection scope %s/%s, want %s/%s", c.CustomerID, c.AgentID, cus, agt)
			}
		})
	})
}

// TestReplySurvivesRestart: a reply queued by a gateway that stops before
// delivering is sent exactly once by the next gateway on the same database.
func TestReplySurvivesRestart(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		sb := g.newSandbox(t, "restart")
		conn := g.connectTest(t, sb.APIKey)
		in := g.inject(t, sb.APIKey, conn.ID, `{"sender":"carol","text":"are you there?"}`)
		out := g.queue(t, sb.APIKey, "/v1/messages/"+in.ID+"/reply", `{"text":"yes"}`)
		time.Sleep(100 * time.Millisecond) // nothing delivers it
		if m := g.message(t, sb.APIKey, out.ID); m.Status != "queued" || m.Attempts != 0 {
			t.Fatalf("without a worker the reply is %s after %d attempts", m.Status, m.Attempts)
		}
		head := g.project(t, sb.APIKey).LastSeq
		g.Stop()

		g = start(t, cfg, server.Options{})
		sent := g.waitEvent(t, sb.APIKey, head, stream.MessageSent, out.ID)
		_, msg := messageEvent(t, sent, outboundKeys)
		if msg["attempts"] != float64(1) || msg["status"] != "sent" {
			t.Errorf("message.sent after restart: %v", msg)
		}
		m := g.message(t, sb.APIKey, out.ID)
		if m.Status != "sent" || m.Attempts != 1 || m.SentAt == nil || m.Error != nil {
			t.Errorf("reply after restart: %+v", m)
		}
		// Give a second delivery the chance to happen, then count.
		time.Sleep(300 * time.Millisecond)
		n := 0
		for _, e := range g.events(t, sb.APIKey, "type=message.sent") {
			if eventMessageID(t, e) == out.ID {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d message.sent events for %s, want 1", n, out.ID)
		}
		if m := g.message(t, sb.APIKey, out.ID); m.Attempts != 1 {
			t.Errorf("attempts %d after delivery, want 1", m.Attempts)
		}
	})
}

// TestInboundIdempotent: a repeated provider id stores one message and
// appends one message.received, also when the repeats race.
func TestInboundIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "idempotent")
		key := sb.APIKey
		conn := g.connectTest(t, key)

		first := g.inject(t, key, conn.ID, `{"sender":"dave","text":"once","id":"dup-1"}`)
		for _, body := range []string{
			`{"sender":"dave","text":"once","id":"dup-1"}`,
			`{"sender":"dave","text":"changed on retry","id":"dup-1"}`,
		} {
			resp := g.post(t, key, "/v1/connections/"+conn.ID+"/inbound", body)
			if resp.Status != http.StatusOK {
				t.Fatalf("repeat: status %d, body %s", resp.Status, resp.Body)
			}
			var m message
			decodeJSON(t, resp.Body, &m)
			if m.ID != first.ID || m.Text != "once" {
				t.Errorf("repeat answered %+v, want the stored %s", m, first.ID)
			}
		}

		// Ten racing deliveries of a new id.
		const racers = 10
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[int]int{}
			ids      = map[string]bool{}
		)
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := g.post(t, key, "/v1/connections/"+conn.ID+"/inbound", `{"sender":"erin","text":"race","id":"dup-2"}`)
				var m message
				if err := json.Unmarshal(resp.Body, &m); err != nil {
					t.Errorf("status %d, body %s", resp.Status, resp.Body)
				}
				mu.Lock()
				statuses[resp.Status]++
				ids[m.ID] = true
				mu.Unlock()
			}()
		}
		wg.Wait()
		if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != racers-1 || len(ids) != 1 {
			t.Errorf("racing repeats: statuses %v, message ids %v; want one 201, %d 200, one id", statuses, ids, racers-1)
		}

		// The same provider id on another connection is another message.
		other := g.connectTest(t, key)
		g.inject(t, key, other.ID, `{"sender":"dave","text":"once","id":"dup-1"}`)

		for _, c := range []struct {
			conn, id string
		}{{conn.ID, "dup-1"}, {conn.ID, "dup-2"}, {other.ID, "dup-1"}} {
			if n := count(t, g.DB, "SELECT COUNT(*) FROM messages WHERE connection_id = ? AND provider_message_id = ?", c.conn, c.id); n != 1 {
				t.Errorf("%d messages of %s with provider id %s, want 1", n, c.conn, c.id)
			}
		}
		if n := countEvents(t, g, sb.ProjectID, stream.MessageReceived); n != 3 {
			t.Errorf("%d message.received events, want 3", n)
		}
		if n := len(g.events(t, key, "type=message.received")); n != 3 {
			t.Errorf("the stream shows %d message.received, want 3", n)
		}
		var convs []conversation
		g.get(t, key, "/v1/conversations?connection_id="+conn.ID, &convs)
		if len(convs) != 2 {
			t.Errorf("%d conversations on %s, want 2 (dave, erin)", len(convs), conn.ID)
		}
	})
}

// TestInboundOnlyOnTest: injection is refused on a connection of a real
// channel, and stores nothing.
func TestInboundOnlyOnTest(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "real channel")
		// No adapter of a real channel exists yet: store the row directly,
		// as one would.
		id := ident.New(ident.Connection)
		ctx := tenant.WithProject(context.Background(), sb.ProjectID)
		_, err := g.Log.Write(ctx, sb.ProjectID, func(tx *stream.Tx) error {
			return tx.Client().Connection.Create().SetID(id).SetChannel("email").SetStatus("active").
				SetCustomerID(sb.CustomerID).SetAgentID(sb.AgentID).Exec(tx.Context())
		})
		if err != nil {
			t.Fatal(err)
		}
		before := rows(t, g, sb.ProjectID)
		resp := g.post(t, sb.APIKey, "/v1/connections/"+id+"/inbound", `{"sender":"ivan","text":"spoof"}`)
		e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "")
		if !strings.Contains(e.Error.Message, "test") {
			t.Errorf("message %q does not say injection is for test connections", e.Error.Message)
		}
		if after := rows(t, g, sb.ProjectID); !same(after, before) {
			t.Errorf("a refused injection changed the project: %v, had %v", after, before)
		}
	})
}

// TestCrossProject: project B's key on project A's ids answers exactly as
// for unknown ids, changes nothing of A, and B's lists show none of A's.
func TestCrossProject(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		a := g.newSandbox(t, "A")
		b := g.newSandbox(t, "B")
		connA := g.connectTest(t, a.APIKey)
		inA := g.inject(t, a.APIKey, connA.ID, `{"sender":"frank","text":"private"}`)
		outA := g.queue(t, a.APIKey, "/v1/messages/"+inA.ID+"/reply", `{"text":"private reply"}`)
		g.waitMessage(t, a.APIKey, outA.ID, "sent", func(m message) bool { return m.Status == "sent" })
		connB := g.connectTest(t, b.APIKey)
		g.inject(t, b.APIKey, connB.ID, `{"sender":"grace","text":"mine"}`)

		beforeA := rows(t, g, a.ProjectID)
		streamA := g.events(t, a.APIKey, "")
		var msgsA []message
		g.get(t, a.APIKey, "/v1/conversations/"+inA.ConversationID+"/messages", &msgsA)

		cases := []struct {
			name, method, path, body string
		}{
			{"get connection", "GET", "/v1/connections/" + connA.ID, ""},
			{"delete connection", "DELETE", "/v1/connections/" + connA.ID, ""},
			{"inbound", "POST", "/v1/connections/" + connA.ID + "/inbound", `{"sender":"mallory","text":"spoof"}`},
			{"get conversation", "GET", "/v1/conversations/" + inA.ConversationID, ""},
			{"conversation messages", "GET", "/v1/conversations/" + inA.ConversationID + "/messages", ""},
			{"get inbound message", "GET", "/v1/messages/" + inA.ID, ""},
			{"get outbound message", "GET", "/v1/messages/" + outA.ID, ""},
			{"reply", "POST", "/v1/messages/" + inA.ID + "/reply", `{"text":"hijack"}`},
			{"reply to the reply", "POST", "/v1/messages/" + outA.ID + "/reply", `{"text":"hijack"}`},
			{"typing", "POST", "/v1/messages/" + inA.ID + "/typing", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				req := request{Method: c.method, Path: c.path, Key: b.APIKey, Body: c.body}
				if c.body != "" {
					req.ContentType = jsonCT
				}
				e := wantError(t, g.do(t, req), http.StatusNotFound, "not_found", "")
				// The answer for a well-formed unknown id is the same.
				var theirs, unknown string
				for _, id := range []string{connA.ID, inA.ConversationID, inA.ID, outA.ID} {
					if strings.Contains(c.path, id) {
						prefix, _, _ := strings.Cut(id, "_")
						theirs, unknown = id, ident.New(prefix)
						req.Path = strings.Replace(c.path, id, unknown, 1)
					}
				}
				u := wantError(t, g.do(t, req), http.StatusNotFound, "not_found", "")
				if strings.ReplaceAll(e.Error.Message, theirs, "ID") != strings.ReplaceAll(u.Error.Message, unknown, "ID") {
					t.Errorf("another project's id answers %q, an unknown id %q", e.Error.Message, u.Error.Message)
				}
			})
		}
		t.Run("send through A's connection", func(t *testing.T) {
			t.Parallel()
			resp := g.post(t, b.APIKey, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"frank","text":"hijack"}`, connA.ID))
			if resp.Status != http.StatusBadRequest && resp.Status != http.StatusNotFound {
				t.Fatalf("status %d, body %s", resp.Status, resp.Body)
			}
			var e apiError
			decodeJSON(t, resp.Body, &e)
			if e.Error.Param != "connection_id" && !strings.Contains(e.Error.Message, "connection_id") {
				t.Errorf("error %s does not name connection_id", resp.Body)
			}
		})
		t.Run("lists", func(t *testing.T) {
			t.Parallel()
			var conns []connection
			g.get(t, b.APIKey, "/v1/connections", &conns)
			if len(conns) != 1 || conns[0].ID != connB.ID {
				t.Errorf("B lists connections %+v", conns)
			}
			var convs []conversation
			g.get(t, b.APIKey, "/v1/conversations", &convs)
			if len(convs) != 1 || convs[0].ConnectionID != connB.ID {
				t.Errorf("B lists conversations %+v", convs)
			}
			g.get(t, b.APIKey, "/v1/conversations?connection_id="+connA.ID, &convs)
			if len(convs) != 0 {
				t.Errorf("B lists A's conversations: %+v", convs)
			}
			// Paging from A's ids shows nothing of A either.
			for _, q := range []string{"after=" + inA.ConversationID, "after=" + ident.Conversation + "_" + strings.Repeat("0", 26)} {
				g.get(t, b.APIKey, "/v1/conversations?"+q, &convs)
				if len(convs) != 1 || convs[0].ConnectionID != connB.ID {
					t.Errorf("B pages %s: %+v", q, convs)
				}
			}
			g.get(t, b.APIKey, "/v1/connections?after="+connA.ID, &conns)
			if len(conns) != 1 || conns[0].ID != connB.ID {
				t.Errorf("B pages connections after A's: %+v", conns)
			}
			for _, ev := range g.events(t, b.APIKey, "") {
				if strings.Contains(string(ev.Data), a.CustomerID) || strings.Contains(string(ev.Data), connA.ID) {
					t.Errorf("B's stream holds A's event %s", ev.Data)
				}
			}
		})
		t.Cleanup(func() {
			// After the parallel cases: A is as it was.
			if after := rows(t, g, a.ProjectID); fmt.Sprint(after) != fmt.Sprint(beforeA) {
				t.Errorf("B's calls changed A's rows: %v, had %v", after, beforeA)
			}
			if got := g.events(t, a.APIKey, ""); len(got) != len(streamA) {
				t.Errorf("A's stream has %d events, had %d", len(got), len(streamA))
			}
			var msgs []message
			g.get(t, a.APIKey, "/v1/conversations/"+inA.ConversationID+"/messages", &msgs)
			if !same(msgs, msgsA) {
				t.Errorf("A's messages changed: %+v, had %+v", msgs, msgsA)
			}
			var conv conversation
			g.get(t, a.APIKey, "/v1/conversations/"+inA.ConversationID, &conv)
			if conv.Typing {
				t.Errorf("B's typing call shows in A's conversation: %+v", conv)
			}
			var c connection
			g.get(t, a.APIKey, "/v1/connections/"+connA.ID, &c)
			if !same(c, connA) {
				t.Errorf("A's connection changed: %+v, had %+v", c, connA)
			}
		})
	})
}

// TestMessagingBadInput: malformed ids answer 404, bad bodies and paging
// parameters 400 naming the parameter, bodies that are not JSON 415; none
// of them changes anything.
func TestMessagingBadInput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "bad input")
		key := sb.APIKey
		conn := g.connectTest(t, key)
		in := g.inject(t, key, conn.ID, `{"sender":"heidi","text":"hi"}`)
		before := rows(t, g, sb.ProjectID)

		// Malformed and unknown ids.
		unknown := map[string]string{
			ident.Connection: ident.New(ident.Connection), ident.Conversation: ident.New(ident.Conversation),
			ident.Message: ident.New(ident.Message),
		}
		badIDs := func(prefix, good string) []string {
			wrong := ident.Message
			if prefix == ident.Message {
				wrong = ident.Connection
			}
			_, body, _ := strings.Cut(good, "_")
			return []string{
				wrong + "_" + body,                   // another kind's prefix
				"garbage",                            // no prefix
				prefix + "_",                         // no body
				prefix + "_" + body[:25],             // short
				prefix + "_" + body + "0",            // long
				prefix + "_" + strings.ToUpper(body), // wrong case
				prefix + "_" + strings.Repeat("u", 26),
				prefix + "_" + strings.Repeat("z", 26), // overflows a ULID
				strings.ToUpper(prefix) + "_" + body,
				"' OR 1=1 --",
				unknown[prefix], // well-formed, unknown
			}
		}
		idRoutes := []struct {
			method, path, prefix, good, body string
		}{
			{"GET", "/v1/connections/%s", ident.Connection, conn.ID, ""},
			{"DELETE", "/v1/connections/%s", ident.Connection, conn.ID, ""},
			{"POST", "/v1/connections/%s/inbound", ident.Connection, conn.ID, `{"sender":"x","text":"y"}`},
			{"GET", "/v1/conversations/%s", ident.Conversation, in.ConversationID, ""},
			{"GET", "/v1/conversations/%s/messages", ident.Conversation, in.ConversationID, ""},
			{"GET", "/v1/messages/%s", ident.Message, in.ID, ""},
			{"POST", "/v1/messages/%s/reply", ident.Message, in.ID, `{"text":"y"}`},
			{"POST", "/v1/messages/%s/typing", ident.Message, in.ID, ""},
		}
		for _, r := range idRoutes {
			t.Run(r.method+" "+r.path, func(t *testing.T) {
				t.Parallel()
				for _, id := range badIDs(r.prefix, r.good) {
					req := request{Method: r.method, Path: fmt.Sprintf(r.path, strings.ReplaceAll(id, " ", "%20")), Key: key, Body: r.body}
					if r.body != "" {
						req.ContentType = jsonCT
					}
					resp := g.do(t, req)
					if resp.Status != http.StatusNotFound {
						t.Errorf("%s %s: status %d, want 404; body %s", req.Method, req.Path, resp.Status, resp.Body)
						continue
					}
					var e apiError
					decodeJSON(t, resp.Body, &e)
					if e.Error.Code != "not_found" && e.Error.Code != "route_not_found" {
						t.Errorf("%s %s: code %q", req.Method, req.Path, e.Error.Code)
					}
				}
			})
		}

		long := strings.Repeat("a", 64<<10+1)
		bodies := []struct {
			name, path, contentType, body string
			status                        int
			code, param                   string
		}{
			// POST /v1/connections
			{"connect: malformed JSON", "/v1/connections", jsonCT, `{"channel":`, 400, "malformed_json", ""},
			{"connect: array", "/v1/connections", jsonCT, `["test"]`, 400, "malformed_json", ""},
			{"connect: trailing data", "/v1/connections", jsonCT, `{"channel":"test"}{}`, 400, "malformed_json", ""},
			{"connect: unknown field", "/v1/connections", jsonCT, `{"channel":"test","colour":"red"}`, 400, "invalid_parameter", "colour"},
			{"connect: channel a number", "/v1/connections", jsonCT, `{"channel":5}`, 400, "invalid_parameter", "channel"},
			{"connect: name an object", "/v1/connections", jsonCT, `{"channel":"test","name":{}}`, 400, "invalid_parameter", "name"},
			{"connect: text/plain", "/v1/connections", "text/plain", `{"channel":"test"}`, 415, "unsupported_media_type", ""},
			{"connect: no content type", "/v1/connections", "", `{"channel":"test"}`, 415, "unsupported_media_type", ""},
			// POST /v1/connections/{id}/inbound
			{"inbound: malformed JSON", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x",`, 400, "malformed_json", ""},
			{"inbound: empty body", "/v1/connections/" + conn.ID + "/inbound", jsonCT, ``, 400, "malformed_json", ""},
			{"inbound: trailing data", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x","text":"y"} {}`, 400, "malformed_json", ""},
			{"inbound: array", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `[{"sender":"x","text":"y"}]`, 400, "malformed_json", ""},
			{"inbound: unknown field", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x","text":"y","colour":"red"}`, 400, "invalid_parameter", "colour"},
			{"inbound: sender a number", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":5,"text":"y"}`, 400, "invalid_parameter", "sender"},
			{"inbound: text an array", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x","text":["y"]}`, 400, "invalid_parameter", "text"},
			{"inbound: missing sender", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"text":"y"}`, 400, "invalid_parameter", "sender"},
			{"inbound: blank sender", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"  ","text":"y"}`, 400, "invalid_parameter", "sender"},
			{"inbound: sender too long", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"` + strings.Repeat("s", 321) + `","text":"y"}`, 400, "invalid_parameter", "sender"},
			{"inbound: missing text", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x"}`, 400, "invalid_parameter", "text"},
			{"inbound: text too long", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x","text":"` + long + `"}`, 400, "invalid_parameter", "text"},
			{"inbound: id too long", "/v1/connections/" + conn.ID + "/inbound", jsonCT, `{"sender":"x","text":"y","id":"` + strings.Repeat("i", 201) + `"}`, 400, "invalid_parameter", "id"},
			{"inbound: text/plain", "/v1/connections/" + conn.ID + "/inbound", "text/plain", `{"sender":"x","text":"y"}`, 415, "unsupported_media_type", ""},
			{"inbound: no content type", "/v1/connections/" + conn.ID + "/inbound", "", `{"sender":"x","text":"y"}`, 415, "unsupported_media_type", ""},
			// POST /v1/messages/{id}/reply
			{"reply: malformed JSON", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":`, 400, "malformed_json", ""},
			{"reply: unknown field", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":"y","to":"someone-else"}`, 400, "invalid_parameter", "to"},
			{"reply: text a number", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":1}`, 400, "invalid_parameter", "text"},
			{"reply: missing text", "/v1/messages/" + in.ID + "/reply", jsonCT, `{}`, 400, "invalid_parameter", "text"},
			{"reply: empty text", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":""}`, 400, "invalid_parameter", "text"},
			{"reply: text too long", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":"` + long + `"}`, 400, "invalid_parameter", "text"},
			{"reply: html too long", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":"y","html":"` + long + `"}`, 400, "invalid_parameter", "html"},
			{"reply: subject of two lines", "/v1/messages/" + in.ID + "/reply", jsonCT, `{"text":"y","subject":"a\nb"}`, 400, "invalid_parameter", "subject"},
			{"reply: text/plain", "/v1/messages/" + in.ID + "/reply", "text/plain", `{"text":"y"}`, 415, "unsupported_media_type", ""},
			// POST /v1/messages
			{"send: malformed JSON", "/v1/messages", jsonCT, `{`, 400, "malformed_json", ""},
			{"send: unknown field", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"x","text":"y","cc":"z"}`, conn.ID), 400, "invalid_parameter", "cc"},
			{"send: missing connection_id", "/v1/messages", jsonCT, `{"to":"x","text":"y"}`, 400, "invalid_parameter", "connection_id"},
			{"send: malformed connection_id", "/v1/messages", jsonCT, `{"connection_id":"conn_1","to":"x","text":"y"}`, 400, "invalid_parameter", "connection_id"},
			{"send: unknown connection_id", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"x","text":"y"}`, ident.New(ident.Connection)), 400, "invalid_parameter", "connection_id"},
			{"send: connection_id a number", "/v1/messages", jsonCT, `{"connection_id":1,"to":"x","text":"y"}`, 400, "invalid_parameter", "connection_id"},
			{"send: missing to", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"text":"y"}`, conn.ID), 400, "invalid_parameter", "to"},
			{"send: to too long", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"y"}`, conn.ID, strings.Repeat("t", 321)), 400, "invalid_parameter", "to"},
			{"send: to with a newline", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"a\nb","text":"y"}`, conn.ID), 400, "invalid_parameter", "to"},
			{"send: missing text", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"x"}`, conn.ID), 400, "invalid_parameter", "text"},
			{"send: text too long", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"x","text":%q}`, conn.ID, long), 400, "invalid_parameter", "text"},
			{"send: text a boolean", "/v1/messages", jsonCT, fmt.Sprintf(`{"connection_id":%q,"to":"x","text":true}`, conn.ID), 400, "invalid_parameter", "text"},
			{"send: form", "/v1/messages", "application/x-www-form-urlencoded", `to=x&text=y`, 415, "unsupported_media_type", ""},
			// POST /v1/messages/{id}/typing
			{"typing: unknown field", "/v1/messages/" + in.ID + "/typing", jsonCT, `{"seconds":5}`, 400, "invalid_parameter", "seconds"},
			{"typing: malformed JSON", "/v1/messages/" + in.ID + "/typing", jsonCT, `{`, 400, "malformed_json", ""},
			{"typing: text/plain", "/v1/messages/" + in.ID + "/typing", "text/plain", `hello`, 415, "unsupported_media_type", ""},
		}
		for _, c := range bodies {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Method: http.MethodPost, Path: c.path, Key: key, ContentType: c.contentType, Body: c.body})
				wantError(t, resp, c.status, c.code, c.param)
			})
		}

		queries := []struct {
			path, param string
		}{
			{"/v1/connections?limit=0", "limit"},
			{"/v1/connections?limit=501", "limit"},
			{"/v1/connections?limit=abc", "limit"},
			{"/v1/connections?limit=-1", "limit"},
			{"/v1/connections?limit=1.5", "limit"},
			{"/v1/connections?limit=1&limit=2", "limit"},
			{"/v1/connections?after=" + in.ID, "after"},
			{"/v1/connections?after=garbage", "after"},
			{"/v1/connections?cursor=x", "cursor"},
			{"/v1/conversations?limit=0", "limit"},
			{"/v1/conversations?limit=501", "limit"},
			{"/v1/conversations?limit=abc", "limit"},
			{"/v1/conversations?after=" + conn.ID, "after"},
			{"/v1/conversations?connection_id=garbage", "connection_id"},
			{"/v1/conversations?connection_id=" + in.ConversationID, "connection_id"},
			{"/v1/conversations?sort=desc", "sort"},
			{"/v1/conversations/" + in.ConversationID + "/messages?limit=0", "limit"},
			{"/v1/conversations/" + in.ConversationID + "/messages?limit=501", "limit"},
			{"/v1/conversations/" + in.ConversationID + "/messages?limit=abc", "limit"},
			{"/v1/conversations/" + in.ConversationID + "/messages?after=" + in.ConversationID, "after"},
			{"/v1/conversations/" + in.ConversationID + "/messages?after=msg_x", "after"},
			{"/v1/conversations/" + in.ConversationID + "/messages?page=2", "page"},
		}
		for _, c := range queries {
			t.Run("GET "+c.path, func(t *testing.T) {
				t.Parallel()
				wantError(t, g.do(t, request{Path: c.path, Key: key}), http.StatusBadRequest, "invalid_parameter", c.param)
			})
		}

		t.Cleanup(func() {
			// After the parallel cases: nothing was stored or appended.
			if after := rows(t, g, sb.ProjectID); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("refused requests changed the project: %v, had %v", after, before)
			}
			var conv conversation
			g.get(t, key, "/v1/conversations/"+in.ConversationID, &conv)
			if conv.Typing {
				t.Errorf("a refused typing call shows: %+v", conv)
			}
		})
	})
}

// TestPaging pages the list endpoints with after and limit.
func TestPaging(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		key := g.newSandbox(t, "paging").APIKey
		var conns []string
		for range 3 {
			conns = append(conns, g.connectTest(t, key).ID)
		}
		var msgs []string
		for i := range 5 {
			msgs = append(msgs, g.inject(t, key, conns[0], fmt.Sprintf(`{"sender":"s%d","text":"m"}`, i%2)).ID)
		}
		var convIDs []string
		var convs []conversation
		g.get(t, key, "/v1/conversations", &convs)
		for _, c := range convs {
			convIDs = append(convIDs, c.ID)
		}
		if len(convIDs) != 2 {
			t.Fatalf("conversations %+v, want 2", convs)
		}
		// Walks a list two at a time.
		walk := func(path string, id func([]byte) []string) []string {
			var all []string
			after := ""
			for range 10 {
				q := "?limit=2"
				if after != "" {
					q += "&after=" + after
				}
				resp := g.do(t, request{Path: path + q, Key: key})
				if resp.Status != http.StatusOK {
					t.Fatalf("GET %s%s: status %d, body %s", path, q, resp.Status, resp.Body)
				}
				page := id(resp.Body)
				if len(page) > 2 {
					t.Fatalf("page of %d with limit 2", len(page))
				}
				if len(page) == 0 {
					return all
				}
				all = append(all, page...)
				after = page[len(page)-1]
			}
			t.Fatalf("%s does not end", path)
			return nil
		}
		ids := func(b []byte) []string {
			var v []struct {
				ID string `json:"id"`
			}
			json.Unmarshal(b, &v)
			out := make([]string, len(v))
			for i, x := range v {
				out[i] = x.ID
			}
			return out
		}
		if got := walk("/v1/connections", ids); !slices.Equal(got, conns) {
			t.Errorf("connections paged %v, want %v", got, conns)
		}
		if got := walk("/v1/conversations", ids); !slices.Equal(got, convIDs) {
			t.Errorf("conversations paged %v, want %v", got, convIDs)
		}
		var want []string
		for i, id := range msgs {
			if i%2 == 0 {
				want = append(want, id)
			}
		}
		conv := g.message(t, key, msgs[0]).ConversationID
		if got := walk("/v1/conversations/"+conv+"/messages", ids); !slices.Equal(got, want) {
			t.Errorf("messages paged %v, want %v", got, want)
		}
		for _, q := range []string{"limit=1", "limit=500", "limit="} {
			if resp := g.do(t, request{Path: "/v1/connections?" + q, Key: key}); resp.Status != http.StatusOK {
				t.Errorf("GET /v1/connections?%s: status %d, body %s", q, resp.Status, resp.Body)
			}
		}
	})
}

// TestDeliveryFailures sends to the test channel's magic recipients.
func TestDeliveryFailures(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "failures")
		key := sb.APIKey
		conn := g.connectTest(t, key)
		send := func(to string) message {
			m := g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"ping"}`, conn.ID, to))
			if m.Recipient == nil || *m.Recipient != to || m.InReplyTo != nil || m.ConnectionID != conn.ID {
				t.Errorf("send to %s answered %+v", to, m)
			}
			var c conversation
			g.get(t, key, "/v1/conversations/"+m.ConversationID, &c)
			if c.Participant != to || c.ConnectionID != conn.ID {
				t.Errorf("conversation of a send to %s: %+v", to, c)
			}
			return m
		}

		t.Run("fail-permanent", func(t *testing.T) {
			t.Parallel()
			m := send("fail-permanent")
			ev := g.waitEvent(t, key, 0, stream.MessageFailed, m.ID)
			scope, msg := messageEvent(t, ev, outboundKeys)
			if str(scope["customer_id"]) != sb.CustomerID || str(scope["agent_id"]) != sb.AgentID {
				t.Errorf("message.failed scope %s", ev.Data)
			}
			if msg["status"] != "failed" || msg["error"] == nil || msg["error"] == "" || msg["sent_at"] != nil || msg["attempts"] != float64(1) {
				t.Errorf("message.failed message %v", msg)
			}
			got := g.message(t, key, m.ID)
			if got.Status != "failed" || got.Error == nil || !strings.Contains(*got.Error, "fail-permanent") || got.Attempts != 1 || got.SentAt != nil {
				t.Errorf("failed message %+v", got)
			}
		})
		t.Run("flaky", func(t *testing.T) {
			t.Parallel()
			m := send("flaky")
			// The first attempt fails and is retried after about a second.
			retrying := g.waitMessage(t, key, m.ID, "waiting for a retry", func(m message) bool {
				return m.Status == "queued" && m.Error != nil
			})
			if retrying.Attempts != 1 || !strings.Contains(*retrying.Error, "retrying") {
				t.Errorf("after a transient failure: %+v", retrying)
			}
			ev := g.waitEvent(t, key, 0, stream.MessageSent, m.ID)
			_, msg := messageEvent(t, ev, outboundKeys)
			if msg["status"] != "sent" || msg["attempts"] != float64(2) || msg["error"] != nil {
				t.Errorf("message.sent message %v", msg)
			}
			got := g.message(t, key, m.ID)
			if got.Status != "sent" || got.Attempts != 2 || got.Error != nil || got.SentAt == nil {
				t.Errorf("flaky message after delivery %+v", got)
			}
		})
		t.Run("fail-transient", func(t *testing.T) {
			t.Parallel()
			m := send("fail-transient")
			got := g.waitMessage(t, key, m.ID, "retrying", func(m message) bool {
				return m.Status == "queued" && m.Attempts >= 1 && m.Error != nil
			})
			if !strings.Contains(*got.Error, "fail-transient") || got.SentAt != nil {
				t.Errorf("transiently failing message %+v", got)
			}
		})
		t.Cleanup(func() {
			// After the subtests: one message.failed (fail-permanent), one
			// message.sent (flaky), nothing about fail-transient.
			if n := countEvents(t, g, sb.ProjectID, stream.MessageFailed); n != 1 {
				t.Errorf("%d message.failed events, want 1", n)
			}
			if n := countEvents(t, g, sb.ProjectID, stream.MessageSent); n != 1 {
				t.Errorf("%d message.sent events, want 1", n)
			}
		})
	})
}

package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/testchan"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// receipt injects a receipt on the test connection conn and returns the
// answer.
func (g *gateway) receipt(t *testing.T, key, connID, messageID, state, code, reason string) response {
	t.Helper()
	r := map[string]string{"message_id": messageID, "state": state}
	if code != "" {
		r["code"] = code
	}
	if reason != "" {
		r["reason"] = reason
	}
	body, _ := json.Marshal(map[string]any{"receipt": r})
	return g.post(t, key, "/v1/connections/"+connID+"/inbound", string(body))
}

// applied injects a receipt that must find its message (200) and returns
// the message as the answer shows it.
func (g *gateway) applied(t *testing.T, key, connID, messageID, state, code, reason string) message {
	t.Helper()
	resp := g.receipt(t, key, connID, messageID, state, code, reason)
	if resp.Status != http.StatusOK {
		t.Fatalf("receipt %s on %s: status %d, body %s", state, messageID, resp.Status, resp.Body)
	}
	var m message
	decodeJSON(t, resp.Body, &m)
	if m.ID != messageID && testchan.ProviderID(m.ID) != messageID {
		t.Errorf("receipt on %s answered message %s", messageID, m.ID)
	}
	return m
}

// sentMessage sends text to "bob" on conn and waits until it is sent.
func (g *gateway) sentMessage(t *testing.T, key, connID string) message {
	t.Helper()
	m := g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"bob","text":"ping"}`, connID))
	return g.waitMessage(t, key, m.ID, "sent", func(m message) bool { return m.Status == "sent" })
}

// gqlDelivery reads a message's delivery through GraphQL, in the REST
// shape.
func (g *gateway) gqlDelivery(t *testing.T, key, id string) *api.Delivery {
	t.Helper()
	var m gqlMessage
	g.gqlNode(t, key, id, "Message", gqlMsgFields, &m)
	if rest := g.message(t, key, id); !same(m.rest(), rest) {
		t.Errorf("message %s through GraphQL %+v, through REST %+v", id, m.rest(), rest)
	}
	return m.rest().Delivery
}

func failedEventsOf(t *testing.T, g *gateway, key, id string) []api.MessageEvent {
	t.Helper()
	var out []api.MessageEvent
	for _, e := range g.events(t, key, "type=message.failed") {
		var d api.MessageEvent
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Message.ID == id {
			out = append(out, d)
		}
	}
	return out
}

// TestReceipts drives the provider's reports on sent messages through the
// test channel's receipt injection: the delivery state shows on the
// message (REST and GraphQL) and never moves back, a failure after
// message.sent appends one message.failed with the provider's code, and a
// report naming no message of the connection changes nothing.
func TestReceipts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "receipts")
		key := sb.APIKey
		conn := g.connectTest(t, key)

		t.Run("sent delivered read", func(t *testing.T) {
			t.Parallel()
			m := g.sentMessage(t, key, conn.ID)
			if m.Delivery != nil {
				t.Errorf("a message the provider has not reported on shows delivery %+v", m.Delivery)
			}
			if d := g.applied(t, key, conn.ID, m.ID, "sent", "", "").Delivery; d == nil || d.State != "sent" ||
				d.DeliveredAt != nil || d.ReadAt != nil || d.Code != nil || d.Reason != nil {
				t.Errorf("after sent: delivery %+v", d)
			}
			// By the provider id as well as by comm's id.
			got := g.applied(t, key, conn.ID, testchan.ProviderID(m.ID), "delivered", "", "")
			d := got.Delivery
			if d == nil || d.State != "delivered" || d.DeliveredAt == nil || d.ReadAt != nil {
				t.Fatalf("after delivered: delivery %+v", d)
			}
			if got.Status != "sent" || got.Error != nil {
				t.Errorf("a delivered message: status %s, error %v", got.Status, got.Error)
			}
			deliveredAt := *d.DeliveredAt
			read := g.applied(t, key, conn.ID, m.ID, "read", "", "").Delivery
			if read == nil || read.State != "read" || read.ReadAt == nil || !read.DeliveredAt.Equal(deliveredAt) {
				t.Fatalf("after read: delivery %+v", read)
			}
			if rest := g.message(t, key, m.ID).Delivery; !same(rest, read) {
				t.Errorf("GET shows delivery %+v, the receipt answered %+v", rest, read)
			}
			if gd := g.gqlDelivery(t, key, m.ID); !same(gd, read) {
				t.Errorf("GraphQL shows delivery %+v, REST %+v", gd, read)
			}
			// Late and repeated reports change nothing.
			for _, state := range []string{"delivered", "sent", "read"} {
				if d := g.applied(t, key, conn.ID, m.ID, state, "", "").Delivery; !same(d, read) {
					t.Errorf("a late %s moved the delivery to %+v", state, d)
				}
			}
			// Read is final: a failure report after it changes nothing.
			if got := g.applied(t, key, conn.ID, m.ID, "failed", "30007", "carrier violation"); got.Status != "sent" || !same(got.Delivery, read) {
				t.Errorf("failed after read: %+v", got)
			}
			if evs := failedEventsOf(t, g, key, m.ID); len(evs) != 0 {
				t.Errorf("message.failed for a read message: %+v", evs)
			}
		})

		t.Run("read before delivered", func(t *testing.T) {
			t.Parallel()
			m := g.sentMessage(t, key, conn.ID)
			read := g.applied(t, key, conn.ID, m.ID, "read", "", "").Delivery
			if read == nil || read.State != "read" || read.ReadAt == nil || read.DeliveredAt == nil || !read.DeliveredAt.Equal(*read.ReadAt) {
				t.Fatalf("read first: delivery %+v (a read message counts as delivered then)", read)
			}
			if d := g.applied(t, key, conn.ID, m.ID, "delivered", "", "").Delivery; !same(d, read) {
				t.Errorf("delivered after read: %+v, want it to stay %+v", d, read)
			}
			if d := g.message(t, key, m.ID).Delivery; !same(d, read) {
				t.Errorf("GET: %+v", d)
			}
		})

		t.Run("failed after sent", func(t *testing.T) {
			t.Parallel()
			m := g.sentMessage(t, key, conn.ID)
			g.applied(t, key, conn.ID, m.ID, "delivered", "", "")
			got := g.applied(t, key, conn.ID, m.ID, "failed", "30007", "Message filtered by the carrier")
			d := got.Delivery
			if got.Status != "failed" || got.Error == nil || !strings.Contains(*got.Error, "Message filtered by the carrier") ||
				!strings.Contains(*got.Error, "30007") || got.SentAt == nil {
				t.Errorf("a message reported failed after it was sent: %+v", got)
			}
			if d == nil || d.State != "failed" || d.Code == nil || *d.Code != "30007" || d.Reason == nil ||
				*d.Reason != "Message filtered by the carrier" || d.DeliveredAt == nil {
				t.Errorf("failed: delivery %+v", d)
			}
			ev := g.waitEvent(t, key, 0, stream.MessageFailed, m.ID)
			_, msg := messageEvent(t, ev, sorted(append(outboundKeys, "delivery")))
			if msg["status"] != "failed" || msg["sent_at"] == nil || msg["error"] != *got.Error {
				t.Errorf("message.failed message %v", msg)
			}
			var data api.MessageEvent
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			if ed := data.Message.Delivery; ed == nil || ed.State != "failed" || ed.Code == nil || *ed.Code != "30007" {
				t.Errorf("message.failed delivery %+v", ed)
			}
			if gd := g.gqlDelivery(t, key, m.ID); !same(gd, d) {
				t.Errorf("GraphQL shows delivery %+v, REST %+v", gd, d)
			}
			// Failed is final; a repeat appends nothing.
			for _, state := range []string{"failed", "read", "delivered"} {
				if again := g.applied(t, key, conn.ID, m.ID, state, "", ""); !same(again, got) {
					t.Errorf("%s after failed: %+v, want %+v", state, again, got)
				}
			}
			if evs := failedEventsOf(t, g, key, m.ID); len(evs) != 1 {
				t.Errorf("%d message.failed events, want 1", len(evs))
			}
			if sent := countEvents(t, g, sb.ProjectID, stream.MessageSent); sent == 0 {
				t.Errorf("no message.sent")
			}
		})

		t.Run("not this connection's", func(t *testing.T) {
			t.Parallel()
			other := g.newSandbox(t, "other project")
			oconn := g.connectTest(t, other.APIKey)
			om := g.sentMessage(t, other.APIKey, oconn.ID)
			sibling := g.connectTest(t, key)
			sm := g.sentMessage(t, key, sibling.ID)
			// A connection of the same project with no send in flight: a
			// report naming no message of it is dropped at once.
			mine := g.connectTest(t, key)
			for _, id := range []string{om.ID, sm.ID, testchan.ProviderID(sm.ID), "msg_01jd0000000000000000000000", "SM0123456789abcdef"} {
				resp := g.receipt(t, key, mine.ID, id, "failed", "30003", "unreachable")
				wantError(t, resp, http.StatusNotFound, "not_found", "")
			}
			// Another project's key cannot reach the connection at all.
			wantError(t, g.receipt(t, other.APIKey, sibling.ID, sm.ID, "failed", "", ""), http.StatusNotFound, "not_found", "")
			for _, c := range []struct{ key, id string }{{other.APIKey, om.ID}, {key, sm.ID}} {
				if got := g.message(t, c.key, c.id); got.Status != "sent" || got.Delivery != nil || got.Error != nil {
					t.Errorf("a report on another connection touched %+v", got)
				}
			}
			if n := count(t, g.DB, "SELECT COUNT(*) FROM pending_receipts WHERE connection_id = ?", mine.ID); n != 0 {
				t.Errorf("%d reports kept for messages of no send in flight", n)
			}
		})

		t.Run("graphql", func(t *testing.T) {
			t.Parallel()
			// A connection of its own: a report naming no message is
			// kept as pending while another send of the connection is in
			// flight, which the parallel subtests' sends would make.
			conn := g.connectTest(t, key)
			m := g.sentMessage(t, key, conn.ID)
			q := `mutation($conn: ID!, $in: ReceiptInput!) { injectReceipt(connectionID: $conn, input: $in) {
				pending expiresAt message { ` + gqlMsgFields + ` } } }`
			var res struct {
				InjectReceipt struct {
					Pending   bool        `json:"pending"`
					ExpiresAt *time.Time  `json:"expiresAt"`
					Message   *gqlMessage `json:"message"`
				} `json:"injectReceipt"`
			}
			g.gqlOK(t, key, q, map[string]any{"conn": conn.ID, "in": map[string]any{"messageID": m.ID, "state": "read"}}, &res)
			got := res.InjectReceipt
			if got.Pending || got.ExpiresAt != nil || got.Message == nil || got.Message.Delivery == nil || got.Message.Delivery.State != "read" {
				t.Fatalf("injectReceipt answered %+v", got)
			}
			if rest := g.message(t, key, m.ID); !same(got.Message.rest(), rest) {
				t.Errorf("injectReceipt message %+v, REST %+v", got.Message.rest(), rest)
			}
			r := g.gql(t, key, q, map[string]any{"conn": conn.ID, "in": map[string]any{"messageID": "SMnone", "state": "read"}})
			gqlFail(t, r, "injectReceipt", "not_found", "")
			r = g.gql(t, key, q, map[string]any{"conn": conn.ID, "in": map[string]any{"messageID": m.ID, "state": "lost"}})
			gqlFail(t, r, "injectReceipt", "invalid_parameter", "receipt.state")
		})

		t.Run("bad receipts", func(t *testing.T) {
			t.Parallel()
			path := "/v1/connections/" + conn.ID + "/inbound"
			for _, c := range []struct{ body, param string }{
				{`{"receipt":{"message_id":"msg_x","state":"delivered"},"sender":"alice"}`, "receipt"},
				{`{"receipt":{"state":"delivered"}}`, "receipt.message_id"},
				{`{"receipt":{"message_id":"msg_x","state":"bounced"}}`, "receipt.state"},
				{`{"receipt":{"message_id":"msg_x"}}`, "receipt.state"},
				{`{"receipt":{"message_id":"msg_x","state":"delivered","code":"1"}}`, "receipt.code"},
				{`{"receipt":{"message_id":"msg_x","state":"failed","code":"` + strings.Repeat("9", 65) + `"}}`, "receipt.code"},
				{`{"receipt":{"message_id":"msg_x","state":"failed","reason":"` + strings.Repeat("r", 1001) + `"}}`, "receipt.reason"},
				{`{"receipt":{"message_id":"msg_x","state":"read","colour":"red"}}`, "colour"},
				{`{"receipt":{"message_id":7,"state":"read"}}`, "receipt.message_id"},
			} {
				wantError(t, g.post(t, key, path, c.body), http.StatusBadRequest, "invalid_parameter", c.param)
			}
		})
	})
}

// held is a test channel whose sends to "held" wait until the test lets
// them go: a report can then come while the send's answer is still out.
type held struct {
	*testchan.Adapter
	gate chan struct{}
}

func (h *held) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if msg.To == "held" {
		select {
		case <-h.gate:
		case <-ctx.Done():
			return channels.SendResult{}, fmt.Errorf("held: %w", channels.ErrTransient)
		}
	}
	return h.Adapter.Send(ctx, msg)
}

// heldChannel is the "held" channel: every connection's sends wait on
// gate.
func heldChannel(gate chan struct{}) channels.Descriptor {
	return channels.Descriptor{Channel: "held", Tier: channels.Free,
		New: func(ctx context.Context, c channels.Connection) (channels.Adapter, error) {
			a, err := testchan.New(ctx, c)
			if err != nil {
				return nil, err
			}
			return &held{Adapter: a.(*testchan.Adapter), gate: gate}, nil
		}}
}

// TestReceiptBeforeSend: a report that comes while the send's answer is
// still out (a status callback beating the API response) is kept and
// applied once the send is recorded; a failure so reported appends
// message.failed after message.sent. What waits is bounded per connection.
func TestReceiptBeforeSend(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		gate := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(gate) }) }
		t.Cleanup(release)
		const limit = 4
		g := startGateway(t, cfg, setup{outbox: true, svc: messaging.Options{PendingReceipts: limit},
			channels: []channels.Descriptor{heldChannel(gate)}})
		sb := g.newSandbox(t, "early reports")
		key := sb.APIKey
		resp := g.post(t, key, "/v1/connections", `{"channel":"held"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		var conn connection
		decodeJSON(t, resp.Body, &conn)
		send := func() message {
			return g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"held","text":"ping"}`, conn.ID))
		}
		a, b := send(), send()
		g.waitMessage(t, key, a.ID, "sending", func(m message) bool { return m.Status == "sending" })

		pending := func(id, state, code, reason string) api.PendingReceipt {
			t.Helper()
			resp := g.receipt(t, key, conn.ID, id, state, code, reason)
			if resp.Status != http.StatusAccepted {
				t.Fatalf("early %s on %s: status %d, body %s", state, id, resp.Status, resp.Body)
			}
			var p api.PendingReceipt
			decodeJSON(t, resp.Body, &p)
			want := id
			if strings.HasPrefix(id, "msg_") {
				want = testchan.ProviderID(id)
			}
			if p.Status != "pending" || p.MessageID != want ||
				p.ExpiresAt.Before(time.Now().Add(messaging.PendingReceiptAge-time.Minute)) {
				t.Errorf("early %s answered %+v", state, p)
			}
			return p
		}
		waiting := func() int64 {
			return count(t, g.DB, "SELECT COUNT(*) FROM pending_receipts WHERE connection_id = ?", conn.ID)
		}
		pending(a.ID, "delivered", "", "")
		pending(a.ID, "delivered", "", "") // a repeat is kept once
		pending(b.ID, "failed", "30005", "Unknown destination handset")
		if n := waiting(); n != 2 {
			t.Errorf("%d reports wait, want 2", n)
		}
		// Reports naming no message wait too, while sends are out, up to
		// the connection's limit; then they are refused.
		for i := range limit - 2 {
			pending(fmt.Sprintf("SMunknown%d", i), "delivered", "", "")
		}
		resp = g.receipt(t, key, conn.ID, "SMunknown-over", "delivered", "", "")
		wantError(t, resp, http.StatusTooManyRequests, "rate_limited", "")
		if n := waiting(); n != limit {
			t.Errorf("%d reports wait, want the limit %d", n, limit)
		}
		if got := g.message(t, key, a.ID); got.Delivery != nil {
			t.Errorf("delivery before the send was recorded: %+v", got.Delivery)
		}

		release()
		ga := g.waitMessage(t, key, a.ID, "delivered", func(m message) bool { return m.Delivery != nil })
		if ga.Status != "sent" || ga.Delivery.State != "delivered" || ga.Delivery.DeliveredAt == nil {
			t.Errorf("early delivered, applied after the send: %+v", ga)
		}
		gb := g.waitMessage(t, key, b.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if gb.Delivery == nil || gb.Delivery.State != "failed" || gb.Delivery.Code == nil || *gb.Delivery.Code != "30005" || gb.SentAt == nil {
			t.Errorf("early failure, applied after the send: %+v", gb)
		}
		sent := g.waitEvent(t, key, 0, stream.MessageSent, b.ID)
		failed := g.waitEvent(t, key, sent.Seq, stream.MessageFailed, b.ID)
		var data api.MessageEvent
		if err := json.Unmarshal(failed.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Message.Delivery == nil || data.Message.Delivery.Code == nil || *data.Message.Delivery.Code != "30005" {
			t.Errorf("message.failed %s", failed.Data)
		}
		if evs := failedEventsOf(t, g, key, b.ID); len(evs) != 1 {
			t.Errorf("%d message.failed events, want 1", len(evs))
		}
		// Only the reports for messages that never came are left.
		if n := waiting(); n != limit-2 {
			t.Errorf("%d reports wait after the sends, want %d", n, limit-2)
		}
		// With nothing in flight, a report for no message is dropped, not kept.
		wantError(t, g.receipt(t, key, conn.ID, "SMlate", "delivered", "", ""), http.StatusNotFound, "not_found", "")
		if n := waiting(); n != limit-2 {
			t.Errorf("%d reports wait, want %d", n, limit-2)
		}
	})
}

// callback is a provider that reports on sent messages with signed status
// callbacks to the connection's hook (as Twilio and Telnyx do): its sends
// answer "cb-" and comm's id, its callbacks are {"sid", "status", "code"}
// signed with the connection's secret.
type callback struct{ secret []byte }

func (a *callback) Send(_ context.Context, msg channels.Outbound) (channels.SendResult, error) {
	return channels.SendResult{ProviderID: "cb-" + msg.MessageID}, nil
}

func (a *callback) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	m := hmac.New(sha256.New, a.secret)
	m.Write(body)
	if !hmac.Equal([]byte(r.Header.Get("X-Callback-Signature")), []byte(hex.EncodeToString(m.Sum(nil)))) {
		return nil, channels.ErrSignature
	}
	var cb struct{ SID, Status, Code string }
	if err := json.Unmarshal(body, &cb); err != nil {
		return nil, err
	}
	return []channels.Inbound{{Receipt: &channels.Receipt{MessageID: cb.SID, State: cb.Status, Code: cb.Code}}}, nil
}

func callbackChannel() channels.Descriptor {
	return channels.Descriptor{Channel: "callback", Tier: channels.Free,
		New: func(_ context.Context, c channels.Connection) (channels.Adapter, error) {
			var cfg struct{ Secret string }
			if err := json.Unmarshal(c.Config, &cfg); err != nil || cfg.Secret == "" {
				return nil, &channels.ConfigError{Field: "secret", Msg: "required"}
			}
			return &callback{secret: []byte(cfg.Secret)}, nil
		}}
}

// TestReceiptWebhook: status callbacks through a connection's provider
// ingress (/hooks/{channel}/{connection}) record the delivery; a callback
// naming no message of the connection (another project's, made up) is
// taken (200) and changes nothing; an unsigned one is refused.
func TestReceiptWebhook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{callbackChannel()}})
		connect := func(key, secret string) connection {
			resp := g.post(t, key, "/v1/connections", `{"channel":"callback","config":{"secret":"`+secret+`"}}`)
			if resp.Status != http.StatusCreated {
				t.Fatalf("connect: %d %s", resp.Status, resp.Body)
			}
			var c connection
			decodeJSON(t, resp.Body, &c)
			return c
		}
		a, b := g.newSandbox(t, "a").APIKey, g.newSandbox(t, "b").APIKey
		ca, cb := connect(a, "secret a"), connect(b, "secret b")
		send := func(key, connID string) message {
			m := g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"+15550100","text":"hi"}`, connID))
			return g.waitMessage(t, key, m.ID, "sent", func(m message) bool { return m.Status == "sent" })
		}
		ma, mb := send(a, ca.ID), send(b, cb.ID)
		hook := func(connID, secret, sid, status, code string) response {
			body, _ := json.Marshal(map[string]string{"sid": sid, "status": status, "code": code})
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			return g.do(t, request{Method: http.MethodPost, Path: "/hooks/callback/" + connID, ContentType: jsonCT,
				Body: string(body), Header: map[string]string{"X-Callback-Signature": hex.EncodeToString(m.Sum(nil))}})
		}
		for _, c := range []struct{ sid, status, code string }{
			{"cb-" + ma.ID, "delivered", ""},
			{"cb-" + ma.ID, "delivered", ""}, // Twilio retries
			{"cb-" + mb.ID, "failed", "30003"},
			{"SMnothing", "failed", "30003"},
			{"cb-" + ma.ID, "bounced", ""}, // a state comm does not know: dropped
		} {
			if resp := hook(ca.ID, "secret a", c.sid, c.status, c.code); resp.Status != http.StatusOK {
				t.Errorf("callback %+v: status %d, body %s", c, resp.Status, resp.Body)
			}
		}
		wantError(t, hook(ca.ID, "not the secret", "cb-"+ma.ID, "failed", "30003"), http.StatusUnauthorized, "unauthenticated", "")
		if got := g.message(t, a, ma.ID); got.Status != "sent" || got.Delivery == nil || got.Delivery.State != "delivered" {
			t.Errorf("after the callbacks: %+v", got)
		}
		if got := g.message(t, b, mb.ID); got.Status != "sent" || got.Delivery != nil {
			t.Errorf("another project's callback touched %+v", got)
		}
		if n := countEvents(t, g, g.project(t, b).ID, stream.MessageFailed) + countEvents(t, g, g.project(t, a).ID, stream.MessageFailed); n != 0 {
			t.Errorf("%d message.failed events", n)
		}
	})
}

// TestReceiptRacesSend: reports injected right after each message is
// queued land while its send is queued, in flight or just recorded; each
// is applied exactly once whichever way the race goes (a report kept
// pending is applied by the send's recording or by the report's own
// re-check), and none is left waiting.
func TestReceiptRacesSend(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "races")
		key := sb.APIKey
		conn := g.connectTest(t, key)
		const n = 24
		ids := make([]string, n)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			answers = map[int]int{}
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"person-%d","text":"ping"}`, conn.ID, i))
				ids[i] = m.ID
				state, code := "delivered", ""
				if i%2 == 1 {
					state, code = "failed", "30003"
				}
				resp := g.receipt(t, key, conn.ID, m.ID, state, code, "")
				mu.Lock()
				answers[resp.Status]++
				mu.Unlock()
				if resp.Status != http.StatusOK && resp.Status != http.StatusAccepted {
					t.Errorf("receipt on %s: %d %s", m.ID, resp.Status, resp.Body)
				}
			}()
		}
		wg.Wait()
		t.Logf("answers by status: %v (202: kept until the send was recorded)", answers)
		for i, id := range ids {
			want := "delivered"
			if i%2 == 1 {
				want = "failed"
			}
			got := g.waitMessage(t, key, id, want, func(m message) bool { return m.Delivery != nil && m.Delivery.State == want })
			if (want == "failed") != (got.Status == "failed") {
				t.Errorf("message %d: %+v", i, got)
			}
		}
		if f := countEvents(t, g, sb.ProjectID, stream.MessageFailed); f != n/2 {
			t.Errorf("%d message.failed events, want %d", f, n/2)
		}
		if w := count(t, g.DB, "SELECT COUNT(*) FROM pending_receipts WHERE connection_id = ?", conn.ID); w != 0 {
			t.Errorf("%d reports left waiting", w)
		}
	})
}

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// lineSecret is what the "linechat" test channel's app-level webhook
// checks: a channel on the operator's own lines shared among projects
// (channels.SharedApp), as hosted WhatsApp and iMessage are.
const lineSecret = "linechat secret"

// lineItem is one item of a linechat webhook request.
type lineItem struct {
	Line    string `json:"line"`
	ID      string `json:"id,omitempty"`
	From    string `json:"from,omitempty"`
	Text    string `json:"text,omitempty"`
	Receipt string `json:"receipt,omitempty"` // the provider id of an outbound message: delivered
}

// lineAnswer is an answer the operator's side sent outside connections.
type lineAnswer struct{ Line, To, Text string }

// lineFake is linechat's provider: its lines, the answers and the sends.
type lineFake struct {
	lines   []channels.Line
	mu      sync.Mutex
	answers []lineAnswer
	sent    []channels.Outbound
}

func (f *lineFake) Lines() []channels.Line { return f.lines }

func (f *lineFake) Receive(r *http.Request, body []byte) ([]channels.LineInbound, error) {
	var req struct {
		Items []lineItem `json:"items"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("linechat: %v", err)
	}
	var out []channels.LineInbound
	for _, it := range req.Items {
		in := channels.Inbound{ProviderID: it.ID, Sender: it.From, Text: it.Text}
		if it.Receipt != "" {
			in = channels.Inbound{Receipt: &channels.Receipt{MessageID: it.Receipt, State: channels.ReceiptDelivered}}
		}
		out = append(out, channels.LineInbound{Line: it.Line, Inbound: in})
	}
	return out, nil
}

func (f *lineFake) Answer(_ context.Context, line, to, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, lineAnswer{line, to, text})
	return nil
}

// answersTo returns the answers person got so far.
func (f *lineFake) answersTo(person string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.answers {
		if a.To == person {
			out = append(out, a.Text)
		}
	}
	return out
}

// Route verifies the app's secret; its keys are not used on a shared
// channel.
func (f *lineFake) Route(r *http.Request, _ []byte) ([]string, *channels.Response, error) {
	if r.Header.Get("X-Line-Secret") != lineSecret {
		return nil, nil, channels.ErrSignature
	}
	return nil, nil, nil
}

// lineAdapter is a linechat connection: it sends from its line.
type lineAdapter struct {
	f    *lineFake
	line string
}

func (a *lineAdapter) Send(_ context.Context, m channels.Outbound) (channels.SendResult, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.sent = append(a.f.sent, m)
	return channels.SendResult{ProviderID: "out-" + m.MessageID}, nil
}

func newLineFake() *lineFake {
	link := func(number string) func(string) string {
		return func(code string) string { return "https://wa.me/" + number + "?text=join%20" + code }
	}
	return &lineFake{lines: []channels.Line{
		{ID: "L1", Address: "+15550001111", JoinLink: link("15550001111")},
		{ID: "L2", Address: "+15550002222", JoinLink: link("15550002222")},
	}}
}

// descriptor is linechat's descriptor, of tier.
func (f *lineFake) descriptor(channel, provider string, tier channels.Tier) channels.Descriptor {
	return channels.Descriptor{Channel: channel, Provider: provider, Tier: tier, App: f, Shared: f,
		New: func(_ context.Context, c channels.Connection) (channels.Adapter, error) {
			if c.Line == "" {
				return nil, fmt.Errorf("linechat: no line")
			}
			return &lineAdapter{f: f, line: c.Line}, nil
		}}
}

// postLine posts items to linechat's app-level webhook.
func postLine(t *testing.T, g *gateway, items ...lineItem) response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"items": items})
	r := g.do(t, request{Method: "POST", Path: "/hooks/linechat", ContentType: "application/json", Body: string(body),
		Header: map[string]string{"X-Line-Secret": lineSecret}})
	if r.Status != http.StatusOK {
		t.Fatalf("post %+v: %d %s", items, r.Status, r.Body)
	}
	return r
}

// receivedTexts are the texts of key's message.received events.
func receivedTexts(t *testing.T, g *gateway, key string) []string {
	t.Helper()
	var out []string
	for _, e := range g.events(t, key, "type=message.received&limit=1000") {
		out = append(out, receivedOf(t, e).Text)
	}
	return out
}

func connectLine(t *testing.T, g *gateway, key, name, config string) connection {
	t.Helper()
	r := g.post(t, key, "/v1/connections", `{"channel":"linechat","name":"`+name+`","config":`+config+`}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("connect %s: %d %s", name, r.Status, r.Body)
	}
	var c connection
	decodeJSON(t, r.Body, &c)
	return c
}

func bindingsOf(t *testing.T, g *gateway, key, connID string) []string {
	t.Helper()
	var bs []struct {
		ID        string    `json:"id"`
		Person    string    `json:"person"`
		CreatedAt time.Time `json:"created_at"`
	}
	g.get(t, key, "/v1/connections/"+connID+"/bindings", &bs)
	var out []string
	for _, b := range bs {
		out = append(out, b.Person)
	}
	return out
}

// TestSharedLineJoin: connections on a shared line show its address, a
// join code and the join link; a person bound to nothing is answered once
// how to join and reaches no project; a wrong code is answered; "join
// <code>" binds the person (not stored), and their messages then reach
// that project only; joining another project on the line moves them;
// bindings are listed and removed through the connection (REST and
// GraphQL) and only by their own project; a send to a person who has not
// joined is refused naming "to"; a receipt finds the connection that
// sent the message.
func TestSharedLineJoin(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		f := newLineFake()
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{f.descriptor("linechat", "", channels.Free)}})
		a, b := g.newSandbox(t, "Alpha").APIKey, g.newSandbox(t, "Beta").APIKey
		ca := connectLine(t, g, a, "Alpha assistant", `{}`)
		cb := connectLine(t, g, b, "Beta assistant", `null`)

		// The record: the first line, a code, the link.
		for _, c := range []connection{ca, cb} {
			if c.Address == nil || *c.Address != "+15550001111" || c.Line == nil || *c.Line != "L1" {
				t.Fatalf("connection %s: address %v line %v, want +15550001111 on L1", c.ID, c.Address, c.Line)
			}
			if c.JoinCode == nil || len(*c.JoinCode) != messaging.JoinCodeLen ||
				strings.Trim(*c.JoinCode, messaging.JoinCodeAlphabet) != "" {
				t.Fatalf("connection %s: join code %v", c.ID, c.JoinCode)
			}
			if want := "https://wa.me/15550001111?text=join%20" + *c.JoinCode; c.JoinLink == nil || *c.JoinLink != want {
				t.Errorf("join link %v, want %s", c.JoinLink, want)
			}
		}
		if *ca.JoinCode == *cb.JoinCode {
			t.Fatalf("two connections on one line share the code %s", *ca.JoinCode)
		}
		var got connection
		g.get(t, a, "/v1/connections/"+ca.ID, &got)
		if got.JoinCode == nil || *got.JoinCode != *ca.JoinCode {
			t.Errorf("GET shows join code %v, want %s", got.JoinCode, *ca.JoinCode)
		}

		// Forged: the app's secret is missing.
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/linechat", ContentType: "application/json",
			Body: `{"items":[{"line":"L1","id":"x","from":"p1","text":"hi"}]}`}), http.StatusUnauthorized, "unauthenticated", "")
		// A connection on a shared line takes nothing at its own URL.
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/linechat/" + ca.ID, ContentType: "application/json",
			Body: `{}`, Header: map[string]string{"X-Line-Secret": lineSecret}}), http.StatusNotFound, "not_found", "")

		// Unbound: answered once, stored nowhere.
		unrouted := g.Svc.UnroutedEvents()
		postLine(t, g, lineItem{Line: "L1", ID: "m1", From: "p1", Text: "hello?"})
		postLine(t, g, lineItem{Line: "L1", ID: "m2", From: "p1", Text: "anyone?"})
		if ans := f.answersTo("p1"); len(ans) != 1 || !strings.Contains(ans[0], "join ") {
			t.Fatalf("p1 got answers %q, want one saying how to join", ans)
		}
		if n := g.Svc.UnroutedEvents() - unrouted; n != 2 {
			t.Errorf("unrouted grew by %d, want 2", n)
		}
		// A wrong code: answered so, stored nowhere.
		postLine(t, g, lineItem{Line: "L1", ID: "m3", From: "p1", Text: "join ZZZZZZ"})
		if ans := f.answersTo("p1"); len(ans) != 2 || !strings.Contains(ans[1], "not valid") {
			t.Fatalf("p1 got answers %q, want a second saying the code is not valid", ans)
		}
		if ta, tb := receivedTexts(t, g, a), receivedTexts(t, g, b); len(ta)+len(tb) != 0 {
			t.Fatalf("unbound messages were stored: %q %q", ta, tb)
		}

		// Join A (lower case, spaces): confirmed, not stored; then the
		// person's messages reach A only.
		postLine(t, g, lineItem{Line: "L1", ID: "m4", From: "p1", Text: "  Join " + strings.ToLower(*ca.JoinCode) + " "},
			lineItem{Line: "L1", ID: "m5", From: "p1", Text: "hello A"})
		if ans := f.answersTo("p1"); len(ans) != 3 || !strings.Contains(ans[2], "Alpha assistant") {
			t.Fatalf("p1 got answers %q, want a confirmation naming Alpha assistant", ans)
		}
		if ta, tb := receivedTexts(t, g, a), receivedTexts(t, g, b); strings.Join(ta, "|") != "hello A" || len(tb) != 0 {
			t.Fatalf("after joining A: A got %q, B got %q", ta, tb)
		}
		if bs := bindingsOf(t, g, a, ca.ID); len(bs) != 1 || bs[0] != "p1" {
			t.Errorf("A's bindings %q, want [p1]", bs)
		}

		// Join B on the same line: the binding moves.
		postLine(t, g, lineItem{Line: "L1", ID: "m6", From: "p1", Text: "join " + *cb.JoinCode},
			lineItem{Line: "L1", ID: "m7", From: "p1", Text: "hello B"})
		if ta, tb := receivedTexts(t, g, a), receivedTexts(t, g, b); len(ta) != 1 || strings.Join(tb, "|") != "hello B" {
			t.Fatalf("after joining B: A got %q, B got %q", ta, tb)
		}
		if bs := bindingsOf(t, g, a, ca.ID); len(bs) != 0 {
			t.Errorf("A's bindings %q after p1 moved, want none", bs)
		}
		if bs := bindingsOf(t, g, b, cb.ID); len(bs) != 1 || bs[0] != "p1" {
			t.Errorf("B's bindings %q, want [p1]", bs)
		}
		// Another project's connection: not found, to list or to unbind.
		wantError(t, g.do(t, request{Path: "/v1/connections/" + cb.ID + "/bindings", Key: a}), http.StatusNotFound, "not_found", "")
		wantError(t, g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + cb.ID + "/bindings/p1", Key: a}),
			http.StatusNotFound, "not_found", "")

		// A writes to p1, who left for B: refused naming "to".
		e := wantError(t, g.post(t, a, "/v1/messages", `{"connection_id":"`+ca.ID+`","to":"p1","text":"come back"}`),
			http.StatusBadRequest, "invalid_parameter", "to")
		if !strings.Contains(e.Error.Message, *ca.JoinLink) {
			t.Errorf("refusal %q does not name the join link", e.Error.Message)
		}

		// B writes to p1; the receipt on the line finds B's message.
		r := g.post(t, b, "/v1/messages", `{"connection_id":"`+cb.ID+`","to":"p1","text":"welcome"}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("B sends to p1: %d %s", r.Status, r.Body)
		}
		var sent message
		decodeJSON(t, r.Body, &sent)
		waitFor(t, "the send", func() bool {
			var m message
			g.get(t, b, "/v1/messages/"+sent.ID, &m)
			return m.Status == "sent"
		})
		postLine(t, g, lineItem{Line: "L1", Receipt: "out-" + sent.ID})
		var m message
		g.get(t, b, "/v1/messages/"+sent.ID, &m)
		if m.Delivery == nil || m.Delivery.State != channels.ReceiptDelivered {
			t.Errorf("after the receipt: delivery %+v, want delivered", m.Delivery)
		}

		// GraphQL shows the code and the bindings, and unbinds.
		var node struct {
			JoinCode *string `json:"joinCode"`
			JoinLink *string `json:"joinLink"`
			Bindings []struct {
				ID        string    `json:"id"`
				Person    string    `json:"person"`
				CreatedAt time.Time `json:"createdAt"`
			} `json:"bindings"`
		}
		g.gqlNode(t, b, cb.ID, "Connection", "joinCode joinLink bindings(limit: 10) { id person createdAt }", &node)
		if node.JoinCode == nil || *node.JoinCode != *cb.JoinCode || len(node.Bindings) != 1 || node.Bindings[0].Person != "p1" {
			t.Fatalf("GraphQL connection %+v", node)
		}
		gqlFail(t, g.gql(t, a, `mutation { unbind(connectionID: "`+cb.ID+`", person: "p1") }`, nil), "unbind", "not_found", "")
		var ub struct {
			Unbind bool `json:"unbind"`
		}
		g.gqlOK(t, b, `mutation { unbind(connectionID: "`+cb.ID+`", person: "p1") }`, nil, &ub)
		if !ub.Unbind {
			t.Fatal("unbind answered false")
		}
		// Unbound again: nothing reaches B.
		postLine(t, g, lineItem{Line: "L1", ID: "m8", From: "p1", Text: "still there?"})
		if tb := receivedTexts(t, g, b); len(tb) != 1 {
			t.Errorf("after unbind B got %q", tb)
		}

		// REST unbind: 204, then 404.
		postLine(t, g, lineItem{Line: "L1", ID: "m9", From: "p2", Text: "join " + *ca.JoinCode})
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + ca.ID + "/bindings/p2", Key: a}); r.Status != http.StatusNoContent {
			t.Fatalf("unbind p2: %d %s", r.Status, r.Body)
		}
		wantError(t, g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + ca.ID + "/bindings/p2", Key: a}),
			http.StatusNotFound, "not_found", "")
		postLine(t, g, lineItem{Line: "L1", ID: "m10", From: "p2", Text: "for A?"})
		if ta := receivedTexts(t, g, a); len(ta) != 1 {
			t.Errorf("after REST unbind A got %q", ta)
		}

		// Bindings come in pages, with a Link to the next.
		postLine(t, g, lineItem{Line: "L1", ID: "m11", From: "p3", Text: "join " + *ca.JoinCode},
			lineItem{Line: "L1", ID: "m12", From: "p4", Text: "join " + *ca.JoinCode})
		r = g.do(t, request{Path: "/v1/connections/" + ca.ID + "/bindings?limit=1", Key: a})
		var page []struct {
			ID        string    `json:"id"`
			Person    string    `json:"person"`
			CreatedAt time.Time `json:"created_at"`
		}
		decodeJSON(t, r.Body, &page)
		link := r.Header.Get("Link")
		if r.Status != http.StatusOK || len(page) != 1 || page[0].Person != "p3" || !strings.Contains(link, "after="+page[0].ID) {
			t.Fatalf("first page: %d %s, Link %q", r.Status, r.Body, link)
		}
		g.get(t, a, "/v1/connections/"+ca.ID+"/bindings?limit=1&after="+page[0].ID, &page)
		if len(page) != 1 || page[0].Person != "p4" {
			t.Fatalf("second page: %+v", page)
		}

		// Deleting a connection removes its bindings.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + ca.ID, Key: a}); r.Status != http.StatusNoContent {
			t.Fatalf("delete A: %d %s", r.Status, r.Body)
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM bindings WHERE connection_id = ?", ca.ID); n != 0 {
			t.Errorf("%d bindings of a deleted connection", n)
		}
	})
}

// TestSharedLineDedicated: config.dedicated gives a connection a line to
// itself (no join code; everything on the line is its own, and it writes
// to anyone); a second one finds no spare line (409 naming
// config.dedicated), a shared connection cannot name a dedicated line
// (409 naming config.line), and deleting the dedicated connection frees
// its line.
func TestSharedLineDedicated(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		f := newLineFake()
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{f.descriptor("linechat", "", channels.Free)}})
		a, b, c := g.newSandbox(t, "A").APIKey, g.newSandbox(t, "B").APIKey, g.newSandbox(t, "C").APIKey
		shared := connectLine(t, g, a, "shared", `{}`)
		if *shared.Line != "L1" {
			t.Fatalf("shared connection on %s, want L1", *shared.Line)
		}
		ded := connectLine(t, g, b, "dedicated", `{"dedicated":true}`)
		if ded.Line == nil || *ded.Line != "L2" || *ded.Address != "+15550002222" || ded.JoinCode != nil || ded.JoinLink != nil {
			t.Fatalf("dedicated connection: %+v", ded)
		}
		wantError(t, g.post(t, c, "/v1/connections", `{"channel":"linechat","config":{"dedicated":true}}`),
			http.StatusConflict, "conflict", "config.dedicated")
		wantError(t, g.post(t, c, "/v1/connections", `{"channel":"linechat","config":{"line":"+15550002222"}}`),
			http.StatusConflict, "conflict", "config.line")
		wantError(t, g.post(t, c, "/v1/connections", `{"channel":"linechat","config":{"line":"L9"}}`),
			http.StatusBadRequest, "invalid_parameter", "config.line")
		wantError(t, g.post(t, c, "/v1/connections", `{"channel":"linechat","config":{"dedicated":"yes"}}`),
			http.StatusBadRequest, "invalid_parameter", "config.dedicated")
		// Named shared line: L1, as A's.
		if cc := connectLine(t, g, c, "named", `{"line":"L1"}`); *cc.Line != "L1" || cc.JoinCode == nil {
			t.Fatalf("named shared line: %+v", cc)
		}

		// Anyone on L2 reaches B, no join step; B writes to anyone.
		postLine(t, g, lineItem{Line: "L2", ID: "d1", From: "stranger", Text: "hi B"})
		if tb := receivedTexts(t, g, b); strings.Join(tb, "|") != "hi B" {
			t.Fatalf("B got %q", tb)
		}
		if ans := f.answersTo("stranger"); len(ans) != 0 {
			t.Errorf("a person on a dedicated line was answered %q", ans)
		}
		if r := g.post(t, b, "/v1/messages", `{"connection_id":"`+ded.ID+`","to":"someone","text":"hello"}`); r.Status != http.StatusAccepted {
			t.Fatalf("dedicated send: %d %s", r.Status, r.Body)
		}
		// An unbound person on A's shared line: refused.
		wantError(t, g.post(t, a, "/v1/messages", `{"connection_id":"`+shared.ID+`","to":"someone","text":"hello"}`),
			http.StatusBadRequest, "invalid_parameter", "to")

		// Deleted: L2 is free to dedicate again, to one of those racing
		// for it.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + ded.ID, Key: b}); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		// Two ask for it to themselves, two to share it: either one
		// dedicated connection has it alone, or it is shared.
		keys := []string{a, b, c, g.newSandbox(t, "D").APIKey}
		configs := []string{`{"dedicated":true}`, `{"line":"L2"}`, `{"dedicated":true}`, `{"line":"L2"}`}
		statuses := make([]int, len(keys))
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Go(func() {
				statuses[i] = g.post(t, k, "/v1/connections", `{"channel":"linechat","config":`+configs[i]+`}`).Status
			})
		}
		wg.Wait()
		for _, st := range statuses {
			if st != http.StatusCreated && st != http.StatusConflict {
				t.Errorf("racing connect: status %d", st)
			}
		}
		onL2 := count(t, g.DB, "SELECT COUNT(*) FROM connections WHERE line = 'L2' AND deleted_at IS NULL")
		dedicated := count(t, g.DB, "SELECT COUNT(*) FROM connections WHERE line = 'L2' AND deleted_at IS NULL AND route_key IS NOT NULL")
		if dedicated > 1 || (dedicated == 1 && onL2 != 1) || onL2 == 0 {
			t.Errorf("after the race L2 has %d connections, %d dedicated (statuses %v)", onL2, dedicated, statuses)
		}
	})
}

// TestSharedLinePaid: the real hosted WhatsApp tier still asks a sandbox
// key to sign in before it gets a line.
func TestSharedLinePaid(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		f := newLineFake()
		g := startGateway(t, cfg, setup{channels: []channels.Descriptor{f.descriptor("whatsapp", "hosted", channels.Paid)}})
		key := g.newSandbox(t, "sandbox").APIKey
		wantError(t, g.post(t, key, "/v1/connections", `{"channel":"whatsapp","provider":"hosted"}`),
			http.StatusPaymentRequired, "payment_required", "")
	})
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lineSession is linechat's relay stream (an AppSession): what the test
// pushes, emitted by line.
type lineSession struct{ items chan lineItem }

func (s lineSession) Run(ctx context.Context, emit func(key string, ins ...channels.Inbound) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-s.items:
			if err := emit(it.Line, channels.Inbound{ProviderID: it.ID, Sender: it.From, Text: it.Text}); err != nil {
				return err
			}
		}
	}
}

// TestSharedLineSession: a shared channel's app session (a relay's event
// stream) runs once a connection is on one of its lines, and what it
// emits by line is routed as the app-level webhook's messages are: join,
// then the person's messages reach the connection.
func TestSharedLineSession(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		f := newLineFake()
		sess := lineSession{items: make(chan lineItem, 10)}
		d := f.descriptor("linechat", "", channels.Free)
		d.Session = sess
		g := startGateway(t, cfg, setup{sessions: true, channels: []channels.Descriptor{d}})
		key := g.newSandbox(t, "relay").APIKey
		c := connectLine(t, g, key, "relay assistant", `{}`)
		sess.items <- lineItem{Line: "L1", ID: "s1", From: "p1", Text: "join " + *c.JoinCode}
		sess.items <- lineItem{Line: "L1", ID: "s2", From: "p1", Text: "over the relay"}
		waitFor(t, "the session's message", func() bool { return len(receivedTexts(t, g, key)) == 1 })
		if got := receivedTexts(t, g, key); got[0] != "over the relay" {
			t.Errorf("received %q", got)
		}
		if ans := f.answersTo("p1"); len(ans) != 1 || !strings.Contains(ans[0], "relay assistant") {
			t.Errorf("answers %q, want the join's confirmation", ans)
		}
	})
}

// TestSharedLineAnswerEvery: a person bound to nothing is answered again
// only after an hour, and what the line remembers of answers is pruned
// after a day.
func TestSharedLineAnswerEvery(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		f := newLineFake()
		clock := &readsClock{}
		g := startGateway(t, cfg, setup{svc: messaging.Options{Now: clock.now},
			channels: []channels.Descriptor{f.descriptor("linechat", "", channels.Free)}})
		connectLine(t, g, g.newSandbox(t, "A").APIKey, "A", `{}`)
		postLine(t, g, lineItem{Line: "L1", ID: "a1", From: "p1", Text: "hi"})
		clock.advance(59 * time.Minute)
		postLine(t, g, lineItem{Line: "L1", ID: "a2", From: "p1", Text: "hi?"})
		if ans := f.answersTo("p1"); len(ans) != 1 {
			t.Fatalf("within the hour: %d answers, want 1", len(ans))
		}
		clock.advance(2 * time.Minute)
		postLine(t, g, lineItem{Line: "L1", ID: "a3", From: "p1", Text: "hi??"})
		if ans := f.answersTo("p1"); len(ans) != 2 {
			t.Fatalf("after the hour: %d answers, want 2", len(ans))
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM line_answers"); n != 1 {
			t.Errorf("%d answers remembered, want 1", n)
		}
		clock.advance(25 * time.Hour)
		postLine(t, g, lineItem{Line: "L1", ID: "a4", From: "p2", Text: "hello"})
		if n := count(t, g.DB, "SELECT COUNT(*) FROM line_answers"); n != 1 {
			t.Errorf("%d answers remembered after a day, want 1 (p1's pruned)", n)
		}
	})
}

package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// gateway is a running comm gateway (package gatewaytest) without
// workers: the websockets are Front.Live().
type gateway struct{ *gatewaytest.Gateway }

func start(t *testing.T, cfg store.Config, opts live.Options) *gateway {
	t.Helper()
	return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config:  gw.Config{Server: server.Options{Live: opts}},
		Workers: &gw.Workers{},
	})}
}

func (g *gateway) sandbox(t *testing.T) *messaging.Sandbox {
	t.Helper()
	sb, err := g.Svc.CreateSandbox(context.Background(), "live")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func (g *gateway) append(t *testing.T, project string, n int, typ string) {
	t.Helper()
	for i := range n {
		if _, err := g.Log.Append(context.Background(), project, typ, map[string]int{"i": i}); err != nil {
			t.Error(err)
			return
		}
	}
}

// client is a minimal GraphQL-over-websocket client written from the
// protocols' documents.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	legacy bool
}

func dial(t *testing.T, url, proto string, header http.Header) (*client, *http.Response, error) {
	return dialWith(t, websocket.Dialer{Subprotocols: []string{proto}, HandshakeTimeout: 5 * time.Second}, url, header)
}

func dialWith(t *testing.T, d websocket.Dialer, url string, header http.Header) (*client, *http.Response, error) {
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/graphql", header)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws, legacy: d.Subprotocols[0] == live.ProtocolLegacy}, resp, nil
}

type msg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (c *client) write(m msg) {
	c.t.Helper()
	if err := c.ws.WriteJSON(m); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads the next protocol message other than keep-alives.
func (c *client) next(timeout time.Duration) (msg, error) {
	for {
		c.ws.SetReadDeadline(time.Now().Add(timeout))
		var m msg
		if err := c.ws.ReadJSON(&m); err != nil {
			return m, err
		}
		if m.Type != "ka" && m.Type != "ping" && m.Type != "pong" {
			return m, nil
		}
	}
}

func (c *client) init(payload any) {
	c.t.Helper()
	b, _ := json.Marshal(payload)
	c.write(msg{Type: "connection_init", Payload: b})
	m, err := c.next(5 * time.Second)
	if err != nil || m.Type != "connection_ack" {
		c.t.Fatalf("init: %v %+v", err, m)
	}
}

func (c *client) subscribe(id, query string, vars map[string]any) {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	kind := "subscribe"
	if c.legacy {
		kind = "start"
	}
	c.write(msg{ID: id, Type: kind, Payload: b})
}

type event struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// events reads data messages of subscription id until n events arrived.
func (c *client) events(id string, n int) ([]event, error) {
	var out []event
	for len(out) < n {
		m, err := c.next(10 * time.Second)
		if err != nil {
			return out, err
		}
		if m.ID != id {
			continue // another subscription's
		}
		if want := map[bool]string{false: "next", true: "data"}[c.legacy]; m.Type != want {
			return out, fmt.Errorf("unexpected message %s %s %s (want %s)", m.ID, m.Type, m.Payload, want)
		}
		var p struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return out, err
		}
		for _, raw := range p.Data {
			if raw[0] == '[' {
				var evs []event
				if err := json.Unmarshal(raw, &evs); err != nil {
					return out, err
				}
				out = append(out, evs...)
			} else {
				var e event
				if err := json.Unmarshal(raw, &e); err != nil {
					return out, err
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

const subEvents = `subscription($after: Int, $type: String) { events(afterSeq: $after, type: $type) { seq type data } }`

// inOrder reads n events of subscription id and checks they are seqs 1..n.
func (c *client) inOrder(id string, n int) {
	c.t.Helper()
	evs, err := c.events(id, n)
	if err != nil {
		c.t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			c.t.Fatalf("subscription %s: position %d has seq %d", id, i, e.Seq)
		}
	}
}

// subscriber is a socket authenticated with key and subscribed (as id) to
// the project's events from its head.
func (g *gateway) subscriber(t *testing.T, key, id string) *client {
	t.Helper()
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.init(map[string]string{"apiKey": key})
	c.subscribe(id, subEvents, nil)
	return c
}

// TestReplayLiveReconnect: subscribe from 0 on a project with a backlog
// while events are appended concurrently; drop the socket mid-stream;
// resubscribe from the last seq received. The union is exactly 1..N.
func TestReplayLiveReconnect(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		for _, proto := range []string{live.ProtocolTransportWS, live.ProtocolLegacy} {
			t.Run(proto, func(t *testing.T) {
				g := start(t, cfg, live.Options{})
				sb := g.sandbox(t)
				const backlog, more = 1500, 1500
				g.append(t, sb.ProjectID, backlog, stream.MessageReceived)
				done := make(chan struct{})
				go func() { defer close(done); g.append(t, sb.ProjectID, more, stream.MessageSent) }()

				var got []event
				var last int64
				for round := 0; len(got) < backlog+more; round++ {
					c, _, err := dial(t, g.URL, proto, nil)
					if err != nil {
						t.Fatal(err)
					}
					c.init(map[string]string{"Authorization": "Bearer " + sb.APIKey})
					c.subscribe("s", subEvents, map[string]any{"after": last})
					want := min(700, backlog+more-len(got))
					evs, err := c.events("s", want)
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					for _, e := range evs {
						if e.Seq != last+1 {
							t.Fatalf("round %d: seq %d after %d", round, e.Seq, last)
						}
						last = e.Seq
					}
					got = append(got, evs...)
					c.ws.Close() // abrupt: no complete, no close frame
				}
				<-done
				if len(got) != backlog+more || last != backlog+more {
					t.Fatalf("received %d events, last %d", len(got), last)
				}
			})
		}
	})
}

// TestTypeFilterBatchesAndShape: a typed subscription sees only its type;
// eventBatches delivers the same stream in batches; aliases and partial
// selections are honoured.
func TestTypeFilterBatchesAndShape(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	for i := range 30 {
		typ := stream.MessageReceived
		if i%3 == 0 {
			typ = stream.MessageSent
		}
		g.append(t, sb.ProjectID, 1, typ)
	}
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.init(map[string]string{"apiKey": sb.APIKey})
	c.subscribe("typed", subEvents, map[string]any{"type": "message.sent"})
	evs, err := c.events("typed", 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Type != stream.MessageSent || e.Seq != int64(3*i+1) {
			t.Fatalf("typed event %d: %+v", i, e)
		}
	}
	c.subscribe("b", `subscription { eventBatches(afterSeq: 5, max: 7) { seq type data } }`, nil)
	evs, err = c.events("b", 25)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq != 6 || evs[24].Seq != 30 {
		t.Fatalf("batches: %d..%d", evs[0].Seq, evs[24].Seq)
	}
	c.subscribe("alias", `subscription { e: events(afterSeq: 29) { n: seq __typename } }`, nil)
	m, err := c.next(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":{"e":{"n":30,"__typename":"Event"}}}`; string(m.Payload) != want {
		t.Fatalf("aliased payload %s, want %s", m.Payload, want)
	}
	// Live: a new event reaches all three subscriptions.
	g.append(t, sb.ProjectID, 1, stream.MessageSent)
	seen := map[string]bool{}
	for len(seen) < 3 {
		m, err := c.next(5 * time.Second)
		if err != nil {
			t.Fatalf("live: %v (seen %v)", err, seen)
		}
		if !strings.Contains(string(m.Payload), "31") {
			t.Fatalf("live payload %s", m.Payload)
		}
		seen[m.ID] = true
	}
}

// TestBadInput: bad keys close with 4403; bad arguments and documents get
// error messages with codes while the connection and other subscriptions
// go on.
func TestBadInput(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{MaxSubscriptions: 3})
	sb := g.sandbox(t)
	for _, payload := range []any{
		map[string]string{"Authorization": "Bearer comm_sandbox_nope"},
		map[string]string{"apiKey": ""},
		nil,
	} {
		c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(payload)
		c.write(msg{Type: "connection_init", Payload: b})
		_, err = c.next(5 * time.Second)
		var ce *websocket.CloseError
		if !errorsAs(err, &ce) || ce.Code != 4403 {
			t.Errorf("init %v: %v, want close 4403", payload, err)
		}
	}
	// A key in the upgrade's header works too.
	h := http.Header{"Authorization": {"Bearer " + sb.APIKey}}
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, h)
	if err != nil {
		t.Fatal(err)
	}
	c.init(nil)
	c.subscribe("ok", subEvents, nil)
	for _, tc := range []struct{ query, code string }{
		{`subscription { events(afterSeq: -1) { seq } }`, "invalid_parameter"},
		{`subscription { events(type: "nope") { seq } }`, "invalid_parameter"},
		{`subscription { eventBatches(max: 0) { seq } }`, "invalid_parameter"},
		{`subscription { events { nope } }`, "GRAPHQL_VALIDATION_FAILED"},
		{`subscription {`, "GRAPHQL_PARSE_FAILED"},
		{`subscription { a: events { seq } b: events { seq } }`, "invalid_parameter"},
	} {
		c.subscribe("bad", tc.query, nil)
		m, err := c.next(5 * time.Second)
		if err != nil || m.Type != "error" || m.ID != "bad" || !strings.Contains(string(m.Payload), tc.code) {
			t.Errorf("%s: %v %s %s", tc.query, err, m.Type, m.Payload)
		}
	}
	// Too many operations on one connection.
	c.subscribe("2", subEvents, nil)
	c.subscribe("3", subEvents, nil)
	c.subscribe("4", subEvents, nil)
	m, err := c.next(5 * time.Second)
	if err != nil || m.ID != "4" || !strings.Contains(string(m.Payload), "rate_limited") {
		t.Errorf("fourth subscription: %v %+v", err, m)
	}
	// The good subscriptions still work.
	g.append(t, sb.ProjectID, 1, stream.MessageSent)
	ids := map[string]bool{}
	for len(ids) < 3 {
		m, err := c.next(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.ID] = true
	}
	// Queries and mutations run over the socket too (once a slot is free).
	c.write(msg{ID: "3", Type: "complete"})
	c.subscribe("q", `query { project { id } }`, nil)
	m, err = c.next(5 * time.Second)
	if err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), sb.ProjectID) {
		t.Fatalf("query over socket: %v %+v", err, m)
	}
	if m, err = c.next(5 * time.Second); err != nil || m.Type != "complete" {
		t.Fatalf("query complete: %v %+v", err, m)
	}
	// A duplicate id closes with 4409.
	c.subscribe("ok", subEvents, nil)
	_, err = c.next(5 * time.Second)
	var ce *websocket.CloseError
	if !errorsAs(err, &ce) || ce.Code != 4409 {
		t.Errorf("duplicate id: %v", err)
	}
}

// TestInitTimeoutAndOrigin: a client that never initialises is closed with
// 4408; a foreign browser origin is refused at the upgrade.
func TestInitTimeoutAndOrigin(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{InitTimeout: 300 * time.Millisecond})
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.next(5 * time.Second)
	var ce *websocket.CloseError
	if !errorsAs(err, &ce) || ce.Code != 4408 {
		t.Errorf("no init: %v, want 4408", err)
	}
	_, resp, err := dial(t, g.URL, live.ProtocolTransportWS, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: %v %v", err, resp)
	}
}

// TestGoroutinesReturnToBaseline: many subscribe/unsubscribe cycles and
// abrupt disconnects leave no goroutine or feed behind.
func TestGoroutinesReturnToBaseline(t *testing.T) {
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	g.append(t, sb.ProjectID, 50, stream.MessageSent)
	runtime.GC()
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
			if err != nil {
				t.Error(err)
				return
			}
			c.init(map[string]string{"apiKey": sb.APIKey})
			c.subscribe("a", subEvents, nil)
			c.subscribe("b", subEvents, map[string]any{"after": 45})
			if _, err := c.events("a", 10); err != nil {
				t.Error(err)
			}
			if i%2 == 0 {
				c.write(msg{ID: "a", Type: "complete"})
			}
			c.ws.Close()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if runtime.NumGoroutine() <= base+2 && g.Front.Live().Conns() == 0 && g.Front.Live().Broker().Feeds() == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("goroutines %d (baseline %d), conns %d, feeds %d", runtime.NumGoroutine(), base,
		g.Front.Live().Conns(), g.Front.Live().Broker().Feeds())
}

// TestSlowSubscriberPagesFromDatabase: a subscriber that stops reading
// while thousands of events commit is dropped from the live feed (its queue
// is bounded) and catches up from the database once it reads again: still
// exactly 1..N, in order.
func TestSlowSubscriberPagesFromDatabase(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{MaxQueueBytes: 8 << 10})
	sb := g.sandbox(t)
	c := g.subscriber(t, sb.APIKey, "s")
	time.Sleep(100 * time.Millisecond) // joined the live feed
	const n = 6000
	big := strings.Repeat("x", 400)
	for i := range n {
		if _, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageSent, map[string]any{"i": i, "pad": big}); err != nil {
			t.Fatal(err)
		}
	}
	c.inOrder("s", n)
}

// TestSocketCaps: sockets are capped per API key (4429 at connection_init,
// with a reason naming the cap) and per client IP (429 at the upgrade);
// closing one makes room again.
func TestSocketCaps(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{MaxPerKey: 2, MaxPerIP: 3})
	a, b := g.sandbox(t), g.sandbox(t)
	var open []*client
	for range 2 {
		c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.init(map[string]string{"apiKey": a.APIKey})
		open = append(open, c)
	}
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.write(msg{Type: "connection_init", Payload: json.RawMessage(`{"apiKey":"` + a.APIKey + `"}`)})
	_, err = c.next(5 * time.Second)
	var ce *websocket.CloseError
	if !errorsAs(err, &ce) || ce.Code != 4429 || !strings.Contains(ce.Text, "API key (at most 2)") {
		t.Fatalf("third socket of a key: %v, want close 4429", err)
	}
	// Another key from the same address: the third socket of the IP.
	waitConns(t, g, 2)
	c, _, err = dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.init(map[string]string{"apiKey": b.APIKey})
	_, resp, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth socket of an IP: %v %v", err, resp)
	}
	open[0].ws.Close()
	waitConns(t, g, 2)
	c, _, err = dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatalf("after closing one: %v", err)
	}
	c.init(map[string]string{"apiKey": a.APIKey})
}

func waitConns(t *testing.T, g *gateway, n int) {
	t.Helper()
	for range 200 {
		if g.Front.Live().Conns() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d sockets open, want %d", g.Front.Live().Conns(), n)
}

// TestSubscriptionsCounted: Subscriptions counts the subscriptions open
// on all sockets (for metrics), down to none once the socket closes.
func TestSubscriptionsCounted(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.init(map[string]string{"Authorization": "Bearer " + sb.APIKey})
	c.subscribe("s", subEvents, nil)
	c.subscribe("t", subEvents, nil)
	waitSubs := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for g.Front.Live().Subscriptions() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d subscriptions, want %d", g.Front.Live().Subscriptions(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSubs(2)
	c.ws.Close()
	waitSubs(0)
}

// TestFramesPerSubscriber: subscribers of one project that frame events
// alike share the feed's frames, and those that do not (another
// operation id, the legacy protocol, a type filter, a cursor ahead of the
// feed) get their own: each gets every event it asked for once, in
// order, under its own id and message type.
func TestFramesPerSubscriber(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	g.append(t, sb.ProjectID, 1, stream.MessageSent) // seq 1
	type want struct {
		c           *client
		id, typ     string
		from, count int64
	}
	var subs []want
	open := func(proto, id string, vars map[string]any, typ string, from, count int64) {
		c, _, err := dial(t, g.URL, proto, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.init(map[string]string{"apiKey": sb.APIKey})
		c.subscribe(id, subEvents, vars)
		subs = append(subs, want{c, id, typ, from, count})
	}
	// seqs 2..21 follow: 2, 4, ... are message.received, 3, 5, ... message.sent.
	open(live.ProtocolTransportWS, "1", map[string]any{"after": 1}, "", 2, 20)
	open(live.ProtocolTransportWS, "1", map[string]any{"after": 1}, "", 2, 20)
	open(live.ProtocolTransportWS, "other", map[string]any{"after": 1}, "", 2, 20)
	open(live.ProtocolLegacy, "1", map[string]any{"after": 1}, "", 2, 20)
	open(live.ProtocolTransportWS, "1", map[string]any{"after": 1, "type": stream.MessageReceived}, stream.MessageReceived, 2, 10)
	open(live.ProtocolTransportWS, "1", map[string]any{"after": 11}, "", 12, 10) // ahead of the feed
	time.Sleep(100 * time.Millisecond)                                           // replays done: they join the feed
	for i := range 20 {
		typ := stream.MessageReceived
		if i%2 == 1 {
			typ = stream.MessageSent
		}
		g.append(t, sb.ProjectID, 1, typ)
	}
	for _, s := range subs {
		evs, err := s.c.events(s.id, int(s.count))
		if err != nil {
			t.Fatalf("subscription %q (legacy %v, type %q): %v", s.id, s.c.legacy, s.typ, err)
		}
		next := s.from
		for _, e := range evs {
			if s.typ != "" && e.Type != s.typ {
				t.Fatalf("subscription %q filtered on %s got %s", s.id, s.typ, e.Type)
			}
			if e.Seq < next {
				t.Fatalf("subscription %q: seq %d again or out of order (want >= %d)", s.id, e.Seq, next)
			}
			if s.typ == "" && e.Seq != next {
				t.Fatalf("subscription %q: seq %d, want %d", s.id, e.Seq, next)
			}
			next = e.Seq + 1
		}
		// Nothing more arrives for it.
		s.c.ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var m msg
		for {
			if err := s.c.ws.ReadJSON(&m); err != nil {
				break
			}
			if m.Type == "next" || m.Type == "data" {
				t.Fatalf("subscription %q: a message after its last event: %s", s.id, m.Payload)
			}
		}
	}
}

// TestWriteTimeoutClosesNonReader: a subscriber that stops reading while
// events keep coming is closed once a write to it has waited WriteTimeout
// (pings are an hour apart and the send budget is not pressed: only the
// write watchdog can close it), and a subscriber of the same project that
// reads gets every event, in order.
func TestWriteTimeoutClosesNonReader(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{WriteTimeout: time.Second, PingInterval: time.Hour})
	sb := g.sandbox(t)
	reader := g.subscriber(t, sb.APIKey, "r")
	// The stuck one's kernel buffer is small, so the server's writes to it
	// block once its own send buffer is full.
	stuck := dialSmallBuffer(t, g.URL, 4096)
	stuck.init(map[string]string{"apiKey": sb.APIKey})
	stuck.subscribe("s", subEvents, nil)
	time.Sleep(100 * time.Millisecond) // both joined the live feed

	const n = 300 // 18 MB: more than the kernel's buffers and the socket's queue
	big := strings.Repeat("x", 60<<10)
	t0 := time.Now()
	go func() {
		for i := range n {
			if _, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageSent, map[string]any{"i": i, "pad": big}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reader.inOrder("r", n)
	for g.Front.Live().Conns() > 1 {
		if time.Since(t0) > 15*time.Second {
			t.Fatalf("the socket that reads nothing is still open after %v", time.Since(t0))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the socket that reads nothing closed %v after the first append", time.Since(t0).Round(time.Millisecond))
}

// dialSmallBuffer dials with a kernel receive buffer of size bytes, so
// that the server's writes to the socket fill it and return in part.
func dialSmallBuffer(t *testing.T, url string, size int) *client {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{live.ProtocolTransportWS}, HandshakeTimeout: 5 * time.Second,
		NetDial: func(network, addr string) (net.Conn, error) {
			c, err := net.Dial(network, addr)
			if err == nil {
				c.(*net.TCPConn).SetReadBuffer(size)
			}
			return c, err
		}}
	c, _, err := dialWith(t, d, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLargeFramesToASlowReader: frames larger than the socket's buffers,
// to a subscriber that reads slowly, are written in parts (the first part
// by the delivering goroutine, the rest by the socket's writer) and arrive
// whole, in order, with the server's pings between them.
func TestLargeFramesToASlowReader(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{PingInterval: 20 * time.Millisecond})
	sb := g.sandbox(t)
	c := dialSmallBuffer(t, g.URL, 64<<10)
	ws := c.ws
	var pings sync.WaitGroup
	pings.Add(1)
	var once sync.Once
	ws.SetPingHandler(func(data string) error {
		once.Do(pings.Done)
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	c.init(map[string]string{"apiKey": sb.APIKey})
	c.subscribe("s", subEvents, nil)
	time.Sleep(100 * time.Millisecond) // joined the live feed

	const n = 40
	pads := make([]string, n)
	go func() {
		for i := range n {
			pads[i] = strings.Repeat(string(rune('a'+i%26)), 300<<10+i)
		}
		for i := range n {
			if _, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageSent, map[string]any{"i": i, "pad": pads[i]}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range n {
		time.Sleep(5 * time.Millisecond) // a slow reader
		evs, err := c.events("s", 1)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var data struct {
			I   int    `json:"i"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(evs[0].Data, &data); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if evs[0].Seq != int64(i+1) || data.I != i || len(data.Pad) != 300<<10+i || strings.Count(data.Pad, data.Pad[:1]) != len(data.Pad) {
			t.Fatalf("event %d: seq %d, i %d, pad of %d bytes", i, evs[0].Seq, data.I, len(data.Pad))
		}
	}
	pings.Wait()
}

// TestControlFrames: a websocket ping from the client gets a pong with its
// data, and a close frame from the client gets its code back.
func TestControlFrames(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.init(map[string]string{"apiKey": sb.APIKey})
	pong := make(chan string, 1)
	c.ws.SetPongHandler(func(data string) error { pong <- data; return nil })
	if err := c.ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A protocol ping: its pong is read after the websocket pong.
	c.write(msg{Type: "ping"})
	c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m msg
	if err := c.ws.ReadJSON(&m); err != nil || m.Type != "pong" {
		t.Fatalf("got %+v (%v), want the protocol's pong", m, err)
	}
	select {
	case data := <-pong:
		if data != "are you there" {
			t.Fatalf("pong %q", data)
		}
	default:
		t.Fatal("no pong for the websocket ping")
	}
	if err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4321, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ws.ReadMessage()
	var ce *websocket.CloseError
	if !errorsAs(err, &ce) || ce.Code != 4321 {
		t.Fatalf("after the client's close: %v, want close 4321 echoed", err)
	}
	waitConns(t, g, 0)
}

// TestManySubscribersOneProject: a project with enough subscribers that
// each distribution is split among goroutines still gets every event to
// every subscriber once, in order.
func TestManySubscribersOneProject(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), live.Options{})
	sb := g.sandbox(t)
	const sockets, perSocket, n = 4, 12, 300
	var clients []*client
	for range sockets {
		c, _, err := dial(t, g.URL, live.ProtocolTransportWS, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.init(map[string]string{"apiKey": sb.APIKey})
		for i := range perSocket {
			c.subscribe(fmt.Sprint(i), subEvents, nil)
		}
		clients = append(clients, c)
	}
	time.Sleep(200 * time.Millisecond) // joined the live feed
	go g.append(t, sb.ProjectID, n, stream.MessageSent)
	var wg sync.WaitGroup
	for k, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := map[string]int64{}
			for got := 0; got < perSocket*n; got++ {
				m, err := c.next(10 * time.Second)
				if err != nil {
					t.Errorf("socket %d: %v after %d events", k, err, got)
					return
				}
				var p struct {
					Data struct{ Events event } `json:"data"`
				}
				if err := json.Unmarshal(m.Payload, &p); err != nil || m.Type != "next" {
					t.Errorf("socket %d: %s %s %v", k, m.Type, m.Payload, err)
					return
				}
				if want := next[m.ID] + 1; p.Data.Events.Seq != want {
					t.Errorf("socket %d, subscription %s: seq %d, want %d", k, m.ID, p.Data.Events.Seq, want)
					return
				}
				next[m.ID]++
			}
		}()
	}
	wg.Wait()
}

// TestRevokedKeyClosesCleanly: a socket whose key is revoked while large
// frames are on their way to it (larger than its receive buffer, so some
// are written in part) gets whole frames, in order, then the close 4403.
// The reader keeps reading: a close frame waits at most a second for the
// frame being written.
func TestRevokedKeyClosesCleanly(t *testing.T) {
	t.Parallel()
	// No pings: a pong the client sends after the server closed the socket
	// would be answered with a reset, which discards what the client has
	// not read yet (the server closes at once after its close frame).
	g := start(t, storetest.SQLite(t), live.Options{PingInterval: time.Hour})
	sb := g.sandbox(t)
	call := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+sb.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call("POST", "/v1/keys", `{"name":"socket"}`)
	var nk struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&nk); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("new key: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	c := dialSmallBuffer(t, g.URL, 64<<10)
	c.init(map[string]string{"apiKey": nk.APIKey})
	c.subscribe("s", subEvents, nil)
	time.Sleep(100 * time.Millisecond) // joined the live feed
	const n = 40
	stop, appended := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-appended }()
	go func() {
		defer close(appended)
		for i := range n {
			select {
			case <-stop:
				return
			default:
			}
			pad := strings.Repeat(string(rune('a'+i%26)), 300<<10)
			if _, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageSent, map[string]any{"i": i, "pad": pad}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; ; i++ {
		if i == 3 {
			if r := call("DELETE", "/v1/keys/"+nk.ID, ""); r.StatusCode != http.StatusOK {
				t.Fatalf("revoke: %d", r.StatusCode)
			}
		}
		evs, err := c.events("s", 1)
		var ce *websocket.CloseError
		if errorsAs(err, &ce) {
			if ce.Code != 4403 || i < 3 {
				t.Fatalf("after %d events: close %d %q, want 4403 after the revocation", i, ce.Code, ce.Text)
			}
			return
		}
		if err != nil {
			t.Fatalf("after %d events: %v (want whole frames, then close 4403)", i, err)
		}
		if evs[0].Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, evs[0].Seq)
		}
		if i == n-1 {
			t.Fatalf("every event arrived and the socket was not closed")
		}
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestEventPagesHaveAByteBudget: ten events of ~900 KB (plus small ones
// from a real inbound message) are stored. GET /v1/events?limit=100 (also
// long-polling), the GraphQL events(first: 1000) query and a websocket
// replay return pages within the default budget (4 MiB), never a partial
// event; paging on gets every event once, in order. An event larger than
// the budget comes alone.
func TestEventPagesHaveAByteBudget(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "pages")
		conn := g.connectTest(t, sb.APIKey)
		g.inject(t, sb.APIKey, conn.ID, `{"sender":"carol","text":"hello"}`)
		// The test channel takes at most 64 KiB of text: the large events
		// go straight into the log, as a large email's would.
		for i := range 10 {
			big := map[string]any{"i": i, "text": strings.Repeat(string(rune('a'+i)), 900_000)}
			if _, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageReceived, big); err != nil {
				t.Fatal(err)
			}
		}
		g.inject(t, sb.APIKey, conn.ID, `{"sender":"carol","text":"bye"}`)
		head := g.project(t, sb.APIKey).LastSeq
		budget := stream.DefaultPageBytes

		// REST, and long-polling.
		for _, wait := range []string{"", "&wait=1"} {
			var all []event
			pages := 0
			for after := int64(0); ; pages++ {
				resp := g.do(t, request{Path: fmt.Sprintf("/v1/events?limit=100&after_seq=%d%s", after, wait), Key: sb.APIKey})
				if resp.Status != 200 {
					t.Fatalf("GET /v1/events: %d %s", resp.Status, resp.Body)
				}
				var evs []event
				decodeJSON(t, resp.Body, &evs)
				if len(evs) == 0 {
					break
				}
				if len(evs) > 1 && len(resp.Body) > budget+len(evs)+1 {
					t.Fatalf("a page of %d events is %d bytes, budget %d", len(evs), len(resp.Body), budget)
				}
				all = append(all, evs...)
				after = evs[len(evs)-1].Seq
			}
			dense(t, "REST"+wait, all, head)
			if pages < 3 {
				t.Fatalf("REST%s: %d pages, want the large events spread over at least 3", wait, pages)
			}
		}
		first := g.events(t, sb.APIKey, "limit=100")
		if int64(len(first)) >= head {
			t.Fatalf("the first page holds all %d events", len(first))
		}

		// GraphQL: the first page says more follow; paging gets them all.
		var data struct {
			Events gqlEvents `json:"events"`
		}
		g.gqlOK(t, sb.APIKey, `{ events(first: 1000) { edges { cursor node { seq } } pageInfo { hasNextPage endCursor } } }`, nil, &data)
		if len(data.Events.Edges) != len(first) || !data.Events.PageInfo.HasNextPage {
			t.Fatalf("GraphQL first page: %d events (REST %d), hasNextPage %v", len(data.Events.Edges), len(first), data.Events.PageInfo.HasNextPage)
		}
		dense(t, "GraphQL", g.gqlEventsAll(t, sb.APIKey, 1000), head)

		// A websocket replay: every event once, in order, no message over
		// the budget unless it holds one event.
		c, _, err := g.dialWS(t, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.init(sb.APIKey)
		if err := c.subscribe("b", `subscription { eventBatches(afterSeq: 0, max: 1000) { seq type data } }`, nil); err != nil {
			t.Fatal(err)
		}
		evs, largest, err := c.events("b", head)
		if err != nil {
			t.Fatal(err)
		}
		dense(t, "websocket replay", evs, head)
		if largest > budget+1000 {
			t.Fatalf("a replayed message of %d bytes, budget %d", largest, budget)
		}

		// An event larger than the budget comes alone.
		huge := map[string]any{"text": strings.Repeat("z", budget+1000)}
		seq, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageReceived, huge)
		if err != nil {
			t.Fatal(err)
		}
		g.inject(t, sb.APIKey, conn.ID, `{"sender":"carol","text":"after the huge one"}`)
		if evs := g.events(t, sb.APIKey, fmt.Sprintf("after_seq=%d", seq-1)); len(evs) != 1 || evs[0].Seq != seq {
			t.Fatalf("the huge event: %d events", len(evs))
		}
		if evs := g.events(t, sb.APIKey, fmt.Sprintf("after_seq=%d", seq)); len(evs) == 0 || evs[0].Seq != seq+1 {
			t.Fatalf("after the huge event: %d events", len(evs))
		}
		var raw json.RawMessage
		g.gqlOK(t, sb.APIKey, `query($a: Int) { events(afterSeq: $a, first: 10) { edges { node { seq } } pageInfo { hasNextPage } } }`,
			map[string]any{"a": seq - 1}, &raw)
		if want := fmt.Sprintf(`{"events":{"edges":[{"node":{"seq":%d}}],"pageInfo":{"hasNextPage":true}}}`, seq); string(raw) != want {
			t.Fatalf("GraphQL around the huge event: %s, want %s", raw, want)
		}
	})
}

// newKey makes another key of the project through POST /v1/keys and
// returns its id and secret.
func (g *gateway) newKey(t *testing.T, key string) (id, secret string) {
	t.Helper()
	r := g.do(t, request{Method: "POST", Path: "/v1/keys", Key: key, ContentType: "application/json", Body: `{"name":"socket"}`})
	var nk api.NewKey
	decodeJSON(t, r.Body, &nk)
	if r.Status != 201 || nk.APIKey == "" {
		t.Fatalf("create key: %d %s", r.Status, r.Body)
	}
	return nk.ID, nk.APIKey
}

// subscribed opens a socket with key, subscribes to events and waits until
// the subscription is live (an event injected now arrives).
func (g *gateway) subscribed(t *testing.T, key, sandboxKey, connID string) *wsClient {
	t.Helper()
	c, _, err := g.dialWS(t, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.init(key)
	head := g.project(t, sandboxKey).LastSeq
	if err := c.subscribe("s", `subscription($a: Int) { events(afterSeq: $a) { seq type data } }`, map[string]any{"a": head}); err != nil {
		t.Fatal(err)
	}
	g.inject(t, sandboxKey, connID, `{"sender":"carol","text":"before"}`)
	if _, _, err := c.events("s", g.project(t, sandboxKey).LastSeq); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRevokedKeyClosesItsSockets: a socket authenticated with key K runs a
// subscription and mutations; revoking K (REST DELETE /v1/keys/{id})
// closes it with 4403 at once, and nothing is delivered on it afterwards.
// A key revoked behind the service's back (an operator's UPDATE, no hint)
// stops working at the socket's next operation, and its sockets close at
// the periodic check.
func TestRevokedKeyClosesItsSockets(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{Live: live.Options{KeyCheckInterval: time.Hour}})
		sb := g.newSandbox(t, "revoke")
		conn := g.connectTest(t, sb.APIKey)
		kid, key := g.newKey(t, sb.APIKey)
		c := g.subscribed(t, key, sb.APIKey, conn.ID)
		// A mutation works before.
		mutation := fmt.Sprintf(`mutation { injectInbound(connectionID: %q, input: {sender: "bob", text: "over the socket"}) { duplicate } }`, conn.ID)
		if err := c.subscribe("m", mutation, nil); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			m, err := c.next(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID == "m" && m.Type == "next" && strings.Contains(string(m.Payload), "errors") {
				t.Fatalf("mutation over the socket: %s", m.Payload)
			}
			done = m.ID == "m" && m.Type == "complete"
		}
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/keys/" + kid, Key: sb.APIKey}); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		revokedAt := g.project(t, sb.APIKey).LastSeq
		g.inject(t, sb.APIKey, conn.ID, `{"sender":"carol","text":"after"}`)
		for _, m := range c.wantClosed(4403, "revoked") {
			var p struct {
				Data struct {
					Events event `json:"events"`
				} `json:"data"`
			}
			json.Unmarshal(m.Payload, &p)
			if m.Type == "next" && p.Data.Events.Seq > revokedAt {
				t.Errorf("event %d delivered after the revocation", p.Data.Events.Seq)
			}
		}
		// The key cannot open another socket.
		c2, _, err := g.dialWS(t, 0)
		if err != nil {
			t.Fatal(err)
		}
		c2.write(wsMsg{Type: "connection_init", Payload: json.RawMessage(`{"apiKey":"` + key + `"}`)})
		c2.wantClosed(4403, "revoked")

		// Revoked without a hint: the next operation finds out.
		_, key2 := g.newKey(t, sb.APIKey)
		c = g.subscribed(t, key2, sb.APIKey, conn.ID)
		revokeAllBut(t, g, sb.ProjectID, key2)
		if err := c.subscribe("m2", mutation, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.wantClosed(4403, "revoked") {
			if m.ID == "m2" {
				t.Errorf("the mutation answered %s %s", m.Type, m.Payload)
			}
		}
		if n := count(t, g.DB, "SELECT count(*) FROM messages WHERE text = 'over the socket'"); n != 1 {
			t.Errorf("%d messages from mutations over the socket, want 1", n)
		}
	})
}

// revokeAllBut revokes key (the secret) behind the service's back, as an
// operator's UPDATE would: no hint reaches the sockets.
func revokeAllBut(t *testing.T, g *gateway, projectID, key string) {
	t.Helper()
	hash, err := apikey.Parse(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.DB.W.Exec(g.DB.Rebind("UPDATE api_keys SET revoked_at = ? WHERE hash = ? AND project_id = ?"), time.Now().UTC(), hash[:], projectID); err != nil {
		t.Fatal(err)
	}
}

// TestRevokedKeyClosesSocketsOnReplicas: two gateways on one database; a
// socket on the first, the key revoked through the second. On PostgreSQL
// the revocation's NOTIFY closes it (periodic checks are off); on both
// engines the periodic check closes the socket of a key revoked without
// any hint.
func TestRevokedKeyClosesSocketsOnReplicas(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		check := time.Hour // only the NOTIFY can close the socket
		if cfg.URL == "" {
			check = 200 * time.Millisecond // SQLite has no NOTIFY
		}
		g1 := start(t, cfg, server.Options{Live: live.Options{KeyCheckInterval: check}})
		g2 := start(t, cfg, server.Options{})
		sb := g1.newSandbox(t, "replicas")
		conn := g1.connectTest(t, sb.APIKey)
		kid, key := g1.newKey(t, sb.APIKey)
		c := g1.subscribed(t, key, sb.APIKey, conn.ID)
		if r := g1.do(t, request{Method: "GET", Path: "/v1/project", Key: key}); r.Status != 200 {
			t.Fatalf("GET /v1/project: %d %s", r.Status, r.Body)
		}
		if r := g2.do(t, request{Method: "DELETE", Path: "/v1/keys/" + kid, Key: sb.APIKey}); r.Status != 200 {
			t.Fatalf("revoke on the other replica: %d %s", r.Status, r.Body)
		}
		c.wantClosed(4403, "revoked")
		// The first replica knew the key (its REST request above); it
		// forgets it on the signal (PostgreSQL), or within the 2 s it
		// trusts a key it read (SQLite, which has no signal).
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := g1.do(t, request{Method: "GET", Path: "/v1/project", Key: key})
			if r.Status == 401 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revoked key still works on the other replica: %d", r.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// No hint at all: the periodic check.
		g3 := start(t, cfg, server.Options{Live: live.Options{KeyCheckInterval: 200 * time.Millisecond}})
		_, key2 := g3.newKey(t, sb.APIKey)
		c = g3.subscribed(t, key2, sb.APIKey, conn.ID)
		revokeAllBut(t, g2, sb.ProjectID, key2)
		c.wantClosed(4403, "revoked")
	})
}

// heapWatch samples the heap (after a GC) until stopped, and calls abort
// once if it grows past bound over base, so that a regression fails the
// test before it takes the machine's memory.
type heapWatch struct {
	base, peak uint64
	stop, done chan struct{}
	once       sync.Once
}

func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// watchHeap samples the heap until end (or the test's end, so a test that
// stops early leaves no sampler to call abort after it).
func watchHeap(t *testing.T, bound uint64, abort func()) *heapWatch {
	h := &heapWatch{base: heapNow(), stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { h.end() })
	h.peak = h.base
	go func() {
		defer close(h.done)
		aborted := false
		for {
			select {
			case <-h.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			now := heapNow()
			h.peak = max(h.peak, now)
			if !aborted && now > h.base+bound {
				aborted = true
				abort()
			}
		}
	}()
	return h
}

func (h *heapWatch) end() (base, peak uint64) {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	return h.base, h.peak
}

// waitNoSockets waits (up to a minute) until the gateway has no socket open
// and reports whether it got there.
func waitNoSockets(g *gateway) bool {
	for range 1200 {
		if g.Front.Live().Conns() == 0 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// TestWebsocketFloodsStayBounded reproduces issue 12's attacks on the
// websocket endpoint, with clients that never read: 5 sockets × 20
// eventBatches(max: 1000) subscriptions from seq 0 over a ~26 MB backlog of
// ~120 KB events, then 5 sockets sending 2,500 large pings. The server's
// heap stays bounded and the sockets are closed; a normal subscriber then
// still gets every event once, in order.
func TestWebsocketFloodsStayBounded(t *testing.T) {
	g := start(t, storetest.SQLite(t), server.Options{Live: live.Options{WriteTimeout: 2 * time.Second}})
	sb := g.newSandbox(t, "flood")
	conn := g.connectTest(t, sb.APIKey)
	body, _ := json.Marshal(map[string]string{"sender": "mallory",
		"text": strings.Repeat("t", 60<<10), "html": "<p>" + strings.Repeat("h", 60<<10) + "</p>"})
	for range 220 {
		g.inject(t, sb.APIKey, conn.ID, string(body))
	}
	head := g.project(t, sb.APIKey).LastSeq
	var backlog int64
	if err := g.DB.R.QueryRow(g.DB.Rebind("SELECT sum(length(body)) FROM events WHERE project_id = ?"), sb.ProjectID).Scan(&backlog); err != nil {
		t.Fatal(err)
	}
	const mb = 1 << 20

	var clients []*wsClient
	abort := func() {
		t.Error("heap past its bound: closing the attack's sockets")
		for _, c := range clients {
			c.ws.Close()
		}
	}

	// 5 sockets × 20 eventBatches subscriptions, never read.
	h := watchHeap(t, 200*mb, abort)
	for range 5 {
		c, _, err := g.dialWS(t, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c.init(sb.APIKey)
		clients = append(clients, c)
		for i := range 20 {
			if err := c.subscribe(fmt.Sprint(i), `subscription { eventBatches(afterSeq: 0, max: 1000) { seq type data } }`, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	closed := waitNoSockets(g)
	base, peak := h.end()
	t.Logf("5 sockets × 20 eventBatches over a %d MB backlog (%d events), never read: heap %d MB -> peak %d MB (+%d MB)",
		backlog/mb, head, base/mb, peak/mb, (peak-base)/mb)
	if !closed {
		t.Errorf("%d sockets that never read are still open", g.Front.Live().Conns())
	}
	for _, c := range clients {
		c.ws.Close()
	}

	// 2,500 pings of ~60 KB over 5 sockets, the pongs never read.
	clients = nil
	h = watchHeap(t, 64*mb, abort)
	ping, _ := json.Marshal(wsMsg{Type: "ping", Payload: json.RawMessage(`{"pad":"` + strings.Repeat("p", 60_000) + `"}`)})
	var sent, refused int
	for range 5 {
		c, _, err := g.dialWS(t, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c.init(sb.APIKey)
		clients = append(clients, c)
	}
	for range 500 {
		for _, c := range clients {
			c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := c.ws.WriteMessage(websocket.TextMessage, ping); err != nil {
				refused++
				continue
			}
			sent++
		}
	}
	closed = waitNoSockets(g)
	base, peak = h.end()
	t.Logf("2,500 pings of %d KB over 5 sockets, pongs never read: %d written before the server closed the sockets; heap %d MB -> peak %d MB (+%d MB)",
		len(ping)/1000, sent, base/mb, peak/mb, (peak-base)/mb)
	if !closed {
		t.Errorf("%d sockets flooding pings are still open", g.Front.Live().Conns())
	}
	for _, c := range clients {
		c.ws.Close()
	}

	// A normal subscriber still gets every event once, in order. It
	// takes batches of a few events: with this test's 2 s write timeout
	// a reader that spends longer than that decoding one 25 MB frame (the
	// race detector on a busy machine) would be closed as a slow reader,
	// which is the bound working, not what this step checks.
	c, _, err := g.dialWS(t, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.init(sb.APIKey)
	if err := c.subscribe("b", `subscription { eventBatches(afterSeq: 0, max: 5) { seq type data } }`, nil); err != nil {
		t.Fatal(err)
	}
	evs, _, err := c.events("b", head)
	if err != nil {
		t.Fatal(err)
	}
	dense(t, "subscriber after the floods", evs, head)
}

// TestWebsocketsShareABoundedSendBudget: many sockets of different keys
// that never read cannot make the server queue more than its server-wide
// send budget (here 8 MiB, where each socket alone may queue 4 MiB), and
// do not keep it: the sockets holding a large share without draining are
// closed. A reading subscriber on another socket, started in the middle of
// the attack, gets every event once, in order, live ones included.
func TestWebsocketsShareABoundedSendBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("memory and send-budget bounds are measured without the race detector")
	}
	const mb = 1 << 20
	const total = 8 * mb
	g := start(t, storetest.SQLite(t), server.Options{Live: live.Options{
		// The budget, not the write timeout, must bound them; the sockets
		// holding it without draining are closed after StallTimeout.
		WriteTimeout: 30 * time.Second,
		StallTimeout: time.Second, TotalQueueBytes: total,
	}})
	sb := g.newSandbox(t, "budget")
	conn := g.connectTest(t, sb.APIKey)
	body, _ := json.Marshal(map[string]string{"sender": "mallory",
		"text": strings.Repeat("t", 60<<10), "html": "<p>" + strings.Repeat("h", 60<<10) + "</p>"})
	for range 120 {
		g.inject(t, sb.APIKey, conn.ID, string(body))
	}
	var keys []string
	for range 8 {
		_, k := g.newKey(t, sb.APIKey)
		keys = append(keys, k)
	}

	var clients []*wsClient
	abort := func() {
		t.Error("heap past its bound: closing the attack's sockets")
		for _, c := range clients {
			c.ws.Close()
		}
	}
	// The most bytes queued on all sockets, sampled.
	var maxQueued atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if q := g.Front.Live().QueuedBytes(); q > maxQueued.Load() {
				maxQueued.Store(q)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	// 8 keys × 4 sockets × 5 eventBatches subscriptions, never read: alone
	// each socket may queue 4 MiB (128 MiB in all), and read a page more.
	// (The heap includes the test's clients: the reader keeps ~17 MB.)
	h := watchHeap(t, 128*mb, abort)
	for _, k := range keys {
		for range 4 {
			c, _, err := g.dialWS(t, 4096)
			if err != nil {
				t.Fatal(err)
			}
			c.init(k)
			clients = append(clients, c)
			for i := range 5 {
				if err := c.subscribe(fmt.Sprint(i), `subscription { eventBatches(afterSeq: 0, max: 1000) { seq type data } }`, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// A reader on another socket, while the attack goes on and new events
	// are appended.
	reader, _, err := g.dialWS(t, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader.init(sb.APIKey)
	t0 := time.Now()
	if err := reader.subscribe("r", `subscription { eventBatches(afterSeq: 0, max: 1000) { seq type data } }`, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		g.inject(t, sb.APIKey, conn.ID, fmt.Sprintf(`{"sender":"carol","text":"live %d"}`, i))
	}
	head := g.project(t, sb.APIKey).LastSeq
	evs, _, err := reader.events("r", head)
	if err != nil {
		t.Fatal(err)
	}
	dense(t, "reader during the attack", evs, head)
	readTime := time.Since(t0)
	reader.ws.Close()

	closed := waitNoSockets(g)
	base, peak := h.end()
	close(stopSampling)
	<-sampled
	t.Logf("32 sockets of 8 keys × 5 eventBatches, never read, send budget %d MB: at most %.1f MB queued on all sockets; heap %d MB -> peak %d MB (+%d MB) (the test's clients included); the reader got %d events in order in %s",
		total/mb, float64(maxQueued.Load())/mb, base/mb, peak/mb, (peak-base)/mb, len(evs), readTime.Round(time.Millisecond))
	if q := maxQueued.Load(); q > total {
		t.Errorf("%d bytes queued on all sockets, budget %d", q, total)
	}
	if !closed {
		t.Errorf("%d sockets that never read are still open", g.Front.Live().Conns())
	}
	if q := g.Front.Live().QueuedBytes(); q != 0 {
		t.Errorf("%d bytes still counted queued with every socket closed", q)
	}
	for _, c := range clients {
		c.ws.Close()
	}
}

// TestWebsocketResultWaitsForTheSendBudget: while sockets that do not read
// hold the server-wide send budget, a query's result on another socket
// waits for room and then fails with a clear rate_limited error (not
// queued past the budget); once the budget has room again, the same query
// is answered.
func TestWebsocketResultWaitsForTheSendBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("memory and send-budget bounds are measured without the race detector")
	}
	const total = 1 << 20
	g := start(t, storetest.SQLite(t), server.Options{Live: live.Options{
		WriteTimeout: time.Minute, StallTimeout: time.Minute, // nothing frees the budget by itself
		TotalQueueBytes: total, BusyTimeout: 500 * time.Millisecond,
	}})
	sb := g.newSandbox(t, "busy")
	conn := g.connectTest(t, sb.APIKey)
	body, _ := json.Marshal(map[string]string{"sender": "mallory",
		"text": strings.Repeat("t", 60<<10), "html": "<p>" + strings.Repeat("h", 60<<10) + "</p>"})
	for range 60 {
		g.inject(t, sb.APIKey, conn.ID, string(body))
	}
	var hogs []*wsClient
	for range 4 {
		c, _, err := g.dialWS(t, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c.init(sb.APIKey)
		if err := c.subscribe("h", `subscription { eventBatches(afterSeq: 0, max: 1000) { seq type data } }`, nil); err != nil {
			t.Fatal(err)
		}
		hogs = append(hogs, c)
	}
	// Full, and settled: the kernel's socket buffers take what they can
	// while the writers start, so wait until nothing more drains.
	full, last := false, int64(-1)
	for range 400 {
		q := g.Front.Live().QueuedBytes()
		if q > total*3/4 && q == last {
			full = true
			break
		}
		last = q
		time.Sleep(100 * time.Millisecond)
	}
	if !full {
		t.Fatalf("the sockets that do not read hold only %d bytes of the %d budget", g.Front.Live().QueuedBytes(), total)
	}
	c, _, err := g.dialWS(t, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.init(sb.APIKey)
	const query = `{ events(first: 3) { edges { node { seq data } } } }` // ~370 KB: more than the room left, less than the budget
	if err := c.subscribe("q1", query, nil); err != nil {
		t.Fatal(err)
	}
	m, err := c.next(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with the budget held (%d of %d bytes queued): %s %.300s", g.Front.Live().QueuedBytes(), total, m.Type, m.Payload)
	if m.Type != "error" || !strings.Contains(string(m.Payload), "rate_limited") || !strings.Contains(string(m.Payload), "send queues are full") {
		t.Fatalf("a result past the send budget: %s %.300s, want an error saying the send queues are full", m.Type, m.Payload)
	}
	if q := g.Front.Live().QueuedBytes(); q > total {
		t.Fatalf("%d bytes queued, budget %d", q, total)
	}
	for _, h := range hogs {
		h.ws.Close()
	}
	for range 400 {
		if g.Front.Live().Conns() == 1 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err := c.subscribe("q2", query, nil); err != nil {
		t.Fatal(err)
	}
	m, err = c.next(20 * time.Second)
	if err != nil || m.Type != "next" || m.ID != "q2" {
		t.Fatalf("with room again: %v %s %.300s", err, m.Type, m.Payload)
	}
}

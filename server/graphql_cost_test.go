package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// heapDuring runs fn and returns the live heap after a collection before
// it and the largest heap sampled while it ran: what the in-process server
// held at its peak, garbage not yet collected included.
func heapDuring(fn func()) (base, peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak = ms.HeapAlloc, ms.HeapAlloc
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	return base, peak
}

const mib = 1 << 20

// appendSized appends n message.received events of about size bytes each
// to project's stream in one transaction.
func appendSized(t *testing.T, log *stream.Log, project string, n, size int) {
	t.Helper()
	pad := strings.Repeat("x", size)
	_, err := log.Write(context.Background(), project, func(tx *stream.Tx) error {
		for i := range n {
			if err := tx.Append(stream.MessageReceived, json.RawMessage(`{"n":`+strconv.Itoa(i)+`,"pad":"`+pad+`"}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append %d events: %v", n, err)
	}
}

// attackQuery is the query: 124 aliases of a full page of events.
func attackQuery() string {
	var q strings.Builder
	q.WriteString("{")
	for i := range 124 {
		fmt.Fprintf(&q, "e%d:events(first:1000){edges{node{data}}}", i)
	}
	q.WriteString("}")
	return q.String()
}

// TestGraphQLCostAttack: the 5 KB query of 124 aliased
// events(first: 1000) over a stream of 1000 events of 1.3 KB (a 162 MB
// answer and +900 MB of server memory before) is refused for its cost
// before anything is read, and the server's heap stays flat. With the
// cost limit lifted by the operator, the byte budget still refuses it
// without building the answer.
func TestGraphQLCostAttack(t *testing.T) {
	// Not parallel: the heap is measured.
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		for _, c := range []struct {
			name string
			opts graph.Options
			code string
		}{
			{"default limits", graph.Options{}, graph.CodeComplexityLimit},
			{"cost limit lifted", graph.Options{ComplexityLimit: 1 << 40}, graph.CodeResponseTooLarge},
		} {
			t.Run(c.name, func(t *testing.T) {
				g := start(t, cfg, server.Options{GraphQL: c.opts})
				sb := g.newSandbox(t, "attack")
				appendSized(t, g.Log, sb.ProjectID, 1000, 1300)
				q := attackQuery()
				var res gqlResult
				base, peak := heapDuring(func() { res = g.gql(t, sb.APIKey, q, nil) })
				t.Logf("%s: query %d bytes; answer status %d, %d bytes; server heap %d MB before, peak +%.1f MB",
					c.name, len(q), res.Status, len(res.Body), base/mib, float64(peak-base)/mib)
				if len(res.Errors) != 1 || (len(res.Data) > 0 && string(res.Data) != "null") {
					t.Fatalf("status %d, body %.500s", res.Status, res.Body)
				}
				e := res.Errors[0]
				if e.Extensions["code"] != c.code {
					t.Errorf("code %v, want %s: %s", e.Extensions["code"], c.code, e.Message)
				}
				if c.code == graph.CodeComplexityLimit && (!strings.Contains(e.Message, "complexity") ||
					!strings.Contains(e.Message, strconv.Itoa(graph.DefaultComplexityLimit)) || !strings.Contains(e.Message, "first")) {
					t.Errorf("the cost error does not explain itself: %q", e.Message)
				}
				if c.code == graph.CodeResponseTooLarge && !strings.Contains(e.Message, strconv.Itoa(graph.DefaultMaxResponseBytes)) {
					t.Errorf("the budget error does not state the budget: %q", e.Message)
				}
				if len(res.Body) > 4<<10 {
					t.Errorf("the refusal is %d bytes", len(res.Body))
				}
				if grew := peak - base; grew > 64*mib {
					t.Errorf("the server's heap grew by %d MB answering the attack", grew/mib)
				}
			})
		}
	})
}

// TestGraphQLPageSizes: Relay connections omitting first/last answer a
// page of the REST default (50) with hasNextPage, before a cursor the last
// 50; a page over the maximum is refused naming the argument (over HTTP
// and the websocket, for every paged field of Query); the maximum itself
// is served.
func TestGraphQLPageSizes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		sb := g.newSandbox(t, "pages")
		key := sb.APIKey
		const n = 52
		conn := g.connectTest(t, key)
		for range n - 1 {
			g.connectTest(t, key)
		}
		var msgIDs []string
		for i := range n {
			msgIDs = append(msgIDs, g.inject(t, key, conn.ID, fmt.Sprintf(`{"sender":"s%02d","text":"hi"}`, i)).ID)
		}

		type page struct {
			TotalCount int `json:"totalCount"`
			Edges      []struct {
				Cursor string `json:"cursor"`
				Node   struct {
					ID string `json:"id"`
				} `json:"node"`
			} `json:"edges"`
			PageInfo struct {
				HasNextPage     bool `json:"hasNextPage"`
				HasPreviousPage bool `json:"hasPreviousPage"`
			} `json:"pageInfo"`
		}
		sel := `{ totalCount edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage } }`
		var all map[string]page
		g.gqlOK(t, key, `{ connections `+sel+` conversations `+sel+` messages `+sel+` }`, nil, &all)
		for _, f := range []string{"connections", "conversations", "messages"} {
			p := all[f]
			if p.TotalCount != n || len(p.Edges) != 50 || !p.PageInfo.HasNextPage {
				t.Errorf("%s without first: %d edges of %d, hasNextPage %v; want 50 and a next page",
					f, len(p.Edges), p.TotalCount, p.PageInfo.HasNextPage)
			}
		}
		if m := all["messages"]; len(m.Edges) == 50 && (m.Edges[0].Node.ID != msgIDs[0] || m.Edges[49].Node.ID != msgIDs[49]) {
			t.Errorf("messages without first did not start with the oldest")
		}

		// Before a cursor, without first or last: the 50 rows right
		// before it.
		var before struct {
			Messages page `json:"messages"`
		}
		last := all["messages"].Edges
		var rest struct {
			Messages page `json:"messages"`
		}
		g.gqlOK(t, key, `query($c: Cursor) { messages(after: $c) `+sel+` }`, map[string]any{"c": last[len(last)-1].Cursor}, &rest)
		if len(rest.Messages.Edges) != 2 || rest.Messages.Edges[1].Node.ID != msgIDs[n-1] {
			t.Fatalf("the page after the first: %+v", rest.Messages)
		}
		g.gqlOK(t, key, `query($c: Cursor) { messages(before: $c) `+sel+` }`, map[string]any{"c": rest.Messages.Edges[1].Cursor}, &before)
		if b := before.Messages; len(b.Edges) != 50 || b.Edges[0].Node.ID != msgIDs[1] || b.Edges[49].Node.ID != msgIDs[n-2] || !b.PageInfo.HasPreviousPage {
			t.Errorf("messages(before:) without last: %d edges, hasPreviousPage %v; want the 50 before it", len(b.Edges), b.PageInfo.HasPreviousPage)
		}

		// The maximum is served.
		var full struct {
			Messages page `json:"messages"`
		}
		g.gqlOK(t, key, `{ messages(first: 500) `+sel+` }`, nil, &full)
		if len(full.Messages.Edges) != n || full.Messages.PageInfo.HasNextPage {
			t.Errorf("messages(first: 500): %d edges, hasNextPage %v", len(full.Messages.Edges), full.Messages.PageInfo.HasNextPage)
		}
		var evs struct {
			Events struct {
				Edges []struct {
					Cursor int `json:"cursor"`
				} `json:"edges"`
			} `json:"events"`
		}
		g.gqlOK(t, key, `{ events(first: 1000) { edges { cursor } } }`, nil, &evs)
		if len(evs.Events.Edges) == 0 {
			t.Errorf("events(first: 1000) answered no events")
		}
		// first: null is the default, as REST's absent limit.
		g.gqlOK(t, key, `{ events(first: null) { edges { cursor } } }`, nil, &evs)
		if len(evs.Events.Edges) != 100 {
			t.Errorf("events(first: null): %d events, want the default 100", len(evs.Events.Edges))
		}

		// Too large is refused naming the argument, on every paged field of
		// Query, present or future.
		schema := graph.NewExecutableSchema(graph.Config{}).Schema()
		var over []struct{ query, field, param string }
		for _, f := range schema.Query.Fields {
			for _, a := range []string{"first", "last", "limit"} {
				if f.Arguments.ForName(a) == nil {
					continue
				}
				sub := ""
				if k := schema.Types[f.Type.Name()].Kind; k == ast.Object || k == ast.Interface || k == ast.Union {
					sub = " { __typename }"
				}
				over = append(over, struct{ query, field, param string }{
					fmt.Sprintf("{ %s(%s: 100000)%s }", f.Name, a, sub), f.Name, a})
			}
		}
		if len(over) < 6 {
			t.Fatalf("only %d paged arguments found on Query: %v", len(over), over)
		}
		ws := dialGraphQL(t, g, key)
		for _, c := range over {
			e := gqlFail(t, g.gql(t, key, c.query, nil), c.field, "invalid_parameter", c.param)
			if !strings.Contains(e.Message, "at most") {
				t.Errorf("%s: message %q does not state the maximum", c.query, e.Message)
			}
			if e := ws.query(t, c.query); len(e.Errors) == 0 || e.Errors[0].Extensions["code"] != "invalid_parameter" ||
				e.Errors[0].Extensions["param"] != c.param {
				t.Errorf("%s over the websocket: %+v", c.query, e)
			}
		}
		gqlFail(t, g.gql(t, key, `{ messages(first: 501) { totalCount } }`, nil), "messages", "invalid_parameter", "first")
		gqlFail(t, g.gql(t, key, `{ conversations(last: 501) { totalCount } }`, nil), "conversations", "invalid_parameter", "last")
		gqlFail(t, g.gql(t, key, `{ events(first: 1001) { edges { cursor } } }`, nil), "events", "invalid_parameter", "first")
	})
}

// TestGraphQLResponseBudget: with a 1 MiB budget, a query whose answer
// would be 128 MB (400 events of 16 KB, each selected 20 times: within the
// cost limit) is refused with response_too_large, over HTTP and over the
// websocket, while the server's heap stays far below what building the
// answer takes; an answer within the budget is served in full.
func TestGraphQLResponseBudget(t *testing.T) {
	// Not parallel: the heap is measured.
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		const budget = 1 * mib
		g := start(t, cfg, server.Options{GraphQL: graph.Options{MaxResponseBytes: budget}})
		sb := g.newSandbox(t, "budget")
		appendSized(t, g.Log, sb.ProjectID, 400, 16<<10)
		var q strings.Builder
		q.WriteString("{ events(first: 400) { edges { node {")
		for i := range 20 {
			fmt.Fprintf(&q, " d%d: data", i)
		}
		q.WriteString(" } } } }")

		var res gqlResult
		base, peak := heapDuring(func() { res = g.gql(t, sb.APIKey, q.String(), nil) })
		t.Logf("answer status %d, %d bytes; server heap %d MB before, peak +%.1f MB (the answer would be %d MB)",
			res.Status, len(res.Body), base/mib, float64(peak-base)/mib, 400*20*(16<<10)/mib)
		e := gqlFail(t, res, "events", graph.CodeResponseTooLarge, "")
		if len(res.Errors) != 1 || !strings.Contains(e.Message, strconv.Itoa(budget)) {
			t.Errorf("errors %+v", res.Errors)
		}
		if len(res.Body) > 4<<10 {
			t.Errorf("the refusal is %d bytes", len(res.Body))
		}
		if grew := peak - base; grew > 48*mib {
			t.Errorf("the server's heap grew by %d MB refusing the answer", grew/mib)
		}

		// The websocket runs queries through the same executor.
		ws := dialGraphQL(t, g, sb.APIKey)
		if r := ws.query(t, q.String()); len(r.Errors) != 1 || r.Errors[0].Extensions["code"] != graph.CodeResponseTooLarge {
			t.Errorf("over the websocket: %+v", r)
		}

		// Within the budget: served whole.
		var ok struct {
			Events struct {
				Edges []struct {
					Node struct {
						Data json.RawMessage `json:"data"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"events"`
		}
		g.gqlOK(t, sb.APIKey, `{ events(first: 40) { edges { node { data } } } }`, nil, &ok)
		if len(ok.Events.Edges) != 40 || len(ok.Events.Edges[39].Node.Data) < 16<<10 {
			t.Errorf("a 650 KB answer within the budget: %d events", len(ok.Events.Edges))
		}
		if r := ws.query(t, `{ events(first: 40) { edges { node { data } } } }`); len(r.Errors) != 0 || len(r.Data) < 40*(16<<10) {
			t.Errorf("within the budget over the websocket: %d bytes, errors %+v", len(r.Data), r.Errors)
		}
	})
}

// gqlSocket is a graphql-transport-ws connection running queries.
type gqlSocket struct {
	ws *websocket.Conn
	n  int
}

func dialGraphQL(t *testing.T, g *gateway, key string) *gqlSocket {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(g.URL, "http")+"/graphql", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	s := &gqlSocket{ws: ws}
	s.write(t, map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": key}})
	if m := s.read(t); m.Type != "connection_ack" {
		t.Fatalf("connection_init: %+v", m)
	}
	return s
}

type wsMessage struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

func (s *gqlSocket) write(t *testing.T, v any) {
	t.Helper()
	if err := s.ws.WriteJSON(v); err != nil {
		t.Fatalf("websocket write: %v", err)
	}
}

func (s *gqlSocket) read(t *testing.T) wsMessage {
	t.Helper()
	for {
		s.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		var m wsMessage
		if err := s.ws.ReadJSON(&m); err != nil {
			t.Fatalf("websocket read: %v", err)
		}
		if m.Type != "ping" && m.Type != "pong" && m.Type != "ka" {
			return m
		}
	}
}

// query runs one query over the socket and returns its result (an
// "error" message's errors as the result's errors).
func (s *gqlSocket) query(t *testing.T, q string) gqlResult {
	t.Helper()
	s.n++
	id := strconv.Itoa(s.n)
	s.write(t, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": q}})
	for {
		m := s.read(t)
		if m.ID != id {
			continue
		}
		switch m.Type {
		case "next":
			var out struct {
				Data   json.RawMessage `json:"data"`
				Errors []gqlError      `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &out); err != nil {
				t.Fatalf("next %s: %v", m.Payload, err)
			}
			if c := s.read(t); c.ID != id || c.Type != "complete" {
				t.Fatalf("after next: %+v", c)
			}
			return gqlResult{response: response{Status: http.StatusOK, Body: m.Payload}, Data: out.Data, Errors: out.Errors}
		case "error":
			var errs []gqlError
			if err := json.Unmarshal(m.Payload, &errs); err != nil {
				t.Fatalf("error %s: %v", m.Payload, err)
			}
			return gqlResult{response: response{Body: m.Payload}, Errors: errs}
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
}

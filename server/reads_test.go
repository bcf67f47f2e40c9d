package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// readsClock is a service clock a test moves (messaging.Options.Now).
type readsClock struct{ off atomic.Int64 }

func (c *readsClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *readsClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// readConn is a connection as REST shows it (the wire type).
type readConn = connection

// readGQLConn is a connection as GraphQL shows it.
type readGQLConn struct {
	ID           string    `json:"id"`
	Channel      string    `json:"channel"`
	Provider     *string   `json:"provider"`
	Status       string    `json:"status"`
	CustomerID   string    `json:"customerID"`
	AgentID      string    `json:"agentID"`
	Name         *string   `json:"name"`
	Address      *string   `json:"address"`
	Line         *string   `json:"line"`
	JoinCode     *string   `json:"joinCode"`
	JoinLink     *string   `json:"joinLink"`
	WebhookURL   *string   `json:"webhookURL"`
	AuthorizeURL *string   `json:"authorizeURL"`
	CreatedAt    time.Time `json:"createdAt"`
}

const readConnFields = `id channel provider status customerID agentID name address line joinCode joinLink webhookURL authorizeURL createdAt`

func (c readGQLConn) rest() readConn {
	return readConn(c)
}

// readConv is a conversation as REST shows it.
type readConv struct {
	ID           string     `json:"id"`
	ConnectionID string     `json:"connection_id"`
	Typing       bool       `json:"typing"`
	TypingUntil  *time.Time `json:"typing_until"`
}

// readGQLConv is a conversation as GraphQL shows it.
type readGQLConv struct {
	ID           string     `json:"id"`
	ConnectionID string     `json:"connectionID"`
	TypingUntil  *time.Time `json:"typingUntil"`
}

// readGet fetches path and decodes the fields of a 200 answer that v has.
func readGet(t *testing.T, g *gateway, key, path string, v any) {
	t.Helper()
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", path, resp.Status, resp.Body)
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		t.Fatalf("GET %s: %v; body %s", path, err, resp.Body)
	}
}

// asJSON shows v in test failures.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestReadsAgree: REST and GraphQL read through the same rules of the
// domain. A deleted connection is gone from every read of both doors
// (lists, look-ups, filters, node and nodes) while its conversations and
// messages stay readable through both; typing state is judged by the
// service clock (messaging.Options.Now) in both; an explicit page size of
// 0 is refused by both.
func TestReadsAgree(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		// The service clock runs an hour behind the wall clock: a typing
		// lease the service still counts is long over by time.Now.
		clk := &readsClock{}
		clk.advance(-time.Hour)
		g := startWith(t, cfg, server.Options{}, messaging.Options{Now: clk.now})
		key := g.newSandbox(t, "reads").APIKey
		gone, kept := g.connectTest(t, key), g.connectTest(t, key)
		mGone := g.inject(t, key, gone.ID, `{"sender":"alice","text":"before the delete"}`)
		mKept := g.inject(t, key, kept.ID, `{"sender":"bob","text":"hi"}`)
		if resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + gone.ID, Key: key}); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: status %d, body %s", resp.Status, resp.Body)
		}

		// Lists: the same live connections, field for field.
		var rconns []readConn
		g.get(t, key, "/v1/connections", &rconns)
		gconns := g.gqlWalk(t, key, "connections", readConnFields, 1)
		if len(rconns) != 1 || len(gconns) != 1 {
			t.Fatalf("after delete: %d connections through REST, %d through GraphQL, want 1", len(rconns), len(gconns))
		}
		var gc readGQLConn
		decodeJSON(t, gconns[0], &gc)
		if !same(gc.rest(), rconns[0]) || rconns[0].ID != kept.ID {
			t.Errorf("connection through GraphQL %s, through REST %s", asJSON(gc.rest()), asJSON(rconns[0]))
		}
		var one readConn
		g.get(t, key, "/v1/connections/"+kept.ID, &one)
		var gn readGQLConn
		g.gqlNode(t, key, kept.ID, "Connection", readConnFields, &gn)
		if !same(gn.rest(), one) {
			t.Errorf("node(%s) %s, GET %s", kept.ID, asJSON(gn.rest()), asJSON(one))
		}

		// Look-ups and filters do not reach the deleted one.
		wantError(t, g.do(t, request{Path: "/v1/connections/" + gone.ID, Key: key}), http.StatusNotFound, "not_found", "")
		gqlFail(t, g.gql(t, key, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": gone.ID}), "node", "not_found", "")
		res := g.gql(t, key, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{gone.ID, kept.ID}})
		if !jsonEqual(res.Data, `{"nodes":[null,{"id":"`+kept.ID+`"}]}`) || len(res.Errors) != 1 {
			t.Errorf("nodes(deleted, live): %s", res.Body)
		}
		for _, e := range res.Errors {
			if e.Extensions["code"] != "not_found" {
				t.Errorf("nodes(deleted, live): code %v; body %s", e.Extensions["code"], res.Body)
			}
		}
		for _, where := range []map[string]any{{"id": gone.ID}, {"status": "deleted"}, {"idIn": []string{gone.ID, kept.ID}}} {
			var page struct {
				Connections struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Node struct {
							ID string `json:"id"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"connections"`
			}
			g.gqlOK(t, key, `query($w: ConnectionWhereInput) { connections(where: $w) { totalCount edges { node { id } } } }`,
				map[string]any{"w": where}, &page)
			for _, e := range page.Connections.Edges {
				if e.Node.ID == gone.ID {
					t.Errorf("connections(where: %v) shows the deleted connection", where)
				}
			}
			if page.Connections.TotalCount != len(page.Connections.Edges) {
				t.Errorf("connections(where: %v): totalCount %d, %d edges", where, page.Connections.TotalCount, len(page.Connections.Edges))
			}
		}
		gqlFail(t, g.gql(t, key, `mutation($id: ID!) { deleteConnection(id: $id) }`, map[string]any{"id": gone.ID}), "deleteConnection", "not_found", "")

		// Its conversation and message stay readable through both doors.
		var rm struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		}
		readGet(t, g, key, "/v1/messages/"+mGone.ID, &rm)
		var gm struct {
			ID   string `json:"id"`
			Text string `json:"text"`
		}
		g.gqlNode(t, key, mGone.ID, "Message", `id text`, &gm)
		if rm != gm || rm.Text != "before the delete" {
			t.Errorf("message of the deleted connection: REST %+v, GraphQL %+v", rm, gm)
		}
		var rconvs []readConv
		readGet(t, g, key, "/v1/conversations?connection_id="+gone.ID, &rconvs)
		var gconvs struct {
			Conversations struct {
				Edges []struct {
					Node readGQLConv `json:"node"`
				} `json:"edges"`
			} `json:"conversations"`
		}
		g.gqlOK(t, key, `query($c: String) { conversations(where: {connectionID: $c}) { edges { node { id connectionID typingUntil } } } }`,
			map[string]any{"c": gone.ID}, &gconvs)
		if len(rconvs) != 1 || len(gconvs.Conversations.Edges) != 1 || rconvs[0].ID != gconvs.Conversations.Edges[0].Node.ID ||
			rconvs[0].ID != mGone.ConversationID {
			t.Errorf("conversations of the deleted connection: REST %+v, GraphQL %+v", rconvs, gconvs)
		}

		// Typing, judged by the service clock: showing while its lease
		// lasts by that clock, gone once the clock passes it.
		resp := g.post(t, key, "/v1/messages/"+mKept.ID+"/typing", `{}`)
		if resp.Status != http.StatusOK {
			t.Fatalf("typing: status %d, body %s", resp.Status, resp.Body)
		}
		var st struct {
			TypingUntil time.Time `json:"typing_until"`
		}
		if err := json.Unmarshal(resp.Body, &st); err != nil {
			t.Fatalf("typing: %v; body %s", err, resp.Body)
		}
		conv := mKept.ConversationID
		typing := func(want bool) {
			t.Helper()
			var rc readConv
			readGet(t, g, key, "/v1/conversations/"+conv, &rc)
			var gc readGQLConv
			g.gqlNode(t, key, conv, "Conversation", `id connectionID typingUntil`, &gc)
			if rc.Typing != want || (rc.TypingUntil != nil) != want {
				t.Errorf("REST: typing %v until %v, want typing %v", rc.Typing, rc.TypingUntil, want)
			}
			if !same(gc.TypingUntil, rc.TypingUntil) {
				t.Errorf("typing until %v through GraphQL, %v through REST (service clock %v)", gc.TypingUntil, rc.TypingUntil, clk.now())
			}
			if want && (rc.TypingUntil == nil || !rc.TypingUntil.Equal(st.TypingUntil)) {
				t.Errorf("typing until %v, the typing call answered %v", rc.TypingUntil, st.TypingUntil)
			}
			var page struct {
				Conversations struct {
					Edges []struct {
						Node readGQLConv `json:"node"`
					} `json:"edges"`
				} `json:"conversations"`
			}
			g.gqlOK(t, key, `query($id: ID) { conversations(where: {id: $id}) { edges { node { id connectionID typingUntil } } } }`,
				map[string]any{"id": conv}, &page)
			if len(page.Conversations.Edges) != 1 || !same(page.Conversations.Edges[0].Node, gc) {
				t.Errorf("conversations list %+v, node %+v", page.Conversations.Edges, gc)
			}
		}
		typing(true)
		clk.advance(messaging.TypingLease + time.Second)
		typing(false)

		// An explicit page size of 0 is refused by both doors.
		wantError(t, g.do(t, request{Path: "/v1/webhook/attempts?limit=0", Key: key}), http.StatusBadRequest, "invalid_parameter", "limit")
		gqlFail(t, g.gql(t, key, `{ webhookAttempts(first: 0) { id } }`, nil), "webhookAttempts", "invalid_parameter", "first")
		wantError(t, g.do(t, request{Path: "/v1/events?limit=0", Key: key}), http.StatusBadRequest, "invalid_parameter", "limit")
		gqlFail(t, g.gql(t, key, `{ events(first: 0) { edges { cursor } } }`, nil), "events", "invalid_parameter", "first")
	})
}

// TestReadsDeletedConnectionOutbox: internal look-ups that must see a
// deleted connection still do (messaging.IncludeDeleted): a message queued
// before its connection was deleted fails with the reason, and REST and
// GraphQL show the same failed message.
func TestReadsDeletedConnectionOutbox(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		key := g.newSandbox(t, "outbox").APIKey
		conn := g.connectTest(t, key)
		out := g.queue(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"carol","text":"queued"}`)
		if resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + conn.ID, Key: key}); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: status %d, body %s", resp.Status, resp.Body)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			(&delivery.Outbox{Service: g.Svc, Logger: gatewaytest.Logger(t)}).Run(ctx)
			close(done)
		}()
		t.Cleanup(func() { cancel(); <-done })
		m := g.waitMessage(t, key, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		const why = "connection was deleted before the message could be sent"
		if m.Error == nil || *m.Error != why {
			t.Errorf("failed message: error %s, want %q", asJSON(m.Error), why)
		}
		var gm struct {
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		g.gqlNode(t, key, out.ID, "Message", `status error`, &gm)
		if gm.Status != "failed" || !same(gm.Error, m.Error) {
			t.Errorf("GraphQL %s, REST status %s error %s", asJSON(gm), m.Status, asJSON(m.Error))
		}
	})
}

package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// The fields the tests select of each GraphQL type: all of them.
const (
	gqlConnFields = `id createdAt channel provider status customerID agentID name address`
	gqlConvFields = `id createdAt connectionID threadKey subject typingUntil lastMessageAt`
	gqlMsgFields  = `id createdAt conversationID connectionID channel direction status providerMessageID sender
		recipient subject text html inReplyTo error attempts nextAttemptAt sentAt
		delivery { state code reason deliveredAt readAt }`
)

// gqlConnection is a Connection as GraphQL shows it.
type gqlConnection struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"createdAt"`
	Channel    string    `json:"channel"`
	Provider   *string   `json:"provider"`
	Status     string    `json:"status"`
	CustomerID string    `json:"customerID"`
	AgentID    string    `json:"agentID"`
	Name       *string   `json:"name"`
	Address    *string   `json:"address"`
}

// rest is the connection in the REST API's shape.
func (c gqlConnection) rest() connection {
	return connection{ID: c.ID, Channel: c.Channel, Provider: c.Provider, Status: c.Status,
		CustomerID: c.CustomerID, AgentID: c.AgentID, Name: c.Name, Address: c.Address, CreatedAt: c.CreatedAt}
}

// gqlConversation is a Conversation as GraphQL shows it.
type gqlConversation struct {
	ID            string     `json:"id"`
	CreatedAt     time.Time  `json:"createdAt"`
	ConnectionID  string     `json:"connectionID"`
	ThreadKey     string     `json:"threadKey"`
	Subject       *string    `json:"subject"`
	TypingUntil   *time.Time `json:"typingUntil"`
	LastMessageAt time.Time  `json:"lastMessageAt"`
}

// rest is the conversation in the REST API's shape; REST shows the typing
// lease only while it lasts.
func (c gqlConversation) rest() conversation {
	out := conversation{ID: c.ID, ConnectionID: c.ConnectionID, Participant: c.ThreadKey, Subject: c.Subject,
		LastMessageAt: c.LastMessageAt, CreatedAt: c.CreatedAt}
	if c.TypingUntil != nil && c.TypingUntil.After(time.Now()) {
		out.Typing, out.TypingUntil = true, c.TypingUntil
	}
	return out
}

// gqlMessage is a Message as GraphQL shows it.
type gqlMessage struct {
	ID                string     `json:"id"`
	CreatedAt         time.Time  `json:"createdAt"`
	ConversationID    string     `json:"conversationID"`
	ConnectionID      string     `json:"connectionID"`
	Channel           string     `json:"channel"`
	Direction         string     `json:"direction"`
	Status            string     `json:"status"`
	ProviderMessageID *string    `json:"providerMessageID"`
	Sender            string     `json:"sender"`
	Recipient         *string    `json:"recipient"`
	Subject           *string    `json:"subject"`
	Text              string     `json:"text"`
	HTML              *string    `json:"html"`
	InReplyTo         *string    `json:"inReplyTo"`
	Error             *string    `json:"error"`
	Attempts          int        `json:"attempts"`
	NextAttemptAt     *time.Time `json:"nextAttemptAt"`
	SentAt            *time.Time `json:"sentAt"`
	Delivery          *struct {
		State       string     `json:"state"`
		Code        *string    `json:"code"`
		Reason      *string    `json:"reason"`
		DeliveredAt *time.Time `json:"deliveredAt"`
		ReadAt      *time.Time `json:"readAt"`
	} `json:"delivery"`
}

// rest is the message in the REST API's shape.
func (m gqlMessage) rest() message {
	return message{ID: m.ID, ConversationID: m.ConversationID, ConnectionID: m.ConnectionID, Channel: m.Channel,
		Direction: m.Direction, Status: m.Status, Sender: m.Sender, Recipient: m.Recipient, Subject: m.Subject,
		Text: m.Text, HTML: m.HTML, InReplyTo: m.InReplyTo, Error: m.Error, Attempts: m.Attempts,
		CreatedAt: m.CreatedAt, SentAt: m.SentAt, Delivery: (*api.Delivery)(m.Delivery)}
}

// gqlProject is a Project as GraphQL shows it.
type gqlProject struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"createdAt"`
	Name       string    `json:"name"`
	CustomerID string    `json:"customerID"`
	AgentID    string    `json:"agentID"`
	LastSeq    int64     `json:"lastSeq"`
}

// gqlEvents is a page of the events query.
type gqlEvents struct {
	Edges []struct {
		Cursor int64 `json:"cursor"`
		Node   event `json:"node"`
	} `json:"edges"`
	PageInfo struct {
		HasNextPage bool   `json:"hasNextPage"`
		EndCursor   *int64 `json:"endCursor"`
	} `json:"pageInfo"`
}

// gqlError is one entry of a GraphQL response's errors.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Locations  []any          `json:"locations"`
	Extensions map[string]any `json:"extensions"`
}

// gqlResult is a GraphQL answer.
type gqlResult struct {
	response
	Data   json.RawMessage
	Errors []gqlError
}

// gql posts an operation to /graphql and decodes the answer.
func (g *gateway) gql(t *testing.T, key, query string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	return gqlDecode(t, g.do(t, request{Method: http.MethodPost, Path: "/graphql", Key: key, ContentType: jsonCT, Body: string(body)}))
}

func gqlDecode(t *testing.T, resp response) gqlResult {
	t.Helper()
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	decodeJSON(t, resp.Body, &out)
	return gqlResult{response: resp, Data: out.Data, Errors: out.Errors}
}

// gqlOK runs an operation that must succeed and decodes its data into v.
func (g *gateway) gqlOK(t *testing.T, key, query string, vars map[string]any, v any) {
	t.Helper()
	res := g.gql(t, key, query, vars)
	if res.Status != http.StatusOK || len(res.Errors) > 0 {
		t.Fatalf("%s: status %d, body %s", oneLine(query), res.Status, res.Body)
	}
	decodeJSON(t, res.Data, v)
}

// gqlFail checks an operation's refusal: field (the operation's root
// field) has no data, and the first error carries code and, if not empty,
// param. It returns that error.
func gqlFail(t *testing.T, res gqlResult, field, code, param string) gqlError {
	t.Helper()
	if len(res.Errors) == 0 {
		t.Fatalf("no error; status %d, body %s", res.Status, res.Body)
	}
	if res.Status != http.StatusOK && res.Status != http.StatusUnprocessableEntity {
		t.Errorf("status %d; body %s", res.Status, res.Body)
	}
	var data map[string]json.RawMessage
	if len(res.Data) > 0 && string(res.Data) != "null" {
		decodeJSON(t, res.Data, &data)
	}
	if d, ok := data[field]; ok && string(d) != "null" {
		t.Errorf("refused %s answered data %s", field, d)
	}
	e := res.Errors[0]
	if e.Extensions["code"] != code {
		t.Errorf("extensions.code %v, want %q; body %s", e.Extensions["code"], code, res.Body)
	}
	if param != "" && e.Extensions["param"] != param {
		t.Errorf("extensions.param %v, want %q; body %s", e.Extensions["param"], param, res.Body)
	}
	if e.Message == "" {
		t.Errorf("error without a message: %s", res.Body)
	}
	return e
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// gqlNode reads one node of a type through node(id:).
func (g *gateway) gqlNode(t *testing.T, key, id, typ, fields string, v any) {
	t.Helper()
	var data struct {
		Node json.RawMessage `json:"node"`
	}
	g.gqlOK(t, key, `query($id: ID!) { node(id: $id) { __typename ... on `+typ+` { `+fields+` } } }`,
		map[string]any{"id": id}, &data)
	var tn struct {
		Typename string `json:"__typename"`
	}
	if err := json.Unmarshal(data.Node, &tn); err != nil || tn.Typename != typ {
		t.Fatalf("node(%s) = %s, want a %s", id, data.Node, typ)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(data.Node, &raw)
	delete(raw, "__typename")
	b, _ := json.Marshal(raw)
	decodeJSON(t, b, v)
}

// gqlWalk pages a Relay connection field of Query with first/after, n at
// a time, checking totalCount and pageInfo, and returns the nodes' JSON.
func (g *gateway) gqlWalk(t *testing.T, key, field, fields string, n int) []json.RawMessage {
	t.Helper()
	q := `query($first: Int, $after: Cursor) { page: ` + field + `(first: $first, after: $after) {
		totalCount edges { cursor node { ` + fields + ` } } pageInfo { hasNextPage endCursor } } }`
	var (
		all   []json.RawMessage
		after any
		total = -1
	)
	for range 50 {
		var data struct {
			Page struct {
				TotalCount int `json:"totalCount"`
				Edges      []struct {
					Cursor string          `json:"cursor"`
					Node   json.RawMessage `json:"node"`
				} `json:"edges"`
				PageInfo struct {
					HasNextPage     bool    `json:"hasNextPage"`
					HasPreviousPage bool    `json:"hasPreviousPage"`
					EndCursor       *string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"page"`
		}
		g.gqlOK(t, key, q, map[string]any{"first": n, "after": after}, &data)
		p := data.Page
		if total >= 0 && p.TotalCount != total {
			t.Errorf("%s: totalCount changed from %d to %d while paging", field, total, p.TotalCount)
		}
		total = p.TotalCount
		if len(p.Edges) > n {
			t.Fatalf("%s: %d edges with first %d", field, len(p.Edges), n)
		}
		for _, e := range p.Edges {
			all = append(all, e.Node)
		}
		if len(p.Edges) > 0 && (p.PageInfo.EndCursor == nil || *p.PageInfo.EndCursor != p.Edges[len(p.Edges)-1].Cursor) {
			t.Errorf("%s: endCursor %v is not the last edge's cursor", field, p.PageInfo.EndCursor)
		}
		if !p.PageInfo.HasNextPage {
			if len(all) != total {
				t.Errorf("%s: walked %d nodes, totalCount %d", field, len(all), total)
			}
			return all
		}
		if len(p.Edges) == 0 || p.PageInfo.EndCursor == nil {
			t.Fatalf("%s: hasNextPage on a page without an end cursor", field)
		}
		after = *p.PageInfo.EndCursor
	}
	t.Fatalf("%s does not end", field)
	return nil
}

// gqlEventsAll reads a project's whole stream through the events query,
// n at a time.
func (g *gateway) gqlEventsAll(t *testing.T, key string, n int) []event {
	t.Helper()
	var (
		all   []event
		after int64
	)
	for range 100 {
		var data struct {
			Events gqlEvents `json:"events"`
		}
		g.gqlOK(t, key, `query($after: Int, $first: Int) { events(afterSeq: $after, first: $first) {
			edges { cursor node { seq type data } } pageInfo { hasNextPage endCursor } } }`,
			map[string]any{"after": after, "first": n}, &data)
		page := data.Events
		for _, e := range page.Edges {
			if e.Cursor != e.Node.Seq {
				t.Errorf("event %d has cursor %d", e.Node.Seq, e.Cursor)
			}
			all = append(all, e.Node)
		}
		switch {
		case len(page.Edges) == 0 && page.PageInfo.EndCursor != nil:
			t.Errorf("empty page with endCursor %d", *page.PageInfo.EndCursor)
		case len(page.Edges) > 0 && (page.PageInfo.EndCursor == nil || *page.PageInfo.EndCursor != page.Edges[len(page.Edges)-1].Node.Seq):
			t.Errorf("endCursor %v is not the last seq of the page", page.PageInfo.EndCursor)
		}
		if !page.PageInfo.HasNextPage {
			return all
		}
		after = *page.PageInfo.EndCursor
	}
	t.Fatal("the events query does not end")
	return nil
}

// sameEvents reports the differences between two reads of one stream.
func sameEvents(t *testing.T, what string, got, want []event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !jsonEqual(got[i].Data, string(want[i].Data)) {
			t.Errorf("%s: event %d = %d %s %s, want %d %s %s", what, i,
				got[i].Seq, got[i].Type, got[i].Data, want[i].Seq, want[i].Type, want[i].Data)
		}
	}
}

// normalize returns an event's data with ids mapped through ids and
// timestamps (keys ending in _at, and typing_until) masked.
func normalize(t *testing.T, raw json.RawMessage, ids map[string]string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("event data %s: %v", raw, err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if (strings.HasSuffix(k, "_at") || k == "typing_until") && e != nil {
					x[k] = "<time>"
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if m, ok := ids[x]; ok {
				return m
			}
		}
		return v
	}
	b, _ := json.Marshal(walk(v))
	return string(b)
}

// TestGraphQLParity drives one use case through each door, GraphQL in
// project A and REST in project B, and reads everything back through the
// other: the stored rows and the event streams agree field by field.
func TestGraphQLParity(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		a := g.newSandbox(t, "graphql door")
		b := g.newSandbox(t, "rest door")

		// Project A, through GraphQL; every answer is checked against REST.
		var connected struct {
			Connect gqlConnection `json:"connect"`
		}
		g.gqlOK(t, a.APIKey, `mutation { connect(input: {channel: "test", name: "g"}) { `+gqlConnFields+` } }`, nil, &connected)
		gconn := connected.Connect
		if err := ident.Check(gconn.ID, ident.Connection); err != nil {
			t.Errorf("connect: id %q: %v", gconn.ID, err)
		}
		if gconn.Channel != "test" || gconn.Status != "active" || gconn.CustomerID != a.CustomerID ||
			gconn.AgentID != a.AgentID || gconn.Name == nil || *gconn.Name != "g" {
			t.Errorf("connect answered %+v", gconn)
		}
		var rconn connection
		g.get(t, a.APIKey, "/v1/connections/"+gconn.ID, &rconn)
		if !same(gconn.rest(), rconn) {
			t.Errorf("connection through GraphQL %+v, through REST %+v", gconn.rest(), rconn)
		}

		type injected struct {
			InjectInbound struct {
				Message   gqlMessage `json:"message"`
				Duplicate bool       `json:"duplicate"`
			} `json:"injectInbound"`
		}
		injectQ := `mutation($conn: ID!, $in: InjectInput!) { injectInbound(connectionID: $conn, input: $in) {
			duplicate message { ` + gqlMsgFields + ` } } }`
		inVars := map[string]any{"conn": gconn.ID, "in": map[string]any{"sender": "alice@example.com", "text": "hello, agent", "id": "prov-1"}}
		var inj injected
		g.gqlOK(t, a.APIKey, injectQ, inVars, &inj)
		gin := inj.InjectInbound.Message
		if inj.InjectInbound.Duplicate || gin.Direction != "inbound" || gin.Status != "received" ||
			gin.Sender != "alice@example.com" || gin.Text != "hello, agent" || gin.ConnectionID != gconn.ID ||
			gin.Channel != "test" || gin.Subject != nil || gin.HTML != nil || gin.InReplyTo != nil ||
			gin.ProviderMessageID == nil || *gin.ProviderMessageID != "prov-1" {
			t.Errorf("injectInbound answered %+v", inj.InjectInbound)
		}
		if rin := g.message(t, a.APIKey, gin.ID); !same(gin.rest(), rin) {
			t.Errorf("inbound through GraphQL %+v, through REST %+v", gin.rest(), rin)
		}
		// A repeated provider id is a duplicate, as on REST.
		var dup injected
		g.gqlOK(t, a.APIKey, injectQ, inVars, &dup)
		if !dup.InjectInbound.Duplicate || dup.InjectInbound.Message.ID != gin.ID {
			t.Errorf("repeated injectInbound answered %+v, want a duplicate of %s", dup.InjectInbound, gin.ID)
		}

		var typed struct {
			Typing struct {
				ConversationID string    `json:"conversationID"`
				TypingUntil    time.Time `json:"typingUntil"`
			} `json:"typing"`
		}
		g.gqlOK(t, a.APIKey, `mutation($m: ID!) { typing(messageID: $m) { conversationID typingUntil } }`,
			map[string]any{"m": gin.ID}, &typed)
		var rconv conversation
		g.get(t, a.APIKey, "/v1/conversations/"+gin.ConversationID, &rconv)
		if typed.Typing.ConversationID != gin.ConversationID || !rconv.Typing || rconv.TypingUntil == nil ||
			!same(*rconv.TypingUntil, typed.Typing.TypingUntil) {
			t.Errorf("typing answered %+v; REST shows %+v", typed.Typing, rconv)
		}
		var gconv gqlConversation
		g.gqlNode(t, a.APIKey, gin.ConversationID, "Conversation", gqlConvFields, &gconv)
		if !same(gconv.rest(), rconv) {
			t.Errorf("typing conversation through GraphQL %+v, through REST %+v", gconv.rest(), rconv)
		}

		// Outbound answers are queued; the worker may deliver at any
		// moment, so the delivery fields are compared after it has.
		queued := func(what string, m gqlMessage) {
			t.Helper()
			r := g.message(t, a.APIKey, m.ID)
			if m.Status != "queued" || m.Attempts != 0 || m.SentAt != nil || m.Direction != "outbound" {
				t.Errorf("%s answered %+v, want a queued outbound message", what, m)
			}
			m.Status, m.Attempts, m.SentAt, m.Error = r.Status, r.Attempts, r.SentAt, r.Error
			if !same(m.rest(), r) {
				t.Errorf("%s through GraphQL %+v, through REST %+v", what, m.rest(), r)
			}
		}
		var replied struct {
			Reply gqlMessage `json:"reply"`
		}
		g.gqlOK(t, a.APIKey, `mutation($m: ID!) { reply(messageID: $m, input: {text: "hello, alice"}) { `+gqlMsgFields+` } }`,
			map[string]any{"m": gin.ID}, &replied)
		gout := replied.Reply
		if gout.ConversationID != gin.ConversationID || gout.Recipient == nil || *gout.Recipient != "alice@example.com" ||
			gout.InReplyTo == nil || *gout.InReplyTo != gin.ID || gout.Text != "hello, alice" || gout.Subject != nil || gout.HTML != nil {
			t.Errorf("reply answered %+v", gout)
		}
		queued("reply", gout)
		g.waitEvent(t, a.APIKey, 0, stream.MessageSent, gout.ID)

		var sent struct {
			Send gqlMessage `json:"send"`
		}
		g.gqlOK(t, a.APIKey, `mutation($c: ID!) { send(input: {connectionID: $c, to: "bob", text: "hi, bob"}) { `+gqlMsgFields+` } }`,
			map[string]any{"c": gconn.ID}, &sent)
		gsend := sent.Send
		if gsend.Recipient == nil || *gsend.Recipient != "bob" || gsend.InReplyTo != nil || gsend.ConnectionID != gconn.ID ||
			gsend.ConversationID == gin.ConversationID || gsend.Text != "hi, bob" {
			t.Errorf("send answered %+v", gsend)
		}
		queued("send", gsend)
		g.waitEvent(t, a.APIKey, 0, stream.MessageSent, gsend.ID)

		// Project B, the same through REST.
		resp := g.post(t, b.APIKey, "/v1/connections", `{"channel":"test","name":"g"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: status %d, body %s", resp.Status, resp.Body)
		}
		decodeJSON(t, resp.Body, &rconn)
		rin := g.inject(t, b.APIKey, rconn.ID, `{"sender":"alice@example.com","text":"hello, agent","id":"prov-1"}`)
		if resp := g.post(t, b.APIKey, "/v1/connections/"+rconn.ID+"/inbound", `{"sender":"alice@example.com","text":"hello, agent","id":"prov-1"}`); resp.Status != http.StatusOK {
			t.Errorf("repeated inject: status %d, body %s", resp.Status, resp.Body)
		}
		if resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/messages/" + rin.ID + "/typing", Key: b.APIKey}); resp.Status != http.StatusOK {
			t.Errorf("typing: status %d, body %s", resp.Status, resp.Body)
		}
		rout := g.queue(t, b.APIKey, "/v1/messages/"+rin.ID+"/reply", `{"text":"hello, alice"}`)
		g.waitEvent(t, b.APIKey, 0, stream.MessageSent, rout.ID)
		rsend := g.queue(t, b.APIKey, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"bob","text":"hi, bob"}`, rconn.ID))
		g.waitEvent(t, b.APIKey, 0, stream.MessageSent, rsend.ID)

		// Both streams hold the same events, up to ids and times.
		ids := map[string]string{
			a.ProjectID: b.ProjectID, a.CustomerID: b.CustomerID, a.AgentID: b.AgentID, gconn.ID: rconn.ID,
			gin.ID: rin.ID, gin.ConversationID: rin.ConversationID, gout.ID: rout.ID, gsend.ID: rsend.ID,
			gsend.ConversationID: rsend.ConversationID,
		}
		evA, evB := g.events(t, a.APIKey, ""), g.events(t, b.APIKey, "")
		types := func(evs []event) []string {
			var out []string
			for _, e := range evs {
				out = append(out, e.Type)
			}
			return out
		}
		wantTypes := []string{stream.ConnectionActive, stream.MessageReceived, stream.MessageSent, stream.MessageSent}
		if !slices.Equal(types(evA), wantTypes) || !slices.Equal(types(evB), wantTypes) {
			t.Fatalf("streams through GraphQL %v and REST %v, want %v", types(evA), types(evB), wantTypes)
		}
		for i := range evA {
			if evA[i].Seq != evB[i].Seq {
				t.Errorf("event %d: seq %d through GraphQL, %d through REST", i, evA[i].Seq, evB[i].Seq)
			}
			if ga, rb := normalize(t, evA[i].Data, ids), normalize(t, evB[i].Data, nil); ga != rb {
				t.Errorf("%s through GraphQL:\n  %s\nthrough REST:\n  %s", evA[i].Type, ga, rb)
			}
		}
		// The events query reads the same stream as GET /v1/events.
		for _, sb := range []sandbox{a, b} {
			sameEvents(t, "events query of "+sb.ProjectID, g.gqlEventsAll(t, sb.APIKey, 3), g.events(t, sb.APIKey, ""))
		}
		var typed2 struct {
			Events gqlEvents `json:"events"`
		}
		g.gqlOK(t, a.APIKey, `{ events(afterSeq: 1, first: 10, type: "message.sent") { edges { cursor node { seq type data } } pageInfo { hasNextPage endCursor } } }`, nil, &typed2)
		var gotSent []event
		for _, e := range typed2.Events.Edges {
			gotSent = append(gotSent, e.Node)
		}
		sameEvents(t, "events(type: message.sent)", gotSent, g.events(t, a.APIKey, "after_seq=1&type=message.sent"))
		if typed2.Events.PageInfo.HasNextPage {
			t.Errorf("events(type:) page of everything has a next page")
		}

		// Both projects, read through GraphQL, agree with REST field by field.
		g.connectTest(t, b.APIKey) // a second connection to page over
		for _, sb := range []sandbox{a, b} {
			key := sb.APIKey
			var proj struct {
				Project gqlProject `json:"project"`
			}
			g.gqlOK(t, key, `{ project { id createdAt name customerID agentID lastSeq } }`, nil, &proj)
			rp := g.project(t, key)
			gp := proj.Project
			if !same(project{ID: gp.ID, Name: gp.Name, CustomerID: gp.CustomerID, AgentID: gp.AgentID,
				LastSeq: gp.LastSeq, CreatedAt: gp.CreatedAt}, rp) || gp.ID != sb.ProjectID {
				t.Errorf("project through GraphQL %+v, through REST %+v", gp, rp)
			}
			var pnode gqlProject
			g.gqlNode(t, key, sb.ProjectID, "Project", `id createdAt name customerID agentID lastSeq`, &pnode)
			if !same(pnode, gp) {
				t.Errorf("node(project) %+v, project %+v", pnode, gp)
			}

			var rconns []connection
			g.get(t, key, "/v1/connections", &rconns)
			gconns := g.gqlWalk(t, key, "connections", gqlConnFields, 1)
			if len(gconns) != len(rconns) {
				t.Errorf("%d connections through GraphQL, %d through REST", len(gconns), len(rconns))
			}
			for i := range min(len(gconns), len(rconns)) {
				var c gqlConnection
				decodeJSON(t, gconns[i], &c)
				if !same(c.rest(), rconns[i]) {
					t.Errorf("connection %d through GraphQL %+v, through REST %+v", i, c.rest(), rconns[i])
				}
				var n gqlConnection
				g.gqlNode(t, key, c.ID, "Connection", gqlConnFields, &n)
				if !same(n, c) {
					t.Errorf("node(%s) %+v, in the list %+v", c.ID, n, c)
				}
			}

			var rconvs []conversation
			g.get(t, key, "/v1/conversations", &rconvs)
			gconvs := g.gqlWalk(t, key, "conversations", gqlConvFields, 1)
			if len(gconvs) != 2 || len(rconvs) != 2 {
				t.Errorf("%d conversations through GraphQL, %d through REST, want 2", len(gconvs), len(rconvs))
			}
			var rmsgs []message
			for i := range min(len(gconvs), len(rconvs)) {
				var c gqlConversation
				decodeJSON(t, gconvs[i], &c)
				if !same(c.rest(), rconvs[i]) || c.TypingUntil != nil {
					t.Errorf("conversation %d through GraphQL %+v, through REST %+v", i, c, rconvs[i])
				}
				var n gqlConversation
				g.gqlNode(t, key, c.ID, "Conversation", gqlConvFields, &n)
				if !same(n, c) {
					t.Errorf("node(%s) %+v, in the list %+v", c.ID, n, c)
				}
				var ms []message
				g.get(t, key, "/v1/conversations/"+c.ID+"/messages", &ms)
				rmsgs = append(rmsgs, ms...)
			}
			slices.SortFunc(rmsgs, func(x, y message) int { return strings.Compare(x.ID, y.ID) })
			gmsgs := g.gqlWalk(t, key, "messages", gqlMsgFields, 2)
			if len(gmsgs) != 3 || len(rmsgs) != 3 {
				t.Errorf("%d messages through GraphQL, %d through REST, want 3", len(gmsgs), len(rmsgs))
			}
			for i := range min(len(gmsgs), len(rmsgs)) {
				var m gqlMessage
				decodeJSON(t, gmsgs[i], &m)
				if !same(m.rest(), rmsgs[i]) {
					t.Errorf("message %d through GraphQL %+v, through REST %+v", i, m.rest(), rmsgs[i])
				}
				var n gqlMessage
				g.gqlNode(t, key, m.ID, "Message", gqlMsgFields, &n)
				if !same(n, m) {
					t.Errorf("node(%s) %+v, in the list %+v", m.ID, n, m)
				}
			}
		}

		// A connection deleted through either door is gone from both.
		var deleted struct {
			DeleteConnection string `json:"deleteConnection"`
		}
		g.gqlOK(t, a.APIKey, `mutation($id: ID!) { deleteConnection(id: $id) }`, map[string]any{"id": gconn.ID}, &deleted)
		if deleted.DeleteConnection != gconn.ID {
			t.Errorf("deleteConnection answered %q", deleted.DeleteConnection)
		}
		wantError(t, g.do(t, request{Path: "/v1/connections/" + gconn.ID, Key: a.APIKey}), http.StatusNotFound, "not_found", "")
		if resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + rconn.ID, Key: b.APIKey}); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: status %d, body %s", resp.Status, resp.Body)
		}
		for _, c := range []struct{ key, id string }{{a.APIKey, gconn.ID}, {b.APIKey, rconn.ID}} {
			gqlFail(t, g.gql(t, c.key, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": c.id}), "node", "not_found", "")
			res := g.gql(t, c.key, `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{c.id, c.id}})
			if !jsonEqual(res.Data, `{"nodes":[null,null]}`) || len(res.Errors) != 2 {
				t.Errorf("nodes of a deleted connection: %s", res.Body)
			}
			for _, e := range res.Errors {
				if e.Extensions["code"] != "not_found" {
					t.Errorf("nodes of a deleted connection: code %v; body %s", e.Extensions["code"], res.Body)
				}
			}
			gqlFail(t, g.gql(t, c.key, `mutation($id: ID!) { deleteConnection(id: $id) }`, map[string]any{"id": c.id}), "deleteConnection", "not_found", "")
		}
		for _, key := range []string{a.APIKey, b.APIKey} {
			var rconns []connection
			g.get(t, key, "/v1/connections", &rconns)
			if got := g.gqlWalk(t, key, "connections", `id`, 5); len(got) != len(rconns) {
				t.Errorf("after delete: %d connections through GraphQL, %d through REST", len(got), len(rconns))
			}
		}
		evA, evB = g.events(t, a.APIKey, "after_seq=4"), g.events(t, b.APIKey, "after_seq=5")
		if len(evA) != len(evB) {
			t.Errorf("deleting through GraphQL appended %v, through REST %v", evA, evB)
		}
	})
}

// TestGraphQLErrorParity: the same bad input through REST and GraphQL is
// refused with the same code (and param, in each door's names), and
// stores nothing.
func TestGraphQLErrorParity(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		sb := g.newSandbox(t, "errors")
		other := g.newSandbox(t, "other")
		key := sb.APIKey
		conn := g.connectTest(t, key)
		in := g.inject(t, key, conn.ID, `{"sender":"alice","text":"hi"}`)
		foreign := g.inject(t, other.APIKey, g.connectTest(t, other.APIKey).ID, `{"sender":"mallory","text":"hi"}`)
		unknownMsg := ident.New(ident.Message)
		before := rows(t, g, sb.ProjectID)

		connect := `mutation($in: ConnectInput!) { connect(input: $in) { id } }`
		reply := `mutation($m: ID!, $in: ReplyInput!) { reply(messageID: $m, input: $in) { id } }`
		typing := `mutation($m: ID!) { typing(messageID: $m) { typingUntil } }`
		send := `mutation($in: SendInput!) { send(input: $in) { id } }`
		inject := `mutation($c: ID!, $in: InjectInput!) { injectInbound(connectionID: $c, input: $in) { duplicate } }`
		events := `query($a: Int, $f: Int, $t: String) { events(afterSeq: $a, first: $f, type: $t) { edges { cursor } } }`
		cases := []struct {
			name       string
			rest       request
			status     int
			query      string
			vars       map[string]any
			field      string
			code       string
			restParam  string
			graphParam string
		}{
			{"unknown channel", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"pigeon"}`},
				400, connect, map[string]any{"in": map[string]any{"channel": "pigeon"}}, "connect", "invalid_parameter", "channel", "channel"},
			{"sms without provider", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"sms"}`},
				400, connect, map[string]any{"in": map[string]any{"channel": "sms"}}, "connect", "invalid_parameter", "provider", "provider"},
			{"malformed customer id", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"test","customer_id":"cus_nope"}`},
				400, connect, map[string]any{"in": map[string]any{"channel": "test", "customerID": "cus_nope"}}, "connect", "invalid_parameter", "customer_id", "customerID"},
			{"config on the test channel", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"test","config":{"token":"x"}}`},
				400, connect, map[string]any{"in": map[string]any{"channel": "test", "config": map[string]any{"token": "x"}}}, "connect", "invalid_parameter", "config", "config"},
			{"paid channel with a sandbox key", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"x"}`},
				402, connect, map[string]any{"in": map[string]any{"channel": "x"}}, "connect", "payment_required", "", ""},
			{"free channel without its config", request{Method: "POST", Path: "/v1/connections", Body: `{"channel":"instagram"}`},
				400, connect, map[string]any{"in": map[string]any{"channel": "instagram"}}, "connect", "invalid_parameter", "config.page_access_token", "config.page_access_token"},
			{"reply to an unknown message", request{Method: "POST", Path: "/v1/messages/" + unknownMsg + "/reply", Body: `{"text":"x"}`},
				404, reply, map[string]any{"m": unknownMsg, "in": map[string]any{"text": "x"}}, "reply", "not_found", "", ""},
			{"reply to a malformed id", request{Method: "POST", Path: "/v1/messages/msg_nope/reply", Body: `{"text":"x"}`},
				404, reply, map[string]any{"m": "msg_nope", "in": map[string]any{"text": "x"}}, "reply", "not_found", "", ""},
			{"reply to another project's message", request{Method: "POST", Path: "/v1/messages/" + foreign.ID + "/reply", Body: `{"text":"x"}`},
				404, reply, map[string]any{"m": foreign.ID, "in": map[string]any{"text": "x"}}, "reply", "not_found", "", ""},
			{"reply with a template on a channel without templates", request{Method: "POST", Path: "/v1/messages/" + in.ID + "/reply", Body: `{"template":{"content_sid":"HX0123456789abcdef0123456789abcdef","variables":{"1":"Ada"}}}`},
				400, reply, map[string]any{"m": in.ID, "in": map[string]any{"template": map[string]any{"contentSid": "HX0123456789abcdef0123456789abcdef",
					"variables": []map[string]any{{"name": "1", "value": "Ada"}}}}}, "reply", "invalid_parameter", "template", "template"},
			{"reply with a Cloud API template on a channel without templates", request{Method: "POST", Path: "/v1/messages/" + in.ID + "/reply", Body: `{"template":{"name":"order_update","language":"en_US"}}`},
				400, reply, map[string]any{"m": in.ID, "in": map[string]any{"template": map[string]any{"name": "order_update", "language": "en_US"}}}, "reply", "invalid_parameter", "template", "template"},
			{"reply with empty text", request{Method: "POST", Path: "/v1/messages/" + in.ID + "/reply", Body: `{"text":""}`},
				400, reply, map[string]any{"m": in.ID, "in": map[string]any{"text": ""}}, "reply", "invalid_parameter", "text", "text"},
			{"reply without text", request{Method: "POST", Path: "/v1/messages/" + in.ID + "/reply", Body: `{}`},
				400, reply, map[string]any{"m": in.ID, "in": map[string]any{}}, "reply", "invalid_parameter", "text", "text"},
			{"reply with a two-line subject", request{Method: "POST", Path: "/v1/messages/" + in.ID + "/reply", Body: `{"text":"x","subject":"a\nb"}`},
				400, reply, map[string]any{"m": in.ID, "in": map[string]any{"text": "x", "subject": "a\nb"}}, "reply", "invalid_parameter", "subject", "subject"},
			{"typing on an unknown message", request{Method: "POST", Path: "/v1/messages/" + unknownMsg + "/typing"},
				404, typing, map[string]any{"m": unknownMsg}, "typing", "not_found", "", ""},
			{"typing on another project's message", request{Method: "POST", Path: "/v1/messages/" + foreign.ID + "/typing"},
				404, typing, map[string]any{"m": foreign.ID}, "typing", "not_found", "", ""},
			{"send through an unknown connection", request{Method: "POST", Path: "/v1/messages", Body: fmt.Sprintf(`{"connection_id":%q,"to":"x","text":"y"}`, ident.New(ident.Connection))},
				400, send, map[string]any{"in": map[string]any{"connectionID": ident.New(ident.Connection), "to": "x", "text": "y"}}, "send", "invalid_parameter", "connection_id", "connectionID"},
			{"send without a recipient", request{Method: "POST", Path: "/v1/messages", Body: fmt.Sprintf(`{"connection_id":%q,"to":" ","text":"y"}`, conn.ID)},
				400, send, map[string]any{"in": map[string]any{"connectionID": conn.ID, "to": " ", "text": "y"}}, "send", "invalid_parameter", "to", "to"},
			{"inject without a sender", request{Method: "POST", Path: "/v1/connections/" + conn.ID + "/inbound", Body: `{"text":"y"}`},
				400, inject, map[string]any{"c": conn.ID, "in": map[string]any{"sender": "", "text": "y"}}, "injectInbound", "invalid_parameter", "sender", "sender"},
			{"inject into an unknown connection", request{Method: "POST", Path: "/v1/connections/" + ident.New(ident.Connection) + "/inbound", Body: `{"sender":"x","text":"y"}`},
				404, inject, map[string]any{"c": ident.New(ident.Connection), "in": map[string]any{"sender": "x", "text": "y"}}, "injectInbound", "not_found", "", ""},
			{"delete an unknown connection", request{Method: "DELETE", Path: "/v1/connections/" + ident.New(ident.Connection)},
				404, `mutation($id: ID!) { deleteConnection(id: $id) }`, map[string]any{"id": ident.New(ident.Connection)}, "deleteConnection", "not_found", "", ""},
			{"events first 0", request{Path: "/v1/events?limit=0"},
				400, events, map[string]any{"f": 0}, "events", "invalid_parameter", "limit", "first"},
			{"events first 1001", request{Path: "/v1/events?limit=1001"},
				400, events, map[string]any{"f": 1001}, "events", "invalid_parameter", "limit", "first"},
			{"events first -1", request{Path: "/v1/events?limit=-1"},
				400, events, map[string]any{"f": -1}, "events", "invalid_parameter", "limit", "first"},
			{"events afterSeq -1", request{Path: "/v1/events?after_seq=-1"},
				400, events, map[string]any{"a": -1}, "events", "invalid_parameter", "after_seq", "afterSeq"},
			{"events of an unknown type", request{Path: "/v1/events?type=nope"},
				400, events, map[string]any{"t": "nope"}, "events", "invalid_parameter", "type", "type"},
			{"node of an unknown id", request{Path: "/v1/messages/" + unknownMsg},
				404, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": unknownMsg}, "node", "not_found", "", ""},
			{"node of a malformed id", request{Path: "/v1/conversations/conv_nope"},
				404, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": "conv_nope"}, "node", "not_found", "", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				req := c.rest
				req.Key = key
				if req.Body != "" {
					req.ContentType = jsonCT
				}
				e := wantError(t, g.do(t, req), c.status, c.code, c.restParam)
				if c.restParam == "" && e.Error.Param != "" {
					t.Errorf("REST names param %q", e.Error.Param)
				}
				ge := gqlFail(t, g.gql(t, key, c.query, c.vars), c.field, c.code, c.graphParam)
				if c.graphParam == "" && ge.Extensions["param"] != nil {
					t.Errorf("GraphQL names param %v", ge.Extensions["param"])
				}
				if c.code == "payment_required" && !strings.Contains(ge.Message, "comm login") {
					t.Errorf("GraphQL's 402 message %q does not tell the caller to sign in", ge.Message)
				}
			})
		}

		t.Run("authentication", func(t *testing.T) {
			t.Parallel()
			body := `{"query":"{ project { id } }"}`
			for _, c := range []struct{ name, auth string }{
				{"no key", ""},
				{"unknown key", "Bearer comm_sandbox_nope"},
				{"key with a wrong checksum", "Bearer " + key + "x"},
				{"basic auth", "Basic " + key},
			} {
				for _, method := range []string{http.MethodPost, http.MethodGet} {
					req := request{Method: method, Path: "/graphql", Auth: c.auth}
					if method == http.MethodPost {
						req.ContentType, req.Body = jsonCT, body
					} else {
						req.Path += "?query=" + url.QueryEscape("{ project { id } }")
					}
					resp := g.do(t, req)
					wantError(t, resp, http.StatusUnauthorized, "unauthenticated", "")
					if resp.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("%s %s: 401 without WWW-Authenticate", method, c.name)
					}
				}
			}
		})

		t.Cleanup(func() {
			if after := rows(t, g, sb.ProjectID); !same(after, before) {
				t.Errorf("refused operations changed the project: %v, had %v", after, before)
			}
			var conv conversation
			g.get(t, key, "/v1/conversations/"+in.ConversationID, &conv)
			if conv.Typing {
				t.Errorf("a refused typing call shows: %+v", conv)
			}
		})
	})
}

// TestGraphQLIsolation: with project B's key, GraphQL neither shows nor
// changes anything of project A, and A's rows and stream stay as they
// were.
func TestGraphQLIsolation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		a := g.newSandbox(t, "A")
		b := g.newSandbox(t, "B")
		conn := g.connectTest(t, a.APIKey)
		in := g.inject(t, a.APIKey, conn.ID, `{"sender":"alice","text":"secret"}`)
		out := g.queue(t, a.APIKey, "/v1/messages/"+in.ID+"/reply", `{"text":"also secret"}`)
		bConn := g.connectTest(t, b.APIKey)
		aRows, bRows := rows(t, g, a.ProjectID), rows(t, g, b.ProjectID)
		aEvents := g.events(t, a.APIKey, "")
		var aConvs []conversation
		g.get(t, a.APIKey, "/v1/conversations", &aConvs)
		foreign := map[string]string{
			a.ProjectID: "Project", conn.ID: "Connection", in.ConversationID: "Conversation", in.ID: "Message", out.ID: "Message",
		}

		for id := range foreign {
			res := g.gql(t, b.APIKey, `query($id: ID!) { node(id: $id) { __typename id } }`, map[string]any{"id": id})
			gqlFail(t, res, "node", "not_found", "")
			if strings.Contains(string(res.Body), "secret") || strings.Contains(string(res.Body), a.CustomerID) {
				t.Errorf("node(%s) leaks: %s", id, res.Body)
			}
		}
		var ids []string
		for id := range foreign {
			ids = append(ids, id)
		}
		ids = append(ids, bConn.ID)
		res := g.gql(t, b.APIKey, `query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }`, map[string]any{"ids": ids})
		var nodes struct {
			Nodes []*struct {
				Typename string `json:"__typename"`
				ID       string `json:"id"`
			} `json:"nodes"`
		}
		decodeJSON(t, res.Data, &nodes)
		if len(nodes.Nodes) != len(ids) {
			t.Fatalf("nodes answered %s", res.Body)
		}
		for i, n := range nodes.Nodes {
			switch {
			case ids[i] == bConn.ID && (n == nil || n.ID != bConn.ID):
				t.Errorf("nodes does not resolve B's own connection: %s", res.Body)
			case ids[i] != bConn.ID && n != nil:
				t.Errorf("nodes leaks A's %s: %s", ids[i], res.Body)
			}
		}
		if len(res.Errors) != len(foreign) {
			t.Errorf("nodes: %d errors for %d foreign ids: %s", len(res.Errors), len(foreign), res.Body)
		}
		for _, e := range res.Errors {
			if e.Extensions["code"] != "not_found" {
				t.Errorf("nodes: error code %v, want not_found; body %s", e.Extensions["code"], res.Body)
			}
		}

		// Lists, filtered or not, show none of A's rows.
		for _, q := range []string{
			`{ l: connections { totalCount edges { node { id } } } }`,
			`{ l: conversations { totalCount edges { node { id } } } }`,
			`{ l: messages { totalCount edges { node { id } } } }`,
			`query($ids: [ID!]) { l: connections(where: {idIn: $ids}) { totalCount edges { node { id } } } }`,
			`query($ids: [ID!]) { l: conversations(where: {idIn: $ids}) { totalCount edges { node { id } } } }`,
			`query($ids: [ID!]) { l: messages(where: {idIn: $ids}) { totalCount edges { node { id } } } }`,
			`query($c: String) { l: connections(where: {customerID: $c}) { totalCount edges { node { id } } } }`,
			`query($c: String) { l: conversations(where: {connectionID: $c}) { totalCount edges { node { id } } } }`,
			`query($c: String) { l: messages(where: {connectionID: $c}) { totalCount edges { node { id } } } }`,
		} {
			var data struct {
				L struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Node struct {
							ID string `json:"id"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"l"`
			}
			vars := map[string]any{}
			if strings.Contains(q, "$ids") {
				vars["ids"] = ids
			}
			if strings.Contains(q, "customerID") {
				vars["c"] = a.CustomerID
			} else if strings.Contains(q, "$c") {
				vars["c"] = conn.ID
			}
			g.gqlOK(t, b.APIKey, q, vars, &data)
			want := 0
			if strings.Contains(q, "connections") && !strings.Contains(q, "customerID") {
				want = 1 // B's own connection
			}
			if data.L.TotalCount != want || len(data.L.Edges) != want {
				t.Errorf("%s with B's key: %+v, want %d rows", oneLine(q), data.L, want)
			}
			for _, e := range data.L.Edges {
				if _, ok := foreign[e.Node.ID]; ok {
					t.Errorf("%s with B's key lists A's %s", oneLine(q), e.Node.ID)
				}
			}
		}
		var proj struct {
			Project struct {
				ID      string `json:"id"`
				LastSeq int64  `json:"lastSeq"`
			} `json:"project"`
		}
		g.gqlOK(t, b.APIKey, `{ project { id lastSeq } }`, nil, &proj)
		if proj.Project.ID != b.ProjectID {
			t.Errorf("project with B's key is %s", proj.Project.ID)
		}
		for _, e := range g.gqlEventsAll(t, b.APIKey, 100) {
			if strings.Contains(string(e.Data), conn.ID) || strings.Contains(string(e.Data), "secret") {
				t.Errorf("B's events query shows A's event %d %s", e.Seq, e.Data)
			}
		}

		// Mutations on A's ids are refused as unknown ids are.
		for _, c := range []struct {
			name, query string
			vars        map[string]any
			field, code string
			param       string
		}{
			{"reply", `mutation($m: ID!) { reply(messageID: $m, input: {text: "hijack"}) { id } }`, map[string]any{"m": in.ID}, "reply", "not_found", ""},
			{"reply to A's reply", `mutation($m: ID!) { reply(messageID: $m, input: {text: "hijack"}) { id } }`, map[string]any{"m": out.ID}, "reply", "not_found", ""},
			{"typing", `mutation($m: ID!) { typing(messageID: $m) { conversationID } }`, map[string]any{"m": in.ID}, "typing", "not_found", ""},
			{"deleteConnection", `mutation($id: ID!) { deleteConnection(id: $id) }`, map[string]any{"id": conn.ID}, "deleteConnection", "not_found", ""},
			{"injectInbound", `mutation($c: ID!) { injectInbound(connectionID: $c, input: {sender: "eve", text: "spoof"}) { duplicate } }`,
				map[string]any{"c": conn.ID}, "injectInbound", "not_found", ""},
			{"send", `mutation($c: ID!) { send(input: {connectionID: $c, to: "alice", text: "hijack"}) { id } }`,
				map[string]any{"c": conn.ID}, "send", "invalid_parameter", "connectionID"},
			{"connect in A's scope", `mutation($cus: String, $agt: String) { connect(input: {channel: "test", customerID: $cus, agentID: $agt}) { id customerID } }`,
				map[string]any{"cus": a.CustomerID, "agt": a.AgentID}, "", "", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				res := g.gql(t, b.APIKey, c.query, c.vars)
				if c.code == "" {
					// Naming A's scope ids is allowed (they are labels the
					// caller chooses), but the connection is B's.
					if len(res.Errors) > 0 {
						return
					}
					var data struct {
						Connect struct {
							ID         string `json:"id"`
							CustomerID string `json:"customerID"`
						} `json:"connect"`
					}
					decodeJSON(t, res.Data, &data)
					if n := count(t, g.DB, "SELECT COUNT(*) FROM connections WHERE id = ? AND project_id = ?", data.Connect.ID, b.ProjectID); n != 1 {
						t.Errorf("connect with A's scope stored %s outside B", data.Connect.ID)
					}
					bRows["connections"]++
					bRows["events"]++
					return
				}
				e := gqlFail(t, res, c.field, c.code, c.param)
				if strings.Contains(e.Message, "secret") || strings.Contains(e.Message, a.ProjectID) {
					t.Errorf("%s error leaks: %s", c.name, e.Message)
				}
			})
		}

		// A is untouched, in the database and through REST with A's key.
		if got := rows(t, g, a.ProjectID); !same(got, aRows) {
			t.Errorf("A's rows %v, had %v", got, aRows)
		}
		if got := rows(t, g, b.ProjectID); !same(got, bRows) {
			t.Errorf("B's rows %v, want %v", got, bRows)
		}
		sameEvents(t, "A's stream", g.events(t, a.APIKey, ""), aEvents)
		var c connection
		g.get(t, a.APIKey, "/v1/connections/"+conn.ID, &c)
		if c.Status != "active" {
			t.Errorf("A's connection after B's delete: %+v", c)
		}
		var convs []conversation
		g.get(t, a.APIKey, "/v1/conversations", &convs)
		if !same(convs, aConvs) {
			t.Errorf("A's conversations %+v, had %+v", convs, aConvs)
		}
		if m := g.message(t, a.APIKey, out.ID); m.Status != "queued" {
			t.Errorf("A's reply %+v", m)
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM messages WHERE text IN ('hijack', 'spoof')"); n != 0 {
			t.Errorf("%d messages of B's mutations stored", n)
		}
	})
}

// TestGraphQLLimits: complexity and introspection limits, GET queries,
// and the body limit.
func TestGraphQLLimits(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{MaxBodyBytes: 8 << 10})
		sb := g.newSandbox(t, "limits")
		key := sb.APIKey

		// Each alias of messages(first: 500) { edges { node { id } } }
		// costs 1 + 500 × 3 (a list's fields count once per row): 13 fit
		// the default limit of 20,000, 14 do not.
		aliases := func(n int) string {
			var q strings.Builder
			q.WriteString("{")
			for i := range n {
				fmt.Fprintf(&q, " m%d: messages(first: 500) { edges { node { id } } }", i)
			}
			q.WriteString(" }")
			return q.String()
		}
		res := g.gql(t, key, aliases(14), nil)
		if len(res.Errors) == 0 || (len(res.Data) > 0 && string(res.Data) != "null") {
			t.Fatalf("an over-complex query: status %d, body %.300s", res.Status, res.Body)
		}
		if e := res.Errors[0]; e.Extensions["code"] != "COMPLEXITY_LIMIT_EXCEEDED" ||
			!strings.Contains(e.Message, "complexity 21014") || !strings.Contains(e.Message, "20000") {
			t.Errorf("complexity error %+v", e)
		}
		var fits map[string]json.RawMessage
		g.gqlOK(t, key, aliases(13), nil, &fits)
		if len(fits) != 13 {
			t.Errorf("a query at the limit answered %d fields", len(fits))
		}

		// Introspection is off by default.
		for _, q := range []string{`{ __schema { types { name } } }`, `{ __type(name: "Query") { name fields { name } } }`} {
			res := g.gql(t, key, q, nil)
			if len(res.Errors) == 0 || strings.Contains(string(res.Body), `"Mutation"`) || strings.Contains(string(res.Body), `"fields"`) {
				t.Errorf("%s: status %d, body %s", q, res.Status, res.Body)
			}
		}
		// __typename is not introspection.
		var tn struct {
			Typename string `json:"__typename"`
		}
		g.gqlOK(t, key, `{ __typename }`, nil, &tn)
		if tn.Typename != "Query" {
			t.Errorf("__typename %q", tn.Typename)
		}

		// GET runs queries with the key, and refuses mutations.
		get := func(q string) gqlResult {
			return gqlDecode(t, g.do(t, request{Path: "/graphql?query=" + url.QueryEscape(q), Key: key}))
		}
		res = get(`{project{id}}`)
		if res.Status != http.StatusOK || len(res.Errors) > 0 || !jsonEqual(res.Data, `{"project":{"id":"`+sb.ProjectID+`"}}`) {
			t.Errorf("GET /graphql?query={project{id}}: status %d, body %s", res.Status, res.Body)
		}
		before := rows(t, g, sb.ProjectID)
		res = get(`mutation { connect(input: {channel: "test"}) { id } }`)
		if res.Status == http.StatusOK || len(res.Errors) == 0 {
			t.Errorf("a mutation over GET: status %d, body %s", res.Status, res.Body)
		}
		if after := rows(t, g, sb.ProjectID); !same(after, before) {
			t.Errorf("a mutation over GET changed the project: %v, had %v", after, before)
		}

		// A body over MaxBodyBytes is refused before it is parsed.
		pad := strings.Repeat(" ", 8<<10)
		for _, body := range []string{
			`{"query":"{ project { id } }` + pad + `"}`,
			`{"query":"mutation { connect(input: {channel: \"test\"}) { id } }","variables":{"pad":"` + pad + `"}}`,
		} {
			resp := g.do(t, request{Method: http.MethodPost, Path: "/graphql", Key: key, ContentType: jsonCT, Body: body})
			e := wantError(t, resp, http.StatusRequestEntityTooLarge, "payload_too_large", "")
			if !strings.Contains(e.Error.Message, "8192") {
				t.Errorf("413 message %q does not state the limit", e.Error.Message)
			}
		}
		if after := rows(t, g, sb.ProjectID); !same(after, before) {
			t.Errorf("a refused body changed the project: %v, had %v", after, before)
		}
		// Just under the limit is served.
		q := `{"query":"{ project { id } }"}`
		under := q[:len(q)-1] + strings.Repeat(" ", 8<<10-len(q)) + "}"
		if resp := g.do(t, request{Method: http.MethodPost, Path: "/graphql", Key: key, ContentType: jsonCT, Body: under}); resp.Status != http.StatusOK {
			t.Errorf("a body of exactly the limit: status %d, body %.300s", resp.Status, resp.Body)
		}

		// An operator can turn introspection on.
		fresh := storetest.SQLite(t)
		if cfg.URL != "" {
			fresh = storetest.Postgres(t)
		}
		open := start(t, fresh, server.Options{GraphQL: graph.Options{Introspection: true}})
		var schema struct {
			Schema struct {
				Types []struct {
					Name string `json:"name"`
				} `json:"types"`
			} `json:"__schema"`
		}
		open.gqlOK(t, open.newSandbox(t, "introspection").APIKey, `{ __schema { types { name } } }`, nil, &schema)
		var names []string
		for _, ty := range schema.Schema.Types {
			names = append(names, ty.Name)
		}
		if !slices.Contains(names, "Mutation") || !slices.Contains(names, "Message") {
			t.Errorf("introspection with the option on lists %v", names)
		}
	})
}

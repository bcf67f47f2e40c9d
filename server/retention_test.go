package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestCursorExpired: after retention deleted a project's oldest events,
// every front door answers a cursor older than the earliest kept event
// with cursor_expired and earliest_seq (REST 410, GraphQL
// extensions, the websocket subscription an error message, webhook replay
// 410) instead of skipping; a cursor at earliest_seq-1 reads on, and seqs
// continue.
func TestCursorExpired(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "retention")
		key := sb.APIKey
		appendN(t, g.Log, sb.ProjectID, 20)
		// 100 days on (an injected clock) with a retention of 90: all but
		// the head are due.
		r := &stream.Retention{Log: g.Log, Keep: 90 * 24 * time.Hour, Now: func() time.Time { return time.Now().Add(100 * 24 * time.Hour) }}
		n, err := r.Pass(ctx)
		if err != nil || n != 19 {
			t.Fatalf("retention pass: %d, %v", n, err)
		}
		appendN(t, g.Log, sb.ProjectID, 5) // 21..25
		const earliest = 20

		// REST.
		for _, q := range []string{"after_seq=0", "after_seq=18", "after_seq=5&type=message.received", "after_seq=0&limit=3", "after_seq=10&wait=1"} {
			resp := g.do(t, request{Path: "/v1/events?" + q, Key: key})
			e := wantError(t, resp, http.StatusGone, "cursor_expired", "after_seq")
			if e.Error.EarliestSeq != earliest {
				t.Errorf("GET /v1/events?%s: earliest_seq %d, want %d; body %s", q, e.Error.EarliestSeq, earliest, resp.Body)
			}
		}
		evs := g.events(t, key, fmt.Sprintf("after_seq=%d", earliest-1))
		if len(evs) != 6 || evs[0].Seq != earliest || evs[5].Seq != 25 {
			t.Fatalf("GET /v1/events from earliest_seq-1: %+v", evs)
		}
		if evs := g.events(t, key, "after_seq=25&wait=0"); len(evs) != 0 {
			t.Errorf("at the head: %+v", evs)
		}

		// GraphQL query.
		const q = `query($a: Int) { events(afterSeq: $a, first: 10) { edges { node { seq } } } }`
		res := g.gql(t, key, q, map[string]any{"a": 3})
		ge := gqlFail(t, res, "events", "cursor_expired", "afterSeq")
		if v, ok := ge.Extensions["earliest_seq"].(float64); !ok || v != earliest {
			t.Errorf("GraphQL extensions.earliest_seq %v, want %d; body %s", ge.Extensions["earliest_seq"], earliest, res.Body)
		}
		var page struct {
			Events struct {
				Edges []struct {
					Node struct {
						Seq int64 `json:"seq"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"events"`
		}
		g.gqlOK(t, key, q, map[string]any{"a": earliest - 1}, &page)
		if len(page.Events.Edges) != 6 || page.Events.Edges[0].Node.Seq != earliest {
			t.Errorf("GraphQL from earliest_seq-1: %+v", page)
		}

		// Subscriptions: an expired cursor gets an error message with the
		// code and earliest_seq, and nothing else for that operation; one
		// at earliest_seq-1 replays and follows.
		c, _, err := g.dialWS(t, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.init(key)
		for id, sub := range map[string]string{
			"ev":    `subscription($a: Int) { events(afterSeq: $a) { seq type data } }`,
			"batch": `subscription($a: Int) { eventBatches(afterSeq: $a, max: 10) { seq } }`,
			"typed": `subscription($a: Int) { events(afterSeq: $a, type: "message.received") { seq } }`,
		} {
			if err := c.subscribe(id, sub, map[string]any{"a": 1}); err != nil {
				t.Fatal(err)
			}
			m, err := c.next(10 * time.Second)
			if err != nil || m.ID != id || m.Type != "error" {
				t.Fatalf("%s: %v %+v, want an error message", id, err, m)
			}
			var errs []gqlError
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) != 1 {
				t.Fatalf("%s: error payload %s", id, m.Payload)
			}
			if errs[0].Extensions["code"] != "cursor_expired" || errs[0].Extensions["earliest_seq"] != float64(earliest) ||
				errs[0].Extensions["param"] != "afterSeq" {
				t.Errorf("%s: error %s, want cursor_expired with earliest_seq %d", id, m.Payload, earliest)
			}
		}
		if err := c.subscribe("ok", `subscription($a: Int) { events(afterSeq: $a) { seq type data } }`, map[string]any{"a": earliest - 1}); err != nil {
			t.Fatal(err)
		}
		got, _, err := c.events("ok", 25)
		if err != nil || len(got) != 6 || got[0].Seq != earliest {
			t.Fatalf("subscription from earliest_seq-1: %v, %+v", err, got)
		}
		appendN(t, g.Log, sb.ProjectID, 1)
		if got, _, err := c.events("ok", 26); err != nil || len(got) != 1 || got[0].Seq != 26 {
			t.Fatalf("subscription after the replay: %v, %+v", err, got)
		}

		// Webhook replay and registration from an expired from_seq.
		put := g.do(t, request{Method: http.MethodPut, Path: "/v1/webhook", Key: key, ContentType: jsonCT,
			Body: `{"url":"https://hooks.example.com/comm"}`})
		if put.Status != http.StatusOK {
			t.Fatalf("PUT /v1/webhook: %d %s", put.Status, put.Body)
		}
		for _, c := range []request{
			{Method: http.MethodPost, Path: "/v1/webhook/replay", Key: key, ContentType: jsonCT, Body: `{"from_seq":0}`},
			{Method: http.MethodPut, Path: "/v1/webhook", Key: key, ContentType: jsonCT, Body: `{"url":"https://hooks.example.com/comm","from_seq":18}`},
		} {
			resp := g.do(t, c)
			if e := wantError(t, resp, http.StatusGone, "cursor_expired", "from_seq"); e.Error.EarliestSeq != earliest {
				t.Errorf("%s %s: earliest_seq %d; body %s", c.Method, c.Path, e.Error.EarliestSeq, resp.Body)
			}
		}
		replay := g.do(t, request{Method: http.MethodPost, Path: "/v1/webhook/replay", Key: key, ContentType: jsonCT,
			Body: fmt.Sprintf(`{"from_seq":%d}`, earliest-1)})
		if replay.Status != http.StatusOK {
			t.Errorf("replay from earliest_seq-1: %d %s", replay.Status, replay.Body)
		}
	})
}

// TestCursorExpiredLiveFeed: when retention deletes events a project's
// live feed has not read yet (committed by another replica whose wake-up
// did not come, older than the retention), the feed's live subscribers are
// told cursor_expired with earliest_seq instead of missing those events.
func TestCursorExpiredLiveFeed(t *testing.T) {
	t.Parallel()
	cfg := storetest.SQLite(t)
	ctx := context.Background()
	g := start(t, cfg, server.Options{})
	// Another "replica" on the same database: its commits do not wake this
	// gateway's feeds (SQLite has no NOTIFY); the feed sees them at its
	// next poll, a second later.
	other, err := stream.Open(g.DB, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sb := g.newSandbox(t, "feed")
	c, _, err := g.dialWS(t, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.init(sb.APIKey)
	for try := range 3 {
		id := fmt.Sprint("s", try)
		head, err := g.Log.Head(ctx, sb.ProjectID)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.subscribe(id, `subscription($a: Int) { events(afterSeq: $a) { seq } }`, map[string]any{"a": head}); err != nil {
			t.Fatal(err)
		}
		appendN(t, g.Log, sb.ProjectID, 1) // through this gateway: the subscriber is live once it has it
		if got, _, err := c.events(id, head+1); err != nil || len(got) != 1 {
			t.Fatalf("live event: %v %+v", err, got)
		}
		appendN(t, other, sb.ProjectID, 5)
		r := &stream.Retention{Log: other, Keep: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
		if _, err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		earliest, _ := other.Earliest(ctx, sb.ProjectID)
		var m wsMsg
		for m.ID != id { // (messages of an earlier try's subscription)
			if m, err = c.next(10 * time.Second); err != nil {
				t.Fatalf("after the trim: %v", err)
			}
		}
		if m.Type == "next" {
			// The feed polled between the appends and the trim: it got
			// the events in time. Try again.
			t.Logf("try %d: the feed read the events before the trim", try)
			c.write(wsMsg{ID: id, Type: "complete"})
			continue
		}
		var errs []gqlError
		if m.Type != "error" || json.Unmarshal(m.Payload, &errs) != nil || len(errs) != 1 ||
			errs[0].Extensions["code"] != "cursor_expired" || errs[0].Extensions["earliest_seq"] != float64(earliest) {
			t.Fatalf("after the trim: %s %s, want cursor_expired with earliest_seq %d", m.Type, m.Payload, earliest)
		}
		return
	}
	t.Fatal("the feed read the events before the trim three times")
}

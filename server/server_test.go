package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		resp := g.do(t, request{Path: "/healthz"})
		if resp.Status != http.StatusOK {
			t.Fatalf("status %d, body %s", resp.Status, resp.Body)
		}
		var body map[string]string
		decodeJSON(t, resp.Body, &body)
		if len(body) != 1 || body["status"] != "ok" {
			t.Errorf("body %s, want {\"status\":\"ok\"}", resp.Body)
		}
	})
}

// TestRequestID: a caller's request id is echoed in the header and in
// error bodies; a missing or oversized one is replaced by a fresh one.
func TestRequestID(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		cases := []struct {
			name, sent string
			echoed     bool
		}{
			{"given", "trace-123", true},
			{"missing", "", false},
			{"too long", strings.Repeat("x", 65), false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Path: "/v1/nope", RequestID: c.sent})
				e := wantError(t, resp, http.StatusNotFound, "route_not_found", "")
				got := e.Error.RequestID
				if c.echoed && got != c.sent {
					t.Errorf("request id %q, want %q", got, c.sent)
				}
				if !c.echoed && (got == c.sent || !strings.HasPrefix(got, "req_")) {
					t.Errorf("request id %q, want a fresh req_ id", got)
				}
			})
		}
	})
}

// TestCreateSandbox: a sandbox answers 201 with well-formed ids and a key
// that works at once on the authenticated routes.
func TestCreateSandbox(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
			ContentType: "application/json", Body: `{"name":"  my agent  "}`})
		if resp.Status != http.StatusCreated {
			t.Fatalf("status %d, body %s", resp.Status, resp.Body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var sb sandbox
		decodeJSON(t, resp.Body, &sb)
		for _, id := range []struct{ value, prefix string }{
			{sb.ProjectID, ident.Project}, {sb.CustomerID, ident.Customer}, {sb.AgentID, ident.Agent},
		} {
			if err := ident.Check(id.value, id.prefix); err != nil {
				t.Errorf("id %q: %v", id.value, err)
			}
		}
		if !strings.HasPrefix(sb.APIKey, "comm_sandbox_") {
			t.Errorf("api_key %q lacks the comm_sandbox_ prefix", sb.APIKey)
		}
		if _, err := apikey.Parse(sb.APIKey); err != nil {
			t.Errorf("api_key %q: %v", sb.APIKey, err)
		}

		p := g.project(t, sb.APIKey)
		if p.CreatedAt.IsZero() || time.Since(p.CreatedAt).Abs() > time.Hour || p.CreatedAt.Location() != time.UTC {
			t.Errorf("created_at %v is not a recent UTC time", p.CreatedAt)
		}
		p.CreatedAt = time.Time{}
		want := project{ID: sb.ProjectID, Name: "my agent", CustomerID: sb.CustomerID, AgentID: sb.AgentID}
		if p != want {
			t.Errorf("GET /v1/project = %+v, want %+v", p, want)
		}
		if evs := g.events(t, sb.APIKey, ""); len(evs) != 0 {
			t.Errorf("a new project has events: %+v", evs)
		}

		// A second sandbox is a different project with a different key.
		other := g.newSandbox(t, "other")
		if other.ProjectID == sb.ProjectID || other.APIKey == sb.APIKey ||
			other.CustomerID == sb.CustomerID || other.AgentID == sb.AgentID {
			t.Errorf("two sandboxes share an id or key: %+v and %+v", sb, other)
		}
		if got := g.project(t, other.APIKey).ID; got != other.ProjectID {
			t.Errorf("second key sees project %s, want %s", got, other.ProjectID)
		}
		// Only the key's hash is stored.
		if n := count(t, g.DB, "SELECT COUNT(*) FROM api_keys WHERE hash = ?", []byte(sb.APIKey)); n != 0 {
			t.Errorf("the key is stored in clear")
		}
	})
}

// TestAuth: every authenticated route refuses a missing, malformed, unknown
// or revoked key with 401, the JSON error shape and a Bearer challenge, and
// accepts a good key.
func TestAuth(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		good := g.newSandbox(t, "good")
		revoked := g.newSandbox(t, "revoked")
		if got := g.project(t, revoked.APIKey).ID; got != revoked.ProjectID {
			t.Fatalf("key works before revocation: got project %s", got)
		}
		revokeKeys(t, g.Log, revoked.ProjectID)

		badSum := good.APIKey[:len(good.APIKey)-1] + flip(good.APIKey[len(good.APIKey)-1])
		routes := []string{"/v1/project", "/v1/events", "/v1/events?after_seq=0&limit=5",
			"/v1/events?limit=abc"} // auth comes before parameter checks
		cases := []struct {
			name string
			auth string // the Authorization header; empty leaves it out
		}{
			{"missing header", ""},
			{"basic scheme", "Basic x"},
			{"basic scheme with a good key", "Basic " + good.APIKey},
			{"key without scheme", good.APIKey},
			{"scheme without key", "Bearer"},
			{"scheme with blank key", "Bearer    "},
			{"malformed key", "Bearer not-a-key"},
			{"truncated key", "Bearer " + good.APIKey[:len(good.APIKey)-3]},
			{"key with a trailing character", "Bearer " + good.APIKey + "x"},
			{"bad checksum", "Bearer " + badSum},
			{"unknown sandbox key", "Bearer " + apikey.New(apikey.SandboxPrefix)},
			{"unknown signed-in key", "Bearer " + apikey.New(apikey.SignedInPrefix)},
			{"revoked key", "Bearer " + revoked.APIKey},
		}
		for _, c := range cases {
			for _, route := range routes {
				t.Run(c.name+" "+route, func(t *testing.T) {
					t.Parallel()
					resp := g.do(t, request{Path: route, Auth: c.auth})
					e := wantError(t, resp, http.StatusUnauthorized, "unauthenticated", "")
					if ch := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer") {
						t.Errorf("WWW-Authenticate %q, want a Bearer challenge", ch)
					}
					if strings.Contains(e.Error.Message, good.APIKey) || strings.Contains(e.Error.Message, revoked.APIKey) {
						t.Errorf("error message echoes a key: %q", e.Error.Message)
					}
				})
			}
		}

		okCases := []struct{ name, auth string }{
			{"canonical", "Bearer " + good.APIKey},
			{"lowercase scheme", "bearer " + good.APIKey},
			{"extra spaces", "Bearer   " + good.APIKey + "  "},
		}
		for _, c := range okCases {
			t.Run("accepts "+c.name, func(t *testing.T) {
				t.Parallel()
				for _, route := range routes[:3] {
					if resp := g.do(t, request{Path: route, Auth: c.auth}); resp.Status != http.StatusOK {
						t.Errorf("GET %s: status %d, body %s", route, resp.Status, resp.Body)
					}
				}
			})
		}

		t.Run("sandbox creation needs no key", func(t *testing.T) {
			t.Parallel()
			resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
				ContentType: "application/json", Body: `{"name":"anonymous"}`, Auth: "Basic x"})
			if resp.Status != http.StatusCreated {
				t.Errorf("status %d, body %s", resp.Status, resp.Body)
			}
		})
	})
}

// flip returns a base62 character other than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// TestEventsQuery checks the parameters of GET /v1/events on a stream of
// mixed event types.
func TestEventsQuery(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		empty := g.newSandbox(t, "empty")
		sb := g.newSandbox(t, "busy")

		// 150 events; every third is message.sent, every tenth
		// connection.active, the rest message.received.
		const total = 150
		typeOf := func(seq int64) string {
			switch {
			case seq%10 == 0:
				return stream.ConnectionActive
			case seq%3 == 0:
				return stream.MessageSent
			}
			return stream.MessageReceived
		}
		ctx := context.Background()
		for seq := int64(1); seq <= total; seq++ {
			got, err := g.Log.Append(ctx, sb.ProjectID, typeOf(seq), map[string]int64{"i": seq})
			if err != nil {
				t.Fatal(err)
			}
			if got != seq {
				t.Fatalf("append %d got seq %d", seq, got)
			}
		}
		// seqs of type typ in (after, total], at most limit of them.
		expect := func(after int64, limit int, typ string) []int64 {
			var out []int64
			for seq := after + 1; seq <= total && len(out) < limit; seq++ {
				if typ == "" || typeOf(seq) == typ {
					out = append(out, seq)
				}
			}
			return out
		}

		t.Run("empty stream is an empty array", func(t *testing.T) {
			t.Parallel()
			for _, q := range []string{"", "?after_seq=0", "?type=message.received", "?limit=1000", "?after_seq=999"} {
				resp := g.do(t, request{Path: "/v1/events" + q, Key: empty.APIKey})
				if resp.Status != http.StatusOK || string(bytes.TrimSpace(resp.Body)) != "[]" {
					t.Errorf("GET /v1/events%s on an empty stream: status %d, body %q; want 200 []", q, resp.Status, resp.Body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})

		valid := []struct {
			name  string
			query string
			want  []int64
		}{
			{"defaults: after_seq 0, limit 100", "", expect(0, 100, "")},
			{"explicit defaults", "after_seq=0&limit=100", expect(0, 100, "")},
			{"after_seq", "after_seq=140", expect(140, 100, "")},
			{"after_seq with limit", "after_seq=7&limit=3", expect(7, 3, "")},
			{"limit 1", "limit=1", expect(0, 1, "")},
			{"limit 1000", "limit=1000", expect(0, 1000, "")},
			{"after the head", "after_seq=150", nil},
			{"far after the head", "after_seq=9223372036854775807", nil},
			{"type message.sent", "type=message.sent", expect(0, 100, stream.MessageSent)},
			{"type message.received paged", "type=message.received&after_seq=50&limit=10", expect(50, 10, stream.MessageReceived)},
			{"type connection.active", "type=connection.active&limit=1000", expect(0, 1000, stream.ConnectionActive)},
			{"type with no events", "type=domain.verified", nil},
			{"empty type means all", "type=&limit=5", expect(0, 5, "")},
			{"empty limit means the default", "limit=", expect(0, 100, "")},
			{"empty after_seq means the default", "after_seq=&limit=2", expect(0, 2, "")},
			{"wait 0 answers at once", "wait=0&after_seq=148", expect(148, 100, "")},
			{"wait with events ready", "wait=30&after_seq=149", expect(149, 100, "")},
			{"parameters in any order", "limit=2&type=message.sent&after_seq=10", expect(10, 2, stream.MessageSent)},
		}
		for _, c := range valid {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				evs := g.events(t, sb.APIKey, c.query)
				got := make([]int64, len(evs))
				for i, e := range evs {
					got[i] = e.Seq
					if e.Type != typeOf(e.Seq) {
						t.Errorf("seq %d has type %q, want %q", e.Seq, e.Type, typeOf(e.Seq))
					}
					if want := fmt.Sprintf(`{"i":%d}`, e.Seq); !jsonEqual(e.Data, want) {
						t.Errorf("seq %d data %s, want %s", e.Seq, e.Data, want)
					}
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("seqs %v, want %v", got, c.want)
				}
			})
		}

		invalid := []struct {
			name    string
			query   string
			param   string
			message string // a substring of the error message, if set
		}{
			{"limit over the maximum", "limit=1001", "limit", "1000"},
			{"limit zero", "limit=0", "limit", ""},
			{"limit negative", "limit=-1", "limit", ""},
			{"limit not a number", "limit=abc", "limit", ""},
			{"limit not an integer", "limit=1.5", "limit", ""},
			{"limit overflowing int64", "limit=99999999999999999999", "limit", ""},
			{"after_seq not a number", "after_seq=abc", "after_seq", ""},
			{"after_seq not an integer", "after_seq=1.5", "after_seq", ""},
			{"after_seq negative", "after_seq=-1", "after_seq", ""},
			{"after_seq overflowing int64", "after_seq=9223372036854775808", "after_seq", ""},
			{"unknown type", "type=message.bogus", "type", ""},
			{"type in the wrong case", "type=Message.Received", "type", ""},
			{"unknown parameter", "foo=1", "foo", "foo"},
			{"parameter in the wrong case", "Limit=5", "Limit", "Limit"},
			{"unknown parameter beside good ones", "limit=5&cursor=3", "cursor", "cursor"},
			{"repeated limit", "limit=1&limit=2", "limit", ""},
			{"repeated after_seq", "after_seq=1&after_seq=1", "after_seq", ""},
			{"repeated type", "type=message.sent&type=message.received", "type", ""},
			{"wait negative", "wait=-1", "wait", ""},
			{"wait too long", "wait=61", "wait", ""},
			{"wait not a number", "wait=soon", "wait", ""},
			{"malformed query string", "limit=%zz", "", ""},
		}
		for _, c := range invalid {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Path: "/v1/events?" + c.query, Key: sb.APIKey})
				e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", c.param)
				if c.message != "" && !strings.Contains(e.Error.Message, c.message) {
					t.Errorf("message %q does not mention %q", e.Error.Message, c.message)
				}
			})
		}

		t.Run("unknown type lists the known types", func(t *testing.T) {
			t.Parallel()
			resp := g.do(t, request{Path: "/v1/events?type=nope", Key: sb.APIKey})
			e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "type")
			for _, typ := range stream.Types {
				if !strings.Contains(e.Error.Message, typ) {
					t.Errorf("message %q does not list %s", e.Error.Message, typ)
				}
			}
		})
		t.Run("unknown parameter lists the known ones", func(t *testing.T) {
			t.Parallel()
			resp := g.do(t, request{Path: "/v1/events?bogus=1", Key: sb.APIKey})
			e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "bogus")
			for _, p := range []string{"after_seq", "limit", "type", "wait"} {
				if !strings.Contains(e.Error.Message, p) {
					t.Errorf("message %q does not list %s", e.Error.Message, p)
				}
			}
		})
	})
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestEventsLongPoll: with wait, an empty page is held until an event of
// the requested type commits, and returned as soon as it does.
func TestEventsLongPoll(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})

		t.Run("event arrives during the wait", func(t *testing.T) {
			t.Parallel()
			sb := g.newSandbox(t, "poll")
			appended := appendLater(t, g.Log, sb.ProjectID, 200*time.Millisecond, stream.MessageReceived)
			began := time.Now()
			evs := g.events(t, sb.APIKey, "wait=5")
			took := time.Since(began)
			<-appended
			if len(evs) != 1 || evs[0].Seq != 1 || evs[0].Type != stream.MessageReceived {
				t.Fatalf("got %+v, want the one appended event", evs)
			}
			// The event commits at about 200ms; answering near the 5s
			// deadline would mean the wake-up was missed.
			if took > 3*time.Second {
				t.Errorf("long poll answered after %v; the event was appended after 200ms", took)
			}
		})

		t.Run("events of other types do not end the wait", func(t *testing.T) {
			t.Parallel()
			sb := g.newSandbox(t, "typed poll")
			a := appendLater(t, g.Log, sb.ProjectID, 100*time.Millisecond, stream.MessageReceived)
			b := appendLater(t, g.Log, sb.ProjectID, 400*time.Millisecond, stream.MessageSent)
			evs := g.events(t, sb.APIKey, "wait=5&type=message.sent")
			<-a
			<-b
			if len(evs) != 1 || evs[0].Seq != 2 || evs[0].Type != stream.MessageSent {
				t.Fatalf("got %+v, want only seq 2 of type message.sent", evs)
			}
		})

		t.Run("nothing arrives", func(t *testing.T) {
			t.Parallel()
			sb := g.newSandbox(t, "quiet")
			began := time.Now()
			evs := g.events(t, sb.APIKey, "wait=1")
			if len(evs) != 0 {
				t.Fatalf("got %+v from an empty stream", evs)
			}
			if took := time.Since(began); took < 900*time.Millisecond {
				t.Errorf("wait=1 answered after %v, before the wait ran out", took)
			}
		})

		t.Run("another project's events do not end the wait", func(t *testing.T) {
			t.Parallel()
			mine := g.newSandbox(t, "mine")
			theirs := g.newSandbox(t, "theirs")
			a := appendLater(t, g.Log, theirs.ProjectID, 100*time.Millisecond, stream.MessageReceived)
			evs := g.events(t, mine.APIKey, "wait=1")
			<-a
			if len(evs) != 0 {
				t.Fatalf("got another project's events: %+v", evs)
			}
		})
	})
}

// appendLater appends one event of type typ after d; the channel closes
// once it is committed.
func appendLater(t *testing.T, log *stream.Log, projectID string, d time.Duration, typ string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(d)
		if _, err := log.Append(context.Background(), projectID, typ, map[string]string{"t": typ}); err != nil {
			t.Errorf("append: %v", err)
		}
	}()
	return done
}

// TestEventsPaging pages through a stream larger than the maximum page:
// every seq comes exactly once, in order, then an empty page.
func TestEventsPaging(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "large")

		// Append from several goroutines so the log commits in groups.
		const total, appenders = 2500, 25
		var (
			mu   sync.Mutex
			sent = make(map[int64]string, total)
			wg   sync.WaitGroup
		)
		for w := range appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range total / appenders {
					data := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
					seq, err := g.Log.Append(context.Background(), sb.ProjectID, stream.MessageReceived, json.RawMessage(data))
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					sent[seq] = data
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		var after int64
		pages := 0
		for {
			evs := g.events(t, sb.APIKey, fmt.Sprintf("after_seq=%d&limit=1000", after))
			if len(evs) == 0 {
				break
			}
			pages++
			if pages > 3 {
				t.Fatalf("more than 3 pages of 1000 for %d events", total)
			}
			if want := min(1000, total-int(after)); len(evs) != want {
				t.Errorf("page after %d has %d events, want %d", after, len(evs), want)
			}
			for _, e := range evs {
				if e.Seq != after+1 {
					t.Fatalf("after seq %d came %d", after, e.Seq)
				}
				if !jsonEqual(e.Data, sent[e.Seq]) {
					t.Fatalf("seq %d data %s, acknowledged with %s", e.Seq, e.Data, sent[e.Seq])
				}
				after = e.Seq
			}
		}
		if after != total || pages != 3 {
			t.Errorf("paged to seq %d in %d pages, want %d in 3", after, pages, total)
		}
		if head := g.project(t, sb.APIKey).LastSeq; head != total {
			t.Errorf("last_seq %d, want %d", head, total)
		}
	})
}

// TestSandboxBodyErrors: every malformed creation request is refused with
// a precise error and stores nothing.
func TestSandboxBodyErrors(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		const jsonCT = "application/json"
		cases := []struct {
			name        string
			contentType string
			body        string
			status      int
			code        string
			param       string
		}{
			{"malformed JSON", jsonCT, `{"name":`, 400, "malformed_json", ""},
			{"malformed JSON token", jsonCT, `{"name":"a",}`, 400, "malformed_json", ""},
			{"not JSON at all", jsonCT, `name=a`, 400, "malformed_json", ""},
			{"trailing data", jsonCT, `{"name":"a"} {"name":"b"}`, 400, "malformed_json", ""},
			{"trailing garbage", jsonCT, `{"name":"a"}x`, 400, "malformed_json", ""},
			{"array body", jsonCT, `[{"name":"a"}]`, 400, "malformed_json", ""},
			{"string body", jsonCT, `"a"`, 400, "malformed_json", ""},
			{"empty body", jsonCT, ``, 400, "malformed_json", ""},
			{"whitespace body", jsonCT, "  \n", 400, "malformed_json", ""},
			{"null body", jsonCT, `null`, 400, "invalid_parameter", "name"},
			{"empty object", jsonCT, `{}`, 400, "invalid_parameter", "name"},
			{"name is a number", jsonCT, `{"name":5}`, 400, "invalid_parameter", "name"},
			{"name is an object", jsonCT, `{"name":{"x":1}}`, 400, "invalid_parameter", "name"},
			{"name is an array", jsonCT, `{"name":["a"]}`, 400, "invalid_parameter", "name"},
			{"name is a boolean", jsonCT, `{"name":true}`, 400, "invalid_parameter", "name"},
			{"name is null", jsonCT, `{"name":null}`, 400, "invalid_parameter", "name"},
			{"unknown field", jsonCT, `{"name":"a","colour":"red"}`, 400, "invalid_parameter", "colour"},
			{"empty name", jsonCT, `{"name":""}`, 400, "invalid_parameter", "name"},
			{"whitespace name", jsonCT, `{"name":" \t\n "}`, 400, "invalid_parameter", "name"},
			{"name of 201 characters", jsonCT, `{"name":"` + strings.Repeat("a", 201) + `"}`, 400, "invalid_parameter", "name"},
			{"name of 201 non-ASCII characters", jsonCT, `{"name":"` + strings.Repeat("é", 201) + `"}`, 400, "invalid_parameter", "name"},
			{"name with a NUL", jsonCT, `{"name":"a\u0000b"}`, 400, "invalid_parameter", "name"},
			{"name with a newline inside", jsonCT, `{"name":"a\nb"}`, 400, "invalid_parameter", "name"},
			{"name with an escape character", jsonCT, `{"name":"a\u001b[31mb"}`, 400, "invalid_parameter", "name"},
			{"missing Content-Type", "", `{"name":"a"}`, 415, "unsupported_media_type", ""},
			{"text/plain", "text/plain", `{"name":"a"}`, 415, "unsupported_media_type", ""},
			{"form", "application/x-www-form-urlencoded", `name=a`, 415, "unsupported_media_type", ""},
			{"malformed Content-Type", "application/json; charset", `{"name":"a"}`, 415, "unsupported_media_type", ""},
			{"missing Content-Type and body", "", ``, 415, "unsupported_media_type", ""},
		}
		t.Run("unknown field is named in the message", func(t *testing.T) {
			t.Parallel()
			resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
				ContentType: jsonCT, Body: `{"name":"a","colour":"red"}`})
			e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "colour")
			if !strings.Contains(e.Error.Message, "colour") {
				t.Errorf("message %q does not name the field", e.Error.Message)
			}
		})
		projects := count(t, g.DB, "SELECT COUNT(*) FROM projects")
		keys := count(t, g.DB, "SELECT COUNT(*) FROM api_keys")
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
					ContentType: c.contentType, Body: c.body})
				if c.code == "" { // any 4xx in the error shape
					if resp.Status != c.status {
						t.Fatalf("status %d, want %d; body %s", resp.Status, c.status, resp.Body)
					}
					var e apiError
					decodeJSON(t, resp.Body, &e)
					return
				}
				wantError(t, resp, c.status, c.code, c.param)
			})
		}
		t.Cleanup(func() {
			// Runs after the parallel cases above have finished.
			if n := count(t, g.DB, "SELECT COUNT(*) FROM projects"); n != projects {
				t.Errorf("refused requests stored projects: %d rows, had %d", n, projects)
			}
			if n := count(t, g.DB, "SELECT COUNT(*) FROM api_keys"); n != keys {
				t.Errorf("refused requests stored keys: %d rows, had %d", n, keys)
			}
		})
	})
}

// TestSandboxNames: names are trimmed and at most 200 characters; good
// names in any script are stored as given.
func TestSandboxNames(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		for _, name := range []string{
			"a",
			strings.Repeat("a", 200),
			"Mañana — エージェント 🤖",
			strings.Repeat("é", 100),
			`quotes " and \ backslashes`,
			"<script>&amp;</script>",
		} {
			sb := g.newSandbox(t, "  "+name+"\n")
			if got := g.project(t, sb.APIKey).Name; got != name {
				t.Errorf("name stored as %q, want %q", got, name)
			}
		}
		// A name within 200 characters but over 200 bytes must not fail
		// inside the server: it is either stored or refused as a bad name.
		body, _ := json.Marshal(map[string]string{"name": strings.Repeat("é", 200)})
		resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
			ContentType: "application/json", Body: string(body)})
		if resp.Status != http.StatusCreated {
			wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "name")
		}
	})
}

// TestBodyTooLarge: a body over Options.MaxBodyBytes is refused with 413
// and stores nothing; a body just under it is accepted.
func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{MaxBodyBytes: 1024})
		before := count(t, g.DB, "SELECT COUNT(*) FROM projects")
		for _, body := range []string{
			`{"name":"` + strings.Repeat("a", 4096) + `"}`,
			`{"name":"a"}` + strings.Repeat(" ", 4096),
			strings.Repeat(" ", 4096) + `{"name":"a"}`,
		} {
			resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
				ContentType: "application/json", Body: body})
			e := wantError(t, resp, http.StatusRequestEntityTooLarge, "payload_too_large", "")
			if !strings.Contains(e.Error.Message, "1024") {
				t.Errorf("message %q does not state the limit", e.Error.Message)
			}
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM projects"); n != before {
			t.Errorf("refused bodies stored projects: %d rows, had %d", n, before)
		}
		under := `{"name":"fits"}` + strings.Repeat(" ", 1024-15)
		resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
			ContentType: "application/json", Body: under})
		if resp.Status != http.StatusCreated {
			t.Errorf("a body of exactly 1024 bytes: status %d, body %s", resp.Status, resp.Body)
		}
	})
}

// TestRoutes: unknown routes and wrong methods answer in the JSON error
// shape.
func TestRoutes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "routes")
		notFound := []struct{ method, path string }{
			{"GET", "/"},
			{"GET", "/v1"},
			{"GET", "/v1/nope"},
			{"GET", "/v2/events"},
			{"GET", "/v1/events/1"},
			{"GET", "/v1/projects"},
			{"POST", "/v1/projects"},
			{"GET", "/v1/projects/sandbox/extra"},
			{"DELETE", "/nope"},
		}
		for _, c := range notFound {
			t.Run(c.method+" "+c.path, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Method: c.method, Path: c.path, Key: sb.APIKey})
				wantError(t, resp, http.StatusNotFound, "route_not_found", "")
			})
		}
		wrongMethod := []struct {
			method, path string
			allow        string // a method the Allow header must list
		}{
			{"POST", "/v1/events", "GET"},
			{"PUT", "/v1/events", "GET"},
			{"DELETE", "/v1/project", "GET"},
			{"PATCH", "/v1/project", "GET"},
			{"GET", "/v1/projects/sandbox", "POST"},
			{"DELETE", "/v1/projects/sandbox", "POST"},
			{"POST", "/healthz", "GET"},
		}
		for _, c := range wrongMethod {
			t.Run(c.method+" "+c.path, func(t *testing.T) {
				t.Parallel()
				resp := g.do(t, request{Method: c.method, Path: c.path, Key: sb.APIKey,
					ContentType: "application/json", Body: `{"name":"x"}`})
				wantError(t, resp, http.StatusMethodNotAllowed, "method_not_allowed", "")
				allow := strings.Split(strings.ReplaceAll(resp.Header.Get("Allow"), " ", ""), ",")
				if !slices.Contains(allow, c.allow) {
					t.Errorf("Allow %q does not list %s", resp.Header.Get("Allow"), c.allow)
				}
				if slices.Contains(allow, c.method) {
					t.Errorf("Allow %q lists the refused method %s", resp.Header.Get("Allow"), c.method)
				}
			})
		}
		t.Run("wrong method stores nothing", func(t *testing.T) {
			// PUT with a good body must not create a sandbox.
			before := count(t, g.DB, "SELECT COUNT(*) FROM projects")
			g.do(t, request{Method: "PUT", Path: "/v1/projects/sandbox",
				ContentType: "application/json", Body: `{"name":"x"}`})
			if n := count(t, g.DB, "SELECT COUNT(*) FROM projects"); n != before {
				t.Errorf("projects %d, had %d", n, before)
			}
		})
	})
}

// TestTenantIsolation: one project's key never sees another project's
// events, with or without a type filter, and the database agrees.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		a := g.newSandbox(t, "A")
		b := g.newSandbox(t, "B")

		// Interleave appends: A gets 30 events, B 12, of two types.
		ctx := context.Background()
		for i := range 30 {
			typ := stream.MessageReceived
			if i%3 == 0 {
				typ = stream.MessageSent
			}
			if _, err := g.Log.Append(ctx, a.ProjectID, typ, map[string]string{"owner": a.ProjectID}); err != nil {
				t.Fatal(err)
			}
			if i%5 < 2 {
				if _, err := g.Log.Append(ctx, b.ProjectID, typ, map[string]string{"owner": b.ProjectID}); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := map[string]int{a.APIKey: 30, b.APIKey: 12}
		owner := map[string]string{a.APIKey: a.ProjectID, b.APIKey: b.ProjectID}
		for _, sb := range []sandbox{a, b} {
			if got := g.project(t, sb.APIKey); got.ID != sb.ProjectID || got.LastSeq != int64(want[sb.APIKey]) {
				t.Errorf("GET /v1/project with %s's key: id %s last_seq %d, want %s %d",
					sb.ProjectID, got.ID, got.LastSeq, sb.ProjectID, want[sb.APIKey])
			}
			seen := 0
			for _, q := range []string{"limit=1000", "type=message.received&limit=1000", "type=message.sent&limit=1000"} {
				evs := g.events(t, sb.APIKey, q)
				for i, e := range evs {
					var d struct{ Owner string }
					json.Unmarshal(e.Data, &d)
					if d.Owner != owner[sb.APIKey] {
						t.Errorf("%s's key read an event of %s: %+v", sb.ProjectID, d.Owner, e)
					}
					if q == "limit=1000" && e.Seq != int64(i+1) {
						t.Errorf("%s's stream is not dense: index %d has seq %d", sb.ProjectID, i, e.Seq)
					}
				}
				if q != "limit=1000" {
					seen += len(evs)
				} else if len(evs) != want[sb.APIKey] {
					t.Errorf("%s's key reads %d events, want %d", sb.ProjectID, len(evs), want[sb.APIKey])
				}
			}
			if seen != want[sb.APIKey] {
				t.Errorf("%s's key reads %d events by type, want %d", sb.ProjectID, seen, want[sb.APIKey])
			}
		}
		for _, sb := range []sandbox{a, b} {
			if n := count(t, g.DB, "SELECT COUNT(*) FROM events WHERE project_id = ?", sb.ProjectID); n != int64(want[sb.APIKey]) {
				t.Errorf("database holds %d events of %s, want %d", n, sb.ProjectID, want[sb.APIKey])
			}
			if n := count(t, g.DB, "SELECT COUNT(*) FROM api_keys WHERE project_id = ?", sb.ProjectID); n != 1 {
				t.Errorf("database holds %d keys of %s, want 1", n, sb.ProjectID)
			}
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM events"); n != 42 {
			t.Errorf("database holds %d events, want 42", n)
		}
	})
}

// TestRestart: keys, events and the seq counter survive a shutdown; new
// events continue the stream without a gap or a reused seq.
func TestRestart(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "durable")
		first := appendN(t, g.Log, sb.ProjectID, 25)
		if got := len(g.events(t, sb.APIKey, "limit=1000")); got != 25 {
			t.Fatalf("before restart: %d events, want 25", got)
		}
		g.Stop()

		g = start(t, cfg, server.Options{})
		if p := g.project(t, sb.APIKey); p.ID != sb.ProjectID || p.LastSeq != 25 {
			t.Fatalf("after restart: project %+v, want id %s last_seq 25", p, sb.ProjectID)
		}
		second := appendN(t, g.Log, sb.ProjectID, 10)
		for seq := range second {
			if _, dup := first[seq]; dup {
				t.Errorf("seq %d reused after restart", seq)
			}
		}
		evs := g.events(t, sb.APIKey, "limit=1000")
		if len(evs) != 35 {
			t.Fatalf("after restart: %d events, want 35", len(evs))
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("after restart index %d has seq %d", i, e.Seq)
			}
			data, ok := first[e.Seq]
			if !ok {
				data = second[e.Seq]
			}
			if !jsonEqual(e.Data, string(data)) {
				t.Errorf("seq %d data %s, want %s", e.Seq, e.Data, data)
			}
		}
		// The restarted server still makes working sandboxes.
		other := g.newSandbox(t, "after restart")
		if got := g.project(t, other.APIKey).ID; got != other.ProjectID {
			t.Errorf("new key sees %s, want %s", got, other.ProjectID)
		}
	})
}

package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
	"github.com/comm-gateway/comm/idempotency"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// postKey sends a JSON body with an Idempotency-Key.
func (g *gateway) postKey(t *testing.T, key, path, body, idem string) response {
	t.Helper()
	return g.do(t, request{Method: http.MethodPost, Path: path, Key: key, ContentType: jsonCT, Body: body,
		Header: map[string]string{"Idempotency-Key": idem}})
}

// idemFixture is a sandbox with a test connection and an inbound message
// to reply to.
type idemFixture struct {
	key, project string
	conn         connection
	in           message
}

func newIdemFixture(t *testing.T, g *gateway, name string) idemFixture {
	t.Helper()
	sb := g.newSandbox(t, name)
	conn := g.connectTest(t, sb.APIKey)
	in := g.inject(t, sb.APIKey, conn.ID, `{"sender":"dave","text":"hello"}`)
	return idemFixture{key: sb.APIKey, project: sb.ProjectID, conn: conn, in: in}
}

func replayed(resp response) bool { return resp.Header.Get("Idempotent-Replayed") == "true" }

// TestIdempotencyKeyReplay: a retry with the same key and request answers
// the first answer (same status, same bytes, marked replayed) and stores
// nothing new; the same key with another body or path answers 422; an
// error answer is kept too; a request without a key is unaffected.
func TestIdempotencyKeyReplay(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		f := newIdemFixture(t, g, "idem")
		path := "/v1/messages/" + f.in.ID + "/reply"
		before := rows(t, g, f.project)

		first := g.postKey(t, f.key, path, `{"text":"once"}`, "k-1")
		if first.Status != http.StatusAccepted || replayed(first) {
			t.Fatalf("first: status %d, replayed %v, body %s", first.Status, replayed(first), first.Body)
		}
		var m message
		decodeJSON(t, first.Body, &m)
		sent := rows(t, g, f.project)
		if sent["messages"] != before["messages"]+1 {
			t.Errorf("the send stored %d messages, want 1", sent["messages"]-before["messages"])
		}
		for range 2 {
			again := g.postKey(t, f.key, path, `{"text":"once"}`, "k-1")
			if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || !replayed(again) {
				t.Errorf("retry: status %d, replayed %v, body %s; want %d, true, %s",
					again.Status, replayed(again), again.Body, first.Status, first.Body)
			}
			if ct := again.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("retry: Content-Type %q", ct)
			}
		}
		after := rows(t, g, f.project)
		if after["messages"] != sent["messages"] || after["events"] != sent["events"] {
			t.Errorf("after two retries: %v, after the send %v; want nothing more", after, sent)
		}

		// The same key with another body, or another path: 422, naming the header.
		e := wantError(t, g.postKey(t, f.key, path, `{"text":"twice"}`, "k-1"), http.StatusUnprocessableEntity,
			"idempotency_key_reused", "Idempotency-Key")
		if !strings.Contains(e.Error.Message, "Idempotency-Key") {
			t.Errorf("422 message %q does not name the header", e.Error.Message)
		}
		other := g.inject(t, f.key, f.conn.ID, `{"sender":"erin","text":"hi"}`)
		wantError(t, g.postKey(t, f.key, "/v1/messages/"+other.ID+"/reply", `{"text":"once"}`, "k-1"),
			http.StatusUnprocessableEntity, "idempotency_key_reused", "Idempotency-Key")
		if n := rows(t, g, f.project)["messages"]; n != after["messages"]+1 { // + erin's inbound
			t.Errorf("%d messages after the refused reuses, want %d", n, after["messages"]+1)
		}

		// An error answer is kept: the retry replays it.
		unknown := "/v1/messages/msg_01jd8x5m3r7q6y2b9v0c4k1n8t/reply"
		e1 := wantError(t, g.postKey(t, f.key, unknown, `{"text":"x"}`, "k-2"), http.StatusNotFound, "not_found", "")
		resp := g.postKey(t, f.key, unknown, `{"text":"x"}`, "k-2")
		e2 := apiError{}
		decodeJSON(t, resp.Body, &e2)
		if resp.Status != http.StatusNotFound || !replayed(resp) || e2 != e1 {
			t.Errorf("retry of a 404: status %d, replayed %v, %+v; want the first %+v", resp.Status, replayed(resp), e2, e1)
		}

		// Keys are per request kind: another route with a new key runs.
		c1 := g.postKey(t, f.key, "/v1/connections", `{"channel":"test"}`, "k-3")
		c2 := g.postKey(t, f.key, "/v1/connections", `{"channel":"test"}`, "k-3")
		if c1.Status != http.StatusCreated || !bytes.Equal(c1.Body, c2.Body) || !replayed(c2) {
			t.Errorf("connect twice with one key: %d %s, then %d %s", c1.Status, c1.Body, c2.Status, c2.Body)
		}
		// Without a key, nothing changes: two sends are two messages.
		n0 := rows(t, g, f.project)["messages"]
		g.queue(t, f.key, path, `{"text":"no key"}`)
		g.queue(t, f.key, path, `{"text":"no key"}`)
		if n := rows(t, g, f.project)["messages"]; n != n0+2 {
			t.Errorf("two sends without a key made %d messages, want 2", n-n0)
		}
	})
}

// TestIdempotencyKeyInvalid: a key that is empty, too long, not printable
// ASCII or sent twice answers 400 naming the header, and runs nothing.
func TestIdempotencyKeyInvalid(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		f := newIdemFixture(t, g, "idem-invalid")
		path := "/v1/messages/" + f.in.ID + "/reply"
		before := rows(t, g, f.project)
		for name, key := range map[string]string{
			"empty":     "",
			"too long":  strings.Repeat("k", 256),
			"tab":       "a\tb",
			"non-ASCII": "clé",
		} {
			t.Run(name, func(t *testing.T) {
				wantError(t, g.postKey(t, f.key, path, `{"text":"x"}`, key), http.StatusBadRequest,
					"invalid_parameter", "Idempotency-Key")
			})
		}
		req, err := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(`{"text":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.key)
		req.Header.Set("Content-Type", jsonCT)
		req.Header.Add("Idempotency-Key", "a")
		req.Header.Add("Idempotency-Key", "b")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("two keys: status %d, want 400", resp.StatusCode)
		}
		if ok := g.postKey(t, f.key, path, `{"text":"x"}`, strings.Repeat("k", 255)+""); ok.Status != http.StatusAccepted {
			t.Errorf("a key of 255 characters: status %d, body %s", ok.Status, ok.Body)
		}
		if n := rows(t, g, f.project)["messages"]; n != before["messages"]+1 {
			t.Errorf("%d messages more, want the one with a good key", n-before["messages"])
		}
	})
}

// TestIdempotencyKeyPerProject: the same key in two projects is two keys.
func TestIdempotencyKeyPerProject(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		a, b := newIdemFixture(t, g, "idem-a"), newIdemFixture(t, g, "idem-b")
		ra := g.postKey(t, a.key, "/v1/messages/"+a.in.ID+"/reply", `{"text":"same"}`, "shared-key")
		rb := g.postKey(t, b.key, "/v1/messages/"+b.in.ID+"/reply", `{"text":"same"}`, "shared-key")
		for _, r := range []response{ra, rb} {
			if r.Status != http.StatusAccepted || replayed(r) {
				t.Errorf("status %d, replayed %v, body %s; want 202, run", r.Status, replayed(r), r.Body)
			}
		}
		// Even the same path and body (B's key on A's message is B's own
		// request: not found in B, and not A's answer).
		rc := g.postKey(t, b.key, "/v1/messages/"+a.in.ID+"/reply", `{"text":"same"}`, "shared-key")
		if rc.Status != http.StatusUnprocessableEntity {
			t.Errorf("B reuses its key on another path: status %d, body %s; want 422", rc.Status, rc.Body)
		}
		rd := g.postKey(t, b.key, "/v1/messages/"+a.in.ID+"/reply", `{"text":"same"}`, "b-other")
		wantError(t, rd, http.StatusNotFound, "not_found", "")
	})
}

// TestIdempotencyKeyConcurrent: identical requests racing with one key run
// once; the others answer 409 (retryable, Retry-After) or the replay.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		f := newIdemFixture(t, g, "idem-race")
		path := "/v1/messages/" + f.in.ID + "/reply"
		before := rows(t, g, f.project)
		const racers = 8
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			runs  []response
			other []response
		)
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := g.postKey(t, f.key, path, `{"text":"race"}`, "race-key")
				mu.Lock()
				defer mu.Unlock()
				if r.Status == http.StatusAccepted && !replayed(r) {
					runs = append(runs, r)
				} else {
					other = append(other, r)
				}
			}()
		}
		wg.Wait()
		if len(runs) != 1 {
			t.Fatalf("%d requests ran, want 1", len(runs))
		}
		for _, r := range other {
			switch {
			case r.Status == http.StatusAccepted && replayed(r) && bytes.Equal(r.Body, runs[0].Body):
			case r.Status == http.StatusConflict:
				wantError(t, r, http.StatusConflict, "conflict", "Idempotency-Key")
				if r.Header.Get("Retry-After") == "" {
					t.Errorf("409 while running without Retry-After")
				}
			default:
				t.Errorf("racer: status %d, replayed %v, body %s", r.Status, replayed(r), r.Body)
			}
		}
		if n := rows(t, g, f.project)["messages"]; n != before["messages"]+1 {
			t.Errorf("%d messages more, want 1", n-before["messages"])
		}
	})
}

// TestIdempotencyKeyExpiry: a key started by a replica that died answers
// 409 until its lease runs out, then runs afresh; keys are kept a day,
// then the key is free for another request, and old keys are pruned.
func TestIdempotencyKeyExpiry(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		clk := &clock{}
		g := startGateway(t, cfg, setup{svc: messaging.Options{Now: clk.now}})
		f := newIdemFixture(t, g, "idem-expiry")
		path := "/v1/messages/" + f.in.ID + "/reply"
		body := `{"text":"after a crash"}`

		// A replica took the key and died before answering.
		keys := idempotency.New(g.Svc, idempotency.Options{})
		ctx := messaging.WithPrincipal(context.Background(), &messaging.Principal{ProjectID: f.project})
		if _, _, err := keys.Begin(ctx, "crashed", idempotency.Fingerprint(http.MethodPost, path, "", []byte(body))); err != nil {
			t.Fatal(err)
		}
		before := rows(t, g, f.project)
		r := g.postKey(t, f.key, path, body, "crashed")
		wantError(t, r, http.StatusConflict, "conflict", "Idempotency-Key")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("409 while running without Retry-After")
		}
		clk.advance(idempotency.DefaultLease + time.Second)
		r = g.postKey(t, f.key, path, body, "crashed")
		if r.Status != http.StatusAccepted || replayed(r) {
			t.Fatalf("after the lease: status %d, replayed %v, body %s; want 202, run", r.Status, replayed(r), r.Body)
		}
		if again := g.postKey(t, f.key, path, body, "crashed"); !replayed(again) || !bytes.Equal(again.Body, r.Body) {
			t.Errorf("retry after the take-over: status %d, replayed %v", again.Status, replayed(again))
		}
		if n := rows(t, g, f.project)["messages"]; n != before["messages"]+1 {
			t.Errorf("%d messages more, want 1", n-before["messages"])
		}

		// A day later the key is free: another request with it runs, and
		// the old keys are pruned by it.
		g.postKey(t, f.key, path, `{"text":"day one"}`, "old-1")
		clk.advance(idempotency.DefaultTTL + time.Minute)
		r = g.postKey(t, f.key, path, `{"text":"next day"}`, "crashed")
		if r.Status != http.StatusAccepted || replayed(r) {
			t.Errorf("a day later: status %d, replayed %v, body %s; want 202, run", r.Status, replayed(r), r.Body)
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM idempotency_keys WHERE project_id = ? AND key = ?", f.project, "old-1"); n != 0 {
			t.Errorf("the day-old key old-1 is still stored")
		}
		if n := count(t, g.DB, "SELECT COUNT(*) FROM idempotency_keys WHERE project_id = ?", f.project); n != 1 {
			t.Errorf("%d keys stored, want 1 (the new one)", n)
		}
	})
}

// TestIdempotencyKeyLargeAnswer: an answer larger than the bound is not
// kept; the retry answers 409 saying so (no Retry-After), and does not
// run the request again.
func TestIdempotencyKeyLargeAnswer(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{Idempotency: idempotency.Options{MaxResponseBytes: 200}})
		f := newIdemFixture(t, g, "idem-large")
		path := "/v1/messages/" + f.in.ID + "/reply"
		body := `{"text":"` + strings.Repeat("long ", 100) + `"}`
		first := g.postKey(t, f.key, path, body, "big")
		if first.Status != http.StatusAccepted {
			t.Fatalf("status %d, body %s", first.Status, first.Body)
		}
		n0 := rows(t, g, f.project)["messages"]
		r := g.postKey(t, f.key, path, body, "big")
		e := wantError(t, r, http.StatusConflict, "conflict", "Idempotency-Key")
		if r.Header.Get("Retry-After") != "" || !strings.Contains(e.Error.Message, "larger than") {
			t.Errorf("retry of a large answer: Retry-After %q, message %q", r.Header.Get("Retry-After"), e.Error.Message)
		}
		if n := rows(t, g, f.project)["messages"]; n != n0 {
			t.Errorf("the retry stored %d messages", n-n0)
		}
		// What is stored is sealed: not the body in the clear.
		var stored []byte
		if err := g.DB.R.QueryRow(g.DB.Rebind("SELECT response FROM idempotency_keys WHERE project_id = ? AND key = ?"),
			f.project, "big").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != nil {
			t.Errorf("a too-large answer was stored (%d bytes)", len(stored))
		}
	})
}

// TestIdempotencyKeySealed: a kept answer is sealed at rest, such as a
// new API key's (shown once, and again only to its retry).
func TestIdempotencyKeySealed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startNoOutbox(t, cfg, server.Options{})
		f := newIdemFixture(t, g, "idem-sealed")
		signed := signedInKey(t, g, f.project)
		r := g.postKey(t, signed, "/v1/keys", `{}`, "new-key")
		if r.Status != http.StatusCreated {
			t.Fatalf("POST /v1/keys: status %d, body %s", r.Status, r.Body)
		}
		again := g.postKey(t, signed, "/v1/keys", `{}`, "new-key")
		if !replayed(again) || !bytes.Equal(again.Body, r.Body) {
			t.Errorf("retry: status %d, replayed %v", again.Status, replayed(again))
		}
		var stored []byte
		if err := g.DB.R.QueryRow(g.DB.Rebind("SELECT response FROM idempotency_keys WHERE project_id = ? AND key = ?"),
			f.project, "new-key").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if len(stored) == 0 || bytes.Contains(stored, []byte("comm_")) || bytes.Contains(stored, r.Body[:20]) {
			t.Errorf("stored answer is not sealed: %q", stored)
		}
	})
}

// TestIdempotencyKeyReleasedOn5xx: an answer the client is expected to
// retry (here 502 provider_unavailable) is not kept: the key is released,
// and the retry runs afresh.
func TestIdempotencyKeyReleasedOn5xx(t *testing.T) {
	t.Parallel()
	cfg := storetest.SQLite(t)
	relay := bluebubblestest.NewServer(imRelayPassword, imRelayAddress)
	t.Cleanup(relay.Close)
	g := startGateway(t, cfg, setup{imessage: imessage.Options{Relays: []imessage.Relay{{URL: relay.URL, Password: "an-old-password", Address: imRelayAddress}}}})
	sb := g.newSandbox(t, "idem-5xx")
	key := signedInKey(t, g, sb.ProjectID)
	for range 2 {
		r := g.postKey(t, key, "/v1/connections", `{"channel":"imessage"}`, "five-hundred")
		wantError(t, r, http.StatusBadGateway, "provider_unavailable", "")
		if replayed(r) {
			t.Errorf("a 502 was replayed")
		}
	}
	if n := count(t, g.DB, "SELECT COUNT(*) FROM idempotency_keys WHERE project_id = ?", sb.ProjectID); n != 0 {
		t.Errorf("%d keys kept after 502s, want 0", n)
	}
}

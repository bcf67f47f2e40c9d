package delivery_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
	hook "github.com/comm-gateway/comm/webhook"
)

// logHits logs the hits a receiver saw, a line per run of consecutive
// seqs on one path with one status and no pause over 100 ms, so a
// failure's messages stay near the end of the output.
func logHits(t *testing.T, hits []hit) {
	t.Helper()
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && hits[j].Path == hits[i].Path && hits[j].Status == hits[i].Status &&
			hits[j].Seq == hits[j-1].Seq+1 && hits[j].Start.Sub(hits[j-1].End) <= 100*time.Millisecond {
			j++
		}
		h, last := hits[i], hits[j-1]
		t.Logf("hits %d-%d: %s seqs %d-%d status %d, %s to %s", i+1, j, h.Path, h.Seq, last.Seq, h.Status,
			h.Start.Format("15:04:05.000"), last.End.Format("15:04:05.000"))
		i = j
	}
}

// checkInOrder checks the receiver's hits on path: the acknowledged
// deliveries are exactly seqs from+1..to, in order, each body byte for byte
// the item GET /v1/events serves, each signed for secret, each seq always
// under the same webhook-id. With dups, an acknowledged delivery may be
// repeated once right after itself (the one in flight when a replica
// stopped). It returns the webhook-id of every seq.
func checkInOrder(t *testing.T, g *gateway, rcv *receiver, path string, p project, secret string, from, to int64, dups ...bool) map[int64]string {
	t.Helper()
	items := map[int64]json.RawMessage{}
	for _, raw := range g.events(t, p.Key, from) {
		items[eventOf(t, raw).Seq] = raw
	}
	ids := map[int64]string{}
	next := from + 1
	for _, h := range rcv.snapshot() {
		if h.Path != path {
			continue
		}
		if err := verifyStandard(secret, h.Header, h.Body); err != nil {
			t.Errorf("seq %d: signature: %v", h.Seq, err)
		}
		if verifyStandard(secret+"x", h.Header, h.Body) == nil {
			t.Errorf("seq %d: the signature also verifies with another secret", h.Seq)
		}
		if ct := h.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("seq %d: Content-Type %q", h.Seq, ct)
		}
		if want, ok := items[h.Seq]; !ok || !bytes.Equal(h.Body, want) {
			t.Errorf("seq %d: body\n%s\nwant the GET /v1/events item\n%s", h.Seq, h.Body, want)
		}
		id := h.Header.Get("Webhook-Id")
		if old, ok := ids[h.Seq]; ok && old != id {
			t.Errorf("seq %d: webhook-id %q, earlier %q", h.Seq, id, old)
		}
		ids[h.Seq] = id
		if h.Status < 200 || h.Status > 299 {
			continue
		}
		if len(dups) > 0 && dups[0] && h.Seq == next-1 {
			continue
		}
		if h.Seq != next {
			t.Errorf("acknowledged seq %d, want %d (deliveries must follow the stream)", h.Seq, next)
		}
		next = h.Seq + 1
	}
	if next != to+1 {
		t.Errorf("acknowledged up to seq %d, want %d", next-1, to)
	}
	if t.Failed() {
		// The whole exchange, to tell a skipped delivery from a receiver
		// that missed recording one.
		logHits(t, rcv.snapshot())
	}
	seen := map[string]int64{}
	for seq, id := range ids {
		if other, ok := seen[id]; ok {
			t.Errorf("seqs %d and %d share webhook-id %q", seq, other, id)
		}
		seen[id] = seq
	}
	return ids
}

func randomWhsec() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// TestDeliveriesSignedInOrder registers three projects on one HTTPS
// receiver (a whsec_ secret, a plain secret, a generated one) and checks
// every delivery with an independent Standard Webhooks verifier.
func TestDeliveriesSignedInOrder(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})

		type reg struct {
			name, secret string
			p            project
			cursor       int64
		}
		regs := []*reg{{name: "whsec", secret: randomWhsec()}, {name: "plain", secret: "not base64: é! " + plainSecret}, {name: "generated"}}
		for i, r := range regs {
			r.p = g.newProject(t)
			appendN(t, g.Log, r.p.ID, 3)
			in := map[string]any{"url": rcv.URL() + "/" + r.name}
			if r.secret != "" {
				in["secret"] = r.secret
			}
			r.cursor = g.head(t, r.p.ID)
			if i == 1 {
				in["from_seq"] = 1
				r.cursor = 1
			}
			w := g.putWebhook(t, r.p.Key, in)
			if w.Status != "active" || w.Cursor != r.cursor || w.URL != rcv.URL()+"/"+r.name {
				t.Fatalf("%s: PUT answered %+v, want active at cursor %d", r.name, w, r.cursor)
			}
			switch {
			case r.secret == "" && (w.Secret == nil || !strings.HasPrefix(*w.Secret, "whsec_")):
				t.Fatalf("%s: PUT without a secret answered secret %v, want a generated whsec_ one", r.name, w.Secret)
			case r.secret == "":
				r.secret = *w.Secret
				key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.secret, "whsec_"))
				if err != nil || len(key) < 16 {
					t.Fatalf("generated secret %q: %d bytes, %v", r.secret, len(key), err)
				}
			case w.Secret != nil:
				t.Fatalf("%s: PUT echoed the caller's secret", r.name)
			}
		}
		for _, r := range regs {
			appendN(t, g.Log, r.p.ID, 25)
		}
		for _, r := range regs {
			head := g.head(t, r.p.ID)
			waitFor(t, r.name+" deliveries", 20*time.Second, func() bool { return g.getWebhook(t, r.p.Key).Cursor == head })
			checkInOrder(t, g, rcv, "/"+r.name, r.p, r.secret, r.cursor, head)
			w := g.getWebhook(t, r.p.Key)
			if w.Status != "active" || w.LastError != nil || w.FailingSince != nil {
				t.Errorf("%s: GET /v1/webhook %+v, want active without error", r.name, w)
			}
		}
	})
}

// TestReceiverDownThenUp: a receiver answering 503 gets every event once it
// is back, in order, under the same webhook-id; the API shows the failing
// state and the attempts.
func TestReceiverDownThenUp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		var down atomic.Bool
		down.Store(true)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if down.Load() {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		secret := randomWhsec()
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/down", "secret": secret})
		cursor := w.Cursor
		head := appendN(t, g.Log, p.ID, 5)

		waitFor(t, "two failed attempts", 10*time.Second, func() bool { return rcv.count() >= 2 })
		w = g.getWebhook(t, p.Key)
		if w.Status != "failing" || w.LastError == nil || !strings.Contains(*w.LastError, "503") ||
			w.FailingSince == nil || w.NextAttemptAt == nil || w.Cursor != cursor {
			t.Fatalf("while down: %+v; want failing, last_error about the 503, failing_since, next_attempt_at, cursor %d", w, cursor)
		}
		if time.Since(*w.FailingSince) > 10*time.Second || w.FailingSince.After(time.Now()) {
			t.Errorf("failing_since %s is not the first failure", w.FailingSince)
		}
		down.Store(false)
		waitFor(t, "the backlog", 15*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, g, rcv, "/down", p, secret, cursor, head)
		for _, h := range rcv.snapshot() {
			if h.Status == http.StatusServiceUnavailable && h.Seq != cursor+1 {
				t.Errorf("seq %d was attempted while seq %d was failing", h.Seq, cursor+1)
			}
		}
		w = g.getWebhook(t, p.Key)
		if w.Status != "active" || w.LastError != nil || w.FailingSince != nil || w.NextAttemptAt != nil {
			t.Errorf("after recovery: %+v, want active and clean", w)
		}

		hits := rcv.snapshot()
		as := g.attempts(t, p.Key, "limit=500")
		if len(as) != len(hits) {
			t.Fatalf("%d attempts listed, the receiver got %d requests", len(as), len(hits))
		}
		var failed, ok int
		for i, a := range as {
			if i > 0 && (a.ID >= as[i-1].ID || a.At.After(as[i-1].At)) {
				t.Errorf("attempts not newest first: %+v after %+v", a, as[i-1])
			}
			if a.URL != rcv.URL()+"/down" {
				t.Errorf("attempt url %q", a.URL)
			}
			switch {
			case a.OK && a.StatusCode == http.StatusNoContent && a.Error == nil:
				ok++
			case !a.OK && a.StatusCode == http.StatusServiceUnavailable && a.Error != nil && a.Seq == cursor+1:
				failed++
			default:
				t.Errorf("unexpected attempt %+v", a)
			}
		}
		if failed < 2 || ok != int(head-cursor) {
			t.Errorf("%d failed and %d successful attempts, want >= 2 and %d", failed, ok, head-cursor)
		}
		if !as[0].OK || as[0].Seq != head {
			t.Errorf("newest attempt %+v, want the delivery of seq %d", as[0], head)
		}
		two := g.attempts(t, p.Key, "limit=2")
		if len(two) != 2 || two[0].ID != as[0].ID || two[1].ID != as[1].ID {
			t.Errorf("limit=2: %+v, want the two newest", two)
		}
		if next := g.attempts(t, p.Key, "limit=2&after="+two[1].ID); len(next) != 2 || next[0].ID != as[2].ID {
			t.Errorf("after=%s: %+v, want the third and fourth newest", two[1].ID, next)
		}
		wantError(t, "limit=0", g.do(t, http.MethodGet, "/v1/webhook/attempts?limit=0", p.Key, ""), http.StatusBadRequest, "limit")
		wantError(t, "limit=501", g.do(t, http.MethodGet, "/v1/webhook/attempts?limit=501", p.Key, ""), http.StatusBadRequest, "limit")
	})
}

// TestReceiverRefusesConnections: nothing listens at the URL for a while
// (connection refused), then a receiver starts there.
func TestReceiverRefusesConnections(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: tlsClient(t, true, 0)})
		p := g.newProject(t)
		secret := "plain-secret-" + plainSecret
		w := g.putWebhook(t, p.Key, map[string]any{"url": "https://" + addr + "/hook", "secret": secret})
		head := appendN(t, g.Log, p.ID, 4)
		waitFor(t, "a refused attempt", 10*time.Second, func() bool { return len(g.attempts(t, p.Key, "")) > 0 })
		got := g.getWebhook(t, p.Key)
		if got.Status != "failing" || got.LastError == nil || !strings.Contains(*got.LastError, "refused") || got.FailingSince == nil {
			t.Fatalf("while nothing listens: %+v, want failing with a connection-refused error", got)
		}
		a := g.attempts(t, p.Key, "")[0]
		if a.OK || a.StatusCode != 0 || a.Error == nil || a.Seq != w.Cursor+1 {
			t.Errorf("attempt %+v, want a failure without status for seq %d", a, w.Cursor+1)
		}
		ln, err = net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("port %s was taken meanwhile: %v", addr, err)
		}
		rcv := newReceiverOn(t, ln)
		waitFor(t, "the backlog", 15*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, g, rcv, "/hook", p, secret, w.Cursor, head)
		if got := g.getWebhook(t, p.Key); got.Status != "active" || got.LastError != nil {
			t.Errorf("after recovery: %+v", got)
		}
	})
}

// TestRetryAfter: a 429 with Retry-After: 2 delays the next attempt by at
// least two seconds.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if n == 1 {
				w.Header().Set("Retry-After", "2")
				return http.StatusTooManyRequests
			}
			return http.StatusOK
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		head := appendN(t, g.Log, p.ID, 2)
		waitFor(t, "the first attempt", 10*time.Second, func() bool { return len(g.attempts(t, p.Key, "")) > 0 })
		w := g.getWebhook(t, p.Key)
		if w.Status != "failing" || w.NextAttemptAt == nil || w.NextAttemptAt.Sub(rcv.snapshot()[0].Start) < 1900*time.Millisecond {
			t.Errorf("after the 429: %+v, want next_attempt_at 2 s after the first attempt (%s)", w, rcv.snapshot()[0].Start)
		}
		waitFor(t, "the deliveries", 15*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		hits := rcv.snapshot()
		if len(hits) != 3 {
			t.Fatalf("%d requests, want 3 (a 429, then two deliveries)", len(hits))
		}
		if gap := hits[1].Start.Sub(hits[0].Start); gap < 1950*time.Millisecond {
			t.Errorf("second attempt %s after the 429 with Retry-After: 2", gap)
		}
		if hits[0].Header.Get("Webhook-Id") != hits[1].Header.Get("Webhook-Id") || hits[0].Seq != hits[1].Seq {
			t.Errorf("the retry is not the same delivery: %q seq %d, then %q seq %d",
				hits[0].Header.Get("Webhook-Id"), hits[0].Seq, hits[1].Header.Get("Webhook-Id"), hits[1].Seq)
		}
	})
}

// TestRestartMidDelivery stops the worker and the gateway while a slow
// receiver handles a delivery, then starts them again on the same
// database: nothing is lost, and only the delivery in flight is repeated.
func TestRestartMidDelivery(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		box := newBox(t)
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		rcv := newReceiver(t)
		inFlight := make(chan int64, 1)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if n == 4 {
				inFlight <- h.Seq
				// Never an acknowledgement: when the handler sees the
				// request go at the stop, its answer may still reach the
				// worker, which would rightly count a 204 while this
				// receiver does not.
				sleepOrGone(r, 5*time.Second)
				return http.StatusServiceUnavailable
			}
			sleepOrGone(r, 30*time.Millisecond)
			return http.StatusNoContent
		})
		client := rcv.client(true, 0)
		wk := startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: client})
		p := g.newProject(t)
		secret := randomWhsec()
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/r", "secret": secret})
		head := appendN(t, g.Log, p.ID, 12)
		var seq int64
		select {
		case seq = <-inFlight:
		case <-time.After(15 * time.Second):
			t.Fatal("the fourth delivery never came")
		}
		wk.stop()
		g.Stop()

		g = startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: client})
		waitFor(t, "the backlog after the restart", 15*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, g, rcv, "/r", p, secret, w.Cursor, head, true)
		counts := map[int64]int{}
		prev := w.Cursor
		for _, h := range rcv.snapshot() {
			counts[h.Seq]++
			if h.Seq != prev && h.Seq != prev+1 {
				t.Errorf("seq %d delivered after seq %d", h.Seq, prev)
			}
			prev = h.Seq
		}
		for s := w.Cursor + 1; s <= head; s++ {
			switch {
			case counts[s] == 2 && s == seq:
			case counts[s] != 1:
				t.Errorf("seq %d delivered %d times (the one in flight at the stop: %d)", s, counts[s], seq)
			}
		}
	})
}

// TestGoneDisablesAtOnce: a 410 disables the endpoint with a
// webhook.disabled event; registering again re-enables it.
func TestGoneDisablesAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		var gone atomic.Bool
		gone.Store(true)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if gone.Load() {
				return http.StatusGone
			}
			return http.StatusOK
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		secret := randomWhsec()
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": secret})
		appendN(t, g.Log, p.ID, 3)
		waitFor(t, "the endpoint to be disabled", 10*time.Second, func() bool { return g.getWebhook(t, p.Key).Status == "disabled" })
		got := g.getWebhook(t, p.Key)
		if got.DisabledReason == nil || !strings.Contains(*got.DisabledReason, "410") || got.Cursor != w.Cursor {
			t.Errorf("disabled: %+v, want a reason naming the 410 and cursor %d", got, w.Cursor)
		}
		disabled := g.eventsOfType(t, p.Key, stream.WebhookDisabled)
		if len(disabled) != 1 {
			t.Fatalf("%d webhook.disabled events, want 1", len(disabled))
		}
		var data struct {
			Webhook webhook `json:"webhook"`
			Reason  string  `json:"reason"`
		}
		decodeStrict(t, disabled[0].Data, &data)
		if data.Webhook.ID != w.ID || data.Webhook.Status != "disabled" || !strings.Contains(data.Reason, "410") || data.Webhook.Secret != nil {
			t.Errorf("webhook.disabled data %s", disabled[0].Data)
		}
		appendN(t, g.Log, p.ID, 2)
		time.Sleep(400 * time.Millisecond) // eight poll intervals
		if n := rcv.count(); n != 1 {
			t.Fatalf("%d requests, want only the one answered 410", n)
		}
		as := g.attempts(t, p.Key, "")
		if len(as) != 1 || as[0].StatusCode != http.StatusGone || as[0].OK {
			t.Errorf("attempts %+v, want the one 410", as)
		}

		gone.Store(false)
		again := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": secret})
		if again.Status != "active" || again.DisabledReason != nil || again.LastError != nil || again.Cursor != w.Cursor {
			t.Errorf("PUT again: %+v, want active at cursor %d", again, w.Cursor)
		}
		if n := len(g.eventsOfType(t, p.Key, stream.WebhookEnabled)); n != 1 {
			t.Errorf("%d webhook.enabled events, want 1", n)
		}
		head := g.head(t, p.ID)
		waitFor(t, "the backlog", 10*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, g, rcv, "/", p, secret, w.Cursor, head)
	})
}

// TestRedirectIsAFailure: a 3xx is a failed delivery; its target, another
// receiver or a loopback or metadata address, is never requested.
func TestRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		target := newReceiver(t)
		plain := newPlainReceiver(t)
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			switch n {
			case 1:
				w.Header().Set("Location", target.URL()+"/stolen")
				return http.StatusTemporaryRedirect
			case 2:
				w.Header().Set("Location", plain.URL+"/loopback")
				return http.StatusFound
			default:
				w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
				return http.StatusMovedPermanently
			}
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		appendN(t, g.Log, p.ID, 2)
		waitFor(t, "two attempts", 10*time.Second, func() bool { return len(g.attempts(t, p.Key, "")) >= 2 })
		for _, a := range g.attempts(t, p.Key, "") {
			if a.OK || (a.StatusCode != http.StatusTemporaryRedirect && a.StatusCode != http.StatusFound) ||
				a.Error == nil || !strings.Contains(*a.Error, "redirect") || a.Seq != w.Cursor+1 {
				t.Errorf("attempt %+v, want a failed delivery naming the redirect", a)
			}
		}
		if got := g.getWebhook(t, p.Key); got.Status != "failing" || got.Cursor != w.Cursor {
			t.Errorf("after redirects: %+v, want failing at cursor %d", got, w.Cursor)
		}
		if n := target.count() + int(plain.hits.Load()); n != 0 {
			t.Errorf("a redirect target got %d requests", n)
		}
	})
}

// plainReceiver is a plain-HTTP loopback server counting requests.
type plainReceiver struct {
	URL  string
	hits atomic.Int64
}

func newPlainReceiver(t *testing.T) *plainReceiver {
	p := &plainReceiver{}
	srv := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.hits.Add(1) }))
	p.URL = srv
	return p
}

// TestSlowReceiverRetried: an answer slower than the client's timeout is a
// failed attempt, retried.
func TestSlowReceiverRetried(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if n == 1 {
				// Never an acknowledgement, whichever side gives up first:
				// when the handler ends right at the client's timeout, its
				// answer may still reach the client.
				sleepOrGone(r, 3*time.Second)
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 300*time.Millisecond)})
		p := g.newProject(t)
		secret := "slow-" + plainSecret
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/slow", "secret": secret})
		head := appendN(t, g.Log, p.ID, 2)
		start := time.Now()
		waitFor(t, "the deliveries", 10*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("delivered after %s: the slow attempt was not cut at the client's timeout", d)
		}
		checkInOrder(t, g, rcv, "/slow", p, secret, w.Cursor, head)
		as := g.attempts(t, p.Key, "")
		first := as[len(as)-1]
		if first.OK || first.Error == nil || (first.StatusCode != 0 && first.StatusCode != http.StatusServiceUnavailable) ||
			first.LatencyMS < 250 || first.LatencyMS > 2000 {
			t.Errorf("first attempt %+v, want a timeout after about 300 ms", first)
		}
	})
}

// TestHugeResponseNotRead: a receiver acknowledging with an endless body is
// acknowledged without the body being read.
func TestHugeResponseNotRead(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		const huge = 50 << 20
		var written atomic.Int64
		var mu sync.Mutex
		done := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			mu.Lock()
			ch := done[n]
			mu.Unlock()
			if ch != nil {
				defer close(ch)
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(huge))
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			for sent := 0; sent < huge; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					break
				}
				if n == 1 {
					written.Add(int64(len(chunk)))
				}
			}
			return 0
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		head := appendN(t, g.Log, p.ID, 2)
		start := time.Now()
		waitFor(t, "the deliveries", 10*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		for n := 1; n <= 2; n++ {
			select {
			case <-done[n]:
			case <-time.After(10 * time.Second):
				t.Fatalf("the receiver is still writing its answer %d", n)
			}
		}
		if w := written.Load(); w > huge/4 {
			t.Errorf("the receiver wrote %d MB of its answer before the client hung up", w>>20)
		} else {
			t.Logf("the receiver wrote %d KB of a %d MB answer in %s", w>>10, huge>>20, time.Since(start).Round(time.Millisecond))
		}
		for _, a := range g.attempts(t, p.Key, "") {
			if !a.OK || a.StatusCode != http.StatusOK || a.LatencyMS > 2000 {
				t.Errorf("attempt %+v, want a quick success", a)
			}
		}
	})
}

// TestDisableAfter: an endpoint failing continuously for DisableAfter is
// disabled.
func TestDisableAfter(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int { return http.StatusInternalServerError })
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0), DisableAfter: 500 * time.Millisecond})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		appendN(t, g.Log, p.ID, 1)
		waitFor(t, "the endpoint to be disabled", 10*time.Second, func() bool { return g.getWebhook(t, p.Key).Status == "disabled" })
		w := g.getWebhook(t, p.Key)
		if w.DisabledReason == nil || !strings.Contains(*w.DisabledReason, "continuously") || w.LastError == nil {
			t.Errorf("disabled: %+v, want a reason about continuous failures", w)
		}
		if n := len(g.eventsOfType(t, p.Key, stream.WebhookDisabled)); n != 1 {
			t.Errorf("%d webhook.disabled events, want 1", n)
		}
		n := rcv.count()
		if n < 2 {
			t.Errorf("disabled after %d attempts; the first failure alone must not disable it", n)
		}
		appendN(t, g.Log, p.ID, 1)
		time.Sleep(300 * time.Millisecond)
		if rcv.count() != n {
			t.Errorf("a disabled endpoint got %d more requests", rcv.count()-n)
		}
	})
}

// TestURLGuardAtRegistration: without --webhook-allow-private, plain http
// and private, loopback and metadata targets are refused, and a host name
// that resolves to loopback is refused when dialled.
func TestURLGuardAtRegistration(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{})
		p := g.newProject(t)
		for _, u := range []string{
			"http://example.com/hook",
			"https://127.0.0.1/",
			"https://127.0.0.1:8443/hook",
			"https://10.0.0.1/",
			"https://192.168.1.1/",
			"https://172.16.0.1/",
			"https://100.64.0.1/",
			"https://169.254.169.254/latest/meta-data",
			"https://[::1]/",
			"https://[::ffff:127.0.0.1]/",
			"https://[fd00::1]/",
			"https://[fe80::1]/",
			"https://0.0.0.0/",
			"https://2130706433/",
			"https://0x7f.1/",
			"https://localhost/",
			"https://LOCALHOST./",
			"https://api.localhost/",
			"https://user:pass@example.com/",
			"ftp://example.com/",
			"example.com/hook",
		} {
			body, _ := json.Marshal(map[string]any{"url": u, "secret": plainSecret})
			wantError(t, "PUT "+u, g.do(t, http.MethodPut, "/v1/webhook", p.Key, string(body)), http.StatusBadRequest, "url")
		}
		wantError(t, "GET after refusals", g.do(t, http.MethodGet, "/v1/webhook", p.Key, ""), http.StatusNotFound, "")

		// A public-looking name that resolves to loopback passes the
		// registration check; the client refuses it when dialling.
		name := loopbackName(t)
		if name == "" {
			t.Log("no host name other than localhost resolves to loopback here; dial check skipped")
			return
		}
		rcv := newReceiver(t)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(rcv.URL(), "https://"))
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(false, 0)})
		url := "https://" + name + ":" + port + "/hook"
		g.putWebhook(t, p.Key, map[string]any{"url": url, "secret": plainSecret})
		appendN(t, g.Log, p.ID, 1)
		waitRefused(t, g, p, rcv)
	})
}

// loopbackName returns a host name, other than localhost, that resolves
// only to loopback addresses here (the machine's own name often does).
func loopbackName(t *testing.T) string {
	host, _ := os.Hostname()
	for _, name := range []string{host, "vm", "runsc"} {
		if name == "" || strings.Contains(name, "localhost") {
			continue
		}
		addrs, err := net.LookupHost(name)
		if err != nil || len(addrs) == 0 {
			continue
		}
		all := true
		for _, a := range addrs {
			ip := net.ParseIP(a)
			all = all && ip != nil && ip.IsLoopback()
		}
		if all {
			return name
		}
	}
	return ""
}

// waitRefused waits for an attempt the client refused to dial, and checks
// nothing reached the receiver.
func waitRefused(t *testing.T, g *gateway, p project, rcv *receiver) {
	t.Helper()
	waitFor(t, "a refused attempt", 10*time.Second, func() bool { return len(g.attempts(t, p.Key, "")) > 0 })
	a := g.attempts(t, p.Key, "")[0]
	// The tenant is told why in neutral words: not what the name
	// resolved to, nor the port, nor the guard's internals.
	const neutral = "the URL resolves to a private or reserved address"
	if a.OK || a.StatusCode != 0 || a.Error == nil || *a.Error != neutral {
		t.Errorf("attempt %+v, want the refusal as %q", a, neutral)
	}
	w := g.getWebhook(t, p.Key)
	if w.Status != "failing" || w.LastError == nil || *w.LastError != neutral {
		t.Errorf("webhook %+v, want failing with last_error %q", w, neutral)
	}
	for _, leak := range []string{"127.0.0.1", "::1", "netguard", "dial"} {
		if strings.Contains(*a.Error+" "+ptrText(w.LastError), leak) {
			t.Errorf("the tenant sees %q in %q / %q", leak, *a.Error, ptrText(w.LastError))
		}
	}
	if n := rcv.count(); n != 0 {
		t.Errorf("the receiver got %d requests through the guard", n)
	}
}

// TestGuardAtDialTime: an operator allowed private URLs at registration,
// but the delivery client does not: it refuses loopback when dialling.
func TestGuardAtDialTime(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(false, 0)})
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(rcv.URL(), "https://"))
		for _, host := range []string{"localhost", "127.0.0.1", "[::1]"} {
			t.Run(strings.Trim(host, "[]"), func(t *testing.T) {
				p := g.newProject(t)
				g.putWebhook(t, p.Key, map[string]any{"url": "https://" + host + ":" + port + "/", "secret": plainSecret})
				appendN(t, g.Log, p.ID, 1)
				waitRefused(t, g, p, rcv)
			})
		}
	})
}

// TestReplay: POST /v1/webhook/replay redelivers from from_seq+1, in order,
// under the same webhook-ids.
func TestReplay(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		secret := randomWhsec()
		w := g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/replay", "secret": secret})
		head := appendN(t, g.Log, p.ID, 60)
		waitFor(t, "the deliveries", 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		ids := checkInOrder(t, g, rcv, "/replay", p, secret, w.Cursor, head)
		first := rcv.count()
		if n := len(g.attempts(t, p.Key, "")); n != 50 {
			t.Errorf("GET /v1/webhook/attempts listed %d attempts, want a page of 50", n)
		}

		from := w.Cursor + 7
		r := g.replay(t, p.Key, from)
		if r.Cursor != from {
			t.Errorf("replay answered cursor %d, want %d", r.Cursor, from)
		}
		waitFor(t, "the replay", 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		again := rcv.snapshot()[first:]
		if len(again) != int(head-from) {
			t.Fatalf("replay delivered %d events, want %d", len(again), head-from)
		}
		for i, h := range again {
			if h.Seq != from+1+int64(i) {
				t.Errorf("replayed delivery %d is seq %d, want %d", i, h.Seq, from+1+int64(i))
			}
			if id := h.Header.Get("Webhook-Id"); id != ids[h.Seq] {
				t.Errorf("seq %d replayed as webhook-id %q, first delivered as %q", h.Seq, id, ids[h.Seq])
			}
			if err := verifyStandard(secret, h.Header, h.Body); err != nil {
				t.Errorf("replayed seq %d: %v", h.Seq, err)
			}
		}
	})
}

// TestReplicas runs two delivery workers (on PostgreSQL, over two separate
// gateways on one database): deliveries never overlap, follow the stream,
// and survive the loss of the replica holding the endpoint, whether it
// shuts down or dies holding its lease.
func TestReplicas(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		box := newBox(t)
		ga := startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		gb := ga
		if cfg.URL != "" {
			gb = startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		}
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			sleepOrGone(r, 10*time.Millisecond)
			return http.StatusNoContent
		})
		client := rcv.client(true, 0)
		const lease = time.Second
		workers := map[string]*worker{}
		svcOf := map[string]*gateway{}
		run := func(owner string, g *gateway) {
			workers[owner] = startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: client, Owner: owner, Lease: lease})
			svcOf[owner] = g
		}
		run("replica-a", ga)
		run("replica-b", gb)

		p := ga.newProject(t)
		secret := randomWhsec()
		w := ga.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/replicas", "secret": secret})
		produce := func(n int) int64 {
			var head int64
			for i := range n {
				g := ga
				if i%2 == 1 {
					g = gb
				}
				head = appendN(t, g.Log, p.ID, 1)
			}
			return head
		}
		afterAcks := func(n int) {
			start := rcv.count()
			waitFor(t, fmt.Sprintf("%d more deliveries", n), 10*time.Second, func() bool { return rcv.count() >= start+n })
		}
		nextHitAfter := func(at time.Time) time.Time {
			var next time.Time
			waitFor(t, "a delivery after "+at.Format(time.StampMilli), 10*time.Second, func() bool {
				for _, h := range rcv.snapshot() {
					if h.Start.After(at) {
						next = h.Start
						return true
					}
				}
				return false
			})
			return next
		}

		// The holder shuts down mid-stream: the other takes over at once.
		produce(30)
		afterAcks(5)
		holder := ga.leaseOwner(t)
		if workers[holder] == nil {
			t.Fatalf("lease held by %q", holder)
		}
		workers[holder].stop()
		stopped := time.Now()
		if d := nextHitAfter(stopped).Sub(stopped); d > 3*time.Second {
			t.Errorf("the surviving replica took over %s after %s stopped", d, holder)
		}
		replacement := "replica-c"
		run(replacement, svcOf[holder])

		// The holder dies holding its lease: the others wait for the lease
		// to run out, then take over.
		produce(30)
		afterAcks(5)
		// (The holder may start one more delivery before it notices.)
		died := time.Now()
		ga.stealLease(t, p.ID, "replica-dead", lease)
		if d := nextHitAfter(time.Now().Add(300 * time.Millisecond)).Sub(died); d < lease || d > 4*time.Second {
			t.Errorf("took over %s after the holder died with a %s lease", d, lease)
		}
		head := produce(10)
		waitFor(t, "the whole stream", 20*time.Second, func() bool { return ga.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, ga, rcv, "/replicas", p, secret, w.Cursor, head, true)
		if n := rcv.overlapCount(); n != 0 {
			t.Errorf("%d deliveries overlapped another", n)
		}
		counts := map[int64]int{}
		prev := w.Cursor
		for _, h := range rcv.snapshot() {
			counts[h.Seq]++
			if h.Seq != prev && h.Seq != prev+1 {
				t.Errorf("seq %d delivered after seq %d", h.Seq, prev)
			}
			prev = h.Seq
		}
		dups := 0
		for _, c := range counts {
			dups += c - 1
		}
		if dups > 2 {
			t.Errorf("%d repeated deliveries; only the ones in flight at the two losses may repeat", dups)
		}
	})
}

// TestLeaseOutlivesSlowDelivery: a delivery slower than the lease must not
// let another replica deliver to the same endpoint meanwhile.
func TestLeaseOutlivesSlowDelivery(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		box := newBox(t)
		ga := startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		gb := ga
		if cfg.URL != "" {
			gb = startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		}
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			if n == 2 {
				// Longer than the lease: the worker renews it meanwhile
				// (or, if a renewal fails, cuts the delivery before the
				// lease ends). The answer is a 503, never an
				// acknowledgement: when the receiver sees the request go
				// only as a deadline passes, the worker may still read
				// what it writes (seen under load: a 204 here reached the
				// worker, which rightly moved on, while the receiver
				// counted it as unanswered).
				sleepOrGone(r, 2500*time.Millisecond)
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		client := rcv.client(true, 0)
		startWorker(t, &delivery.Webhooks{Hooks: ga.Hooks, Client: client, Owner: "replica-a", Lease: time.Second})
		startWorker(t, &delivery.Webhooks{Hooks: gb.Hooks, Client: client, Owner: "replica-b", Lease: time.Second})
		p := ga.newProject(t)
		w := ga.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/slow", "secret": plainSecret})
		head := appendN(t, ga.Log, p.ID, 4)
		waitFor(t, "the deliveries", 15*time.Second, func() bool { return ga.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, ga, rcv, "/slow", p, plainSecret, w.Cursor, head)
		if n := rcv.overlapCount(); n != 0 {
			for _, h := range rcv.snapshot() {
				t.Logf("seq %d %s..%s status %d", h.Seq, h.Start.Format(time.StampMilli), h.End.Format(time.StampMilli), h.Status)
			}
			t.Errorf("%d deliveries overlapped another", n)
		}
	})
}

// TestReRegisterSwitchesAtOnce: after PUT /v1/webhook with a new URL, no
// more than the delivery in flight goes to the old one.
func TestReRegisterSwitchesAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			sleepOrGone(r, 20*time.Millisecond)
			return http.StatusNoContent
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/old", "secret": "old-" + plainSecret})
		head := appendN(t, g.Log, p.ID, 50)
		waitFor(t, "a few deliveries", 10*time.Second, func() bool { return rcv.count() >= 3 })
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/new", "secret": "new-" + plainSecret})
		switched := rcv.count()
		waitFor(t, "the rest", 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		late := 0
		for _, h := range rcv.snapshot()[switched:] {
			if h.Path == "/old" {
				late++
			} else if err := verifyStandard("new-"+plainSecret, h.Header, h.Body); err != nil {
				t.Errorf("seq %d to the new URL: %v", h.Seq, err)
			}
		}
		if late > 1 {
			t.Errorf("%d deliveries went to the old URL after it was replaced", late)
		}
	})
}

// TestDeleteStopsDeliveries: after DELETE /v1/webhook nothing more is
// delivered and no attempt is left behind.
func TestDeleteStopsDeliveries(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			sleepOrGone(r, 50*time.Millisecond)
			return http.StatusNoContent
		})
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		appendN(t, g.Log, p.ID, 30)
		waitFor(t, "a few deliveries", 10*time.Second, func() bool { return rcv.count() >= 3 })
		if resp := g.do(t, http.MethodDelete, "/v1/webhook", p.Key, ""); resp.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
		}
		n := rcv.count()
		time.Sleep(300 * time.Millisecond)
		if late := rcv.count() - n; late > 1 {
			t.Errorf("%d deliveries after DELETE", late)
		}
		wantError(t, "GET after DELETE", g.do(t, http.MethodGet, "/v1/webhook", p.Key, ""), http.StatusNotFound, "")
		if as := g.attempts(t, p.Key, ""); len(as) != 0 {
			t.Errorf("%d attempts listed after DELETE: %+v", len(as), as[0])
		}
	})
}

// TestBadInput: malformed registrations and replays are refused with a 400
// naming the field, and store nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		p := g.newProject(t)
		head := appendN(t, g.Log, p.ID, 3)
		put := func(body string) response { return g.do(t, http.MethodPut, "/v1/webhook", p.Key, body) }
		url := `"https://example.com/hook"`
		for _, c := range []struct{ body, param string }{
			{`{}`, "url"},
			{`{"secret":"s"}`, "url"},
			{`{"url":""}`, "url"},
			{`{"url":42}`, "url"},
			{`{"url":"not a url"}`, "url"},
			{`{"url":` + url + `,"secret":"whsec_!!!"}`, "secret"},
			{`{"url":` + url + `,"secret":"whsec_"}`, "secret"},
			{`{"url":` + url + `,"secret":"` + strings.Repeat("s", 300) + `"}`, "secret"},
			// Weak secrets (issue 12): fewer than 16 bytes of key, or too
			// few different characters to hold 128 bits.
			{`{"url":` + url + `,"secret":"a"}`, "secret"},
			{`{"url":` + url + `,"secret":"` + strings.Repeat("a", 40) + `"}`, "secret"},
			{`{"url":` + url + `,"secret":"` + strings.Repeat("ab", 20) + `"}`, "secret"},
			{`{"url":` + url + `,"secret":"short-but-varied"}`, "secret"},
			{`{"url":` + url + `,"secret":"whsec_` + base64.StdEncoding.EncodeToString([]byte("12345678")) + `"}`, "secret"},
			{`{"url":` + url + `,"secret":"whsec_` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `"}`, "secret"},
			// A NUL anywhere in the body is refused, naming the field.
			{`{"url":` + url + `,"secret":"` + plainSecret + `\u0000"}`, "secret"},
			{`{"url":` + url + `,"from_seq":` + strconv.FormatInt(head+1, 10) + `}`, "from_seq"},
			{`{"url":` + url + `,"from_seq":-1}`, "from_seq"},
			{`{"url":` + url + `,"from_seq":"1"}`, "from_seq"},
			{`{"url":` + url + `,"from_seq":1.5}`, "from_seq"},
			{`{"url":` + url + `,"colour":"blue"}`, ""},
			{`not json`, ""},
			{`[]`, ""},
			{`{"url":` + url + `} {}`, ""},
		} {
			wantError(t, "PUT "+c.body, put(c.body), http.StatusBadRequest, c.param)
		}
		if resp := g.do(t, http.MethodPut, "/v1/webhook", p.Key, ""); resp.Status != http.StatusBadRequest && resp.Status != http.StatusUnsupportedMediaType {
			t.Errorf("PUT without a body: %d %s", resp.Status, resp.Body)
		}
		wantError(t, "GET none", g.do(t, http.MethodGet, "/v1/webhook", p.Key, ""), http.StatusNotFound, "")
		wantError(t, "DELETE none", g.do(t, http.MethodDelete, "/v1/webhook", p.Key, ""), http.StatusNotFound, "")
		wantError(t, "replay none", g.do(t, http.MethodPost, "/v1/webhook/replay", p.Key, `{"from_seq":0}`), http.StatusNotFound, "")
		wantError(t, "replay without from_seq", g.do(t, http.MethodPost, "/v1/webhook/replay", p.Key, `{}`), http.StatusBadRequest, "from_seq")
		if n, err := g.DB.Ent.Webhook.Query().Count(systemCtx()); err != nil || n != 0 {
			t.Fatalf("%d webhooks stored after refusals (%v)", n, err)
		}

		w := g.putWebhook(t, p.Key, map[string]any{"url": "https://example.com/hook", "secret": "kept-" + plainSecret})
		for _, c := range []struct{ body, param string }{
			{`{"url":"https://example.org/x","secret":"whsec_!!!"}`, "secret"},
			{`{"url":"https://example.org/x","from_seq":-5}`, "from_seq"},
			{`{"url":"ftp://example.org/x"}`, "url"},
		} {
			wantError(t, "PUT over a registration "+c.body, put(c.body), http.StatusBadRequest, c.param)
		}
		for _, c := range []struct{ body, param string }{
			{`{}`, "from_seq"},
			{`{"from_seq":null}`, "from_seq"},
			{`{"from_seq":-1}`, "from_seq"},
			{`{"from_seq":` + strconv.FormatInt(head+1, 10) + `}`, "from_seq"},
			{`{"from_seq":"0"}`, "from_seq"},
			{`{"from":0}`, ""},
		} {
			wantError(t, "replay "+c.body, g.do(t, http.MethodPost, "/v1/webhook/replay", p.Key, c.body), http.StatusBadRequest, c.param)
		}
		got := g.getWebhook(t, p.Key)
		if got.URL != w.URL || got.Cursor != w.Cursor || !got.UpdatedAt.Equal(w.UpdatedAt) {
			t.Errorf("after refused changes: %+v, was %+v", got, w)
		}
		if r := g.replay(t, p.Key, head); r.Cursor != head {
			t.Errorf("replay to the head: cursor %d", r.Cursor)
		}
		if r := g.replay(t, p.Key, 0); r.Cursor != 0 {
			t.Errorf("replay from 0: cursor %d", r.Cursor)
		}
		wantError(t, "no key", g.do(t, http.MethodGet, "/v1/webhook", "", ""), http.StatusUnauthorized, "")
		other := g.newProject(t)
		wantError(t, "another project's GET", g.do(t, http.MethodGet, "/v1/webhook", other.Key, ""), http.StatusNotFound, "")
	})
}

// TestAttemptHistoryBounded: the attempt history is pruned to
// hook.MaxAttemptHistory (give or take the pruning interval) even
// when events trickle in a few at a time.
func TestAttemptHistoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("delivers over a thousand events")
	}
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		p := g.newProject(t)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL(), "secret": plainSecret})
		total := hook.MaxAttemptHistory + 150
		for sent := 0; sent < total; sent += 30 {
			head := appendN(t, g.Log, p.ID, 30)
			waitFor(t, fmt.Sprintf("seq %d", head), 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		}
		n, err := g.DB.Ent.WebhookAttempt.Query().Count(systemCtx())
		if err != nil {
			t.Fatal(err)
		}
		if n < hook.MaxAttemptHistory || n > hook.MaxAttemptHistory+100 {
			t.Errorf("%d attempts stored after %d deliveries, want about %d", n, rcv.count(), hook.MaxAttemptHistory)
		}
		as := g.attempts(t, p.Key, "limit=500")
		if len(as) != 500 || !as[0].OK || as[0].Seq != g.head(t, p.ID) {
			t.Errorf("GET /v1/webhook/attempts?limit=500: %d attempts, newest %+v", len(as), as[0])
		}
	})
}

// TestTakeOverAfterKill: with the default lease and poll interval, when
// the replica holding an endpoint dies (stops renewing, keeps its lease),
// the other replica delivers within 5 s, in order, nothing lost, and the
// two never deliver at once.
func TestTakeOverAfterKill(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		box := newBox(t)
		ga := startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		gb := ga
		if cfg.URL != "" {
			gb = startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		}
		rcv := newReceiver(t)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			sleepOrGone(r, 20*time.Millisecond)
			return http.StatusNoContent
		})
		client := rcv.client(true, 0)
		workers := map[string]*worker{
			"replica-a": startWorker(t, &delivery.Webhooks{Hooks: ga.Hooks, Client: client, Owner: "replica-a", PollInterval: time.Second}),
			"replica-b": startWorker(t, &delivery.Webhooks{Hooks: gb.Hooks, Client: client, Owner: "replica-b", PollInterval: time.Second}),
		}
		p := ga.newProject(t)
		w := ga.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/kill", "secret": plainSecret})
		appendN(t, ga.Log, p.ID, 20)
		waitFor(t, "a few deliveries", 10*time.Second, func() bool { return rcv.count() >= 5 })
		holder := ga.leaseOwner(t)
		if workers[holder] == nil {
			t.Fatalf("lease held by %q", holder)
		}
		workers[holder].W.Abandon()
		workers[holder].stop()
		died := time.Now()
		head := appendN(t, gb.Log, p.ID, 20)
		var first time.Time
		waitFor(t, "a delivery by the survivor", 10*time.Second, func() bool {
			for _, h := range rcv.snapshot() {
				if h.Start.After(died) {
					first = h.Start
					return true
				}
			}
			return false
		})
		took := first.Sub(died)
		t.Logf("the survivor delivered %s after %s died (lease %s)", took.Round(time.Millisecond), holder, delivery.DefaultLease)
		if took > 5*time.Second {
			t.Errorf("the survivor took over %s after the holder died; want under 5 s", took)
		}
		if owner := ga.leaseOwner(t); owner == holder {
			t.Errorf("the lease is still %s's", owner)
		}
		waitFor(t, "the whole stream", 20*time.Second, func() bool { return ga.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, ga, rcv, "/kill", p, plainSecret, w.Cursor, head, true)
		if n := rcv.overlapCount(); n != 0 {
			t.Errorf("%d deliveries overlapped another", n)
		}
	})
}

// TestSlowDeliveryKeepsLease: a delivery longer than the (default) lease
// completes and is acknowledged once, the holder renewing meanwhile; the
// other replica never delivers alongside it. When the lease is taken
// from the holder during a slow delivery, the delivery is cut before
// anyone may take over.
func TestSlowDeliveryKeepsLease(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		box := newBox(t)
		ga := startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		gb := ga
		if cfg.URL != "" {
			gb = startGateway(t, cfg, gwOptions{AllowPrivate: true, Box: box})
		}
		slow := delivery.DefaultLease * 5 / 3
		rcv := newReceiver(t)
		cut := make(chan time.Time, 1)
		rcv.setAnswer(func(w http.ResponseWriter, r *http.Request, h *hit, n int) int {
			switch n {
			case 2: // slower than the lease: kept by renewals
				sleepOrGone(r, slow)
			case 4: // the lease is taken meanwhile: cut
				select {
				case <-time.After(3 * delivery.DefaultLease):
				case <-r.Context().Done():
					cut <- time.Now()
				}
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		client := rcv.client(true, 0)
		startWorker(t, &delivery.Webhooks{Hooks: ga.Hooks, Client: client, Owner: "replica-a"})
		startWorker(t, &delivery.Webhooks{Hooks: gb.Hooks, Client: client, Owner: "replica-b"})
		p := ga.newProject(t)
		w := ga.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/slow", "secret": plainSecret})
		appendN(t, ga.Log, p.ID, 3)
		waitFor(t, "the slow delivery", 3*slow, func() bool { return ga.getWebhook(t, p.Key).Cursor == w.Cursor+3 })
		hits := rcv.snapshot()
		if len(hits) != 3 {
			t.Fatalf("%d deliveries of 3 events; want each once (the slow one kept its lease)", len(hits))
		}
		if d := hits[1].End.Sub(hits[1].Start); d < slow || hits[1].Status != http.StatusNoContent {
			t.Errorf("the slow delivery took %s and answered %d; want %s and 204", d, hits[1].Status, slow)
		}

		// The lease is taken during a delivery (as if this replica's
		// renewals had stopped reaching the database and another replica
		// claimed the endpoint): the holder finds it at its next renewal
		// and gives the delivery up.
		head := appendN(t, ga.Log, p.ID, 2)
		waitFor(t, "the fourth delivery", 10*time.Second, func() bool { return rcv.count() >= 4 })
		stolen := time.Now()
		ga.stealLease(t, p.ID, "replica-dead", 2*delivery.DefaultLease)
		select {
		case at := <-cut:
			if d := at.Sub(stolen); d > delivery.DefaultLease/3+time.Second {
				t.Errorf("the delivery went on %s after the lease was taken", d)
			}
		case <-time.After(2 * delivery.DefaultLease):
			t.Fatal("the delivery went on after the lease was taken")
		}
		waitFor(t, "the rest", 30*time.Second, func() bool { return ga.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, ga, rcv, "/slow", p, plainSecret, w.Cursor, head, true)
		if n := rcv.overlapCount(); n != 0 {
			for _, h := range rcv.snapshot() {
				t.Logf("seq %d %s..%s status %d", h.Seq, h.Start.Format(time.StampMilli), h.End.Format(time.StampMilli), h.Status)
			}
			t.Errorf("%d deliveries overlapped another", n)
		}
	})
}

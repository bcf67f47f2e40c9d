package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store/storetest"
)

// failer answers the first n requests matching method and path itself
// (fail), then lets requests through.
type failer struct {
	mu     sync.Mutex
	method string
	path   string
	n      int
	seen   int
	fail   func(w http.ResponseWriter, r *http.Request)
}

func (f *failer) intercept(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != f.method || r.URL.Path != f.path {
		return false
	}
	f.mu.Lock()
	f.seen++
	mine := f.seen <= f.n
	f.mu.Unlock()
	if mine {
		f.fail(w, r)
	}
	return mine
}

func (f *failer) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"error":{"code":"unavailable","message":"database unreachable"}}`))
}

// hangUp drops the connection without an answer.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		c.Close()
	}
}

// TestRetries: idempotent calls are retried after 503, 429 (honouring
// Retry-After) and dropped connections, a bounded number of times; POST
// calls never are.
func TestRetries(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	ctx := context.Background()
	px := newProxy(t, g.URL)
	p := newProject(t, g, px.URL, client.WithRetries(3))
	conn := p.connectTest(t)

	t.Run("503 then success", func(t *testing.T) {
		f := &failer{method: "GET", path: "/v1/project", n: 2, fail: unavailable}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if _, err := p.Project(ctx); err != nil {
			t.Fatalf("Project after two 503s: %v", err)
		}
		if f.attempts() != 3 {
			t.Errorf("%d attempts, want 3", f.attempts())
		}
	})

	t.Run("bounded", func(t *testing.T) {
		f := &failer{method: "GET", path: "/v1/project", n: 100, fail: unavailable}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		_, err := p.Project(ctx)
		var e *client.Error
		if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &e) || e.Status != 503 || e.Message != "database unreachable" {
			t.Errorf("Project with the gateway down: %v", err)
		}
		if f.attempts() != 4 {
			t.Errorf("%d attempts, want 1 + 3 retries", f.attempts())
		}
	})

	t.Run("dropped connection", func(t *testing.T) {
		f := &failer{method: "GET", path: "/v1/connections", n: 1, fail: hangUp}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if cs, err := p.Connections(ctx, "", 0); err != nil || len(cs) != 1 {
			t.Fatalf("Connections after a dropped connection: %v, %v", cs, err)
		}
		if f.attempts() != 2 {
			t.Errorf("%d attempts, want 2", f.attempts())
		}
	})

	t.Run("429 Retry-After", func(t *testing.T) {
		f := &failer{method: "GET", path: "/v1/events", n: 1, fail: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down"}}`))
		}}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		began := time.Now()
		if _, err := p.Events(ctx, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
		// The backoff alone would be 20 ms: the wait is Retry-After's.
		if waited := time.Since(began); waited < 900*time.Millisecond {
			t.Errorf("retried after %v, before the Retry-After of 1 s", waited)
		}
	})

	t.Run("Retry-After too long", func(t *testing.T) {
		f := &failer{method: "GET", path: "/v1/project", n: 100, fail: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			unavailable(w, r)
		}}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		_, err := p.Project(ctx)
		var e *client.Error
		if !errors.As(err, &e) || e.RetryAfter != time.Hour || f.attempts() != 1 {
			t.Errorf("err %v after %d attempts: want the 503 with RetryAfter 1h at once", err, f.attempts())
		}
	})

	t.Run("PUT retried", func(t *testing.T) {
		f := &failer{method: "PUT", path: "/v1/webhook", n: 1, fail: hangUp}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if _, err := p.SetWebhook(ctx, "https://agent.example.com/hook", "a secret, long and varied enough"); err != nil {
			t.Fatal(err)
		}
		if f.attempts() != 2 {
			t.Errorf("%d attempts, want 2", f.attempts())
		}
	})

	t.Run("DELETE whose answer was lost", func(t *testing.T) {
		// The first DELETE reaches the gateway, but its answer is lost; the
		// retry meets not_found, which means done.
		f := &failer{method: "DELETE", path: "/v1/webhook", n: 1, fail: func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequest("DELETE", g.URL+"/v1/webhook", nil)
			req.Header.Set("Authorization", r.Header.Get("Authorization"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusNoContent {
				t.Errorf("delete behind the client's back: %v %v", resp, err)
			}
			hangUp(w, r)
		}}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if err := p.DeleteWebhook(ctx); err != nil {
			t.Errorf("DeleteWebhook: %v", err)
		}
		if f.attempts() != 2 {
			t.Errorf("%d attempts, want 2", f.attempts())
		}
		if _, err := p.GetWebhook(ctx); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("webhook still there: %v", err)
		}
	})

	t.Run("keyed POST retried with its key", func(t *testing.T) {
		// The first Send reaches the gateway, but its answer is lost; the
		// retry carries the same Idempotency-Key and gets the first answer.
		var (
			mu   sync.Mutex
			keys []string
			sent string
		)
		f := &failer{method: "POST", path: "/v1/messages", n: 1, fail: func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			req, _ := http.NewRequest("POST", g.URL+"/v1/messages", bytes.NewReader(body))
			for _, h := range []string{"Authorization", "Content-Type", "Idempotency-Key"} {
				req.Header.Set(h, r.Header.Get(h))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusAccepted {
				t.Errorf("send behind the client's back: %v %v", resp, err)
			} else {
				var m client.Message
				json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
				mu.Lock()
				sent = m.ID
				mu.Unlock()
			}
			hangUp(w, r)
		}}
		px.set(nil, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == "POST" && r.URL.Path == "/v1/messages" {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
			}
			return f.intercept(w, r)
		})
		defer px.set(nil, nil)
		m, err := p.Send(ctx, client.SendRequest{ConnectionID: conn.ID, To: "bob", Text: "once"})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		keys0, sent0 := slices.Clone(keys), sent
		mu.Unlock()
		if f.attempts() != 2 || len(keys0) != 2 || keys0[0] == "" || keys0[0] != keys0[1] {
			t.Errorf("%d attempts with keys %q, want 2 with one key", f.attempts(), keys0)
		}
		if m.ID != sent0 {
			t.Errorf("the retry answered message %s, want the first attempt's %s", m.ID, sent0)
		}
		msgs, err := p.Messages(ctx, m.ConversationID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range msgs {
			if x.Text == "once" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d messages \"once\" stored, want 1", n)
		}
		// The next call has a key of its own.
		if _, err := p.Send(ctx, client.SendRequest{ConnectionID: conn.ID, To: "bob", Text: "twice"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(keys) != 3 || keys[2] == keys[0] {
			t.Errorf("keys %q: want a new key for a new call", keys)
		}
	})

	t.Run("POST without a key never retried", func(t *testing.T) {
		f := &failer{method: "POST", path: "/v1/projects/sandbox", n: 100, fail: unavailable}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if _, err := client.CreateSandbox(ctx, px.URL, "never twice"); err == nil {
			t.Fatal("CreateSandbox succeeded through a failing proxy")
		}
		if f.attempts() != 1 {
			t.Errorf("POST sent %d times, want once", f.attempts())
		}
	})
}

// TestNoRetriesOption: WithRetries(0) makes one attempt.
func TestNoRetriesOption(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	px := newProxy(t, g.URL)
	p := newProject(t, g, px.URL, client.WithRetries(0))
	f := &failer{method: "GET", path: "/v1/project", n: 1, fail: unavailable}
	px.set(nil, f.intercept)
	if _, err := p.Project(context.Background()); !errors.Is(err, client.ErrUnavailable) || f.attempts() != 1 {
		t.Errorf("err %v after %d attempts, want one 503", err, f.attempts())
	}
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/webhook"
)

// Receiver is a loopback webhook receiver that answers 200 at once and
// counts deliveries; it checks each endpoint's deliveries arrive in order.
type Receiver struct {
	srv       *httptest.Server
	delivered atomic.Int64
	lat       Latencies
	mu        sync.Mutex
	last      map[string]int64
	disorder  atomic.Int64
}

// NewReceiver starts a receiver.
func NewReceiver() *Receiver {
	r := &Receiver{last: map[string]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.handle))
	return r
}

// URL returns the receiver's address for an endpoint named name.
func (r *Receiver) URL(name string) string { return r.srv.URL + "/" + name }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	now := time.Now()
	var ev struct {
		Seq  int64 `json:"seq"`
		Data struct {
			T int64 `json:"t"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err == nil {
		if ev.Data.T > 0 {
			r.lat.Add(now.Sub(time.Unix(0, ev.Data.T)))
		}
		r.mu.Lock()
		if ev.Seq != r.last[req.URL.Path]+1 {
			r.disorder.Add(1)
		}
		r.last[req.URL.Path] = ev.Seq
		r.mu.Unlock()
	}
	r.delivered.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// WebhookDrain measures delivering a stored backlog: `endpoints` projects
// each holding `per` events register a webhook from seq 0, and the time
// until the receiver has every event is taken.
func WebhookDrain(ctx context.Context, svc *messaging.Service, hooks *webhook.Hooks, rcv *Receiver, endpoints, per int) (Result, error) {
	l := svc.Log()
	var principals []*messaging.Principal
	for i := range endpoints {
		sb, err := svc.CreateSandbox(ctx, fmt.Sprint("hook ", i))
		if err != nil {
			return Result{}, err
		}
		if err := Fill(ctx, l, sb.ProjectID, per); err != nil {
			return Result{}, err
		}
		p, err := svc.Authenticate(ctx, sb.APIKey)
		if err != nil {
			return Result{}, err
		}
		principals = append(principals, p)
	}
	base := rcv.delivered.Load()
	zero := int64(0)
	t0 := time.Now()
	for i, p := range principals {
		if _, err := hooks.Set(messaging.WithPrincipal(ctx, p), webhook.Input{URL: rcv.URL(fmt.Sprint("e", i)), Secret: benchSecret, FromSeq: &zero}); err != nil {
			return Result{}, err
		}
	}
	want := int64(endpoints * per)
	deadline := time.Now().Add(5 * time.Minute)
	for rcv.delivered.Load()-base < want {
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("webhooks: %d of %d delivered after 5 minutes", rcv.delivered.Load()-base, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return Result{Ops: int(want), Elapsed: time.Since(t0),
		Note: fmt.Sprintf("%d endpoint(s) x %d stored events, in order (%d out of order)", endpoints, per, rcv.disorder.Load())}, nil
}

// WebhookLatency appends `rate` events per second (spread over the
// projects of registered endpoints) for d and reports append -> POST
// received latency.
func WebhookLatency(ctx context.Context, svc *messaging.Service, hooks *webhook.Hooks, rcv *Receiver, endpoints, rate int, d time.Duration) (Result, error) {
	var projects []string
	for i := range endpoints {
		sb, err := svc.CreateSandbox(ctx, fmt.Sprint("latency ", i))
		if err != nil {
			return Result{}, err
		}
		p, err := svc.Authenticate(ctx, sb.APIKey)
		if err != nil {
			return Result{}, err
		}
		if _, err := hooks.Set(messaging.WithPrincipal(ctx, p), webhook.Input{URL: rcv.URL(fmt.Sprint("l", i)), Secret: benchSecret}); err != nil {
			return Result{}, err
		}
		projects = append(projects, sb.ProjectID)
	}
	time.Sleep(1500 * time.Millisecond) // the workers claim the endpoints
	rcv.lat.Reset()
	base := rcv.delivered.Load()
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	stop := next.Add(d)
	sent := 0
	for i := 0; time.Now().Before(stop); i++ {
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		next = next.Add(interval)
		var b bytes.Buffer
		b.WriteString(`{"t":`)
		b.WriteString(strconv.FormatInt(time.Now().UnixNano(), 10))
		b.WriteString(`}`)
		go svc.Log().Append(ctx, projects[i%len(projects)], stream.MessageReceived, json.RawMessage(b.Bytes()))
		sent++
	}
	deadline := time.Now().Add(30 * time.Second)
	for rcv.delivered.Load()-base < int64(sent) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p50, p99, n := rcv.lat.Percentiles()
	return Result{Ops: n, Elapsed: d, P50: p50, P99: p99,
		Note: fmt.Sprintf("%d events/s over %d endpoint(s); latency = append call -> POST at the receiver", rate, endpoints)}, nil
}

// benchSecret signs the benchmark's deliveries (strong enough to be
// accepted: at least 24 characters, 8 of them different).
const benchSecret = "bench-secret-0123456789abcdef"

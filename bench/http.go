package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// API is a small REST client for load generation.
type API struct {
	Base   string
	Client *http.Client
}

// NewAPI returns a client for base with room for n concurrent requests.
func NewAPI(base string, n int) *API {
	return &API{Base: base, Client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n},
		Timeout:   30 * time.Second,
	}}
}

// Do sends a JSON request and decodes a JSON answer into out (if not nil).
func (a *API) Do(ctx context.Context, method, path, key string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := a.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// TestConnection is a sandbox project with a test-channel connection.
type TestConnection struct {
	Key, ConnectionID string
	// Head is the project's last seq when it was made.
	Head int64
}

// NewTestConnections makes n sandbox projects, each with a test connection.
func NewTestConnections(ctx context.Context, a *API, n int) ([]TestConnection, error) {
	out := make([]TestConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		var c struct {
			ID string `json:"id"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, map[string]string{"channel": "test"}, &c); err != nil {
			return nil, err
		}
		out[i] = TestConnection{Key: sb.APIKey, ConnectionID: c.ID, Head: 1} // connection.active
	}
	return out, nil
}

// Inbound runs `workers` clients injecting messages through
// POST /v1/connections/{id}/inbound, spread over conns, for d. Senders
// rotate over 50 per worker, so conversations are both new and reused.
func Inbound(ctx context.Context, a *API, conns []TestConnection, workers int, d time.Duration) (Result, error) {
	r, err := load(workers, d, func(w int) func() error {
		c := conns[w%len(conns)]
		path := "/v1/connections/" + c.ConnectionID + "/inbound"
		i := 0
		return func() error {
			in := map[string]string{
				"sender": fmt.Sprintf("person-%d-%d@example.com", w, i%50),
				"text":   "Hello! Could you tell me when my order ships? It was placed on Monday.",
				"id":     fmt.Sprintf("w%d-%d", w, i),
			}
			i++
			_, err := a.Do(ctx, "POST", path, c.Key, in, nil)
			return err
		}
	})
	r.Note = fmt.Sprintf("%d project(s), %d concurrent clients", len(conns), workers)
	return r, err
}

// ReplyLatency measures, n times in sequence (an idle outbound queue), the
// time from sending POST /v1/messages/{id}/reply to a long-poll of the
// stream returning its message.sent.
func ReplyLatency(ctx context.Context, a *API, c TestConnection, n int) (Result, error) {
	var m struct {
		ID string `json:"id"`
	}
	if _, err := a.Do(ctx, "POST", "/v1/connections/"+c.ConnectionID+"/inbound", c.Key,
		map[string]string{"sender": "latency@example.com", "text": "ping"}, &m); err != nil {
		return Result{}, err
	}
	var head struct {
		LastSeq int64 `json:"last_seq"`
	}
	if _, err := a.Do(ctx, "GET", "/v1/project", c.Key, nil, &head); err != nil {
		return Result{}, err
	}
	var lat latencies
	after := head.LastSeq
	start := time.Now()
	for range n {
		got := make(chan error, 1)
		ready := make(chan struct{})
		go func() {
			var evs []struct {
				Seq int64 `json:"seq"`
			}
			close(ready)
			_, err := a.Do(ctx, "GET", fmt.Sprintf("/v1/events?after_seq=%d&type=message.sent&wait=10", after), c.Key, nil, &evs)
			if err == nil && len(evs) != 1 {
				err = fmt.Errorf("long-poll returned %d events", len(evs))
			}
			if err == nil {
				after = evs[0].Seq
			}
			got <- err
		}()
		<-ready
		time.Sleep(200 * time.Microsecond) // let the long-poll reach the server
		t0 := time.Now()
		if _, err := a.Do(ctx, "POST", "/v1/messages/"+m.ID+"/reply", c.Key, map[string]string{"text": "pong"}, nil); err != nil {
			return Result{}, err
		}
		if err := <-got; err != nil {
			return Result{}, err
		}
		lat.add([]time.Duration{time.Since(t0)})
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: n, Elapsed: time.Since(start), P50: p50, P99: p99,
		Note: "reply -> message.sent seen by a long-polling reader; one at a time"}, nil
}

// checkStored fails unless the projects of keys hold at least want
// events past their heads at the start (heads): a load whose requests
// were answered 200 without storing anything does not count.
func checkStored(ctx context.Context, a *API, keys []string, heads int64, want int) error {
	var total int64
	for _, k := range keys {
		var p struct {
			LastSeq int64 `json:"last_seq"`
		}
		if _, err := a.Do(ctx, "GET", "/v1/project", k, nil, &p); err != nil {
			return err
		}
		total += p.LastSeq
	}
	if got := total - heads; got < int64(want) {
		return fmt.Errorf("%d requests answered 200 but only %d events were stored", want, got)
	}
	return nil
}

// Replies runs `workers` clients replying (POST /v1/messages/{id}/reply)
// for d on the connection connID of key's project, each to an inbound
// message of its own (a conversation per client), with the outbox
// delivering meanwhile. It counts accepted replies (202).
func Replies(ctx context.Context, a *API, key, connID string, workers int, d time.Duration) (Result, error) {
	ids := make([]string, workers)
	for w := range ids {
		var m struct {
			ID string `json:"id"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/connections/"+connID+"/inbound", key,
			map[string]string{"sender": fmt.Sprintf("replies-%d@example.com", w), "text": "ping"}, &m); err != nil {
			return Result{}, err
		}
		ids[w] = m.ID
	}
	r, err := load(workers, d, func(w int) func() error {
		path := "/v1/messages/" + ids[w] + "/reply"
		return func() error {
			_, err := a.Do(ctx, "POST", path, key, map[string]string{"text": "Your order ships on Thursday."}, nil)
			return err
		}
	})
	r.Note = fmt.Sprintf("%d concurrent clients, outbox delivering", workers)
	return r, err
}

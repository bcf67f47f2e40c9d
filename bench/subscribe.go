package bench

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Subscriber is one websocket with one events subscription.
type Subscriber struct {
	ws *websocket.Conn
}

// Subscribe opens n websockets to base, spread over conns' projects, each
// with `subscription { events(afterSeq: <head>) { seq type data } }`.
// received is called for every event frame with its payload.
func Subscribe(ctx context.Context, base string, conns []TestConnection, n int, received func(frame []byte)) ([]*Subscriber, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	subs := make([]*Subscriber, n)
	var (
		wg    sync.WaitGroup
		first atomic.Value
		sem   = make(chan struct{}, 64)
	)
	for i := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c := conns[i%len(conns)]
			d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
				ReadBufferSize: 4096, WriteBufferSize: 1024}
			ws, _, err := d.DialContext(ctx, url, nil)
			if err != nil {
				first.CompareAndSwap(nil, err)
				return
			}
			ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": c.Key}})
			var ack struct{ Type string }
			if err := ws.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
				first.CompareAndSwap(nil, fmt.Errorf("init: %v %s", err, ack.Type))
				ws.Close()
				return
			}
			ws.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
				"query": `subscription { events(afterSeq: ` + strconv.FormatInt(c.Head, 10) + `) { seq type data } }`}})
			subs[i] = &Subscriber{ws: ws}
			go func() {
				for {
					_, b, err := ws.ReadMessage()
					if err != nil {
						return
					}
					received(b)
				}
			}()
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		CloseAll(subs)
		return nil, err
	}
	return subs, nil
}

// CloseAll closes the subscribers' sockets.
func CloseAll(subs []*Subscriber) {
	for _, s := range subs {
		if s != nil {
			s.ws.Close()
		}
	}
}

// stampPrefix marks the send time in an injected message's text.
const stampPrefix = "t="

// SentAt extracts the send time stamped into a message.received frame.
func SentAt(frame []byte) (time.Time, bool) {
	i := bytes.Index(frame, []byte(`"text":"`+stampPrefix))
	if i < 0 {
		return time.Time{}, false
	}
	rest := frame[i+len(`"text":"`+stampPrefix):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Fanout injects rate messages per second, round robin over conns, for d,
// each stamped with its send time, while the subscribers measure the time
// from sending to receiving. It returns the latencies seen.
func Fanout(ctx context.Context, a *API, conns []TestConnection, rate int, d time.Duration, lat *Latencies) (sent int, err error) {
	interval := time.Second / time.Duration(rate)
	stop := time.Now().Add(d)
	next := time.Now()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 32)
	for i := 0; time.Now().Before(stop); i++ {
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		next = next.Add(interval)
		c := conns[i%len(conns)]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := map[string]string{"sender": "load@example.com", "text": stampPrefix + strconv.FormatInt(time.Now().UnixNano(), 10)}
			if _, err := a.Do(ctx, "POST", "/v1/connections/"+c.ConnectionID+"/inbound", c.Key, body, nil); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
		sent++
	}
	wg.Wait()
	if e, _ := firstErr.Load().(error); e != nil {
		return sent, e
	}
	return sent, nil
}

// Latencies is a concurrent collector of durations.
type Latencies struct{ latencies }

// Add records one duration.
func (l *Latencies) Add(d time.Duration) { l.add([]time.Duration{d}) }

// Reset forgets everything recorded.
func (l *Latencies) Reset() {
	l.mu.Lock()
	l.all = l.all[:0]
	l.mu.Unlock()
}

// Percentiles returns p50 and p99 and the count.
func (l *Latencies) Percentiles() (p50, p99 time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p50, p99 = l.latencies.percentilesLocked()
	return p50, p99, len(l.all)
}

// CatchUp subscribes once to eventBatches from 0 and reads until it has
// seen `events` events, returning the elapsed time.
func CatchUp(ctx context.Context, base, key string, events int64, max int) (time.Duration, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, ReadBufferSize: 64 << 10}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return 0, err
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": key}})
	var ack struct{ Type string }
	if err := ws.ReadJSON(&ack); err != nil {
		return 0, err
	}
	t0 := time.Now()
	ws.WriteJSON(map[string]any{"id": "c", "type": "subscribe", "payload": map[string]any{
		"query": fmt.Sprintf(`subscription { eventBatches(afterSeq: 0, max: %d) { seq type data } }`, max)}})
	var last int64
	for last < events {
		_, b, err := ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		// The last seq of the batch is the last "seq": in the frame.
		i := bytes.LastIndex(b, []byte(`{"seq":`))
		if i < 0 {
			return 0, fmt.Errorf("catch-up: unexpected frame %.200s", b)
		}
		rest := b[i+len(`{"seq":`):]
		j := bytes.IndexByte(rest, ',')
		n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err != nil || n <= last {
			return 0, fmt.Errorf("catch-up: seq %d after %d (%v)", n, last, err)
		}
		last = n
	}
	return time.Since(t0), nil
}

package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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
// received is called for every frame with the subscriber's index (0 to
// n-1) and the frame, which it must not keep: each subscriber reads into
// one buffer of its own (the subscribers share the cores with the server
// they measure, so they do not make a frame of garbage per frame).
func Subscribe(ctx context.Context, base string, conns []TestConnection, n int, received func(i int, frame []byte)) ([]*Subscriber, error) {
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
				var buf bytes.Buffer
				for {
					_, r, err := ws.NextReader()
					if err != nil {
						return
					}
					buf.Reset()
					if _, err := buf.ReadFrom(r); err != nil {
						return
					}
					received(i, buf.Bytes())
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

// FanoutStats is what Fanout sent and how punctually.
type FanoutStats struct {
	// Sent counts the messages sent (every scheduled one is sent).
	Sent int
	// Late counts the sends that left more than LateAfter after their
	// intended time: the load generator could not keep up (the sender was
	// still waiting on the server with its previous message, or woke
	// late). Their latency still counts from the intended time.
	Late int
	// MaxLag is the longest a send left after its intended time.
	MaxLag time.Duration
	// LagP50 is the median time a send left after its intended time.
	LagP50 time.Duration
	// AckP50 and AckP99 are the times from the intended send time to
	// the answer of the inbound POST (stored and committed).
	AckP50, AckP99 time.Duration
}

// LateAfter is how long after its intended time a send counts as late.
const LateAfter = time.Millisecond

// Fanout injects rate messages per second, round robin over conns, for d.
// Sends are scheduled by intended time (start + i/rate) and each message
// is stamped with its intended time, so the latency the subscribers
// measure counts from when the message should have been sent: a server
// that falls behind shows as latency, not as a lower send rate (the
// coordinated omission of a generator that waits for its previous sends
// before sending the next). Up to senders requests are in flight; sends
// that cannot leave on time are counted (FanoutStats.Late) and still
// sent.
func Fanout(ctx context.Context, a *API, conns []TestConnection, rate int, d time.Duration, senders int) (FanoutStats, error) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	var (
		wg       sync.WaitGroup
		firstErr atomic.Value
		late     atomic.Int64
		maxLag   atomic.Int64
		acks     latencies
		lags     latencies
	)
	start := time.Now().Add(10 * time.Millisecond)
	// Sender k sends messages k, k+senders, k+2*senders...: each sleeps
	// until its next message's intended time itself (no hand-over from a
	// pacing goroutine, which would add a wake-up to every send).
	for k := range min(senders, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			myLags := make([]time.Duration, 0, n/senders+1)
			myAcks := make([]time.Duration, 0, n/senders+1)
			defer func() { lags.add(myLags); acks.add(myAcks) }()
			for i := k; i < n; i += senders {
				intended := start.Add(time.Duration(i) * interval)
				sleepUntil(intended)
				lag := time.Since(intended)
				myLags = append(myLags, lag)
				if lag > LateAfter {
					late.Add(1)
					for m := maxLag.Load(); int64(lag) > m && !maxLag.CompareAndSwap(m, int64(lag)); m = maxLag.Load() {
					}
				}
				c := conns[i%len(conns)]
				body := map[string]string{"sender": "load@example.com", "text": stampPrefix + strconv.FormatInt(intended.UnixNano(), 10)}
				if _, err := a.Do(ctx, "POST", "/v1/connections/"+c.ConnectionID+"/inbound", c.Key, body, nil); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				myAcks = append(myAcks, time.Since(intended))
			}
		}()
	}
	wg.Wait()
	st := FanoutStats{Sent: n, Late: int(late.Load()), MaxLag: time.Duration(maxLag.Load())}
	st.AckP50, st.AckP99 = acks.percentiles()
	st.LagP50, _ = lags.percentiles()
	if e, _ := firstErr.Load().(error); e != nil {
		return st, e
	}
	return st, nil
}

// Latencies is a concurrent collector of durations. It keeps them in
// shards, each under a lock of its own, so that the thousands of
// subscribers of the subscribe benchmark that record at once (a hundred
// for every event) do not queue on one lock: the load generator shares
// the cores with the server it measures.
type Latencies struct {
	shards [latencyShards]latencyShard
}

type latencyShard struct {
	mu  sync.Mutex
	all []time.Duration
	_   [32]byte // a cache line of its own
}

const latencyShards = 64

// Add records one duration.
func (l *Latencies) Add(d time.Duration) { l.AddFrom(0, d) }

// AddFrom records one duration from recorder i (a subscriber's index):
// recorders with different i%64 take different locks.
func (l *Latencies) AddFrom(i int, d time.Duration) {
	sh := &l.shards[uint(i)%latencyShards]
	sh.mu.Lock()
	sh.all = append(sh.all, d)
	sh.mu.Unlock()
}

// Reset forgets everything recorded.
func (l *Latencies) Reset() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.all = sh.all[:0]
		sh.mu.Unlock()
	}
}

// sorted returns everything recorded, sorted.
func (l *Latencies) sorted() []time.Duration {
	var all []time.Duration
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		all = append(all, sh.all...)
		sh.mu.Unlock()
	}
	slices.Sort(all)
	return all
}

// Percentiles returns p50 and p99 and the count.
func (l *Latencies) Percentiles() (p50, p99 time.Duration, n int) {
	all := l.sorted()
	return quantile(all, 0.50), quantile(all, 0.99), len(all)
}

// Count returns how many durations were recorded (without sorting them).
func (l *Latencies) Count() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.all)
		sh.mu.Unlock()
	}
	return n
}

// Quantile returns the q-quantile (0.999: p99.9) of what was recorded.
func (l *Latencies) Quantile(q float64) time.Duration { return quantile(l.sorted(), q) }

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

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

// SeqFollower is one websocket following a project's events subscription
// from seq 0, checking that the seqs come one after another: none skipped,
// none repeated.
type SeqFollower struct {
	ws      *websocket.Conn
	last    atomic.Int64
	broken  atomic.Int64 // seqs that did not follow the one before
	closed  atomic.Bool
	readErr atomic.Value
}

// Follow opens one subscription per entry of keys (a project's API key;
// repeat a key for several subscribers of one project), each
// `subscription { events(afterSeq: 0) { seq } }`.
func Follow(ctx context.Context, base string, keys []string) ([]*SeqFollower, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	out := make([]*SeqFollower, len(keys))
	for i, key := range keys {
		d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second}
		ws, _, err := d.DialContext(ctx, url, nil)
		if err != nil {
			CloseFollowers(out)
			return nil, err
		}
		f := &SeqFollower{ws: ws}
		out[i] = f
		ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": key}})
		var ack struct{ Type string }
		if err := ws.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
			CloseFollowers(out)
			return nil, fmt.Errorf("follow: init: %v %s", err, ack.Type)
		}
		ws.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query": `subscription { events(afterSeq: 0) { seq type } }`}})
		go f.read()
	}
	return out, nil
}

func (f *SeqFollower) read() {
	for {
		_, b, err := f.ws.ReadMessage()
		if err != nil {
			if !f.closed.Load() {
				f.readErr.Store(err)
			}
			return
		}
		i := bytes.Index(b, []byte(`"seq":`))
		if i < 0 {
			continue // a ping or a complete
		}
		rest := b[i+len(`"seq":`):]
		j := bytes.IndexAny(rest, ",}")
		if j < 0 {
			continue
		}
		seq, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err != nil {
			continue
		}
		if seq != f.last.Load()+1 {
			f.broken.Add(1)
		}
		f.last.Store(seq)
	}
}

// Last is the last seq the follower received.
func (f *SeqFollower) Last() int64 { return f.last.Load() }

// Broken counts seqs that did not follow the one before (skipped or
// repeated events).
func (f *SeqFollower) Broken() int64 { return f.broken.Load() }

// Err is the error that ended the follower's socket, if it ended before
// CloseFollowers.
func (f *SeqFollower) Err() error {
	err, _ := f.readErr.Load().(error)
	return err
}

// CloseFollowers closes the followers' sockets.
func CloseFollowers(fs []*SeqFollower) {
	for _, f := range fs {
		if f != nil {
			f.closed.Store(true)
			f.ws.Close()
		}
	}
}

// Last returns the last seq the receiver got for the endpoint named name.
func (r *Receiver) Last(name string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last["/"+name]
}

// Disorder counts deliveries that did not follow the one before at their
// endpoint (skipped or repeated).
func (r *Receiver) Disorder() int64 { return r.disorder.Load() }

// SoakLoad is the steady mixed load of the soak benchmark: inbound messages
// at Rate per second, round robin over Conns, sent at their scheduled
// times; every ReplyEvery-th is answered with a reply, and every ReadEvery
// a page of events is read.
type SoakLoad struct {
	API        *API
	Conns      []TestConnection
	Rate       int
	ReplyEvery int
	ReadEvery  time.Duration

	Inbound, Replies, Reads, Late atomic.Int64
	errors                        atomic.Int64
	mu                            sync.Mutex
	firstErr                      error
}

// Errors returns the number of failed requests and the first failure.
func (s *SoakLoad) Errors() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errors.Load(), s.firstErr
}

func (s *SoakLoad) fail(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

// Run drives the load until ctx ends. Sends are scheduled by intended
// time; one that could not start within 100 ms of it counts as Late.
func (s *SoakLoad) Run(ctx context.Context) {
	interval := time.Second / time.Duration(s.Rate)
	next := time.Now()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	lastRead := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if w := time.Until(next); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
				return
			}
		}
		if time.Since(next) > 100*time.Millisecond {
			s.Late.Add(1)
		}
		next = next.Add(interval)
		c := s.Conns[i%len(s.Conns)]
		reply := s.ReplyEvery > 0 && i%s.ReplyEvery == 0
		read := s.ReadEvery > 0 && time.Since(lastRead) >= s.ReadEvery
		if read {
			lastRead = time.Now()
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// Requests in flight finish even as the load stops.
			rctx := context.WithoutCancel(ctx)
			var m struct {
				ID string `json:"id"`
			}
			body := map[string]string{"sender": fmt.Sprintf("soak-%d@example.com", i%200), "text": "soak " + strconv.Itoa(i)}
			if _, err := s.API.Do(rctx, "POST", "/v1/connections/"+c.ConnectionID+"/inbound", c.Key, body, &m); err != nil {
				s.fail(err)
				return
			}
			s.Inbound.Add(1)
			if reply {
				if _, err := s.API.Do(rctx, "POST", "/v1/messages/"+m.ID+"/reply", c.Key, map[string]string{"text": "soak reply"}, nil); err != nil {
					s.fail(err)
					return
				}
				s.Replies.Add(1)
			}
			if read {
				if _, err := s.API.Do(rctx, "GET", "/v1/events?limit=100", c.Key, nil, nil); err != nil {
					s.fail(err)
					return
				}
				s.Reads.Add(1)
			}
		}()
	}
}

// Head returns the project's last seq (GET /v1/project).
func (a *API) Head(ctx context.Context, key string) (int64, error) {
	var p struct {
		LastSeq int64 `json:"last_seq"`
	}
	_, err := a.Do(ctx, "GET", "/v1/project", key, nil, &p)
	return p.LastSeq, err
}

// SetWebhook registers url as the project's webhook from seq 0.
func (a *API) SetWebhook(ctx context.Context, key, url string) error {
	_, err := a.Do(ctx, "PUT", "/v1/webhook", key, map[string]any{"url": url, "secret": benchSecret, "from_seq": 0}, nil)
	return err
}

// Delivered counts the deliveries the receiver answered.
func (r *Receiver) Delivered() int64 { return r.delivered.Load() }

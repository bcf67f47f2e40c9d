package slacktest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
)

// Socket Mode: a team's app-level token (AppToken) opens a connection with
// apps.connections.open; the fake sends "hello", then every queued
// envelope not yet acknowledged, and forgets an envelope when the client
// sends {"envelope_id":…} back. A new connection gets the unacknowledged
// envelopes again, as Slack retries them.

// socketState is a team's Socket Mode side; guarded by Server.mu.
type socketState struct {
	appToken string
	pending  []envelope
	seq      int
	changed  chan struct{} // closed and replaced when pending or disconnect changes
	discGen  int           // bumped by Disconnect
	opens    int
}

type envelope struct {
	ID      string          `json:"envelope_id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	Accepts bool            `json:"accepts_response_payload"`
	Retry   int             `json:"retry_attempt"`
}

// EnableSocketMode gives the team an app-level token (xapp-…) for Socket
// Mode and returns it.
func (t *Team) EnableSocketMode() string {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.socket == nil {
		t.socket = &socketState{appToken: "xapp-1-" + randomID("A", 4) + "-" + randomID("", 12), changed: make(chan struct{})}
		t.s.byAppToken[t.socket.appToken] = t
	}
	return t.socket.appToken
}

func (st *socketState) signal() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// QueueSocket queues an events_api envelope carrying body (an
// event_callback, as EventCallback builds it) for the team's Socket Mode
// connections. At most MaxRecorded envelopes wait; beyond, the oldest go.
func (t *Team) QueueSocket(body []byte) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	st := t.socket
	if st == nil {
		return
	}
	st.seq++
	st.pending = keep(append(st.pending, envelope{ID: "env-" + t.ID + "-" + itoa(st.seq), Type: "events_api", Payload: json.RawMessage(body)}))
	st.signal()
}

// Disconnect makes Slack ask the open Socket Mode connections to
// reconnect ({"type":"disconnect","reason":"refresh_requested"}).
func (t *Team) Disconnect() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.socket != nil {
		t.socket.discGen++
		t.socket.signal()
	}
}

// SocketOpens is how many times apps.connections.open succeeded.
func (t *Team) SocketOpens() int {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.socket == nil {
		return 0
	}
	return t.socket.opens
}

// Pending is how many envelopes wait for an acknowledgement.
func (t *Team) Pending() int {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.socket == nil {
		return 0
	}
	return len(t.socket.pending)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// connectionsOpen is apps.connections.open.
func (s *Server) connectionsOpen(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	t := s.byAppToken[token]
	if t == nil || t.revoked {
		s.mu.Unlock()
		if strings.HasPrefix(token, "xoxb-") {
			fail(w, "not_allowed_token_type")
			return
		}
		fail(w, "invalid_auth")
		return
	}
	var f *Failure
	if q := t.fail["apps.connections.open"]; len(q) > 0 {
		f = &q[0]
		t.fail["apps.connections.open"] = q[1:]
	}
	if f == nil {
		t.socket.opens++
	}
	s.mu.Unlock()
	if f != nil {
		s.failWith(w, r, *f)
		return
	}
	ws := "ws" + strings.TrimPrefix(s.URL, "http") + "/link/" + t.ID + "?ticket=" + randomID("", 8)
	answer(w, http.StatusOK, map[string]any{"ok": true, "url": ws})
}

var upgrader = websocket.Upgrader{}

// link is a Socket Mode websocket.
func (s *Server) link(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.teams[r.PathValue("team")]
	ok := t != nil && t.socket != nil && r.URL.Query().Get("ticket") != ""
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such link", http.StatusNotFound)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetReadLimit(1 << 16)
	closed := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(closed) }) }
	go func() { // acknowledgements
		defer end()
		for {
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if err := c.ReadJSON(&ack); err != nil {
				return
			}
			s.mu.Lock()
			st := t.socket
			for i, e := range st.pending {
				if e.ID == ack.EnvelopeID {
					st.pending = append(st.pending[:i:i], st.pending[i+1:]...)
					st.signal()
					break
				}
			}
			s.mu.Unlock()
		}
	}()
	if c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A0FAKEAPP"}}) != nil {
		return
	}
	sent := map[string]bool{}
	s.mu.Lock()
	gen := t.socket.discGen
	s.mu.Unlock()
	for {
		s.mu.Lock()
		st := t.socket
		var out []envelope
		for _, e := range st.pending {
			if !sent[e.ID] {
				sent[e.ID] = true
				out = append(out, e)
			}
		}
		disconnect := st.discGen != gen
		gen = st.discGen
		changed := st.changed
		s.mu.Unlock()
		if disconnect {
			_ = c.WriteJSON(map[string]any{"type": "disconnect", "reason": "refresh_requested"})
		}
		for _, e := range out {
			if c.WriteJSON(e) != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-closed:
			return
		case <-s.done:
			return
		}
	}
}

// WaitPending waits until at most n envelopes wait for an
// acknowledgement, or done closes; it reports whether they did.
func (t *Team) WaitPending(n int, done <-chan struct{}) bool {
	for {
		t.s.mu.Lock()
		st := t.socket
		if st == nil || len(st.pending) <= n {
			t.s.mu.Unlock()
			return true
		}
		changed := st.changed
		t.s.mu.Unlock()
		select {
		case <-changed:
		case <-done:
			return false
		}
	}
}

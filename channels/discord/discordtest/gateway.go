package discordtest

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// payload is a gateway frame.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// session is an identified gateway session: its id and its dispatch log.
type session struct {
	id  string
	seq int64
	log []logged
}

type logged struct {
	seq  int64
	t    string
	data json.RawMessage
}

// gwConn is one websocket connection.
type gwConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	once sync.Once
}

func (c *gwConn) send(p payload) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(p)
}

// closeWith sends a close frame with code and ends the connection.
func (c *gwConn) closeWith(code int, reason string) {
	c.once.Do(func() {
		c.wmu.Lock()
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		c.wmu.Unlock()
		_ = c.ws.Close()
	})
}

// drop ends the TCP connection without a close frame.
func (c *gwConn) drop() { c.once.Do(func() { _ = c.ws.Close() }) }

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("v") != "10" || r.URL.Query().Get("encoding") != "json" {
		http.Error(w, "want ?v=10&encoding=json", http.StatusBadRequest)
		return
	}
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(maxFrame)
	c := &gwConn{ws: ws}
	defer c.drop()
	s.mu.Lock()
	hb := s.heartMS
	s.mu.Unlock()
	if c.send(payload{Op: 10, D: raw(map[string]any{"heartbeat_interval": hb})}) != nil {
		return
	}
	var b *Bot
	defer func() {
		if b != nil {
			b.detach(c)
		}
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var p payload
		if json.Unmarshal(data, &p) != nil {
			c.closeWith(4002, "Decode error")
			return
		}
		switch p.Op {
		case 1:
			if b == nil || b.acking() {
				_ = c.send(payload{Op: 11})
			}
		case 2:
			if b != nil {
				c.closeWith(4005, "Already authenticated.")
				return
			}
			var id struct {
				Token      string         `json:"token"`
				Intents    int            `json:"intents"`
				Properties map[string]any `json:"properties"`
			}
			_ = json.Unmarshal(p.D, &id)
			nb := s.bot(id.Token)
			if nb == nil {
				c.closeWith(4004, "Authentication failed.")
				return
			}
			nb.mu.Lock()
			nb.identifies++
			deny := nb.denyIntent
			nb.mu.Unlock()
			if id.Intents < 0 || id.Intents >= 1<<26 {
				c.closeWith(4013, "Invalid intent(s).")
				return
			}
			if id.Intents&deny != 0 {
				c.closeWith(4014, "Disallowed intent(s).")
				return
			}
			if id.Properties == nil {
				c.closeWith(4002, "Decode error")
				return
			}
			b = nb
			b.identify(c)
		case 6:
			var res struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			_ = json.Unmarshal(p.D, &res)
			nb := s.bot(res.Token)
			if nb == nil {
				c.closeWith(4004, "Authentication failed.")
				return
			}
			if nb.resume(c, res.SessionID, res.Seq) {
				b = nb
			}
		default:
			if b == nil {
				c.closeWith(4003, "Not authenticated.")
				return
			}
		}
	}
}

func (b *Bot) acking() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ack
}

// attach makes c the bot's current connection, ending an older one.
func (b *Bot) attachLocked(c *gwConn) {
	if b.conn != nil && b.conn != c {
		b.conn.drop()
	}
	b.conn = c
}

func (b *Bot) detach(c *gwConn) {
	b.mu.Lock()
	if b.conn == c {
		b.conn = nil
	}
	b.mu.Unlock()
}

func (b *Bot) signalLocked() {
	if b.connected != nil {
		close(b.connected)
	}
	b.connected = make(chan struct{})
}

// identify starts a new session on c: READY, then what was held.
func (b *Bot) identify(c *gwConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attachLocked(c)
	b.sess = &session{id: "sess-" + b.srv.Snowflake()}
	b.sess.seq = 1
	ready := map[string]any{
		"v": 10, "user": User{ID: b.ID, Username: b.Username, Bot: true}, "guilds": []any{},
		"session_id": b.sess.id, "resume_gateway_url": b.srv.GatewayURL,
		"application": map[string]any{"id": b.ID, "flags": 0},
	}
	one := int64(1)
	if c.send(payload{Op: 0, T: "READY", S: &one, D: raw(ready)}) != nil {
		return
	}
	pending := b.pending
	b.pending = nil
	for _, d := range pending {
		b.dispatchLocked("MESSAGE_CREATE", d)
	}
	b.signalLocked()
}

// resume reattaches c to the session and replays what came after seq.
func (b *Bot) resume(c *gwConn, id string, seq int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resumes++
	if b.sess == nil || b.sess.id != id || seq > b.sess.seq {
		_ = c.send(payload{Op: 9, D: raw(false)})
		return false
	}
	if len(b.sess.log) > 0 && seq < b.sess.log[0].seq-1 {
		// The log no longer holds what the client missed.
		_ = c.send(payload{Op: 9, D: raw(false)})
		return false
	}
	b.attachLocked(c)
	for _, e := range b.sess.log {
		if e.seq > seq {
			s := e.seq
			if c.send(payload{Op: 0, T: e.t, S: &s, D: e.data}) != nil {
				return true
			}
		}
	}
	b.sess.seq++
	s := b.sess.seq
	_ = c.send(payload{Op: 0, T: "RESUMED", S: &s, D: raw(map[string]any{})})
	b.signalLocked()
	return true
}

// dispatchLocked logs a dispatch in the session and sends it when a
// connection is up.
func (b *Bot) dispatchLocked(t string, d json.RawMessage) {
	if b.sess == nil {
		if len(b.pending) < MaxLog {
			b.pending = append(b.pending, d)
		}
		return
	}
	b.sess.seq++
	e := logged{seq: b.sess.seq, t: t, data: d}
	b.sess.log = append(b.sess.log, e)
	if len(b.sess.log) > MaxLog {
		b.sess.log = append(b.sess.log[:0:0], b.sess.log[len(b.sess.log)-MaxLog:]...)
	}
	if b.conn != nil {
		s := e.seq
		if b.conn.send(payload{Op: 0, T: t, S: &s, D: d}) != nil {
			b.conn.drop()
		}
	}
}

// Dispatch sends MESSAGE_CREATE with m to the bot's session (held until
// the first identify when there is none; logged for RESUME while no
// connection is up).
func (b *Bot) Dispatch(m Message) {
	if m.Mentions == nil {
		m.Mentions = []User{}
	}
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	if m.Timestamp == "" {
		m.Timestamp = time.Now().UTC().Format(time.RFC3339)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dispatchLocked("MESSAGE_CREATE", raw(m))
}

// DispatchEvent sends any dispatch (t, d) to the session.
func (b *Bot) DispatchEvent(t string, d any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dispatchLocked(t, raw(d))
}

// DM is a message from user (a person) to the bot in their DM channel.
func (b *Bot) DM(user, text string) Message {
	return Message{ID: b.srv.Snowflake(), ChannelID: b.DMChannel(user), Author: User{ID: user, Username: "person" + user}, Content: text}
}

// Mention is a message in a guild channel mentioning the bot.
func (b *Bot) Mention(guild, channel, user, text string) Message {
	b.mu.Lock()
	if _, ok := b.channels[channel]; !ok {
		b.channels[channel] = ""
	}
	b.mu.Unlock()
	return Message{ID: b.srv.Snowflake(), ChannelID: channel, GuildID: guild, Author: User{ID: user, Username: "person" + user},
		Content: "<@" + b.ID + "> " + text, Mentions: []User{{ID: b.ID, Username: b.Username, Bot: true}}}
}

// SetAck switches heartbeat ACKs on or off (off: the connection turns
// zombie).
func (b *Bot) SetAck(on bool) {
	b.mu.Lock()
	b.ack = on
	b.mu.Unlock()
}

// DenyIntents makes IDENTIFY with any of intents close with 4014.
func (b *Bot) DenyIntents(intents int) {
	b.mu.Lock()
	b.denyIntent = intents
	b.mu.Unlock()
}

// Identifies returns how many IDENTIFY payloads the bot's token sent.
func (b *Bot) Identifies() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.identifies
}

// Resumes returns how many RESUME payloads the bot's token sent.
func (b *Bot) Resumes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.resumes
}

// Ready returns a channel closed at the next READY or RESUMED.
func (b *Bot) Ready() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.connected == nil {
		b.connected = make(chan struct{})
	}
	return b.connected
}

// Connected reports whether a gateway connection is up.
func (b *Bot) Connected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conn != nil
}

// Reconnect sends op 7 on the current connection.
func (b *Bot) Reconnect() bool { return b.onConn(func(c *gwConn) { _ = c.send(payload{Op: 7}) }) }

// InvalidSession sends op 9 with d=resumable on the current connection;
// when not resumable the session is forgotten.
func (b *Bot) InvalidSession(resumable bool) bool {
	return b.onConn(func(c *gwConn) {
		if !resumable {
			b.mu.Lock()
			b.sess = nil
			b.mu.Unlock()
		}
		_ = c.send(payload{Op: 9, D: raw(resumable)})
	})
}

// CloseWith closes the current connection with a close code (4004 also
// revokes the token: later identifies fail).
func (b *Bot) CloseWith(code int, reason string) bool {
	return b.onConn(func(c *gwConn) {
		if code == 4004 {
			b.srv.mu.Lock()
			delete(b.srv.bots, b.Token)
			b.srv.mu.Unlock()
		}
		c.closeWith(code, reason)
	})
}

// Drop ends the current connection without a close frame; the session
// stays resumable.
func (b *Bot) Drop() bool { return b.onConn(func(c *gwConn) { c.drop() }) }

func (b *Bot) onConn(f func(*gwConn)) bool {
	b.mu.Lock()
	c := b.conn
	b.mu.Unlock()
	if c == nil {
		return false
	}
	f(c)
	return true
}

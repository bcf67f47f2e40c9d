package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/semaphore"

	"github.com/comm-gateway/comm/channels"
)

// maxFrame bounds a gateway frame read (READY of a bot in many guilds is
// the largest).
const maxFrame = 16 << 20

// gatewayState is what a token's sessions share: the resumable session
// and the last sequence number whose events were handled (emit returned
// nil for their messages). It is saved in Options.State, so a session
// started elsewhere (another replica taking over) resumes it.
type gatewayState struct {
	running atomic.Bool

	mu        sync.Mutex
	sessionID string
	resumeURL string
	acked     int64
	botID     string
	savedAt   time.Time // when last saved to State
}

// savedSession is a gateway session as kept in State.
type savedSession struct {
	SessionID string `json:"session_id"`
	ResumeURL string `json:"resume_url"`
	Seq       int64  `json:"seq"`
	BotID     string `json:"bot_id"`
}

// saveEvery is how often at most the acknowledged sequence number is saved
// while a session runs: a replica taking over resumes at most this much
// earlier, and what it sees again is stored once.
const saveEvery = time.Second

func (g *gatewayState) snapshot() (id, resumeURL string, acked int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessionID, g.resumeURL, g.acked
}

func (g *gatewayState) ack(s int64) {
	g.mu.Lock()
	if s > g.acked {
		g.acked = s
	}
	g.mu.Unlock()
}

func (g *gatewayState) forget() {
	g.mu.Lock()
	g.sessionID, g.resumeURL, g.acked = "", "", 0
	g.mu.Unlock()
}

func (g *gatewayState) bot() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.botID
}

// tokenKey names the bot token in State keys (a hash: State holds no
// secret).
func (a *Adapter) tokenKey() string {
	h := sha256.Sum256([]byte(a.token))
	return hex.EncodeToString(h[:16])
}

// loadSession takes the session saved in State, where whoever ran it last
// (this process, an earlier one, another replica) left it: State, not
// this adapter's memory, is where a session's progress is.
func (a *Adapter) loadSession(ctx context.Context) error {
	raw, err := a.opts.State.Get(ctx, "session/"+a.tokenKey())
	if err != nil {
		return channels.Transient(0, "discord: gateway: reading the saved session: %v", err)
	}
	var s savedSession
	if raw != nil && json.Unmarshal(raw, &s) != nil {
		s = savedSession{} // unreadable: identify
	}
	a.gw.mu.Lock()
	defer a.gw.mu.Unlock()
	a.gw.sessionID, a.gw.resumeURL, a.gw.acked = s.SessionID, s.ResumeURL, s.Seq
	if s.BotID != "" {
		a.gw.botID = s.BotID
	}
	return nil
}

// saveSession keeps the session in State: always when force is set (a new
// session, the end of Poll), else at most every saveEvery. A session
// forgotten (invalid) is deleted.
func (a *Adapter) saveSession(ctx context.Context, force bool) {
	a.gw.mu.Lock()
	if !force && time.Since(a.gw.savedAt) < saveEvery {
		a.gw.mu.Unlock()
		return
	}
	a.gw.savedAt = time.Now()
	var raw []byte
	if a.gw.sessionID != "" {
		raw, _ = json.Marshal(savedSession{SessionID: a.gw.sessionID, ResumeURL: a.gw.resumeURL, Seq: a.gw.acked, BotID: a.gw.botID})
	}
	a.gw.mu.Unlock()
	if err := a.opts.State.Put(ctx, "session/"+a.tokenKey(), raw); err != nil {
		a.opts.Logger.Warn("discord: gateway: saving the session", "connection", a.conn.ID, "err", err)
	}
}

// takeIdentify spends one identify of the bot token's budget (kept in
// State, so every replica and restart counts against the same 24 h), or
// says how long until one is free.
func (a *Adapter) takeIdentify(ctx context.Context) (time.Duration, bool, error) {
	key := "identify/" + a.tokenKey()
	raw, err := a.opts.State.Get(ctx, key)
	if err != nil {
		return 0, false, channels.Transient(0, "discord: gateway: reading the identify budget: %v", err)
	}
	var spent []int64 // unix milliseconds
	_ = json.Unmarshal(raw, &spent)
	now := time.Now()
	live := spent[:0]
	for _, ms := range spent {
		if now.Sub(time.UnixMilli(ms)) < 24*time.Hour {
			live = append(live, ms)
		}
	}
	if len(live) >= a.opts.IdentifyBudget {
		return time.UnixMilli(live[len(live)-a.opts.IdentifyBudget]).Add(24 * time.Hour).Sub(now), false, nil
	}
	live = append(live, now.UnixMilli())
	raw, _ = json.Marshal(live)
	if err := a.opts.State.Put(ctx, key, raw); err != nil {
		return 0, false, channels.Transient(0, "discord: gateway: saving the identify budget: %v", err)
	}
	return 0, true, nil
}

// payload is a gateway frame.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d,omitempty"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// outcome is how a connection ended when the session goes on.
type outcome int

const (
	doResume outcome = iota + 1
	doIdentify
)

// Poll runs the Gateway session until ctx ends (nil) or it fails. It
// identifies (within the identify budget) or resumes the session this
// adapter had, hands each kept MESSAGE_CREATE to emit, and acknowledges
// (advances the sequence number it resumes from) only after emit returned
// nil; a failed emit ends Poll with a transient error, and the next Poll
// resumes from the last acknowledged event, so Discord replays the rest.
// op 7 and lost connections (zombie included) resume within Poll; op 9
// identifies again after a short wait. Close 4004 is channels.ErrRevoked;
// 4010-4014 (4014: the MESSAGE_CONTENT intent is not enabled) are
// permanent.
func (a *Adapter) Poll(ctx context.Context, emit channels.Emit) error {
	if !a.gw.running.CompareAndSwap(false, true) {
		return channels.Transient(0, "discord: poll: a session of this connection is already running in this process")
	}
	defer a.gw.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.closed, cancel)
	defer stop()
	if err := a.loadSession(ctx); err != nil {
		return err
	}
	defer func() {
		// Where this session got to, for whoever runs it next.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		a.saveSession(sctx, true)
		scancel()
	}()
	fails := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		progressed, next, err := a.session(ctx, emit)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if progressed {
			fails = 0
		} else if fails++; fails >= 3 {
			return channels.Transient(0, "discord: gateway: the session could not be established (%d attempts)", fails)
		}
		if next == doIdentify {
			a.gw.forget()
			a.saveSession(ctx, true)
			if err := sleep(ctx, a.reidentifyDelay()); err != nil {
				return nil
			}
		}
	}
}

func (a *Adapter) reidentifyDelay() time.Duration {
	if a.opts.ReidentifyDelay > 0 {
		return a.opts.ReidentifyDelay
	}
	return time.Second + rand.N(4*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// conn is one gateway websocket.
type conn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

func (c *conn) send(op int, d any) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteJSON(payload{Op: op, D: b})
}

func (c *conn) closeWith(code int, reason string) {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

// dialURL is u with v=10 and encoding=json.
func dialURL(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "wss" && pu.Scheme != "ws") {
		return "", errors.New("not a websocket url")
	}
	q := pu.Query()
	q.Set("v", "10")
	q.Set("encoding", "json")
	pu.RawQuery = q.Encode()
	if pu.Path == "" {
		pu.Path = "/"
	}
	return pu.String(), nil
}

// session runs one websocket connection. progressed says READY or
// RESUMED arrived; next says how the session goes on when err is nil.
func (a *Adapter) session(ctx context.Context, emit channels.Emit) (progressed bool, next outcome, err error) {
	sessionID, resumeURL, acked := a.gw.snapshot()
	resume := sessionID != "" && resumeURL != ""
	u := resumeURL
	if !resume {
		u = a.opts.GatewayURL
		if u == "" {
			if u, err = a.rest.gatewayURL(ctx); err != nil {
				return false, 0, err
			}
		}
	}
	du, err := dialURL(u)
	if err != nil {
		return false, 0, channels.Permanent("discord: gateway: %q: %v", u, err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	ws, _, err := websocket.DefaultDialer.DialContext(dctx, du, nil)
	dcancel()
	if err != nil {
		return false, 0, channels.Transient(0, "discord: gateway: connect: %v", err)
	}
	ws.SetReadLimit(maxFrame)
	c := &conn{ws: ws}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()

	// HELLO
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var hello payload
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 {
		return false, 0, channels.Transient(0, "discord: gateway: no HELLO: %v", err)
	}
	var h struct {
		Interval float64 `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(hello.D, &h); err != nil || h.Interval <= 0 {
		return false, 0, channels.Transient(0, "discord: gateway: HELLO without heartbeat_interval")
	}
	interval := time.Duration(h.Interval * float64(time.Millisecond))
	_ = ws.SetReadDeadline(time.Time{})

	if resume {
		err = c.send(6, map[string]any{"token": a.token, "session_id": sessionID, "seq": acked})
	} else {
		wait, ok, terr := a.takeIdentify(ctx)
		if terr != nil {
			return false, 0, terr
		}
		if !ok {
			return false, 0, channels.Transient(wait, "discord: gateway: this bot token's identify budget (%d per 24 h) is spent; waiting keeps Discord from resetting the token", a.opts.IdentifyBudget)
		}
		err = c.send(2, map[string]any{"token": a.token, "intents": Intents,
			"properties": map[string]string{"os": "linux", "browser": "comm", "device": "comm"}})
	}
	if err != nil {
		return false, doResumeOr(resume), nil
	}

	// Heartbeats.
	var lastSeq atomic.Int64
	lastSeq.Store(acked)
	var awaiting, zombie, blocked atomic.Bool
	beat := func() {
		s := lastSeq.Load()
		var d any
		if s > 0 {
			d = s
		}
		awaiting.Store(true)
		_ = c.send(1, d)
	}
	hbCtx, hbCancel := context.WithCancel(ctx)
	defer hbCancel()
	jitter := rand.Float64()
	if a.opts.Jitter != nil {
		jitter = a.opts.Jitter()
	}
	go func() {
		t := time.NewTimer(time.Duration(float64(interval) * jitter))
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
			}
			if awaiting.Load() && !blocked.Load() {
				// No ACK since the last beat while we were reading: a
				// zombie connection. Close with a code other than
				// 1000/1001, which keeps the session resumable.
				zombie.Store(true)
				c.closeWith(4000, "zombie connection: no heartbeat ACK")
				return
			}
			beat()
			t.Reset(interval)
		}
	}()

	// The reader below answers the gateway at once (heartbeats, ACKs,
	// reconnects) and queues dispatches for the storer, which stores what
	// queued up while it stored the last batch in one go: storage never
	// delays a heartbeat ACK, and a backlog costs one commit per batch.
	// The queue is bounded in frames and bytes; when it is full the
	// reader waits (the gateway's frames wait in TCP), which is no
	// zombie.
	q := &frameQueue{frames: make(chan payload, maxQueuedFrames), bytes: semaphore.NewWeighted(maxQueuedBytes)}
	stored := make(chan storeResult, 1)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	go func() {
		res := a.store(sctx, q, emit)
		if res.err != nil {
			c.closeWith(4000, "store failed") // ends the reader
		}
		// Hand back the budget of frames left in the queue (the reader
		// may be waiting for it) until the reader closes it.
		for p := range q.frames {
			q.bytes.Release(weight(p))
		}
		stored <- res
	}()

	next, cerr := a.read(ctx, c, q, &lastSeq, &awaiting, &zombie, &blocked, beat)
	close(q.frames)
	res := <-stored
	if ctx.Err() != nil {
		return res.progressed, 0, nil
	}
	if res.err != nil {
		return res.progressed, 0, res.err
	}
	if cerr != nil {
		return res.progressed, 0, cerr
	}
	if next == doInvalid {
		// op 9: resumable when it says so and a session is known (READY
		// was handled by the storer above).
		if q.resumable && a.gw.bot() != "" {
			if id, _, _ := a.gw.snapshot(); id != "" {
				return res.progressed, doResume, nil
			}
		}
		return res.progressed, doIdentify, nil
	}
	return res.progressed, next, nil
}

// Bounds of the frames read and not yet stored.
const (
	maxQueuedFrames = 4096
	maxQueuedBytes  = 32 << 20
)

// frameQueue carries dispatches from a connection's reader to its storer.
type frameQueue struct {
	frames chan payload
	bytes  *semaphore.Weighted // held for the size of each queued frame
	// resumable is op 9's payload (set by the reader before it ends).
	resumable bool
}

// weight is what a frame holds of the queue's byte budget.
func weight(p payload) int64 { return min(int64(len(p.D))+64, maxQueuedBytes) }

// doInvalid is op 9 (invalid session), decided once the queue is stored.
const doInvalid outcome = -1

// read reads the connection until it ends, answering heartbeats and
// queueing dispatches; it returns how the session goes on.
func (a *Adapter) read(ctx context.Context, c *conn, q *frameQueue, lastSeq *atomic.Int64, awaiting, zombie, blocked *atomic.Bool, beat func()) (outcome, error) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil
			}
			if zombie.Load() {
				a.opts.Logger.Info("discord: gateway: no heartbeat ACK; resuming", "connection", a.conn.ID)
				return doResume, nil
			}
			return a.closeOutcome(err)
		}
		var p payload
		if err := json.Unmarshal(data, &p); err != nil {
			return doResume, nil
		}
		if p.S != nil {
			lastSeq.Store(*p.S)
		}
		switch p.Op {
		case 0:
			w := weight(p)
			blocked.Store(true)
			err := q.bytes.Acquire(ctx, w)
			if err == nil {
				select {
				case q.frames <- p:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			blocked.Store(false)
			if err != nil {
				return 0, nil
			}
		case 1:
			beat()
		case 7:
			c.closeWith(4000, "reconnect requested")
			return doResume, nil
		case 9:
			_ = json.Unmarshal(p.D, &q.resumable)
			c.closeWith(4000, "invalid session")
			return doInvalid, nil
		case 11:
			awaiting.Store(false)
		}
	}
}

// maxBatch bounds the messages stored in one commit.
const maxBatch = 256

// storeResult is how the storer ended.
type storeResult struct {
	progressed bool // READY or RESUMED was handled
	err        error
}

// store takes the queued dispatches, in order, until the reader closes the
// queue: each batch (what queued up while the last one was stored) is
// stored with one emit, and its last sequence number acknowledged once
// emit returned nil. A failed store ends it; the session resumes from the
// last acknowledged event, before the batch.
func (a *Adapter) store(ctx context.Context, q *frameQueue, emit channels.Emit) (res storeResult) {
	var batch []payload
	for {
		p, ok := <-q.frames
		if !ok {
			return res
		}
		batch = append(batch[:0], p)
	more:
		for len(batch) < maxBatch {
			select {
			case p, ok := <-q.frames:
				if !ok {
					break more
				}
				batch = append(batch, p)
			default:
				break more
			}
		}
		err := a.storeBatch(ctx, batch, emit, &res.progressed)
		for _, p := range batch {
			q.bytes.Release(weight(p))
		}
		if err != nil {
			res.err = err
			return res
		}
	}
}

// keyed is a kept message and the guild it came from (the routing key of
// the operator's app session).
type keyed struct {
	guild string
	in    channels.Inbound
}

// storeBatch handles a batch of dispatches in order and acknowledges the
// last once its messages are stored.
func (a *Adapter) storeBatch(ctx context.Context, batch []payload, emit channels.Emit, progressed *bool) error {
	var kept []keyed
	var seq int64
	ready := false
	for _, p := range batch {
		if p.S != nil {
			seq = max(seq, *p.S)
		}
		switch p.T {
		case "READY":
			var r struct {
				SessionID string `json:"session_id"`
				ResumeURL string `json:"resume_gateway_url"`
				User      user   `json:"user"`
			}
			if err := json.Unmarshal(p.D, &r); err != nil || r.SessionID == "" {
				return channels.Transient(0, "discord: gateway: malformed READY")
			}
			a.gw.mu.Lock()
			a.gw.sessionID, a.gw.resumeURL, a.gw.botID = r.SessionID, r.ResumeURL, r.User.ID
			if a.gw.resumeURL == "" {
				a.gw.resumeURL = a.opts.GatewayURL
			}
			a.gw.mu.Unlock()
			*progressed, ready = true, true
		case "RESUMED":
			*progressed = true
		case "MESSAGE_CREATE":
			ins, guild, err := a.inbound(ctx, p.D)
			if err != nil {
				return err
			}
			for _, in := range ins {
				kept = append(kept, keyed{guild, in})
			}
		}
	}
	if err := a.emitKept(kept, emit); err != nil {
		first := kept[0].in.ProviderID
		return channels.Transient(0, "discord: gateway: storing %d message(s) from %s on failed; the session resumes before them: %v", len(kept), first, err)
	}
	if seq > 0 {
		a.gw.ack(seq)
		a.saveSession(ctx, ready)
	}
	return nil
}

// emitKept stores kept messages: all at once on a connection's session,
// in runs of one guild on the operator's app session (each guild is its
// own connection).
func (a *Adapter) emitKept(kept []keyed, emit channels.Emit) error {
	if len(kept) == 0 {
		return nil
	}
	if a.appEmit == nil {
		ins := make([]channels.Inbound, len(kept))
		for i, k := range kept {
			ins[i] = k.in
		}
		return emit(ins...)
	}
	for i := 0; i < len(kept); {
		j := i + 1
		for j < len(kept) && kept[j].guild == kept[i].guild {
			j++
		}
		run := make([]channels.Inbound, 0, j-i)
		for _, k := range kept[i:j] {
			run = append(run, k.in)
		}
		if err := a.appEmit(kept[i].guild, run...); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func doResumeOr(resume bool) outcome {
	if resume {
		return doResume
	}
	return doIdentify
}

// closed classifies how the server ended the connection.
func (a *Adapter) closeOutcome(err error) (outcome, error) {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return doResume, nil
	}
	switch ce.Code {
	case 4004:
		return 0, channels.Revoked("discord: gateway: authentication failed (4004 %s): the bot token was rejected; copy the current token from the developer portal", ce.Text)
	case 4014:
		return 0, channels.Permanent("discord: gateway: disallowed intents (4014 %s): enable the MESSAGE CONTENT intent on the developer portal's Bot page (Privileged Gateway Intents)", ce.Text)
	case 4010, 4011, 4012, 4013:
		return 0, channels.Permanent("discord: gateway: the session cannot go on (%d %s)", ce.Code, ce.Text)
	case 4007, 4009:
		return doIdentify, nil
	}
	return doResume, nil
}

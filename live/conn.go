package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/messaging"
)

// Close codes of graphql-transport-ws.
const (
	closeBadMessage   = 4400
	closeUnauthorized = 4401
	closeForbidden    = 4403
	closeInitTimeout  = 4408
	closeDuplicateID  = 4409
	closeTooManyInits = 4429
	// closeTooMany refuses a socket over the per-key cap (the protocol's
	// "too many" code, with a reason saying which).
	closeTooMany = 4429
	// closeNotReading closes a socket whose peer does not read what it is
	// sent (its control queue passed its cap, or a write stalled): policy
	// violation.
	closeNotReading = websocket.ClosePolicyViolation
)

var errInternal = fault.Internal("internal error")

// message is a protocol message of either protocol.
type message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// conn is one socket.
type conn struct {
	s  *Server
	ws *websocket.Conn
	nc net.Conn        // the socket under ws, which the frames are written to
	rc syscall.RawConn // nil: not a plain socket, frames are written by flush only
	// wmu is held while a frame is written, so frames never interleave;
	// a frame written in part by writeNow keeps it until flush writes the
	// rest. wclosed: a close frame was written, nothing more is.
	wmu       sync.Mutex
	wclosed   atomic.Bool
	raw       rawWrite // writeNow's, under wmu
	legacy    bool
	headerKey string
	ctx       context.Context
	cancel    context.CancelFunc
	ip        string
	keyID     string               // set by admitKey, under s.mu
	slot      int                  // when it is pinged (Server.keepAlive); set by track, under s.mu
	principal *messaging.Principal // set by connection_init (reader only)
	authn     Authenticator        // nil: an API key authenticates
	initTimer *time.Timer
	// replaying is a token a replaying subscriber holds while it reads a
	// page and queues it: one page in flight per socket.
	replaying chan struct{}

	mu sync.Mutex
	// queue holds the frames waiting to be written, data and control in
	// order. queued counts the bytes of data frames queued or being
	// written, bounded by MaxQueueBytes (a single larger frame goes alone);
	// ctrlN and ctrlBytes count control frames (pong, ka, connection_ack,
	// complete, error), bounded by their own cap: a socket passing it is
	// closed.
	queue     []frame
	urgent    []frame // websocket pings and pongs, written before the queue
	queued    int
	fullSince time.Time // since when queued is over the server's hogBytes (zero: it is not)
	progress  time.Time // when a data frame was last written, or queued on an empty queue
	ctrlN     int
	ctrlBytes int
	writing   bool
	closed    bool
	waiting   int           // producers waiting for room; live deliveries step aside meanwhile
	room      chan struct{} // closed when data bytes were written and a producer waits
	subs      map[string]*sub
	acked     bool

	// writeStart is when the data write in progress began (Server.clock),
	// 0 while none is.
	writeStart atomic.Int64
}

// frame is one websocket frame to write (wire.go).
type frame struct {
	b    []byte
	size int // the bytes it counts against the bounds (len(b) before a partial write)
	ctrl bool
	held bool // the rest of a frame writeNow wrote in part: c.wmu is held for it
}

func newConn(s *Server, ws *websocket.Conn, r *http.Request, ip string, authn Authenticator) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, ws: ws, nc: ws.NetConn(), legacy: ws.Subprotocol() == ProtocolLegacy,
		ctx: ctx, cancel: cancel, room: make(chan struct{}), subs: map[string]*sub{},
		replaying: make(chan struct{}, 1), ip: ip, authn: authn,
	}
	if sc, ok := c.nc.(syscall.Conn); ok {
		c.rc, _ = sc.SyscallConn()
		c.raw.fn = c.writeRaw
	}
	if authn != nil {
		return c
	}
	if scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		c.headerKey = strings.TrimSpace(key)
	}
	return c
}

// read is the socket's reader loop; it owns the protocol state.
func (c *conn) read() {
	defer c.shutdown()
	c.ws.SetReadLimit(c.s.opts.ReadLimit)
	idle := 2*c.s.opts.PingInterval + 5*time.Second
	c.ws.SetReadDeadline(time.Now().Add(c.s.opts.InitTimeout + idle))
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(idle))
	})
	// The server writes its frames itself (wire.go), so the replies to the
	// peer's pings and close frame are its own too.
	c.ws.SetPingHandler(func(data string) error {
		c.sendControl(controlFrame(websocket.PongMessage, []byte(data)), true)
		return nil
	})
	c.ws.SetCloseHandler(func(code int, _ string) error {
		c.writeClose(code, "")
		return nil
	})
	c.initTimer = time.AfterFunc(c.s.opts.InitTimeout, func() {
		c.mu.Lock()
		acked := c.acked
		c.mu.Unlock()
		if !acked {
			c.closeWith(closeInitTimeout, "Connection initialisation timeout")
		}
	})
	defer c.initTimer.Stop()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		c.ws.SetReadDeadline(time.Now().Add(idle))
		var m message
		if err := json.Unmarshal(data, &m); err != nil || m.Type == "" {
			c.closeWith(closeBadMessage, "Invalid message received")
			return
		}
		if !c.handle(m) {
			return
		}
	}
}

// handle acts on one message; false ends the connection.
func (c *conn) handle(m message) bool {
	switch m.Type {
	case "connection_init":
		if c.principal != nil {
			c.closeWith(closeTooManyInits, "Too many initialisation requests")
			return false
		}
		p, err := c.authenticate(m.Payload)
		if err != nil {
			c.closeWith(closeForbidden, "Forbidden: "+err.Error())
			return false
		}
		if !c.s.admitKey(c, p.KeyID) {
			c.closeWith(closeTooMany, fmt.Sprintf("Too many websockets for this API key (at most %d)", c.s.opts.MaxPerKey))
			return false
		}
		c.principal = p
		c.mu.Lock()
		c.acked = true
		c.mu.Unlock()
		c.initTimer.Stop()
		c.send(message{Type: "connection_ack"})
		if c.legacy {
			c.send(message{Type: "ka"})
		}
	case "ping":
		c.send(message{Type: "pong", Payload: m.Payload})
	case "pong":
	case "subscribe", "start":
		if (m.Type == "subscribe") == c.legacy {
			c.closeWith(closeBadMessage, fmt.Sprintf("message type %q is not part of %s", m.Type, c.ws.Subprotocol()))
			return false
		}
		if c.principal == nil {
			c.closeWith(closeUnauthorized, "Unauthorized")
			return false
		}
		if m.ID == "" {
			c.closeWith(closeBadMessage, "subscribe without an id")
			return false
		}
		c.mu.Lock()
		_, dup := c.subs[m.ID]
		n := len(c.subs)
		c.mu.Unlock()
		if dup {
			c.closeWith(closeDuplicateID, "Subscriber for "+m.ID+" already exists")
			return false
		}
		if n >= c.s.opts.MaxSubscriptions {
			c.operationError(m.ID, fault.RateLimited(0, "at most %d operations per connection", c.s.opts.MaxSubscriptions))
			return true
		}
		if !c.start(m.ID, m.Payload) {
			return false
		}
	case "complete", "stop":
		c.stopSub(m.ID)
		if c.legacy {
			c.send(message{ID: m.ID, Type: "complete"})
		}
	case "connection_terminate":
		c.closeWith(websocket.CloseNormalClosure, "")
		return false
	default:
		c.closeWith(closeBadMessage, fmt.Sprintf("unknown message type %q", m.Type))
		return false
	}
	return true
}

// authenticate takes the key from the init payload ({"Authorization":
// "Bearer <key>"} or {"apiKey": "<key>"}) or the upgrade's header.
func (c *conn) authenticate(payload json.RawMessage) (*messaging.Principal, error) {
	if c.authn != nil {
		return c.authn(c.ctx, payload)
	}
	key := c.headerKey
	var fields map[string]any
	if len(payload) > 0 && string(payload) != "null" {
		if err := json.Unmarshal(payload, &fields); err != nil {
			return nil, errors.New("connection_init payload must be an object")
		}
	}
	for k, v := range fields {
		s, _ := v.(string)
		switch strings.ToLower(k) {
		case "authorization":
			scheme, rest, ok := strings.Cut(s, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return nil, errors.New("the Authorization field must be Bearer <key>")
			}
			key = strings.TrimSpace(rest)
		case "apikey", "api_key":
			key = s
		}
	}
	p, err := c.s.svc.Authenticate(c.ctx, key)
	if err != nil {
		var e *fault.Error
		if errors.As(err, &e) {
			return nil, errors.New(e.Message)
		}
		return nil, errors.New("authentication failed")
	}
	return p, nil
}

// start runs an operation: a subscription natively, anything else through
// the GraphQL executor. false ends the connection: its key was revoked.
func (c *conn) start(id string, payload json.RawMessage) bool {
	// The key is checked again for every operation: a revoked key stops
	// working at once, even before its sockets are closed.
	live, err := c.s.svc.LiveKeys(c.ctx, []string{c.principal.KeyID})
	if err != nil {
		if c.ctx.Err() == nil {
			c.s.logger.Warn("live: check key", "key", c.principal.KeyID, "err", err)
			c.operationError(id, errInternal)
		}
		return true
	}
	if !live[c.principal.KeyID] {
		c.closeWith(closeForbidden, "Forbidden: API key revoked")
		return false
	}
	c.startOp(id, payload)
	return true
}

func (c *conn) startOp(id string, payload json.RawMessage) {
	var params graphql.RawParams
	if err := json.Unmarshal(payload, &params); err != nil || params.Query == "" {
		c.operationError(id, fault.Invalid("", "payload must be {query, variables?, operationName?}"))
		return
	}
	ctx := graphql.StartOperationTrace(messaging.WithPrincipal(c.ctx, c.principal))
	rc, errs := c.s.exec.CreateOperationContext(ctx, &params)
	if errs != nil {
		resp := c.s.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		c.sendErrors(id, resp.Errors)
		return
	}
	if rc.Operation.Operation != ast.Subscription {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.subs[id] = nil // reserves the id until complete
		c.mu.Unlock()
		go c.execute(ctx, id, rc)
		return
	}
	s, err := c.subscribe(graphql.WithOperationContext(ctx, rc), id, rc)
	if err != nil {
		c.operationError(id, err)
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.stop()
		return
	}
	c.subs[id] = s
	c.mu.Unlock()
	go s.replay()
}

// execute runs a query or mutation and answers with one result.
func (c *conn) execute(ctx context.Context, id string, rc *graphql.OperationContext) {
	responses, ctx := c.s.exec.DispatchOperation(ctx, rc)
	resp := responses(ctx)
	c.mu.Lock()
	_, live := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if !live || resp == nil {
		return
	}
	if c.sendPayload(ctx, id, resp) {
		c.send(message{ID: id, Type: "complete"})
	}
}

// subscribe checks a subscription's root field and arguments and builds
// the subscriber.
func (c *conn) subscribe(ctx context.Context, id string, rc *graphql.OperationContext) (*sub, error) {
	fields := graphql.CollectFields(rc, rc.Operation.SelectionSet, []string{"Subscription"})
	if len(fields) != 1 {
		return nil, fault.Invalid("", "a subscription selects exactly one root field")
	}
	f := fields[0]
	args := f.ArgumentMap(rc.Variables)
	afterSeq, err := intArg(args, "afterSeq")
	if err != nil {
		return nil, err
	}
	q := messaging.EventQuery{AfterSeq: afterSeq, Limit: 1}
	if t, ok := args["type"].(string); ok {
		q.Type = t
	}
	if err := q.Validate(); err != nil {
		return nil, err // graph.Present names after_seq afterSeq
	}
	s := &sub{c: c, id: id, typ: q.Type, cursor: afterSeq}
	switch f.Name {
	case "events":
	case "eventBatches":
		n, err := intArg(args, "max")
		if err != nil {
			return nil, err
		}
		if n < 1 || n > 1000 {
			return nil, fault.Invalid("max", "must be between 1 and 1000")
		}
		s.batch = int(n)
	default:
		return nil, fault.Invalid("", "unknown subscription %s", f.Name)
	}
	s.shape = shapeOf(graphql.CollectFields(rc, f.Selections, []string{"Event"}))
	kind := "next"
	if c.legacy {
		kind = "data"
	}
	s.prefix = fmt.Appendf(nil, `{"id":%s,"type":"%s","payload":{"data":{%s:`, strconv.Quote(id), kind, strconv.Quote(f.Alias))
	s.suffix = []byte("}}}")
	s.key = frameKey{prefix: string(s.prefix), typ: s.typ, batch: s.batch}
	s.f = c.s.broker.join(c.principal.ProjectID)
	return s, nil
}

func shapeOf(fields []graphql.CollectedField) shape {
	sh := shape{full: len(fields) == 3}
	for i, f := range fields {
		sh.fields = append(sh.fields, selected{alias: f.Alias, name: f.Name})
		if f.Alias != f.Name || f.Name != [...]string{"seq", "type", "data"}[min(i, 2)] {
			sh.full = false
		}
	}
	return sh
}

func intArg(args map[string]any, name string) (int64, error) {
	switch v := args[name].(type) {
	case nil:
		return 0, nil
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case float64:
		return int64(v), nil
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return 0, fault.Invalid(name, "must be an integer")
		}
		return n, nil
	}
	return 0, fault.Invalid(name, "must be an integer")
}

func (c *conn) stopSub(id string) {
	c.mu.Lock()
	s := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// operationError reports a failed operation and forgets it.
func (c *conn) operationError(id string, err error) {
	c.sendErrors(id, gqlerror.List{graph.Present(c.ctx, err, c.s.logger)})
}

func (c *conn) sendErrors(id string, errs gqlerror.List) {
	var payload []byte
	if c.legacy {
		payload, _ = json.Marshal(map[string]any{"errors": errs})
		c.send(message{ID: id, Type: "error", Payload: payload})
		c.send(message{ID: id, Type: "complete"})
		return
	}
	payload, _ = json.Marshal(errs)
	c.send(message{ID: id, Type: "error", Payload: payload})
}

// sendPayload queues an operation's result, a data frame: it waits for
// room in the queue. false: the socket closed meanwhile.
func (c *conn) sendPayload(ctx context.Context, id string, resp *graphql.Response) bool {
	payload, err := json.Marshal(resp)
	if err != nil {
		c.operationError(id, errInternal)
		return true
	}
	kind := "next"
	if c.legacy {
		kind = "data"
	}
	b, _ := json.Marshal(message{ID: id, Type: kind, Payload: payload})
	b = textFrame(b)
	switch err := c.sendData(ctx, [][]byte{b}, nil, c.s.opts.BusyTimeout); err {
	case nil:
		return true
	case errBusy:
		c.s.logger.Info("live: a result found no room in the send budget", "ip", c.ip, "bytes", len(b))
		c.operationError(id, fault.RateLimited(0,
			"the server's send queues are full (%d bytes waiting on all sockets): the result (%d bytes) was not sent; try again shortly",
			c.s.budget.used.Load(), len(b)))
	}
	return false
}

// send queues a control message (connection_ack, pong, ka, complete,
// error). A socket whose control frames pass their cap, because its peer
// does not read them, is closed.
func (c *conn) send(m message) {
	b, _ := json.Marshal(m)
	c.sendControl(textFrame(b), false)
}

// sendControl queues a control message's frame (send), or (urgent) a
// websocket ping or pong.
func (c *conn) sendControl(b []byte, urgent bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.ctrlN > 0 && (c.ctrlN+1 > c.s.opts.ControlQueueFrames || c.ctrlBytes+len(b) > c.s.opts.ControlQueueBytes) {
		n, size := c.ctrlN, c.ctrlBytes
		c.mu.Unlock()
		c.s.logger.Info("live: closing a socket that does not read", "ip", c.ip, "control_frames", n, "control_bytes", size)
		c.kill(closeNotReading, fmt.Sprintf("Too many unread messages (%d control messages, %d bytes queued): read what you are sent", n, size))
		return
	}
	c.ctrlN++
	c.ctrlBytes += len(b)
	c.push(frame{b: b, size: len(b), ctrl: true}, urgent)
	c.mu.Unlock()
}

// fits reports whether data frames of size bytes may join the queue: they
// keep it within its bound, or the queue is empty (a frame larger than
// the bound goes alone). Called with c.mu held.
func (c *conn) fits(size int) bool {
	return c.queued == 0 || c.queued+size <= c.s.opts.MaxQueueBytes
}

// tryData queues data frames if they fit at once, in the socket's queue
// and in the server's budget; a live delivery that does not fit reports
// false and its subscriber pages from the database. It also steps aside
// while a producer waits for room.
func (c *conn) tryData(frames [][]byte) bool {
	size := sizeOf(frames)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return true // nobody is listening; the subscriber is being stopped
	}
	if c.waiting > 0 || !c.fits(size) || !c.s.budget.take(size) {
		return false
	}
	c.pushData(frames, size)
	return true
}

// sendReserved is sendData for frames read within reserved bytes already
// taken from the server's budget (waitRoom): they are queued at once when
// they fit in it, and the rest is given back; otherwise the reservation is
// given back and they wait as sendData's do.
func (c *conn) sendReserved(ctx context.Context, frames [][]byte, unless func() bool, reserved int) error {
	size := sizeOf(frames)
	c.mu.Lock()
	if !c.closed && size <= reserved && c.fits(size) {
		c.s.budget.give(reserved - size)
		if unless != nil && unless() {
			c.s.budget.give(size)
		} else {
			c.pushData(frames, size)
		}
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	c.s.budget.give(reserved)
	return c.sendData(ctx, frames, unless, 0)
}

// errClosed: the socket closed or the producer's context ended.
var errClosed = errors.New("closed")

// sendData queues data frames once they fit, waiting for the writer to make
// room in the socket's queue and, then, for room in the server's budget.
// unless, if not nil, is checked when they fit: true drops them (the
// subscription ended meanwhile). errClosed: the socket closed or ctx
// ended; errBusy: busyAfter (if positive) passed without room in the
// server's budget.
func (c *conn) sendData(ctx context.Context, frames [][]byte, unless func() bool, busyAfter time.Duration) error {
	size := sizeOf(frames)
	c.mu.Lock()
	defer c.mu.Unlock()
	var busy *time.Timer
	defer func() {
		if busy != nil {
			busy.Stop()
		}
	}()
	for {
		if c.closed {
			return errClosed
		}
		var ch <-chan struct{}
		global := false
		if !c.fits(size) {
			ch = c.room
		} else if c.s.budget.take(size) {
			break
		} else {
			ch, global = c.s.budget.wait(), true
			if c.s.budget.take(size) { // bytes given back before wait
				c.s.budget.done()
				break
			}
			if busyAfter > 0 && busy == nil {
				busy = time.NewTimer(busyAfter)
			}
		}
		var timeout <-chan time.Time
		if busy != nil && global { // only the server's budget gives up
			timeout = busy.C
		}
		c.waiting++
		c.mu.Unlock()
		timedOut := false
		select {
		case <-ch:
		case <-ctx.Done():
		case <-c.ctx.Done():
		case <-timeout:
			timedOut = true
		}
		if global {
			c.s.budget.done()
		}
		c.mu.Lock()
		c.waiting--
		if ctx.Err() != nil {
			return errClosed
		}
		if timedOut {
			return errBusy
		}
	}
	if unless != nil && unless() {
		c.s.budget.give(size)
		return nil
	}
	c.pushData(frames, size)
	return nil
}

func sizeOf(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	return n
}

// pushData queues data frames; called with c.mu held.
// The bytes are taken from the server's budget already.
func (c *conn) pushData(frames [][]byte, size int) {
	if c.queued == 0 {
		c.progress = time.Now()
	}
	c.queued += size
	if c.queued > c.s.hogBytes && c.fullSince.IsZero() {
		c.fullSince = time.Now()
	}
	for _, f := range frames {
		c.push(frame{b: f, size: len(f)}, false)
	}
}

// push writes a frame at once if no writer is running and the socket
// takes it without waiting (writeNow); otherwise it queues it, after the
// data and protocol messages queued before it, or (urgent: websocket pings
// and pongs) before them, and starts the writer. Called with c.mu held.
func (c *conn) push(f frame, urgent bool) {
	if !c.writing {
		n, held := c.writeNow(f.b)
		if n == len(f.b) {
			c.wrote(f)
			return
		}
		if held {
			f.b, f.held = f.b[n:], true
		}
	}
	if urgent && !f.held {
		c.urgent = append(c.urgent, f)
	} else {
		c.queue = append(c.queue, f)
	}
	if !c.writing {
		c.writing = true
		go c.flush()
	}
}

// wrote accounts for a frame written; called with c.mu held.
func (c *conn) wrote(f frame) {
	if f.ctrl {
		c.ctrlN--
		c.ctrlBytes -= f.size
		return
	}
	c.queued -= f.size
	c.s.budget.give(f.size)
	c.progress = time.Now()
	if c.queued <= c.s.hogBytes {
		c.fullSince = time.Time{}
	}
	if c.waiting > 0 {
		close(c.room)
		c.room = make(chan struct{})
	}
}

// flush writes the queued frames, urgent ones first (but never inside a
// frame written in part); it runs only while there is something to write.
// A frame counts against the bounds until it is written.
func (c *conn) flush() {
	var (
		q  []frame // taken from c.queue, in order
		qi int     // the next frame of q
	)
	c.mu.Lock()
	for {
		if qi == len(q) && len(c.queue) > 0 {
			q, c.queue, qi = c.queue, q[:0], 0 // the written array is reused
		}
		var f frame
		switch {
		case c.closed:
			if qi < len(q) && q[qi].held {
				// The rest of a frame written in part goes out first, so
				// that a close frame (writeClose waits for c.wmu) follows a
				// whole one; the watchdog bounds the write.
				f, q[qi] = q[qi], frame{}
				c.mu.Unlock()
				c.writeStart.Store(c.s.clock())
				c.nc.Write(f.b) //nolint:errcheck // closing anyway
				c.writeStart.Store(0)
				c.wmu.Unlock()
				c.mu.Lock()
			}
			c.writing = false
			c.mu.Unlock()
			return
		case qi < len(q) && q[qi].held:
			f, q[qi] = q[qi], frame{}
			qi++
		case len(c.urgent) > 0:
			f, c.urgent[0], c.urgent = c.urgent[0], frame{}, c.urgent[1:]
		case qi < len(q):
			f, q[qi] = q[qi], frame{}
			qi++
		default:
			c.writing = false
			c.urgent = nil
			if cap(c.queue) > 16 {
				c.queue = nil // an idle socket keeps no large array
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if !f.held {
			c.wmu.Lock() // held at most a second by writeClose, or by this goroutine
			if c.wclosed.Load() {
				c.wmu.Unlock()
				c.mu.Lock()
				c.writing = false
				c.mu.Unlock()
				return
			}
		}
		// No deadline is set per write (it would move a runtime timer for
		// every frame): the server's watchdog ends a write that takes
		// longer than WriteTimeout (Server.expireWrites).
		c.writeStart.Store(c.s.clock())
		_, err := c.nc.Write(f.b)
		c.writeStart.Store(0)
		c.wmu.Unlock()
		if err != nil {
			c.mu.Lock()
			closed := c.closed
			c.writing = false
			c.mu.Unlock()
			if !closed {
				// Mostly a peer that stopped reading: a write stalled
				// for WriteTimeout with the queue at its bound.
				c.s.logger.Info("live: closing a socket whose writes fail", "ip", c.ip, "err", err)
				c.closeWith(closeNotReading, "Write timed out: read what you are sent")
			}
			return
		}
		c.mu.Lock()
		if !c.closed {
			c.wrote(f)
		}
	}
}

// minReplayRoom is the room in the server's budget a replay waits for
// before it reads a page (or the room in the socket's queue, if less).
const minReplayRoom = 64 << 10

// waitRoom waits until the queue is at most half full and the server's
// budget has room for a page, and returns the room left in both, taken
// from the server's budget (the caller gives it back or queues frames with
// it, see sendReserved); -1 once the socket closed or ctx ended.
func (c *conn) waitRoom(ctx context.Context) int {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return -1
		}
		if c.queued <= c.s.opts.MaxQueueBytes/2 {
			room := c.s.opts.MaxQueueBytes - c.queued
			c.mu.Unlock()
			b := c.s.budget
			if free := b.free(); free >= int64(min(room, minReplayRoom)) || b.used.Load() == 0 {
				if n := int(min(int64(room), max(free, 1))); b.take(n) {
					return n
				}
				continue
			}
			ch := b.wait()
			if free := b.free(); free < int64(min(room, minReplayRoom)) && b.used.Load() != 0 {
				select {
				case <-ch:
				case <-ctx.Done():
				}
			}
			b.done()
			if ctx.Err() != nil {
				return -1
			}
			continue
		}
		ch := c.room
		c.waiting++
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
		if ctx.Err() != nil {
			return -1
		}
	}
}

func (c *conn) ping() {
	c.sendControl(controlFrame(websocket.PingMessage, nil), true)
	if c.legacy {
		c.mu.Lock()
		acked := c.acked
		c.mu.Unlock()
		if acked {
			c.send(message{Type: "ka"})
		}
	}
}

// closeWith sends a close frame with code and text, then shuts down.
func (c *conn) closeWith(code int, text string) {
	c.writeClose(code, text)
	c.shutdown()
}

// kill is closeWith without blocking the caller: nothing more is queued or
// delivered from now on; the close frame is written and the socket closed
// on a goroutine of its own.
func (c *conn) kill(code int, text string) {
	if c.stopAll() {
		go func() {
			c.writeClose(code, text)
			c.ws.Close()
		}()
	}
}

// shutdown stops every subscription and closes the socket; idempotent.
func (c *conn) shutdown() {
	c.stopAll()
	c.ws.Close()
}

// stopAll marks the socket closed and stops its subscriptions; false if it
// was closed already.
func (c *conn) stopAll() bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.closed = true
	subs := c.subs
	c.subs = nil
	if len(c.queue) > 0 && c.queue[0].held {
		c.queue = c.queue[:1] // the rest of a frame written in part: flush finishes it
	} else {
		c.queue = nil
	}
	c.urgent = nil
	c.s.budget.give(c.queued) // frames not written (or being written) are dropped
	c.queued = 0
	close(c.room)
	c.mu.Unlock()
	c.cancel()
	for _, s := range subs {
		if s != nil {
			s.stop()
		}
	}
	return true
}

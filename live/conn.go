package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

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
)

const writeTimeout = 10 * time.Second

var errInternal = &messaging.Error{Code: "internal_error", Message: "internal error"}

// message is a protocol message of either protocol.
type message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// conn is one socket.
type conn struct {
	s         *Server
	ws        *websocket.Conn
	legacy    bool
	headerKey string
	ctx       context.Context
	cancel    context.CancelFunc
	principal *messaging.Principal // set by connection_init (reader only)
	initTimer *time.Timer

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	writing bool
	closed  bool
	room    chan struct{} // closed whenever the queue is taken for writing
	subs    map[string]*sub
	acked   bool
}

func newConn(s *Server, ws *websocket.Conn, r *http.Request) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s: s, ws: ws, legacy: ws.Subprotocol() == ProtocolLegacy,
		ctx: ctx, cancel: cancel, room: make(chan struct{}), subs: map[string]*sub{},
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
			c.operationError(m.ID, &messaging.Error{Code: messaging.ErrRateLimited.Code,
				Message: fmt.Sprintf("at most %d operations per connection", c.s.opts.MaxSubscriptions)})
			return true
		}
		c.start(m.ID, m.Payload)
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
		var e *messaging.Error
		if errors.As(err, &e) {
			return nil, errors.New(e.Message)
		}
		return nil, errors.New("authentication failed")
	}
	return p, nil
}

// start runs an operation: a subscription natively, anything else through
// the GraphQL executor.
func (c *conn) start(id string, payload json.RawMessage) {
	var params graphql.RawParams
	if err := json.Unmarshal(payload, &params); err != nil || params.Query == "" {
		c.operationError(id, &messaging.Error{Code: messaging.ErrInvalid.Code, Message: "payload must be {query, variables?, operationName?}"})
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
	c.sendPayload(id, resp)
	c.send(message{ID: id, Type: "complete"})
}

// subscribe checks a subscription's root field and arguments and builds
// the subscriber.
func (c *conn) subscribe(ctx context.Context, id string, rc *graphql.OperationContext) (*sub, error) {
	fields := graphql.CollectFields(rc, rc.Operation.SelectionSet, []string{"Subscription"})
	if len(fields) != 1 {
		return nil, &messaging.Error{Code: messaging.ErrInvalid.Code, Message: "a subscription selects exactly one root field"}
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
		var e *messaging.Error
		if errors.As(err, &e) && e.Param == "after_seq" {
			e.Param = "afterSeq"
		}
		return nil, err
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
			return nil, messaging.Invalid("max", "must be between 1 and 1000")
		}
		s.batch = int(n)
	default:
		return nil, &messaging.Error{Code: messaging.ErrInvalid.Code, Message: "unknown subscription " + f.Name}
	}
	s.shape = shapeOf(graphql.CollectFields(rc, f.Selections, []string{"Event"}))
	kind := "next"
	if c.legacy {
		kind = "data"
	}
	s.prefix = fmt.Appendf(nil, `{"id":%s,"type":"%s","payload":{"data":{%s:`, strconv.Quote(id), kind, strconv.Quote(f.Alias))
	s.suffix = []byte("}}}")
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
			return 0, messaging.Invalid(name, "must be an integer")
		}
		return n, nil
	}
	return 0, messaging.Invalid(name, "must be an integer")
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

func (c *conn) sendPayload(id string, resp *graphql.Response) {
	payload, err := json.Marshal(resp)
	if err != nil {
		c.operationError(id, errInternal)
		return
	}
	kind := "next"
	if c.legacy {
		kind = "data"
	}
	c.send(message{ID: id, Type: kind, Payload: payload})
}

func (c *conn) send(m message) {
	b, _ := json.Marshal(m)
	c.enqueue([][]byte{b}, true)
}

// enqueue queues frames for the writer. Unless forced, it refuses frames
// that would pass the queue's bound.
func (c *conn) enqueue(frames [][]byte, force bool) bool {
	size := 0
	for _, f := range frames {
		size += len(f)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return true // nobody is listening; the subscriber is being stopped
	}
	if !force && c.queued+size > c.s.opts.MaxQueueBytes {
		return false
	}
	c.queue = append(c.queue, frames...)
	c.queued += size
	if !c.writing {
		c.writing = true
		go c.flush()
	}
	return true
}

// flush writes the queue; it runs only while there is something to write.
func (c *conn) flush() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.closed {
			c.writing = false
			c.mu.Unlock()
			return
		}
		q := c.queue
		c.queue, c.queued = nil, 0
		close(c.room)
		c.room = make(chan struct{})
		c.mu.Unlock()
		for _, f := range q {
			c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, f); err != nil {
				c.shutdown()
				return
			}
		}
	}
}

// waitRoom waits until the queue is at most half full.
func (c *conn) waitRoom(ctx context.Context) bool {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return false
		}
		if c.queued <= c.s.opts.MaxQueueBytes/2 {
			c.mu.Unlock()
			return true
		}
		ch := c.room
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (c *conn) ping() {
	c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout))
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
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.shutdown()
}

// shutdown stops every subscription and closes the socket; idempotent.
func (c *conn) shutdown() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	subs := c.subs
	c.subs = nil
	close(c.room)
	c.mu.Unlock()
	c.cancel()
	for _, s := range subs {
		if s != nil {
			s.stop()
		}
	}
	c.ws.Close()
}

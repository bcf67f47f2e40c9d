package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// MessageHandler handles one inbound message (a message.received event).
type MessageHandler func(ctx context.Context, m *InboundMessage) error

// EventHandler handles one event of the stream.
type EventHandler func(ctx context.Context, e *Event) error

// InboundMessage is a message a person sent to the agent: the spec's
// message object of message.received plus its scope.
type InboundMessage struct {
	// ID identifies the message; reply and typing calls take it.
	ID             string
	ConversationID string
	ConnectionID   string
	// Channel is the source channel: email, slack, telegram, test ...
	Channel string
	// Sender is the channel-native sender: address, user id, number ...
	Sender string
	// Subject and HTML are empty on channels that carry none.
	Subject string
	Text    string
	HTML    string
	// Attachments and Details are set on channels that have them (email),
	// as in Message; Client.Attachment downloads an attachment.
	Attachments []AttachmentInfo
	Details     json.RawMessage
	// CustomerID and AgentID are the connection's tenant scope.
	CustomerID string
	AgentID    string
	// Event is the message.received event the message came in.
	Event *Event

	client *Client
	typing *typingLoop
}

// Reply answers the message with text in its conversation. Within Listen
// it first stops the typing indicator, so that the indicator cannot
// reappear after the reply.
func (m *InboundMessage) Reply(ctx context.Context, text string) error {
	_, err := m.ReplyWith(ctx, ReplyRequest{Text: text})
	return err
}

// ReplyHTML answers with an HTML body and its plain-text alternative, on
// channels that carry HTML (email); others send text.
func (m *InboundMessage) ReplyHTML(ctx context.Context, text, html string) error {
	_, err := m.ReplyWith(ctx, ReplyRequest{Text: text, HTML: html})
	return err
}

// ReplyWith answers with a full reply request and returns the queued
// reply.
func (m *InboundMessage) ReplyWith(ctx context.Context, in ReplyRequest) (*Message, error) {
	if m.client == nil {
		return nil, errors.New("comm: reply: message not bound to a client (use Client.MessageOf)")
	}
	if m.typing != nil {
		m.typing.stop()
	}
	return m.client.Reply(ctx, m.ID, in)
}

// MessageOf returns the inbound message of a message.received event (from
// Events or a push delivery), bound to c so that its Reply works.
func (c *Client) MessageOf(e *Event) (*InboundMessage, error) {
	if e.Type != EventMessageReceived {
		return nil, fmt.Errorf("comm: event %d is %s, not %s", e.Seq, e.Type, EventMessageReceived)
	}
	var d MessageEvent
	if err := e.Decode(&d); err != nil {
		return nil, err
	}
	mm := d.Message
	m := &InboundMessage{
		ID: mm.ID, ConversationID: mm.ConversationID, ConnectionID: mm.ConnectionID, Channel: mm.Channel,
		Sender: mm.Sender, Text: mm.Text, Attachments: mm.Attachments, Details: mm.Details,
		CustomerID: d.CustomerID, AgentID: d.AgentID, Event: e, client: c,
	}
	if mm.Subject != nil {
		m.Subject = *mm.Subject
	}
	if mm.HTML != nil {
		m.HTML = *mm.HTML
	}
	if m.ID == "" {
		return nil, fmt.Errorf("comm: event %d: message without an id", e.Seq)
	}
	return m, nil
}

// Listen defaults.
const (
	DefaultPollInterval = time.Second
	DefaultLongPoll     = 25 * time.Second
	DefaultConcurrency  = 8
	DefaultTypingEvery  = 5 * time.Second
	DefaultGrace        = 30 * time.Second
	DefaultSocketRetry  = 5 * time.Second
)

// StartAtHead, given to WithStartSeq, starts a listener without a saved
// cursor at the stream's head: only events from now on.
const StartAtHead int64 = -1

type listenConfig struct {
	interval    time.Duration
	wait        time.Duration
	batch       int
	concurrency int
	typingEvery time.Duration
	handlers    map[string]EventHandler
	onError     func(*Event, error)
	logger      *slog.Logger
	store       CursorStore
	cursorFile  string
	noStore     bool
	startSeq    int64
	websocket   bool
	socketRetry time.Duration
	socketPing  time.Duration
	grace       time.Duration
}

// ListenOption configures Listen.
type ListenOption func(*listenConfig)

// WithPollInterval sets the least time between two polls that found
// nothing new, and the first delay after a failed poll (default 1 s).
func WithPollInterval(d time.Duration) ListenOption {
	return func(c *listenConfig) { c.interval = d }
}

// WithLongPoll sets how long the gateway may hold a poll while there is
// nothing new (the wait parameter; default 25 s, at most 60 s): a new
// event is received as soon as it commits. 0 turns long polling off: then
// Listen polls every poll interval.
func WithLongPoll(wait time.Duration) ListenOption {
	return func(c *listenConfig) { c.wait = min(max(wait, 0), MaxWait) }
}

// WithBatchSize sets the page size of polls (default 100, at most 1000).
func WithBatchSize(n int) ListenOption { return func(c *listenConfig) { c.batch = min(n, 1000) } }

// WithConcurrency bounds the handlers running at once (default 8).
// Handlers run one at a time, in seq order, within a conversation, and in
// parallel across conversations; events that belong to no conversation
// are handled in order among themselves.
func WithConcurrency(n int) ListenOption { return func(c *listenConfig) { c.concurrency = max(n, 1) } }

// WithTypingInterval sets how often the typing indicator is refreshed
// while the message handler runs (default 5 s; the gateway shows it for
// 10 s per call). 0 turns the indicator off.
func WithTypingInterval(d time.Duration) ListenOption {
	return func(c *listenConfig) { c.typingEvery = max(d, 0) }
}

// WithoutTyping turns the typing indicator off.
func WithoutTyping() ListenOption { return WithTypingInterval(0) }

// WithEventHandler handles events of type typ (e.g. "message.sent",
// "connection.active"). typ "" handles every type without a handler of its
// own (message.received included when Listen's message handler is nil).
// Without event handlers, Listen asks the gateway for message.received
// only.
func WithEventHandler(typ string, fn EventHandler) ListenOption {
	return func(c *listenConfig) {
		if c.handlers == nil {
			c.handlers = map[string]EventHandler{}
		}
		c.handlers[typ] = fn
	}
}

// WithErrorHandler receives what goes wrong without stopping Listen: a
// handler's error or panic (*PanicError) with its event, and (with a nil
// event) failed polls, dropped sockets and failed cursor saves. It is
// called from several goroutines. Without it, these are logged.
func WithErrorHandler(fn func(e *Event, err error)) ListenOption {
	return func(c *listenConfig) { c.onError = fn }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ListenOption { return func(c *listenConfig) { c.logger = l } }

// WithCursorStore keeps the cursor in s instead of the default file.
func WithCursorStore(s CursorStore) ListenOption {
	return func(c *listenConfig) { c.store, c.noStore = s, s == nil }
}

// WithCursorFile keeps the cursor in the file at path instead of
// DefaultCursorFile (see FileCursorStore).
func WithCursorFile(path string) ListenOption {
	return func(c *listenConfig) { c.store, c.cursorFile, c.noStore = nil, path, false }
}

// WithoutCursorStore keeps the cursor in memory only: each run starts at
// WithStartSeq.
func WithoutCursorStore() ListenOption {
	return func(c *listenConfig) { c.store, c.noStore = nil, true }
}

// WithStartSeq sets where a listener without a saved cursor starts: after
// seq (default 0: the whole stream), or at the stream's head with
// StartAtHead. The start is saved at once, so a restart continues from it
// (a saved cursor of 0 counts as none).
func WithStartSeq(seq int64) ListenOption { return func(c *listenConfig) { c.startSeq = seq } }

// WithWebsocket follows the stream over the GraphQL subscription
// (graphql-transport-ws on ws(s)://<base>/graphql) instead of polling.
// When the socket cannot be opened or drops, Listen polls and tries the
// socket again after the retry delay, doubling up to 16 times it while
// it keeps failing (default 5 s).
func WithWebsocket() ListenOption { return func(c *listenConfig) { c.websocket = true } }

// WithWebsocketRetry sets the delay before the socket is tried again
// after it failed (default 5 s).
func WithWebsocketRetry(d time.Duration) ListenOption {
	return func(c *listenConfig) { c.socketRetry = d }
}

// WithShutdownGrace sets how long running handlers may take to finish
// once Listen's context is done (default 30 s); their context is canceled
// after it.
func WithShutdownGrace(d time.Duration) ListenOption { return func(c *listenConfig) { c.grace = d } }

// Listen follows the project's event stream and calls handler for every
// inbound message, until ctx is done or a permanent error (a revoked key,
// say) occurs. It returns ctx's error after a stop, or the permanent
// error.
//
// As the spec describes, it polls GET /v1/events (as a long poll, so a
// new event arrives as soon as it commits; or over a websocket with
// WithWebsocket), manages its own cursor, deduplicates within a run, shows
// a typing indicator while the handler runs on a message, dispatches
// message.received to handler (other types to WithEventHandler), and
// continues after a handler's error or panic, which it reports
// (WithErrorHandler) and counts as handled. Transient failures are
// retried with backoff, forever.
//
// Ordering: handlers run in seq order within a conversation, one at a
// time, and in parallel across conversations (WithConcurrency).
//
// Cursor: the cursor is saved (by default in DefaultCursorFile) only past
// events whose handlers have finished, and never past an unfinished one,
// even when later events of other conversations finished earlier; a
// restarted listener resumes from it. On a stop (ctx done), Listen starts
// no event beyond the highest one already started, finishes the ones below
// it, waits up to the shutdown grace for running handlers, and saves: so
// no event is skipped and none is handled twice across a stop and
// restart. Processing is at-least-once, not exactly-once, when a stop is
// not clean: if the process dies, or a handler fails after the grace
// period canceled its context, the events after the saved cursor are
// handled again by the next run, including some whose handlers had
// finished. For exactly-once effects, make handlers idempotent (the
// message ID is stable) or save the cursor in the same transaction as the
// handler's effects with a CursorStore of your own.
func (c *Client) Listen(ctx context.Context, handler MessageHandler, opts ...ListenOption) error {
	cfg := listenConfig{
		interval: DefaultPollInterval, wait: DefaultLongPoll, batch: 100, concurrency: DefaultConcurrency,
		typingEvery: DefaultTypingEvery, logger: slog.Default(), grace: DefaultGrace,
		socketRetry: DefaultSocketRetry, socketPing: 15 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.interval <= 0 {
		cfg.interval = DefaultPollInterval
	}
	if cfg.batch <= 0 {
		cfg.batch = 100
	}
	if cfg.socketRetry <= 0 {
		cfg.socketRetry = DefaultSocketRetry
	}
	if handler == nil && cfg.handlers == nil {
		return errors.New("comm: listen: no handler")
	}
	l := &listener{c: c, cfg: cfg, handler: handler, lanes: map[string]*lane{},
		sem: make(chan struct{}, cfg.concurrency), stopCh: make(chan struct{}),
		saveKick: make(chan struct{}, 1), seen: map[string]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	if len(cfg.handlers) == 0 {
		l.typeFilter = EventMessageReceived
	}
	return l.run(ctx)
}

// listener is one run of Listen.
type listener struct {
	c          *Client
	cfg        listenConfig
	handler    MessageHandler
	typeFilter string
	store      CursorStore
	hctx       context.Context // handlers' context: outlives ctx by the grace
	hcancel    context.CancelFunc
	sem        chan struct{}
	wg         sync.WaitGroup
	stopCh     chan struct{}
	stopOnce   sync.Once
	saveKick   chan struct{}

	mu       sync.Mutex
	cond     *sync.Cond
	pending  []*item // accepted and not yet behind the cursor, in seq order
	accepted int64   // the highest seq accepted: where fetching continues
	cursor   int64   // every event up to it is finished
	inFlight int     // accepted and not finished
	lanes    map[string]*lane
	started  int64 // the highest seq whose handler started
	stopping bool
	frozen   int64 // at a stop, the highest seq that may still start
	seen     map[string]struct{}
	seenRing []string
}

// item is one accepted event.
type item struct {
	ev   Event
	key  string // ordering key: the conversation
	msg  *InboundMessage
	done bool
}

// lane holds the events of one conversation that wait for their turn.
type lane struct{ items []*item }

// maxSeen bounds the message ids remembered for deduplication.
const maxSeen = 4096

// maxPending bounds the events held behind an unfinished one (those
// without a handler included): fetching waits beyond it.
const maxPending = 1024

func (l *listener) run(ctx context.Context) error {
	proj, err := l.retry(ctx, func() (*Project, error) { return l.c.Project(ctx) })
	if err != nil {
		return err
	}
	switch {
	case l.cfg.store != nil:
		l.store = l.cfg.store
	case !l.cfg.noStore:
		path := l.cfg.cursorFile
		if path == "" {
			path = DefaultCursorFile
		}
		l.store = &FileCursorStore{Path: path, ProjectID: proj.ID}
	}
	var cursor int64
	if l.store != nil {
		if cursor, err = l.store.Load(ctx); err != nil {
			return fmt.Errorf("comm: listen: load cursor: %w", err)
		}
	}
	fresh := cursor == 0 && l.cfg.startSeq != 0
	if fresh {
		cursor = l.cfg.startSeq
		if cursor < 0 {
			cursor = proj.LastSeq
		}
	}
	if cursor > proj.LastSeq {
		return fmt.Errorf("comm: listen: cursor %d is ahead of project %s's stream, whose last seq is %d: "+
			"the cursor belongs to another project or database", cursor, proj.ID, proj.LastSeq)
	}
	if fresh && l.store != nil && cursor > 0 {
		if err := l.store.Save(ctx, cursor); err != nil {
			return fmt.Errorf("comm: listen: save cursor: %w", err)
		}
	}
	l.cursor, l.accepted = cursor, cursor

	l.hctx, l.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	defer l.hcancel()
	stopWatch := context.AfterFunc(ctx, l.stop)
	defer stopWatch()
	saverDone := make(chan struct{})
	saverCtx, stopSaver := context.WithCancel(context.Background())
	go func() { defer close(saverDone); l.saver(saverCtx, cursor) }()

	err = l.follow(ctx)
	l.stop()
	l.wg.Wait()
	stopSaver()
	<-saverDone
	if err != nil {
		return err
	}
	return ctx.Err()
}

// retry calls fn until it succeeds, fails permanently or ctx ends.
func (l *listener) retry(ctx context.Context, fn func() (*Project, error)) (*Project, error) {
	for n := 0; ; n++ {
		p, err := fn()
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if permanent(err) {
			return nil, fmt.Errorf("comm: listen: %w", err)
		}
		l.report(nil, fmt.Errorf("comm: listen: %w", err))
		if !sleep(ctx, l.pollBackoff(n)) {
			return nil, ctx.Err()
		}
	}
}

// permanent reports whether repeating a failed request cannot help: an
// error answer of 4xx other than 408 and 429.
func permanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 &&
		e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}

// pollBackoff is the delay after the n-th consecutive failure (0-based).
func (l *listener) pollBackoff(n int) time.Duration {
	return backoff{first: l.cfg.interval, limit: max(30*time.Second, l.cfg.interval)}.delay(n)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// follow fetches events into the dispatcher until ctx ends, the listener
// stops, or a permanent error.
func (l *listener) follow(ctx context.Context) error {
	var (
		failures     int
		socketFails  int
		socketNextAt time.Time
	)
	for ctx.Err() == nil && !l.isStopping() {
		if l.cfg.websocket && !time.Now().Before(socketNextAt) {
			up, err := l.followSocket(ctx)
			if ctx.Err() != nil || l.isStopping() {
				return nil
			}
			if permanent(err) {
				return fmt.Errorf("comm: listen: %w", err)
			}
			if up >= 30*time.Second {
				socketFails = 0
			}
			retry := l.cfg.socketRetry << min(socketFails, 4)
			socketFails++
			socketNextAt = time.Now().Add(retry)
			l.report(nil, fmt.Errorf("comm: listen: websocket: %w; polling, socket again in %v", err, retry))
			continue
		}
		wait := l.cfg.wait
		if l.cfg.websocket {
			wait = min(wait, time.Until(socketNextAt))
		}
		began := time.Now()
		l.mu.Lock()
		after := l.accepted
		l.mu.Unlock()
		evs, err := l.c.EventsWait(ctx, after, l.cfg.batch, l.typeFilter, wait)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if permanent(err) {
				return fmt.Errorf("comm: listen: %w", err)
			}
			l.report(nil, fmt.Errorf("comm: listen: %w", err))
			sleep(ctx, l.pollBackoff(failures))
			failures++
			continue
		}
		failures = 0
		fresh := 0
		for i := range evs {
			isNew, ok := l.accept(evs[i])
			if !ok {
				return nil
			}
			if isNew {
				fresh++
			}
		}
		// Pace the polls when there was nothing new (the long poll ran
		// out, or the page repeated what was already received), and
		// without long polling unless a full page says more is waiting.
		if fresh == 0 || (wait <= 0 && len(evs) < l.cfg.batch) {
			sleep(ctx, l.cfg.interval-time.Since(began))
		}
	}
	return nil
}

func (l *listener) isStopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping
}

// stop ends fetching: no event beyond the highest started one will start,
// and handlers get the grace period.
func (l *listener) stop() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.stopping = true
		l.frozen = l.started
		l.cond.Broadcast()
		l.mu.Unlock()
		close(l.stopCh)
		time.AfterFunc(l.cfg.grace, l.hcancel)
	})
}

// accept hands an event to the dispatcher, in seq order; it blocks while
// too many events are in flight. fresh is false for a repeat of an event
// already accepted; ok is false once the listener stops.
func (l *listener) accept(ev Event) (fresh, ok bool) {
	it := &item{ev: ev}
	if ev.Type == EventMessageReceived || ev.Type == EventMessageSent || ev.Type == EventMessageFailed {
		var d MessageEvent
		if ev.Decode(&d) == nil {
			it.key = "conv:" + d.Message.ConversationID
		}
	}
	h := l.handlerFor(ev.Type)
	if h == nil && (ev.Type != EventMessageReceived || l.handler == nil) {
		it.done = true // nobody wants it
	}
	if !it.done && ev.Type == EventMessageReceived && l.handler != nil {
		m, err := l.c.MessageOf(&it.ev)
		if err != nil {
			l.report(&it.ev, err)
			it.done = true
		}
		it.msg = m
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Seq <= l.accepted {
		return false, !l.stopping // a repeat within this run
	}
	for (l.inFlight >= l.maxInFlight() || len(l.pending) >= maxPending) && !l.stopping {
		l.cond.Wait()
	}
	if l.stopping {
		return false, false
	}
	if it.msg != nil {
		if _, dup := l.seen[it.msg.ID]; dup {
			it.done, it.msg = true, nil
		} else {
			l.remember(it.msg.ID)
		}
	}
	l.accepted = ev.Seq
	l.pending = append(l.pending, it)
	if it.done {
		l.advance()
		return true, true
	}
	l.inFlight++
	if ln, found := l.lanes[it.key]; found {
		ln.items = append(ln.items, it)
		return true, true
	}
	ln := &lane{items: []*item{it}}
	l.lanes[it.key] = ln
	l.wg.Add(1)
	go l.runLane(it.key, ln)
	return true, true
}

func (l *listener) maxInFlight() int { return max(4*l.cfg.concurrency, 16) }

func (l *listener) remember(id string) {
	l.seen[id] = struct{}{}
	l.seenRing = append(l.seenRing, id)
	if len(l.seenRing) > maxSeen {
		delete(l.seen, l.seenRing[0])
		l.seenRing = l.seenRing[1:]
	}
}

// handlerFor returns the event handler of a type; nil for
// message.received when the message handler takes it.
func (l *listener) handlerFor(typ string) EventHandler {
	if typ == EventMessageReceived && l.handler != nil {
		return nil
	}
	if h, ok := l.cfg.handlers[typ]; ok {
		return h
	}
	return l.cfg.handlers[""]
}

// runLane runs a conversation's events one after another, holding one of
// the concurrency slots.
func (l *listener) runLane(key string, ln *lane) {
	defer l.wg.Done()
	if !l.acquire(ln) {
		l.mu.Lock()
		delete(l.lanes, key)
		l.mu.Unlock()
		return
	}
	defer func() { <-l.sem }()
	for {
		l.mu.Lock()
		if len(ln.items) == 0 || (l.stopping && (ln.items[0].ev.Seq > l.frozen || l.hctx.Err() != nil)) {
			delete(l.lanes, key)
			l.mu.Unlock()
			return
		}
		it := ln.items[0]
		ln.items = ln.items[1:]
		l.started = max(l.started, it.ev.Seq)
		l.mu.Unlock()
		l.finish(it, l.handle(it))
	}
}

// acquire takes a concurrency slot; after a stop only for a lane that
// still has an event to finish.
func (l *listener) acquire(ln *lane) bool {
	select {
	case l.sem <- struct{}{}:
		return true
	case <-l.stopCh:
	}
	l.mu.Lock()
	run := len(ln.items) > 0 && ln.items[0].ev.Seq <= l.frozen
	l.mu.Unlock()
	if !run {
		return false
	}
	select {
	case l.sem <- struct{}{}:
		return true
	case <-l.hctx.Done():
		return false
	}
}

// handle runs the event's handler; false means it was interrupted by the
// end of the grace period and must not count as handled.
func (l *listener) handle(it *item) bool {
	ctx := l.hctx
	var err error
	if it.msg != nil {
		m := *it.msg
		if l.cfg.typingEvery > 0 {
			m.typing = l.startTyping(ctx, m.ID)
			defer m.typing.stop()
		}
		err = callSafely(ctx, &m, l.handler)
	} else if h := l.handlerFor(it.ev.Type); h != nil {
		ev := it.ev
		err = callSafely(ctx, &ev, h)
	}
	if err == nil {
		return true
	}
	l.report(&it.ev, err)
	return ctx.Err() == nil
}

// finish marks an event handled (or interrupted) and moves the cursor over
// the finished prefix.
func (l *listener) finish(it *item, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	it.done = ok
	l.inFlight--
	l.advance()
	l.cond.Broadcast()
}

// advance moves the cursor over finished events. Called with mu held.
func (l *listener) advance() {
	moved := false
	for len(l.pending) > 0 && l.pending[0].done {
		l.cursor = l.pending[0].ev.Seq
		l.pending[0] = nil
		l.pending = l.pending[1:]
		moved = true
	}
	if moved {
		select {
		case l.saveKick <- struct{}{}:
		default:
		}
	}
}

// saver saves the cursor whenever it moved, one save at a time (saves
// coalesce), and once more at the end.
func (l *listener) saver(ctx context.Context, saved int64) {
	save := func() {
		l.mu.Lock()
		cur := l.cursor
		l.mu.Unlock()
		if cur == saved || l.store == nil {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.store.Save(sctx, cur); err != nil {
			l.report(nil, fmt.Errorf("comm: listen: save cursor: %w", err))
			return
		}
		saved = cur
	}
	for {
		select {
		case <-l.saveKick:
			save()
		case <-ctx.Done():
			save()
			return
		}
	}
}

func (l *listener) report(e *Event, err error) {
	if l.cfg.onError != nil {
		l.cfg.onError(e, err)
		return
	}
	if e != nil {
		l.cfg.logger.Error("comm: handler failed", "seq", e.Seq, "type", e.Type, "err", err)
		return
	}
	l.cfg.logger.Warn("comm: listen", "err", err)
}

// typingLoop shows the typing indicator until stopped.
type typingLoop struct {
	stopCh   chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func (l *listener) startTyping(ctx context.Context, messageID string) *typingLoop {
	t := &typingLoop{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-t.stopCh:
				return
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			select { // stop wins over a due refresh
			case <-t.stopCh:
				return
			default:
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := l.c.Typing(tctx, messageID)
			cancel()
			if err != nil && ctx.Err() == nil {
				l.cfg.logger.Debug("comm: typing indicator", "message", messageID, "err", err)
				if permanent(err) {
					return
				}
			}
			timer.Reset(l.cfg.typingEvery)
		}
	}()
	return t
}

// stop ends the loop and waits for a typing call in flight, so that it
// cannot land after a reply.
func (t *typingLoop) stop() {
	t.stopOnce.Do(func() { close(t.stopCh) })
	<-t.done
}

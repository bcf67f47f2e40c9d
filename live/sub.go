package live

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/stream"
)

// replayPage is how many events a replaying subscriber reads at a time, at
// most; a page also stops at the room left in the socket's queue (and the
// log's page budget).
const replayPage = 500

// sub is one subscription to a project's events.
type sub struct {
	c     *conn
	id    string
	f     *feed
	typ   string
	batch int // events per message for eventBatches; 0 for events
	shape shape
	// prefix and suffix frame an event (or batch) as a protocol message.
	prefix, suffix []byte
	// key says which subscribers frame events alike (sharedFrames).
	key frameKey

	mu     sync.Mutex
	cursor int64 // last seq given to the socket, or scanned past
	done   atomic.Bool
}

// deliver frames the events after the cursor that match the filter and
// queues them on the socket, without blocking. It reports false when the
// socket's queue is full: the caller then leaves the subscriber to replay.
// Called by the feed with the feed's lock held.
func (s *sub) deliver(envs []stream.Envelope, shared *sharedFrames) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done.Load() {
		return true
	}
	var frames [][]byte
	if s.shape.full && s.cursor < envs[0].Seq {
		// Framed as others are: once for all of them.
		frames = shared.get(s, envs)
	} else {
		frames = s.frames(envs)
	}
	if len(frames) > 0 && !s.c.tryData(frames) {
		return false
	}
	s.cursor = max(s.cursor, envs[len(envs)-1].Seq)
	return true
}

// sharedFrames holds the frames of one distribution (feed.distribute)
// for the subscribers that frame every event the same way: the same
// operation id and root field (prefix), the whole envelope as it is
// (shape.full), the same filter and batch size, and a cursor before the
// first event. Most subscribers of a project are alike, so an event is
// framed once per kind of subscriber rather than once per socket; frames
// are never changed once built, and the sockets' queues share them.
type sharedFrames struct {
	// Usually one kind or a few: compared in turn (a map would hash the
	// prefix for every subscriber).
	keys   []frameKey
	frames [][][]byte
}

type frameKey struct {
	prefix, typ string
	batch       int
}

func (sf *sharedFrames) get(s *sub, envs []stream.Envelope) [][]byte {
	for i := range sf.keys {
		if sf.keys[i] == s.key {
			return sf.frames[i]
		}
	}
	f := s.frames(envs)
	if len(sf.keys) < maxSharedKinds {
		sf.keys = append(sf.keys, s.key)
		sf.frames = append(sf.frames, f)
	}
	return f
}

// maxSharedKinds bounds the kinds of subscriber a distribution shares
// frames among (and the comparisons per subscriber); others frame their
// own.
const maxSharedKinds = 8

// frames turns the events after the cursor into protocol messages, as
// websocket frames (wire.go).
func (s *sub) frames(envs []stream.Envelope) [][]byte {
	var (
		out  [][]byte
		cur  []byte
		inB  int
		last = s.cursor
	)
	for _, e := range envs {
		if e.Seq <= last || (s.typ != "" && e.Type != s.typ) {
			continue
		}
		last = e.Seq
		if s.batch == 0 {
			b := append(newFrame(len(s.prefix)+len(e.Body)+len(s.suffix)+16), s.prefix...)
			b = s.shape.appendEvent(b, e)
			out = append(out, sealFrame(append(b, s.suffix...)))
			continue
		}
		if cur == nil {
			cur = append(newFrame(4096), s.prefix...)
			cur = append(cur, '[')
		} else {
			cur = append(cur, ',')
		}
		cur = s.shape.appendEvent(cur, e)
		if inB++; inB == s.batch {
			out = append(out, sealFrame(append(append(cur, ']'), s.suffix...)))
			cur, inB = nil, 0
		}
	}
	if cur != nil {
		out = append(out, sealFrame(append(append(cur, ']'), s.suffix...)))
	}
	return out
}

// replay pages the backlog from the database until the subscriber has seen
// everything the feed handed out, then joins the feed. It runs on its own
// goroutine and only while catching up. The socket's replaying subscribers
// take turns: one page at a time per socket is read and queued, and a page
// holds no more bytes than the room left in the socket's queue, so memory
// per socket stays within about twice its queue bound whatever the backlog
// and the number of subscriptions.
func (s *sub) replay() {
	c := s.c
	ctx := c.ctx
	select {
	case <-s.f.ready:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case c.replaying <- struct{}{}:
		case <-ctx.Done():
			return
		}
		more, scanned, ok := s.replayPage()
		<-c.replaying
		if !ok {
			return
		}
		if !more && s.f.tryJoin(s, scanned) {
			return
		}
	}
}

// replayPage reads and queues one page; more reports that the page was
// full (by count or bytes), so more events may follow; otherwise scanned is
// the seq up to which the read saw every committed event. !ok ends the
// replay.
func (s *sub) replayPage() (more bool, scanned int64, ok bool) {
	c := s.c
	ctx := c.ctx
	room := c.waitRoom(ctx)
	if room < 0 {
		return false, 0, false
	}
	reserved := room // taken from the server's budget: queued with the page or given back
	defer func() { c.s.budget.give(reserved) }()
	if s.done.Load() {
		return false, 0, false
	}
	head := s.f.headNow() // before the read: every event up to it is committed
	s.mu.Lock()
	after := s.cursor
	s.mu.Unlock()
	envs, cut, err := c.s.log.ReadEnvelopesWithin(ctx, s.f.project, after, replayPage, min(room, c.s.log.PageBytes()), s.typ)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, fault.ErrCursorExpired):
			// Retention deleted events after the cursor: say so (with
			// earliest_seq) and end the subscription, never skip them.
			c.operationError(s.id, err)
			c.stopSub(s.id)
		default:
			c.s.logger.Warn("live: replay", "project", s.f.project, "err", err)
			c.operationError(s.id, errInternal)
			c.stopSub(s.id)
		}
		return false, 0, false
	}
	if len(envs) > 0 {
		s.mu.Lock()
		frames := s.frames(envs)
		s.mu.Unlock()
		if len(frames) > 0 {
			r := reserved
			reserved = 0 // sendReserved queues it or gives it back
			if c.sendReserved(ctx, frames, s.done.Load, r) != nil {
				return false, 0, false
			}
		}
		s.mu.Lock()
		s.cursor = envs[len(envs)-1].Seq
		s.mu.Unlock()
	}
	if s.done.Load() {
		return false, 0, false
	}
	// A page short of both bounds saw everything committed up to head.
	return len(envs) == replayPage || cut, max(after, head), true
}

// stop ends the subscription; safe to call more than once.
func (s *sub) stop() {
	if s.done.Swap(true) {
		return
	}
	s.f.remove(s)
	s.c.s.broker.leave(s.f)
}

// shape is the selection of a subscriber on Event, and the name of the
// root field in the result.
type shape struct {
	// full: exactly seq, type, data in that order without aliases, which is
	// the stored envelope as it is.
	full   bool
	fields []selected
}

type selected struct{ alias, name string }

// appendEvent appends the event as the subscriber selected it.
func (sh shape) appendEvent(b []byte, e stream.Envelope) []byte {
	if sh.full {
		return append(b, e.Body...)
	}
	b = append(b, '{')
	for i, f := range sh.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.alias)
		b = append(b, ':')
		switch f.name {
		case "seq":
			b = strconv.AppendInt(b, e.Seq, 10)
		case "type":
			b = strconv.AppendQuote(b, e.Type)
		case "data":
			data, err := e.Data()
			if err != nil {
				data = json.RawMessage("null")
			}
			b = append(b, data...)
		case "__typename":
			b = append(b, `"Event"`...)
		}
	}
	return append(b, '}')
}

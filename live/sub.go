package live

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/comm-gateway/comm/stream"
)

// replayPage is how many events a replaying subscriber reads at a time.
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

	mu     sync.Mutex
	cursor int64 // last seq given to the socket, or scanned past
	done   bool
}

// deliver frames the events after the cursor that match the filter and
// queues them on the socket, without blocking. It reports false when the
// socket's queue is full: the caller then leaves the subscriber to replay.
// Called by the feed with the feed's lock held.
func (s *sub) deliver(envs []stream.Envelope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return true
	}
	frames := s.frames(envs)
	if len(frames) > 0 && !s.c.enqueue(frames, false) {
		return false
	}
	s.cursor = max(s.cursor, envs[len(envs)-1].Seq)
	return true
}

// frames turns the events after the cursor into protocol messages.
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
			b := make([]byte, 0, len(s.prefix)+len(e.Body)+len(s.suffix)+16)
			b = append(b, s.prefix...)
			b = s.shape.appendEvent(b, e)
			out = append(out, append(b, s.suffix...))
			continue
		}
		if cur == nil {
			cur = append(make([]byte, 0, 4096), s.prefix...)
			cur = append(cur, '[')
		} else {
			cur = append(cur, ',')
		}
		cur = s.shape.appendEvent(cur, e)
		if inB++; inB == s.batch {
			out = append(out, append(append(cur, ']'), s.suffix...))
			cur, inB = nil, 0
		}
	}
	if cur != nil {
		out = append(out, append(append(cur, ']'), s.suffix...))
	}
	return out
}

// replay pages the backlog from the database until the subscriber has seen
// everything the feed handed out, then joins the feed. It runs on its own
// goroutine and only while catching up.
func (s *sub) replay() {
	ctx := s.c.ctx
	select {
	case <-s.f.ready:
	case <-ctx.Done():
		return
	}
	for {
		if !s.c.waitRoom(ctx) {
			return
		}
		head := s.f.headNow() // before the read: every event up to it is committed
		s.mu.Lock()
		after, done := s.cursor, s.done
		s.mu.Unlock()
		if done {
			return
		}
		envs, err := s.c.s.log.ReadEnvelopes(ctx, s.f.project, after, replayPage, s.typ)
		if err != nil {
			if ctx.Err() == nil {
				s.c.s.logger.Warn("live: replay", "project", s.f.project, "err", err)
				s.c.operationError(s.id, errInternal)
				s.c.stopSub(s.id)
			}
			return
		}
		if len(envs) > 0 {
			s.mu.Lock()
			if s.done {
				s.mu.Unlock()
				return
			}
			if frames := s.frames(envs); len(frames) > 0 {
				s.c.enqueue(frames, true)
			}
			s.cursor = envs[len(envs)-1].Seq
			s.mu.Unlock()
		}
		if len(envs) == replayPage {
			continue
		}
		if s.f.tryJoin(s, max(after, head)) {
			return
		}
	}
}

// stop ends the subscription; safe to call more than once.
func (s *sub) stop() {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	s.mu.Unlock()
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

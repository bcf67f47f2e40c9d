package live

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// budget is the server-wide bound on the bytes of data frames queued on
// all sockets (Options.TotalQueueBytes). Each socket's own bound
// (MaxQueueBytes) still applies; the budget bounds their sum, whatever the
// number of sockets. Taking and giving back bytes is one atomic operation;
// the lock is taken only to wake producers that wait for room.
type budget struct {
	limit int64
	used  atomic.Int64

	waiting atomic.Int32 // producers waiting for room
	mu      sync.Mutex
	room    chan struct{} // closed when bytes were given back and a producer waits
}

func newBudget(limit int64) *budget {
	return &budget{limit: limit, room: make(chan struct{})}
}

// take reserves n bytes if they keep the total within the budget, or if
// nothing is queued anywhere (a frame larger than the budget goes alone).
func (b *budget) take(n int) bool {
	for {
		cur := b.used.Load()
		if cur != 0 && cur+int64(n) > b.limit {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// give returns n bytes and wakes the producers waiting for room.
func (b *budget) give(n int) {
	if n == 0 {
		return
	}
	b.used.Add(-int64(n))
	if b.waiting.Load() > 0 {
		b.mu.Lock()
		close(b.room)
		b.room = make(chan struct{})
		b.mu.Unlock()
	}
}

// free is the room left in the budget (never negative).
func (b *budget) free() int64 { return max(b.limit-b.used.Load(), 0) }

// wait returns a channel closed at the next give; the caller must call
// done afterwards. A caller checks for room after wait and before
// receiving, so no give is missed.
func (b *budget) wait() <-chan struct{} {
	b.waiting.Add(1)
	b.mu.Lock()
	ch := b.room
	b.mu.Unlock()
	return ch
}

func (b *budget) done() { b.waiting.Add(-1) }

// errBusy is the error of a query or mutation whose result found no room
// in the server's send budget for BusyTimeout.
var errBusy = errors.New("busy")

// watchdog ends the writes that take longer than WriteTimeout
// (expireWrites) and relieves the server-wide send budget (relieveBudget).
func (s *Server) watchdog() {
	defer s.wg.Done()
	t := time.NewTicker(max(min(s.opts.StallTimeout, s.opts.WriteTimeout)/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.expireWrites()
		s.relieveBudget(time.Now())
	}
}

// clock is the time since the server started, for conn.writeStart: never
// 0 once a write begins.
func (s *Server) clock() int64 { return int64(time.Since(s.epoch)) + 1 }

// expireWrites ends the socket writes in progress for longer than
// WriteTimeout: a peer that reads nothing while the server has something
// to send. The write returns a timeout error and the writer closes the
// socket. Writes carry no deadline of their own: setting one per frame
// moves a runtime timer for every event delivered, a cost the watchdog
// pays once per tick for all sockets.
func (s *Server) expireWrites() {
	now, limit := s.clock(), int64(s.opts.WriteTimeout)
	var stuck []*conn
	s.mu.Lock()
	for c := range s.conns {
		if t := c.writeStart.Load(); t != 0 && now-t > limit {
			stuck = append(stuck, c)
		}
	}
	s.mu.Unlock()
	for _, c := range stuck {
		// A deadline in the past wakes the blocked write (had it just
		// finished, the socket's next write fails instead: either way a
		// write took longer than WriteTimeout, and the socket is closed).
		c.nc.SetWriteDeadline(time.Now()) //nolint:errcheck // a closed socket is what we want
	}
}

// relieveBudget closes, while the server-wide budget is under pressure
// (more than three quarters used), the sockets that hold it without
// draining: more than hogBytes queued continuously for StallTimeout (a
// slow reader), or data queued and not one frame written for StallTimeout
// (a reader that stopped; many such sockets may each hold a small share).
// The largest go first, until the pressure is gone. A peer that reads
// nothing is closed by WriteTimeout anyway (expireWrites); this one
// catches a peer that reads just enough to keep its writes alive.
func (s *Server) relieveBudget(now time.Time) {
	b := s.budget
	if b.used.Load() <= b.limit*3/4 {
		return
	}
	type hog struct {
		c      *conn
		queued int
	}
	var hogs []hog
	for _, c := range s.snapshot() {
		c.mu.Lock()
		q, since, progress, closed := c.queued, c.fullSince, c.progress, c.closed
		c.mu.Unlock()
		hogging := !since.IsZero() && now.Sub(since) >= s.opts.StallTimeout
		stalled := q > 0 && now.Sub(progress) >= s.opts.StallTimeout
		if !closed && (hogging || stalled) {
			hogs = append(hogs, hog{c, q})
		}
	}
	sort.Slice(hogs, func(i, j int) bool { return hogs[i].queued > hogs[j].queued })
	for _, h := range hogs {
		if b.used.Load() <= b.limit*3/4 {
			return
		}
		s.logger.Info("live: closing a socket that holds the send budget without draining", "ip", h.c.ip, "queued_bytes", h.queued)
		h.c.kill(closeNotReading, fmt.Sprintf("Too slow: %d bytes waiting for you, not read for %s, while the server's send budget is short: read what you are sent", h.queued, s.opts.StallTimeout))
	}
}

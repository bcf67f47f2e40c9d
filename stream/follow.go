package stream

import (
	"context"
	"time"
)

// Follower wakes a reader that follows one project's log from a cursor of
// its own: it reads from its cursor, calls Wait when it has nothing to do,
// and reads again, until Wait says ctx ended (design.md invariant 5).
// Wake-ups are hints: Wait returns when the project may have news, and
// the reader always re-reads the database to find out. A wake-up missed
// (another replica's NOTIFY lost, say) costs at most one poll interval;
// one too many costs a read.
//
// The follower watches the project from Follow on and re-arms before Wait
// returns, so a commit between a read and the next Wait wakes that Wait at
// once: create it before the first read. It runs no goroutine; Close it
// when done.
//
// A Follower is used by one goroutine.
type Follower struct {
	w    *Watcher
	ch   <-chan struct{}
	tick *time.Ticker
}

// Follow starts following project's commits, with a poll every poll (the
// safety net) however many wake-ups arrive or are lost.
func (h *Hub) Follow(project string, poll time.Duration) *Follower {
	w := h.Watch(project)
	return &Follower{w: w, ch: w.C(), tick: time.NewTicker(poll)}
}

// FollowEvents is Follow for a reader that takes the events committed in
// this process from memory (Since) rather than reading them back: the hub
// keeps each project's latest ones while such a follower watches it.
func (h *Hub) FollowEvents(project string, poll time.Duration) *Follower {
	w := h.watch(project, true)
	return &Follower{w: w, ch: w.C(), tick: time.NewTicker(poll)}
}

// Since returns the events after afterSeq that committed since, as far
// as this process knows, if the hub kept all of them (ok; none is ok
// too); otherwise the reader reads the log. Only for a FollowEvents
// follower, after a WakeCommit: a poll, and the first read, go to the
// log (the safety net also covers commits announced by nobody).
// The envelopes' bodies are shared: do not change them.
func (f *Follower) Since(afterSeq int64) ([]Envelope, bool) {
	if !f.w.keep {
		return nil, false
	}
	return f.w.hub.since(f.w.project, afterSeq)
}

// Wake tells why Wait returned.
type Wake int

const (
	// WakeDone: ctx ended (cancelled, or its deadline passed). The reader
	// stops following.
	WakeDone Wake = iota
	// WakeCommit: the project committed since the previous Wait returned
	// (or since Follow).
	WakeCommit
	// WakePoll: the poll interval passed.
	WakePoll
	// WakeOther: the caller's other channel fired.
	WakeOther
)

// String names the wake-up.
func (w Wake) String() string {
	switch w {
	case WakeDone:
		return "done"
	case WakeCommit:
		return "commit"
	case WakePoll:
		return "poll"
	case WakeOther:
		return "other"
	}
	return "unknown"
}

// Wait blocks until the project commits after the previous Wait returned
// (or after Follow, for the first), the poll ticks, other fires (a nil
// other never does), or ctx ends, and tells which. A deadline on the wait
// is ctx's (context.WithTimeout): WakeDone then. Anything but WakeDone
// means "re-read from your cursor", except that what other means is the
// caller's.
func (f *Follower) Wait(ctx context.Context, other <-chan struct{}) Wake {
	var why Wake
	select {
	case <-ctx.Done():
		return WakeDone
	case <-f.ch:
		why = WakeCommit
	case <-f.tick.C:
		why = WakePoll
	case <-other:
		why = WakeOther
	}
	// Re-arm before the caller's next read.
	f.ch = f.w.C()
	return why
}

// Close stops following.
func (f *Follower) Close() {
	f.tick.Stop()
	f.w.Close()
}

// Package live serves GraphQL subscriptions to the event stream over
// websockets (graphql-transport-ws and the legacy graphql-ws protocol).
//
// It does not run a resolver per subscriber. Each project with subscribers
// has one feed: woken after a commit (stream.Hub, and across replicas
// PostgreSQL NOTIFY), it reads the new events once and hands their stored
// JSON envelopes to every live subscriber, which frames them for its socket.
// A subscriber first replays the backlog after its afterSeq from the
// database on a goroutine of its own, then joins the feed; one that falls
// behind (its socket's queue is full) leaves the feed and pages from the
// database again. Idle subscriptions hold no goroutine. Every event reaches
// a subscriber exactly once, in order: each subscriber keeps the seq of the
// last event it was given and skips anything at or below it.
package live

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/stream"
)

// Broker runs the per-project feeds.
type Broker struct {
	log    *stream.Log
	logger *slog.Logger
	// poll is the safety net: feeds re-read this often even without a
	// wake-up (wake-ups are hints).
	poll time.Duration

	mu    sync.Mutex
	feeds map[string]*feed
}

// NewBroker returns a broker over the log.
func NewBroker(log *stream.Log, logger *slog.Logger) *Broker {
	return &Broker{log: log, logger: logger, poll: time.Second, feeds: map[string]*feed{}}
}

// feed fans one project's new events out to its live subscribers.
type feed struct {
	b       *Broker
	project string
	refs    int                // guarded by b.mu
	stop    context.CancelFunc // ends run

	mu    sync.Mutex
	subs  map[*sub]struct{}
	order []*sub // distribute's list of subs, kept for its array
	head  int64  // seq of the last event handed out
	// ready is closed once head is known.
	ready chan struct{}
}

// join returns the project's feed, starting it for the first subscriber.
func (b *Broker) join(project string) *feed {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.feeds[project]
	if f == nil {
		ctx, stop := context.WithCancel(context.Background())
		f = &feed{b: b, project: project, stop: stop, subs: map[*sub]struct{}{}, ready: make(chan struct{})}
		b.feeds[project] = f
		go f.run(ctx)
	}
	f.refs++
	return f
}

// leave drops a subscriber's reference; the last one stops the feed.
func (b *Broker) leave(f *feed) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f.refs--
	if f.refs == 0 {
		delete(b.feeds, f.project)
		f.stop()
	}
}

// Feeds returns the number of running feeds.
func (b *Broker) Feeds() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.feeds)
}

const feedPage = 1000

// run follows the project until ctx ends (the last subscriber left).
func (f *feed) run(ctx context.Context) {
	// Follow before reading the head, so no commit after it goes unseen.
	follow := f.b.log.Hub().FollowEvents(f.project, f.b.poll)
	defer follow.Close()
	// Start at the head: subscribers replay anything older themselves.
	for {
		head, err := f.b.log.Head(ctx, f.project)
		if err == nil {
			f.mu.Lock()
			f.head = head
			f.mu.Unlock()
			close(f.ready)
			break
		}
		if ctx.Err() != nil {
			return
		}
		f.b.logger.Warn("live: feed head", "project", f.project, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	wake := stream.WakePoll // the first read is the database's
	for {
		f.mu.Lock()
		after := f.head
		f.mu.Unlock()
		if wake == stream.WakeCommit {
			// Committed in this process: the events are in memory, and
			// reading them back would cost a query per commit.
			if envs, ok := follow.Since(after); ok {
				if len(envs) > 0 {
					f.distribute(envs)
				}
				if wake = follow.Wait(ctx, nil); wake == stream.WakeDone {
					return
				}
				continue
			}
		}
		envs, cut, err := f.b.log.ReadEnvelopesWithin(ctx, f.project, after, feedPage, 0, "")
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Code == fault.ErrCursorExpired.Code {
			// Retention overtook the feed (a retention shorter than the
			// feed's lag): its subscribers replay, and hear it there.
			f.expire(fe.EarliestSeq - 1)
			continue
		}
		if err != nil && ctx.Err() == nil {
			f.b.logger.Warn("live: feed read", "project", f.project, "err", err)
		}
		if len(envs) > 0 {
			f.distribute(envs)
			if len(envs) == feedPage || cut {
				continue
			}
		}
		if wake = follow.Wait(ctx, nil); wake == stream.WakeDone {
			return
		}
	}
}

// distribute hands events to every live subscriber. A subscriber whose
// socket cannot take them leaves the feed and replays from the database.
//
// Most sockets take their frame at once, written from here (conn.push), so
// a project with many subscribers is split among the cores: one part is
// delivered by a goroutine of its own meanwhile. Every part is done before
// the next events are distributed, so each subscriber still gets them in
// order.
func (f *feed) distribute(envs []stream.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	subs := f.order[:0]
	for s := range f.subs {
		subs = append(subs, s)
	}
	parts := 1
	if procs > 1 && len(subs) >= 2*minPart {
		parts = min(procs, len(subs)/minPart)
	}
	var (
		wg     sync.WaitGroup
		behind = make([][]*sub, parts)
		per    = (len(subs) + parts - 1) / parts
	)
	deliver := func(p int) {
		var shared sharedFrames // frames are not shared across parts
		for _, s := range subs[p*per : min(len(subs), (p+1)*per)] {
			if !s.deliver(envs, &shared) {
				behind[p] = append(behind[p], s)
			}
		}
	}
	for p := 1; p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deliver(p)
		}()
	}
	deliver(0)
	wg.Wait()
	for _, part := range behind {
		for _, s := range part {
			delete(f.subs, s)
			go s.replay()
		}
	}
	clear(subs)
	f.order = subs
	f.head = envs[len(envs)-1].Seq
}

// minPart is the fewest subscribers a part of a distribution holds.
const minPart = 16

// procs is how many parts a distribution is split into at most.
var procs = runtime.GOMAXPROCS(0)

// expire moves the feed past events retention deleted, to head, and
// sends its live subscribers back to replay from their cursors.
func (f *feed) expire(head int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		delete(f.subs, s)
		go s.replay()
	}
	f.head = max(f.head, head)
}

// tryJoin adds s to the live set if it has seen everything the feed has
// handed out; otherwise s must read more from the database first.
func (f *feed) tryJoin(s *sub, scanned int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if scanned < f.head {
		return false
	}
	s.mu.Lock()
	s.cursor = max(s.cursor, scanned)
	s.mu.Unlock()
	f.subs[s] = struct{}{}
	return true
}

func (f *feed) remove(s *sub) {
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}

// headNow returns the feed's head.
func (f *feed) headNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head
}

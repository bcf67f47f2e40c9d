package stream_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestFollow drives the follow loop (read from the cursor, Wait, read
// again) through each way Wait returns. After the first read, act does
// something (on a goroutine of its own if async); Wait must then say want,
// and the read after it must find the event act appended, if any. No case
// relies on timing: a case that wants a commit to wake it polls once an
// hour, so only the commit can. The test does not run in parallel, so that
// it can check that followers leave no goroutine and no watch behind.
func TestFollow(t *testing.T) {
	never := time.Hour // a poll that never comes within a test
	closed := make(chan struct{})
	close(closed)
	type env struct {
		l      *stream.Log
		p      string
		cancel context.CancelFunc
	}
	appendOne := func(t *testing.T, e env) {
		if _, err := e.l.Append(context.Background(), e.p, stream.MessageSent, 1); err != nil {
			t.Error(err)
		}
	}
	cases := []struct {
		name    string
		poll    time.Duration
		lost    bool // follow a hub the log does not publish to: every hint is lost
		timeout time.Duration
		other   <-chan struct{}
		act     func(t *testing.T, e env)
		async   bool
		want    stream.Wake
		found   bool
	}{
		{name: "a hint wakes it", poll: never, act: appendOne, async: true, want: stream.WakeCommit, found: true},
		{name: "a commit between read and wait is not missed", poll: never, act: appendOne, want: stream.WakeCommit, found: true},
		{name: "a lost hint is covered by the poll", poll: 10 * time.Millisecond, lost: true, act: appendOne, want: stream.WakePoll, found: true},
		{name: "the poll wakes it without a commit", poll: 10 * time.Millisecond, want: stream.WakePoll},
		{name: "ctx cancel returns", poll: never, act: func(_ *testing.T, e env) { e.cancel() }, async: true, want: stream.WakeDone},
		{name: "a cancelled ctx returns at once", poll: never, act: func(_ *testing.T, e env) { e.cancel() }, want: stream.WakeDone},
		{name: "a deadline returns", poll: never, timeout: 10 * time.Millisecond, want: stream.WakeDone},
		{name: "the caller's channel wakes it", poll: never, other: closed, want: stream.WakeOther},
	}
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		base, _ := goroutines()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				hub := l.Hub()
				if tc.lost {
					hub = stream.NewHub()
				}
				e := env{l: l, p: newProject(t, l)}
				ctx, cancel := context.WithCancel(context.Background())
				if tc.timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				}
				defer cancel()
				e.cancel = cancel
				f := hub.Follow(e.p, tc.poll)
				defer f.Close()
				if evs, err := l.Read(context.Background(), e.p, 0, 10, ""); err != nil || len(evs) != 0 {
					t.Fatalf("first read: %v %v", evs, err)
				}
				var wg sync.WaitGroup
				if tc.act != nil && tc.async {
					wg.Add(1)
					go func() {
						defer wg.Done()
						tc.act(t, e)
					}()
				} else if tc.act != nil {
					tc.act(t, e)
				}
				got := f.Wait(ctx, tc.other)
				wg.Wait()
				if got != tc.want {
					t.Fatalf("Wait = %s, want %s", got, tc.want)
				}
				evs, err := l.Read(context.Background(), e.p, 0, 10, "")
				if err != nil {
					t.Fatal(err)
				}
				if found := len(evs) == 1; found != tc.found {
					t.Fatalf("read after Wait: %v", evs)
				}
			})
		}
		// Every follower closed: no watch left in the hub, no goroutine.
		if n := stream.HubTopics(l.Hub()); n != 0 {
			t.Errorf("%d projects still watched", n)
		}
		deadline := time.Now().Add(10 * time.Second)
		for n, _ := goroutines(); n > base && time.Now().Before(deadline); n, _ = goroutines() {
			time.Sleep(10 * time.Millisecond)
		}
		if n, stacks := goroutines(); n > base {
			t.Errorf("goroutines %d, baseline %d:\n%s", n, base, stacks)
		}
	})
}

// goroutines counts the goroutines of the process but those the database
// pool and driver start (when they please: a connection cleaner, the
// PostgreSQL listener's connection), and returns their stacks.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		_, by, _ := strings.Cut(g, "\ncreated by ")
		if strings.HasPrefix(by, "database/sql.") || strings.HasPrefix(by, "github.com/lib/pq.") {
			continue
		}
		n++
		out = append(out, g)
	}
	return n, strings.Join(out, "\n\n")
}

// TestFollowSeesEveryCommit: a reader following a project whose events
// commit one by one on another goroutine reads every event exactly once,
// in order, woken by commits alone (its poll never comes): no wake-up is
// lost between its reads and its waits.
func TestFollowSeesEveryCommit(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		const n = 200
		f := l.Hub().Follow(p, time.Hour)
		defer f.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range n {
				if _, err := l.Append(context.Background(), p, stream.MessageSent, i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		defer func() { <-done }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var cursor int64
		for cursor < n {
			evs, err := l.Read(ctx, p, cursor, 7, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Seq != cursor+1 {
					t.Fatalf("seq %d after %d", ev.Seq, cursor)
				}
				cursor = ev.Seq
			}
			if len(evs) > 0 {
				continue
			}
			if w := f.Wait(ctx, nil); w != stream.WakeCommit {
				t.Fatalf("Wait = %s at cursor %d", w, cursor)
			}
		}
	})
}

// TestFollowEventsFromMemory: a FollowEvents follower gets every commit of
// this process from memory, byte for byte what the log stores, in order
// and without a gap; a commit it is told of without its events (another
// replica's), or events past the hub's bounds, send it to the log; the
// memory is given back when the last such follower closes.
func TestFollowEventsFromMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f := l.Hub().FollowEvents(p, time.Hour)
		if _, ok := f.Since(0); !ok {
			t.Fatal("nothing committed: Since should say so")
		}
		const n = 300
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range n {
				if _, err := l.Append(context.Background(), p, stream.MessageSent, map[string]int{"i": i}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		var (
			cursor          int64
			fromMem, fromDB int
		)
		for cursor < n {
			if w := f.Wait(ctx, nil); w != stream.WakeCommit {
				t.Fatalf("Wait = %s at cursor %d", w, cursor)
			}
			envs, ok := f.Since(cursor)
			if ok {
				fromMem += len(envs)
			} else {
				var err error
				if envs, err = l.ReadEnvelopes(ctx, p, cursor, 1000, ""); err != nil {
					t.Fatal(err)
				}
				fromDB += len(envs)
			}
			stored, err := l.ReadEnvelopes(ctx, p, cursor, len(envs), "")
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range envs {
				if e.Seq != cursor+1 {
					t.Fatalf("seq %d after %d (from memory: %v)", e.Seq, cursor, ok)
				}
				if s := stored[i]; s.Seq != e.Seq || s.Type != e.Type || string(s.Body) != string(e.Body) {
					t.Fatalf("event %d from memory %q, stored %q", e.Seq, e.Body, s.Body)
				}
				cursor = e.Seq
			}
		}
		<-done
		if fromMem == 0 {
			t.Fatalf("no event came from memory (%d from the log)", fromDB)
		}
		t.Logf("%d events from memory, %d from the log", fromMem, fromDB)

		// Told of a commit without its events: the hub no longer knows
		// what follows the cursor.
		l.Hub().Publish(p, n+1)
		if _, ok := f.Since(cursor); ok {
			t.Fatal("Since answered from memory past a commit whose events it was not given")
		}
		// Event n+1 commits (the hub heard of it already), then n+2 with
		// its events: n+1 is still unknown to the hub.
		for range 2 {
			if _, err := l.Append(context.Background(), p, stream.MessageSent, 1); err != nil {
				t.Fatal(err)
			}
		}
		if envs, ok := f.Since(cursor); ok {
			t.Fatalf("Since answered %d events from memory across the gap", len(envs))
		}
		if envs, ok := f.Since(cursor + 1); !ok || len(envs) != 1 || envs[0].Seq != n+2 {
			t.Fatalf("Since(n+1) = %v, %v; want event n+2 from memory", envs, ok)
		}

		// A large event is not kept past the topic's bound.
		big := strings.Repeat("x", 300<<10)
		if _, err := l.Append(context.Background(), p, stream.MessageSent, big); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Since(n + 2); ok {
			t.Fatal("an event over the topic's byte bound was kept")
		}
		if kept := stream.HubKept(l.Hub()); kept > 256<<10 {
			t.Fatalf("the hub keeps %d bytes", kept)
		}
		f.Close()
		if kept := stream.HubKept(l.Hub()); kept != 0 {
			t.Fatalf("the hub keeps %d bytes after the follower closed", kept)
		}
	})
}

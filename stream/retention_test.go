package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// appendN appends n events to project, alternating message.received and
// message.sent, in writes of up to 500.
func appendN(t *testing.T, l *stream.Log, project string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		_, err := l.Write(context.Background(), project, func(tx *stream.Tx) error {
			for i := range k {
				typ := stream.MessageReceived
				if i%2 == 1 {
					typ = stream.MessageSent
				}
				if err := tx.Append(typ, map[string]int{"i": i}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// age makes project's events up to seq upto look created at 'at'.
func age(t *testing.T, l *stream.Log, project string, upto int64, at time.Time) {
	t.Helper()
	db := l.DB()
	if _, err := db.W.Exec(db.Rebind("UPDATE events SET created_at = ? WHERE project_id = ? AND seq <= ?"), at.UnixMilli(), project, upto); err != nil {
		t.Fatal(err)
	}
}

// expiredAt returns the earliest_seq of a cursor_expired error, or fails.
func expiredAt(t *testing.T, what string, err error) int64 {
	t.Helper()
	var fe *fault.Error
	if !errors.Is(err, fault.ErrCursorExpired) || !errors.As(err, &fe) {
		t.Fatalf("%s: err = %v, want cursor_expired", what, err)
	}
	if fe.Param != "after_seq" {
		t.Errorf("%s: param %q, want after_seq", what, fe.Param)
	}
	if fault.Present(context.Background(), err).Status != 410 {
		t.Errorf("%s: status %d, want 410", what, fault.Present(context.Background(), err).Status)
	}
	return fe.EarliestSeq
}

// TestRetention: a pass deletes the events older than Keep from the front
// of each log, never the head; reads from an older cursor fail with
// cursor_expired and earliest_seq, from earliest-1 on they work, and seqs
// continue after the deletion.
func TestRetention(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		l := openLog(t, cfg, stream.Options{})
		p, q, empty := newProject(t, l), newProject(t, l), newProject(t, l)
		appendN(t, l, p, 30)
		appendN(t, l, q, 5)
		now := time.Now()
		old := now.Add(-100 * 24 * time.Hour)
		age(t, l, p, 20, old) // p: 1..20 old, 21..30 new
		age(t, l, q, 5, old)  // q: all old, head included

		r := &stream.Retention{Log: l, Keep: 90 * 24 * time.Hour, Batch: 7, Now: func() time.Time { return now }}
		n, err := r.Pass(ctx)
		if err != nil || n != 20+4 {
			t.Fatalf("pass: deleted %d, %v; want 24 (p's 20 old ones, q's all but its head)", n, err)
		}
		for _, c := range []struct {
			project string
			want    int64
		}{{p, 21}, {q, 5}, {empty, 1}} {
			if got, err := l.Earliest(ctx, c.project); err != nil || got != c.want {
				t.Errorf("Earliest = %d, %v; want %d", got, err, c.want)
			}
		}

		// Cursors from earliest-1 on read on.
		evs, err := l.Read(ctx, p, 20, 100, "")
		if err != nil || len(evs) != 10 || evs[0].Seq != 21 {
			t.Fatalf("read after 20: %d events, %v", len(evs), err)
		}
		if evs, err := l.Read(ctx, p, 20, 100, stream.MessageSent); err != nil || len(evs) != 5 || evs[0].Seq != 22 {
			t.Fatalf("typed read after 20: %v, %v", evs, err)
		}
		if page, err := l.ReadJSON(ctx, p, 20, 2, ""); err != nil || len(page) < 10 {
			t.Fatalf("JSON read after 20: %s, %v", page, err)
		}
		if evs, err := l.Read(ctx, q, 4, 100, ""); err != nil || len(evs) != 1 || evs[0].Seq != 5 {
			t.Fatalf("q after 4: %v, %v", evs, err)
		}
		// Older cursors fail, whatever the read, even when the page's
		// whole range was deleted; a read of one type when events of its
		// type after the cursor were deleted (1..20 went: message.received
		// the odd seqs, message.sent the even ones).
		reads := map[string]struct {
			read func(after int64) error
			last int64 // the greatest expired cursor
		}{
			"Read": {func(a int64) error { _, err := l.Read(ctx, p, a, 100, ""); return err }, 19},
			"Read small page": {func(a int64) error {
				_, _, err := l.ReadEnvelopesWithin(ctx, p, a, 3, 0, "")
				return err
			}, 19},
			"Read typed": {func(a int64) error { _, err := l.Read(ctx, p, a, 100, stream.MessageSent); return err }, 19},
			"ReadJSON":   {func(a int64) error { _, err := l.ReadJSON(ctx, p, a, 100, ""); return err }, 19},
			"ReadJSON typed": {func(a int64) error {
				_, err := l.ReadJSON(ctx, p, a, 100, stream.MessageReceived)
				return err
			}, 18},
		}
		for name, c := range reads {
			for _, after := range []int64{0, 5, c.last} {
				if got := expiredAt(t, name, c.read(after)); got != 21 {
					t.Errorf("%s after %d: earliest_seq %d, want 21", name, after, got)
				}
			}
			if err := c.read(c.last + 1); err != nil {
				t.Errorf("%s after %d: %v", name, c.last+1, err)
			}
			if err := c.read(math.MaxInt64); err != nil {
				t.Errorf("%s far after the head: %v", name, err)
			}
		}
		// A type none of whose events went reads on from any cursor.
		if evs, err := l.Read(ctx, p, 0, 100, stream.ConnectionActive); err != nil || len(evs) != 0 {
			t.Errorf("a type without deletions: %v, %v", evs, err)
		}
		if err := l.CheckCursor(ctx, p, "from_seq", 19); !errors.Is(err, fault.ErrCursorExpired) {
			t.Errorf("CheckCursor(19) = %v", err)
		}
		if err := l.CheckCursor(ctx, p, "from_seq", 20); err != nil {
			t.Errorf("CheckCursor(20) = %v", err)
		}

		// Seqs continue.
		if seq, err := l.Append(ctx, q, stream.MessageSent, map[string]int{}); err != nil || seq != 6 {
			t.Fatalf("append to q: seq %d, %v; want 6", seq, err)
		}
		if seq, err := l.Append(ctx, p, stream.MessageSent, map[string]int{}); err != nil || seq != 31 {
			t.Fatalf("append to p: seq %d, %v; want 31", seq, err)
		}
		// q's old head is no longer its head: now it goes.
		if n, err := r.Pass(ctx); err != nil || n != 1 {
			t.Fatalf("second pass: deleted %d, %v; want 1", n, err)
		}
		if got, _ := l.Earliest(ctx, q); got != 6 {
			t.Errorf("q's earliest %d, want 6", got)
		}
		// Later (an injected clock, not a sleep): everything but the heads
		// is due.
		r.Now = func() time.Time { return now.Add(200 * 24 * time.Hour) }
		if n, err := r.Pass(ctx); err != nil || n != 10 {
			t.Fatalf("later pass: deleted %d, %v; want 10", n, err)
		}
		for _, c := range []struct {
			project  string
			earliest int64
		}{{p, 31}, {q, 6}} {
			if got, _ := l.Earliest(ctx, c.project); got != c.earliest {
				t.Errorf("Earliest = %d, want %d", got, c.earliest)
			}
			evs, err := l.Read(ctx, c.project, c.earliest-1, 100, "")
			if err != nil || len(evs) != 1 || evs[0].Seq != c.earliest {
				t.Errorf("head read: %v, %v", evs, err)
			}
			if h, _ := l.Head(ctx, c.project); h != c.earliest {
				t.Errorf("head %d, want %d", h, c.earliest)
			}
			if evs, err := l.Read(ctx, c.project, c.earliest, 100, ""); err != nil || len(evs) != 0 {
				t.Errorf("read at head: %v, %v", evs, err)
			}
		}
		// The pos chain continues past the deletion: byte-budgeted pages
		// still cut where they should.
		appendN(t, l, p, 10)
		all, _, err := l.ReadEnvelopesWithin(ctx, p, 30, 100, 0, "")
		if err != nil || len(all) != 11 {
			t.Fatalf("page after trim: %d events, %v", len(all), err)
		}
		budget := len(all[0].Body) + len(all[1].Body) + len(all[2].Body)
		envs, cut, err := l.ReadEnvelopesWithin(ctx, p, 30, 100, budget, "")
		if err != nil || len(envs) != 3 || envs[0].Seq != 31 || !cut {
			t.Errorf("budgeted page after trim: %d events (cut %v), %v; want 3", len(envs), cut, err)
		}
		// A log reopened (a restart) keeps the floor and the seqs.
		l2, err := stream.Open(l.DB(), stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if got, _ := l2.Earliest(ctx, p); got != 31 {
			t.Errorf("after reopen: earliest %d, want 31", got)
		}
		if seq, err := l2.Append(ctx, p, stream.MessageSent, map[string]int{}); err != nil || seq != 42 {
			t.Errorf("after reopen: append seq %d, %v; want 42", seq, err)
		}
	})
}

// TestRetentionAppendsProceed runs a pass over a large old log while
// writers append to it and readers follow it from the start: every append
// succeeds (its latency is logged), seqs stay dense, and a reader either
// reads on without a gap or is told cursor_expired, never skips.
func TestRetentionAppendsProceed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		const old = 20000
		appendN(t, l, p, old)
		age(t, l, p, old, time.Now().Add(-48*time.Hour))
		r := &stream.Retention{Log: l, Keep: 24 * time.Hour} // the default batch

		done := make(chan struct{})
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			latencies []time.Duration // during the pass
			before    []time.Duration // before it started
			trimming  atomic.Bool
			seqs      []int64
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					start := time.Now()
					seq, err := l.Append(ctx, p, stream.MessageReceived, map[string]string{"x": "y"})
					d := time.Since(start)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if trimming.Load() {
						latencies = append(latencies, d)
					} else {
						before = append(before, d)
					}
					seqs = append(seqs, seq)
					mu.Unlock()
				}
			}()
		}
		for _, typ := range []string{"", stream.MessageSent} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var cursor int64
				expired := 0
				for {
					envs, _, err := l.ReadEnvelopesWithin(ctx, p, cursor, 200, 0, typ)
					var fe *fault.Error
					switch {
					case errors.As(err, &fe) && fe.Code == fault.ErrCursorExpired.Code:
						if fe.EarliestSeq-1 <= cursor {
							t.Errorf("reader %q: cursor_expired at %d with earliest_seq %d", typ, cursor, fe.EarliestSeq)
							return
						}
						cursor = fe.EarliestSeq - 1
						expired++
						continue
					case err != nil:
						t.Error(err)
						return
					}
					for _, e := range envs {
						if typ == "" && e.Seq != cursor+1 {
							t.Errorf("reader: gap: %d after %d", e.Seq, cursor)
							return
						}
						if e.Seq <= cursor {
							t.Errorf("reader %q: %d after %d", typ, e.Seq, cursor)
							return
						}
						cursor = e.Seq
					}
					select {
					case <-done:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(300 * time.Millisecond) // appends alone, for comparison
		trimming.Store(true)
		start := time.Now()
		n, err := r.Pass(ctx)
		took := time.Since(start)
		close(done)
		wg.Wait()
		if err != nil || n != old-1 && n != old {
			t.Fatalf("pass: deleted %d, %v; want %d (all old events, the head only if an append followed it)", n, err, old)
		}
		if len(latencies) == 0 || len(before) == 0 {
			t.Fatal("no append ran during the pass, or before it")
		}
		slices.Sort(seqs)
		for i, s := range seqs {
			if s != old+1+int64(i) {
				t.Fatalf("appended seqs not dense: %d at %d", s, i)
			}
		}
		slices.Sort(latencies)
		slices.Sort(before)
		t.Logf("pass deleted %d events in %s; %d appends meanwhile, latency p50 %s p99 %s max %s; before the pass: %d appends, p50 %s p99 %s max %s",
			n, took.Round(time.Millisecond), len(latencies), latencies[len(latencies)/2],
			latencies[len(latencies)*99/100], latencies[len(latencies)-1],
			len(before), before[len(before)/2], before[len(before)*99/100], before[len(before)-1])
		if got, _ := l.Earliest(ctx, p); got != n+1 {
			t.Errorf("earliest %d, want %d", got, n+1)
		}
	})
}

// TestRetentionRareType: a reader of one type keeps its cursor at the
// last event of its type; when that type is rare the cursor falls behind
// the earliest kept event although nothing of its type was deleted after
// it: it reads on. It is told cursor_expired only when events of its type
// after its cursor were deleted.
func TestRetentionRareType(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		for i := range 12 {
			typ := stream.MessageReceived
			if i == 5 || i == 11 {
				typ = stream.ConnectionActive // seqs 6 and 12
			}
			if _, err := l.Append(ctx, p, typ, map[string]int{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
		age(t, l, p, 10, time.Now().Add(-48*time.Hour))
		r := &stream.Retention{Log: l, Keep: 24 * time.Hour}
		if n, err := r.Pass(ctx); err != nil || n != 10 {
			t.Fatalf("pass: %d, %v", n, err)
		}
		// Seen up to its type's seq 6: nothing of its type went after it.
		evs, err := l.Read(ctx, p, 6, 100, stream.ConnectionActive)
		if err != nil || len(evs) != 1 || evs[0].Seq != 12 {
			t.Fatalf("connection.active after 6: %v, %v; want seq 12", evs, err)
		}
		if page, err := l.ReadJSON(ctx, p, 6, 100, stream.ConnectionActive); err != nil || firstSeqOf(page) != 12 {
			t.Fatalf("JSON connection.active after 6: %s, %v", page, err)
		}
		// Before it: seq 6 was deleted.
		_, err = l.Read(ctx, p, 5, 100, stream.ConnectionActive)
		if got := expiredAt(t, "connection.active after 5", err); got != 11 {
			t.Errorf("earliest_seq %d, want 11", got)
		}
		// All types from 6: expired (7..10 went).
		_, err = l.Read(ctx, p, 6, 100, "")
		expiredAt(t, "all types after 6", err)
		// A type never seen: nothing to miss.
		if evs, err := l.Read(ctx, p, 0, 100, stream.MessageFailed); err != nil || len(evs) != 0 {
			t.Errorf("message.failed after 0: %v, %v", evs, err)
		}
	})
}

func firstSeqOf(page []byte) int64 {
	var evs []struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(page, &evs) != nil || len(evs) == 0 {
		return 0
	}
	return evs[0].Seq
}

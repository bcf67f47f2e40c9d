package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

func openLog(t *testing.T, cfg store.Config, opts stream.Options) *stream.Log {
	t.Helper()
	db := storetest.Open(t, cfg)
	l, err := stream.Open(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func newProject(t *testing.T, l *stream.Log) string {
	t.Helper()
	id := ident.New(ident.Project)
	ctx := tenant.WithProject(context.Background(), id)
	_, err := l.Write(ctx, id, func(tx *stream.Tx) error {
		return tx.Client().Project.Create().SetID(id).SetName("p").
			SetCustomerID(ident.New(ident.Customer)).SetAgentID(ident.New(ident.Agent)).Exec(tx.Context())
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type payload struct {
	Writer int `json:"w"`
	N      int `json:"n"`
}

// TestOrderingUnderConcurrency appends from many goroutines to one hot
// project and several others, with some writes slow and some rolled back,
// while readers page through each stream; on PostgreSQL a second log (a
// second replica) appends to the same projects. Every reader must see
// exactly 1..N per project, and exactly the acknowledged appends.
func TestOrderingUnderConcurrency(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		logs := []*stream.Log{openLog(t, cfg, stream.Options{Writers: 3, MaxBatch: 64})}
		if cfg.URL != "" {
			logs = append(logs, openLog(t, cfg, stream.Options{Writers: 2, MaxBatch: 16}))
		}
		projects := make([]string, 6)
		for i := range projects {
			projects[i] = newProject(t, logs[0])
		}
		const writers, perWriter = 24, 60
		var (
			ackMu sync.Mutex
			acked = map[string]map[payload]int64{} // project -> payload -> seq
		)
		for _, p := range projects {
			acked[p] = map[payload]int64{}
		}
		var wg sync.WaitGroup
		var rolledBack atomic.Int64
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 7))
				l := logs[w%len(logs)]
				for n := range perWriter {
					p := projects[0] // the hot project gets half the load
					if r.IntN(2) == 0 {
						p = projects[1+r.IntN(len(projects)-1)]
					}
					ctx := tenant.WithProject(context.Background(), p)
					pl := payload{w, n}
					var seqs []int64
					switch r.IntN(6) {
					case 0: // rolled back after writing a row and appending
						_, err := l.Write(ctx, p, func(tx *stream.Tx) error {
							if err := tx.Client().Project.UpdateOneID(p).SetName("renamed").Exec(tx.Context()); err != nil {
								return err
							}
							if err := tx.Append(stream.MessageReceived, pl); err != nil {
								return err
							}
							return errRollback
						})
						if !errors.Is(err, errRollback) {
							t.Errorf("rolled-back write: got %v", err)
						}
						rolledBack.Add(1)
						continue
					case 1: // slow, spread over the writers by key
						evs, err := l.WriteKeyed(ctx, p, fmt.Sprint("k", w%5), func(tx *stream.Tx) error {
							time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
							return tx.Append(stream.MessageReceived, pl)
						})
						if err != nil {
							t.Error(err)
							return
						}
						seqs = []int64{evs[0].Seq}
					default:
						seq, err := l.Append(ctx, p, stream.MessageReceived, pl)
						if err != nil {
							t.Error(err)
							return
						}
						seqs = []int64{seq}
					}
					ackMu.Lock()
					acked[p][pl] = seqs[0]
					ackMu.Unlock()
				}
			}()
		}
		// Readers page through every project while the writers run.
		done := make(chan struct{})
		type seen struct {
			project string
			events  []stream.Event
		}
		results := make(chan seen, len(projects))
		for i, p := range projects {
			go func() {
				l := logs[i%len(logs)]
				var got []stream.Event
				var after int64
				final := false
				for {
					evs, err := l.Read(context.Background(), p, after, 7+i, "")
					if err != nil {
						t.Error(err)
						break
					}
					for _, e := range evs {
						if e.Seq != after+1 {
							t.Errorf("project %d: after seq %d came %d", i, after, e.Seq)
						}
						after = e.Seq
						got = append(got, e)
					}
					if len(evs) == 0 {
						if final {
							break
						}
						select {
						case <-done:
							final = true // one more pass after the writers finished
						case <-time.After(time.Millisecond):
						}
					}
				}
				results <- seen{p, got}
			}()
		}
		wg.Wait()
		close(done)
		total := 0
		for range projects {
			s := <-results
			want := acked[s.project]
			if len(s.events) != len(want) {
				t.Errorf("project %s: read %d events, %d acknowledged", s.project, len(s.events), len(want))
			}
			for i, e := range s.events {
				if e.Seq != int64(i+1) {
					t.Fatalf("project %s: position %d has seq %d", s.project, i, e.Seq)
				}
				var pl payload
				if err := json.Unmarshal(e.Data, &pl); err != nil {
					t.Fatal(err)
				}
				if seq, ok := want[pl]; !ok || seq != e.Seq {
					t.Errorf("project %s: event %d %+v: acknowledged as %d (%v)", s.project, e.Seq, pl, seq, ok)
				}
			}
			total += len(s.events)
			head, err := logs[0].Head(context.Background(), s.project)
			if err != nil || head != int64(len(s.events)) {
				t.Errorf("project %s: head %d (%v), read %d", s.project, head, err, len(s.events))
			}
		}
		if total+int(rolledBack.Load()) != writers*perWriter {
			t.Errorf("read %d + rolled back %d != written %d", total, rolledBack.Load(), writers*perWriter)
		}
	})
}

var errRollback = errors.New("deliberate rollback")

// TestFailedWorkDoesNotUndoOthers: in one batch, a write that fails at the
// database (a duplicate primary key) must fail alone.
func TestFailedWorkDoesNotUndoOthers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		ctx := tenant.WithProject(context.Background(), p)
		var wg sync.WaitGroup
		var failed, ok atomic.Int64
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.Write(ctx, p, func(tx *stream.Tx) error {
					if i%5 == 0 { // a project with an existing id: unique violation
						if err := tx.Client().Project.Create().SetID(p).SetName("dup").
							SetCustomerID("cus_x").SetAgentID("agt_x").Exec(tx.Context()); err != nil {
							return err
						}
					}
					return tx.Append(stream.ConnectionActive, map[string]int{"i": i})
				})
				if err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 10 || ok.Load() != 40 {
			t.Fatalf("failed %d ok %d; want 10 and 40", failed.Load(), ok.Load())
		}
		evs, err := l.Read(ctx, p, 0, 1000, "")
		if err != nil || len(evs) != 40 || evs[39].Seq != 40 {
			t.Fatalf("read %d events (%v)", len(evs), err)
		}
	})
}

func TestAppendToUnknownProject(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				target := p
				if i%4 == 0 {
					target = ident.New(ident.Project)
				}
				_, errs[i] = l.Append(ctx, target, stream.MessageSent, map[string]int{"i": i})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if (i%4 == 0) != errors.Is(err, stream.ErrNoProject) {
				t.Errorf("append %d: %v", i, err)
			}
		}
		if head, _ := l.Head(ctx, p); head != 15 {
			t.Errorf("head %d, want 15", head)
		}
	})
}

func TestTypeFilterAndUnknownType(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		ctx := context.Background()
		for i := range 30 {
			typ := stream.MessageReceived
			if i%3 == 0 {
				typ = stream.MessageSent
			}
			if _, err := l.Append(ctx, p, typ, map[string]int{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := l.Read(ctx, p, 4, 100, stream.MessageSent)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 8 || evs[0].Seq != 7 || evs[7].Seq != 28 {
			t.Fatalf("filtered read: %+v", evs)
		}
		if _, err := l.Append(ctx, p, "nope", 1); err == nil {
			t.Fatal("unknown type appended")
		}
	})
}

// TestWatchWakesAfterCommit: a watcher's channel closes after a commit.
func TestWatchWakesAfterCommit(t *testing.T) {
	t.Parallel()
	l := openLog(t, storetest.SQLite(t), stream.Options{})
	p := newProject(t, l)
	w := l.Hub().Watch(p)
	defer w.Close()
	ch := w.C()
	go l.Append(context.Background(), p, stream.MessageSent, 1)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up")
	}
	evs, _ := l.Read(context.Background(), p, 0, 10, "")
	if len(evs) != 1 {
		t.Fatalf("woken before the event was readable: %v", evs)
	}
}

func TestRestartContinuesSeq(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		var p string
		for round := range 3 {
			db, err := store.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			l, err := stream.Open(db, stream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p == "" {
				p = newProject(t, l)
			}
			for i := range 5 {
				seq, err := l.Append(context.Background(), p, stream.MessageSent, fmt.Sprint(round, i))
				if err != nil || seq != int64(round*5+i+1) {
					t.Fatalf("round %d: seq %d (%v)", round, seq, err)
				}
			}
			l.Close()
			db.Close()
		}
	})
}

// TestNotifyAcrossReplicas: on PostgreSQL, a commit through one log wakes
// watchers of another log (another replica) on the same database, through
// LISTEN/NOTIFY, well before any polling would.
func TestNotifyAcrossReplicas(t *testing.T) {
	t.Parallel()
	cfg := storetest.Postgres(t)
	a := openLog(t, cfg, stream.Options{})
	b := openLog(t, cfg, stream.Options{})
	p := newProject(t, a)
	time.Sleep(200 * time.Millisecond) // b's LISTEN is up
	w := b.Hub().Watch(p)
	defer w.Close()
	for i := range 20 {
		ch := w.C()
		t0 := time.Now()
		seq, err := a.Append(context.Background(), p, stream.MessageSent, i)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
			t.Fatalf("event %d: replica b not woken", seq)
		}
		if d := time.Since(t0); d > 500*time.Millisecond {
			t.Errorf("event %d: woken after %s", seq, d)
		}
	}
}

// TestPageByteBudget: pages stop before the event that would pass the byte
// budget, never split an event, give an event larger than the budget alone,
// and say when the budget cut them short; every read path agrees and
// paging on gets every event once, in order.
func TestPageByteBudget(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		const budget = 10_000
		l := openLog(t, cfg, stream.Options{PageBytes: budget})
		p := newProject(t, l)
		ctx := context.Background()
		sizes := []int{3000, 3000, 3000, 3000, 25_000, 100, 100, 9_000, 2_000, 12_000, 50}
		for i, n := range sizes {
			typ := stream.MessageReceived
			if i%2 == 1 {
				typ = stream.MessageSent
			}
			if _, err := l.Append(ctx, p, typ, map[string]any{"i": i, "pad": strings.Repeat("é", n/2)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, typ := range []string{"", stream.MessageReceived} {
			var after int64
			var seen []int64
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("paging does not end")
				}
				envs, cut, err := l.ReadEnvelopesWithin(ctx, p, after, 100, 0, typ)
				if err != nil {
					t.Fatal(err)
				}
				evs, cut2, err := l.ReadPage(ctx, p, after, 100, typ)
				if err != nil {
					t.Fatal(err)
				}
				page, err := l.ReadJSON(ctx, p, after, 100, typ)
				if err != nil {
					t.Fatal(err)
				}
				var fromJSON []stream.Event
				if err := json.Unmarshal(page, &fromJSON); err != nil {
					t.Fatal(err)
				}
				if len(envs) == 0 {
					if cut || len(evs) != 0 || len(fromJSON) != 0 {
						t.Fatalf("empty page: cut %v, %d events, %d from JSON", cut, len(evs), len(fromJSON))
					}
					break
				}
				if cut != cut2 || len(evs) != len(envs) || len(fromJSON) != len(envs) {
					t.Fatalf("after %d: %d envelopes (cut %v), %d events (cut %v), %d from JSON", after, len(envs), cut, len(evs), cut2, len(fromJSON))
				}
				total := 0
				for i, e := range envs {
					total += len(e.Body)
					if evs[i].Seq != e.Seq || fromJSON[i].Seq != e.Seq || (typ != "" && e.Type != typ) {
						t.Fatalf("position %d: seqs %d %d %d", i, e.Seq, evs[i].Seq, fromJSON[i].Seq)
					}
					seen = append(seen, e.Seq)
				}
				if len(envs) > 1 && total > budget {
					t.Fatalf("page of %d events holds %d bytes, budget %d", len(envs), total, budget)
				}
				if len(page) != total+len(envs)+1 {
					t.Fatalf("JSON page %d bytes, envelopes %d", len(page), total)
				}
				// The page is as full as the budget allows.
				next, _, err := l.ReadEnvelopesWithin(ctx, p, envs[len(envs)-1].Seq, 1, 0, typ)
				if err != nil {
					t.Fatal(err)
				}
				if len(next) > 0 != cut {
					t.Fatalf("after %d: cut %v, but next page has %d", after, cut, len(next))
				}
				if cut && total+len(next[0].Body) <= budget {
					t.Fatalf("page stopped at %d bytes before an event of %d", total, len(next[0].Body))
				}
				after = envs[len(envs)-1].Seq
			}
			want := 0
			for i := range sizes {
				if typ == "" || i%2 == 0 {
					want++
				}
			}
			if len(seen) != want {
				t.Fatalf("type %q: %d events seen, want %d", typ, len(seen), want)
			}
			for i := 1; i < len(seen); i++ {
				if seen[i] <= seen[i-1] {
					t.Fatalf("type %q: out of order %v", typ, seen)
				}
			}
		}
		// A budget of its own: never more than it, except one event alone.
		envs, cut, err := l.ReadEnvelopesWithin(ctx, p, 0, 100, 1, "")
		if err != nil || len(envs) != 1 || !cut {
			t.Fatalf("budget 1: %d events, cut %v, %v", len(envs), cut, err)
		}
		// The limit still counts: no cut when the limit ends the page.
		envs, cut, err = l.ReadEnvelopesWithin(ctx, p, 5, 2, 1<<20, "")
		if err != nil || len(envs) != 2 || cut {
			t.Fatalf("limit 2: %d events, cut %v, %v", len(envs), cut, err)
		}
	})
}

// TestEventSizesUpgradeInPlace: every event stores its envelope's size and
// pos (the running sum of its project's sizes); a log created before these
// columns existed gets them, filled in, when it is opened; events written
// without them (an older replica during an upgrade) still page, and the
// next append continues the running sum.
func TestEventSizesUpgradeInPlace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		const budget = 10_000
		db := storetest.Open(t, cfg)
		l, err := stream.Open(db, stream.Options{PageBytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		p := newProject(t, l)
		q := newProject(t, l)
		appendN := func(from, n int) {
			for i := from; i < from+n; i++ {
				for _, pr := range []string{p, q} {
					if _, err := l.Append(ctx, pr, stream.MessageReceived, map[string]any{"i": i, "pad": strings.Repeat("x", (i*977)%7000)}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		// wrong counts the events whose size or pos is not what their bodies say.
		wrong := func(db *store.DB) int {
			var n int
			if err := db.R.QueryRow(`SELECT count(*) FROM events WHERE pos IS NULL OR size IS NULL OR size <> octet_length(body)
				OR pos <> (SELECT sum(octet_length(body)) FROM events AS e WHERE e.project_id = events.project_id AND e.seq <= events.seq)`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// pages reads the project page by page and checks every page is as
		// full as the budget allows.
		pages := func(l *stream.Log, pr string, head int64) {
			var after int64
			for after < head {
				envs, cut, err := l.ReadEnvelopesWithin(ctx, pr, after, 100, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				js, err := l.ReadJSON(ctx, pr, after, 100, "")
				if err != nil {
					t.Fatal(err)
				}
				var fromJSON []json.RawMessage
				if err := json.Unmarshal(js, &fromJSON); err != nil || len(fromJSON) != len(envs) || len(envs) == 0 {
					t.Fatalf("after %d: %d envelopes, %d from JSON (%v)", after, len(envs), len(fromJSON), err)
				}
				total := 0
				for i, e := range envs {
					if e.Seq != after+int64(i)+1 {
						t.Fatalf("after %d: event %d has seq %d", after, i, e.Seq)
					}
					total += len(e.Body)
				}
				if len(envs) > 1 && total > budget {
					t.Fatalf("after %d: %d events of %d bytes, budget %d", after, len(envs), total, budget)
				}
				last := envs[len(envs)-1].Seq
				if last < head {
					more, _, err := l.ReadEnvelopesWithin(ctx, pr, last, 1, 0, "")
					if err != nil || len(more) != 1 {
						t.Fatalf("after %d: %v", last, err)
					}
					if !cut && len(envs) < 100 {
						t.Fatalf("after %d: a page of %d events not cut", after, len(envs))
					}
					if cut && total+len(more[0].Body) <= budget {
						t.Fatalf("after %d: page cut at %d bytes, the next event (%d bytes) fits", after, total, len(more[0].Body))
					}
				}
				after = last
			}
		}
		appendN(0, 30)
		if n := wrong(db); n != 0 {
			t.Fatalf("%d events with a wrong size or pos", n)
		}
		pages(l, p, 30)
		l.Close()

		// Make it a log of before: no size or pos.
		for _, stmt := range []string{"ALTER TABLE events DROP COLUMN size", "ALTER TABLE events DROP COLUMN pos"} {
			if _, err := db.W.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		db2 := storetest.Open(t, cfg) // migrates
		if n := wrong(db2); n != 0 {
			t.Fatalf("after the upgrade: %d events with a wrong size or pos", n)
		}
		l2, err := stream.Open(db2, stream.Options{PageBytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		l = l2
		pages(l2, p, 30)
		appendN(30, 10)
		if n := wrong(db2); n != 0 {
			t.Fatalf("after appending to the upgraded log: %d events with a wrong size or pos", n)
		}
		pages(l2, q, 40)

		// Events an older replica wrote, without size or pos: they page
		// (counted as fitting), and the next append heals the sum.
		if _, err := db2.W.Exec(db2.Rebind("UPDATE events SET size = NULL, pos = NULL WHERE project_id = ? AND seq > 35"), p); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for after := int64(0); after < 40; {
			envs, _, err := l2.ReadEnvelopesWithin(ctx, p, after, 100, 0, "")
			if err != nil || len(envs) == 0 {
				t.Fatalf("after %d: %d events (%v)", after, len(envs), err)
			}
			for _, e := range envs {
				got = append(got, e.Seq)
			}
			after = envs[len(envs)-1].Seq
		}
		for i, s := range got {
			if s != int64(i)+1 {
				t.Fatalf("events with NULL pos: read %v", got)
			}
		}
		appendN(40, 5)
		var pos, want int64
		if err := db2.R.QueryRow(db2.Rebind(`SELECT pos, (SELECT sum(octet_length(body)) FROM events WHERE project_id = ?) FROM events WHERE project_id = ? AND seq = 45`), p, p).Scan(&pos, &want); err != nil {
			t.Fatal(err)
		}
		if pos != want {
			t.Fatalf("after events without pos, the next appends have pos %d, want %d", pos, want)
		}
	})
}

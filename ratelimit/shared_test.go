package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// memLedger is a Ledger in memory, as PostgresLedger keeps it: running
// totals per bucket, key, replica and slot.
type memLedger struct {
	mu   sync.Mutex
	rows map[usageKey]int64
	fail bool
}

func (l *memLedger) Exchange(_ context.Context, replica string, use []Usage, since int64) ([]Usage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return nil, errors.New("database down")
	}
	for _, u := range use {
		l.rows[usageKey{u.Bucket, u.Key, u.Replica, u.Slot}] += u.N
	}
	var out []Usage
	for k, n := range l.rows {
		if k.slot >= since && k.replica != replica {
			out = append(out, Usage{Bucket: k.bucket, Key: k.key, Replica: k.replica, Slot: k.slot, N: n})
		}
	}
	return out, nil
}

func (l *memLedger) Sweep(_ context.Context, before int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.rows {
		if k.slot < before {
			delete(l.rows, k)
		}
	}
	return nil
}

// TestSharedBudget: three replicas each asked for a key's tokens five
// times faster than its rate grant together about the budget (burst +
// rate × time), not three times it; the ledger keeps only the last
// minute; a failed exchange loses nothing.
func TestSharedBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	ledger := &memLedger{rows: map[usageKey]int64{}}
	const rate, burst, replicas = 10, 20, 3
	type replica struct {
		b *Bucket
		s *Shared
	}
	var rs []replica
	for i := range replicas {
		b := New(rate, time.Second, burst)
		b.now = clock
		s := NewShared(ledger, string(rune('a'+i)), 0, nil)
		s.now = clock
		s.Add("writes", b)
		rs = append(rs, replica{b, s})
	}
	ctx := context.Background()
	granted := 0
	const step = 10 * time.Millisecond
	const run = 20 * time.Second
	for at := time.Duration(0); at < run; at += step {
		now = now.Add(step)
		for i, r := range rs {
			// Each replica is asked every 20 ms (50/s; the rate is 10/s
			// for all of them), and syncs every 250 ms, staggered.
			if (at/step)%2 == 0 {
				if ok, _ := r.b.Allow("key"); ok {
					granted++
				}
			}
			if (at/step+time.Duration(i)*8)%25 == 0 {
				if err := r.s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if at == 5*time.Second {
			// An exchange that fails keeps its use for the next one.
			ledger.fail = true
			if err := rs[0].s.Sync(ctx); err == nil {
				t.Fatal("Sync with the ledger down: no error")
			}
			ledger.fail = false
		}
	}
	budget := burst + rate*run.Seconds()
	t.Logf("%d replicas granted %d in %s; the budget is %.0f", replicas, granted, run, budget)
	// The bound: what the others grant in about two sync intervals.
	if over := float64(granted) - budget; over > 2*0.25*rate*replicas+burst*(replicas-1) || float64(granted) < 0.9*budget {
		t.Errorf("granted %d of a budget of %.0f", granted, budget)
	}
	oldest := int64(1 << 62)
	for k := range ledger.rows {
		oldest = min(oldest, k.slot)
	}
	if age := now.Unix() - oldest; age > sweepAfter+10 {
		t.Errorf("the ledger keeps a slot %d s old", age)
	}
	for _, r := range rs {
		if len(r.s.seen) > replicas*(Lookback+2) {
			t.Errorf("replica remembers %d rows", len(r.s.seen))
		}
	}
}

// TestSharedOff: a nil Shared or bucket is ignored, and an unshared
// bucket reports nothing.
func TestSharedOff(t *testing.T) {
	var s *Shared
	s.Add("x", New(1, time.Second, 1))
	NewShared(&memLedger{rows: map[usageKey]int64{}}, "a", 0, nil).Add("x", nil)
	b := New(1, time.Second, 1)
	b.Allow("k")
	if m := b.drain(); len(m) != 0 {
		t.Errorf("an unshared bucket kept %v", m)
	}
}

// BenchmarkAllow: the cost a shared bucket adds to a request (counting
// the use for the next report), parallel, over 100 keys.
func BenchmarkAllow(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "local"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			bk := New(1<<30, time.Second, 1<<30)
			if shared {
				NewShared(&memLedger{rows: map[usageKey]int64{}}, "a", 0, nil).Add("writes", bk)
			}
			keys := make([]string, 100)
			for i := range keys {
				keys[i] = "key_" + string(rune('A'+i%26)) + string(rune('a'+i/26))
			}
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					bk.Allow(keys[i%len(keys)])
					i++
				}
			})
		})
	}
}

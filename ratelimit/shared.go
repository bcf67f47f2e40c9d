package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Shared makes the buckets of several replicas one budget. Every replica
// still decides each request from its own buckets, with no database round
// trip; every Every (default DefaultSync) it reports to a Ledger what it
// took per bucket and key since its last report, and charges its buckets
// with what the other replicas reported (a bucket may go into debt, and
// then refuses until it refills). So the replicas together grant the
// budget, plus what the others granted that a replica has not heard of
// yet: at most what they grant in about two sync intervals (one to report,
// one to read). A burst taken on every replica at the same instant can
// pass up to replicas × burst once; a steady rate stays at the limit.
//
// Use is reported in slots of a second of the reporting replica's clock,
// and read back for the last few slots (Lookback): a report delayed longer
// than that is not seen by the others. A replica started afresh knows only
// that recent use: with an hourly budget it grants a full burst again, as
// a restarted single gateway does. The ledger's rows older than a minute
// are swept.
type Shared struct {
	ledger  Ledger
	replica string
	every   time.Duration
	logger  *slog.Logger

	mu      sync.Mutex
	buckets map[string]*Bucket
	seen    map[usageKey]int64 // the others' rows as applied
	swept   time.Time
	now     func() time.Time
}

// DefaultSync is how often Shared exchanges use through the ledger.
const DefaultSync = 250 * time.Millisecond

// Lookback is how many one-second slots before the current one are read
// back: the others' reports that arrive later than this are not seen.
const Lookback = 3

// sweepAfter is how old a slot the ledger keeps (in slots, seconds).
const sweepAfter = 60

// Usage is what one replica took from one key of one bucket in a slot
// (Unix seconds of its clock), as the ledger keeps it: N adds up.
type Usage struct {
	Bucket, Key, Replica string
	Slot                 int64
	N                    int64
}

type usageKey struct {
	bucket, key, replica string
	slot                 int64
}

// A Ledger is where the replicas' use meets (PostgreSQL: NewPostgresLedger).
type Ledger interface {
	// Exchange adds the use of replica (in slot, each Usage's Slot) and
	// returns every other replica's use in slots from since on, as it
	// stands (running totals, not increments).
	Exchange(ctx context.Context, replica string, use []Usage, since int64) ([]Usage, error)
	// Sweep deletes the use of slots before before.
	Sweep(ctx context.Context, before int64) error
}

// NewShared returns the sharing of buckets through ledger by the replica
// named replica (unique among the replicas), every every (DefaultSync if
// not positive). Add the buckets, then Run it.
func NewShared(ledger Ledger, replica string, every time.Duration, logger *slog.Logger) *Shared {
	if every <= 0 {
		every = DefaultSync
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Shared{ledger: ledger, replica: replica, every: every, logger: logger,
		buckets: map[string]*Bucket{}, seen: map[usageKey]int64{}, now: time.Now}
}

// Add shares b under name, the same on every replica (such as the metrics'
// name of the limit). A nil Shared or bucket (a limit that is off) is
// ignored. Add before the bucket is used.
func (s *Shared) Add(name string, b *Bucket) {
	if s == nil || b == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.mu.Lock()
	b.unsent = map[string]int64{}
	b.mu.Unlock()
	s.buckets[name] = b
}

// Run exchanges use every interval until ctx ends, then reports what is
// left once.
func (s *Shared) Run(ctx context.Context) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			s.Sync(fctx) //nolint:errcheck // at exit, best effort
			cancel()
			return
		case <-tick.C:
		}
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("rate limits: share use with the other replicas", "err", err)
		}
	}
}

// Sync reports this replica's use and charges the others' (Run calls it).
func (s *Shared) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	slot := now.Unix()
	var out []Usage
	drained := map[string]map[string]int64{}
	for name, b := range s.buckets {
		m := b.drain()
		if len(m) == 0 {
			continue
		}
		drained[name] = m
		for k, n := range m {
			out = append(out, Usage{Bucket: name, Key: k, Replica: s.replica, Slot: slot, N: n})
		}
	}
	since := slot - Lookback
	in, err := s.ledger.Exchange(ctx, s.replica, out, since)
	if err != nil {
		for name, m := range drained {
			s.buckets[name].unsend(m)
		}
		return fmt.Errorf("ratelimit: exchange: %w", err)
	}
	for _, u := range in {
		b := s.buckets[u.Bucket]
		if b == nil || u.Replica == s.replica || u.Slot < since {
			continue
		}
		k := usageKey{u.Bucket, u.Key, u.Replica, u.Slot}
		if d := u.N - s.seen[k]; d > 0 {
			b.charge(u.Key, d)
			s.seen[k] = u.N
		}
	}
	for k := range s.seen {
		if k.slot < since {
			delete(s.seen, k)
		}
	}
	if now.Sub(s.swept) >= 10*time.Second {
		s.swept = now
		if err := s.ledger.Sweep(ctx, slot-sweepAfter); err != nil {
			return fmt.Errorf("ratelimit: sweep: %w", err)
		}
	}
	return nil
}

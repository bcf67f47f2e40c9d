// Package ratelimit is the gateway's in-memory token bucket, keyed by a
// string (a client IP, an API key id). Each replica keeps its own buckets,
// and decides every request from them alone; on PostgreSQL, Shared makes
// the replicas' buckets one budget by exchanging what each took through
// the database every few hundred milliseconds (see Shared).
package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Bucket holds, per key, up to Burst tokens that refill at Rate per second.
// The zero value is not usable; make one with New. A nil *Bucket allows
// everything (a limit that is off).
type Bucket struct {
	rate  float64 // tokens per second
	burst float64

	mu    sync.Mutex
	keys  map[string]*state
	swept time.Time
	now   func() time.Time

	refused func() // counts refusals (metrics); nil: not counted

	// unsent is what this replica took, per key, since Shared last
	// reported it; nil when the bucket is not shared.
	unsent map[string]int64
}

// OnRefusal has f called each time the bucket refuses (Allow or AllowN
// answering false), for metrics; f must be quick. Set it before use. A nil
// bucket never refuses, and ignores it.
func (b *Bucket) OnRefusal(f func()) {
	if b != nil {
		b.refused = f
	}
}

type state struct {
	tokens float64
	at     time.Time
}

// New returns a bucket of burst tokens per key refilling n tokens per
// period. It returns nil (no limit) when n or burst is not positive.
func New(n int, per time.Duration, burst int) *Bucket {
	if n <= 0 || burst <= 0 || per <= 0 {
		return nil
	}
	return &Bucket{rate: float64(n) / per.Seconds(), burst: float64(burst), keys: map[string]*state{}, now: time.Now}
}

// Allow takes one token for key. It reports whether there was one, and
// else how long until there is.
func (b *Bucket) Allow(key string) (bool, time.Duration) { return b.AllowN(key, 1) }

// AllowN takes n tokens for key at once, or none. A request for more than
// the burst is refused with the time the bucket takes to fill.
func (b *Bucket) AllowN(key string, n int) (bool, time.Duration) {
	if b == nil || n <= 0 {
		return true, 0
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	s := b.fill(key, now)
	need := float64(n)
	if s.tokens >= need {
		s.tokens -= need
		b.taken(key, n)
		return true, 0
	}
	if b.refused != nil {
		b.refused()
	}
	return false, b.wait(math.Min(need, b.burst) - s.tokens)
}

// Blocked reports whether key has no token left, without taking one, and
// how long until it has.
func (b *Bucket) Blocked(key string) (bool, time.Duration) {
	if b == nil {
		return false, 0
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.keys[key]
	if !ok {
		return false, 0
	}
	tokens := math.Min(b.burst, s.tokens+now.Sub(s.at).Seconds()*b.rate)
	if tokens >= 1 {
		return false, 0
	}
	return true, b.wait(1 - tokens)
}

// maxUnsent bounds the keys whose use a shared bucket keeps between two
// reports: beyond it, a new key's use stays this replica's own until the
// next report.
const maxUnsent = 50000

func (b *Bucket) taken(key string, n int) {
	if b.unsent == nil {
		return
	}
	if _, ok := b.unsent[key]; ok || len(b.unsent) < maxUnsent {
		b.unsent[key] += int64(n)
	}
}

// drain returns what was taken since the last drain, and forgets it.
func (b *Bucket) drain() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.unsent
	if len(out) > 0 {
		b.unsent = map[string]int64{}
	}
	return out
}

// unsend puts back what a failed report did not deliver.
func (b *Bucket) unsend(m map[string]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, n := range m {
		b.unsent[k] += n
	}
}

// charge takes n tokens for key that another replica granted: the bucket
// may go into debt (down to -burst), which this replica then refuses
// until it refills.
func (b *Bucket) charge(key string, n int64) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	s := b.fill(key, now)
	s.tokens = math.Max(s.tokens-float64(n), -b.burst)
}

func (b *Bucket) fill(key string, now time.Time) *state {
	s, ok := b.keys[key]
	if !ok {
		s = &state{tokens: b.burst, at: now}
		b.keys[key] = s
		return s
	}
	s.tokens = math.Min(b.burst, s.tokens+now.Sub(s.at).Seconds()*b.rate)
	s.at = now
	return s
}

func (b *Bucket) wait(missing float64) time.Duration {
	return time.Duration(math.Ceil(missing / b.rate * float64(time.Second)))
}

// sweep forgets full buckets (they hold no information) once a minute
// when many keys are tracked, so memory stays bounded by the keys active
// within the time a bucket takes to fill.
func (b *Bucket) sweep(now time.Time) {
	if len(b.keys) < 10000 || now.Sub(b.swept) < time.Minute {
		return
	}
	b.swept = now
	for k, s := range b.keys {
		if s.tokens+now.Sub(s.at).Seconds()*b.rate >= b.burst {
			delete(b.keys, k)
		}
	}
}

package messaging

import (
	"sync"
	"time"
)

// cache is a bounded map of what the hot request paths would otherwise
// read from the database on every request (a key's principal, a
// connection, a thread's conversation id). Entries expire ttl after they
// were put (never, if ttl is 0), so what another replica changed reaches
// this one within ttl even when its signal is lost; changes made here, and
// those other replicas announce (stream signals), remove the entry at
// once. When full, a put first drops expired entries, then arbitrary ones
// (Go's map order), so the cache never holds more than max entries.
type cache[K comparable, V any] struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[K]cached[V]
	// gen counts forgets: an entry read from the database before a
	// forget may be stale, so putAt refuses it (see putAt).
	gen uint64
}

type cached[V any] struct {
	v       V
	expires time.Time // zero: never
}

func newCache[K comparable, V any](max int, ttl time.Duration) *cache[K, V] {
	return &cache[K, V]{ttl: ttl, max: max, m: make(map[K]cached[V])}
}

// get returns the entry of k unless it is missing or expired.
func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || (!e.expires.IsZero() && time.Now().After(e.expires)) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// generation is the number to give putAt for a value about to be read
// from the database.
func (c *cache[K, V]) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put records v for k.
func (c *cache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(k, v)
}

// putAt records v for k unless an entry was forgotten since gen was
// taken (generation, before v was read): then v may predate the change
// that was announced, and is not kept.
func (c *cache[K, V]) putAt(k K, v V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.store(k, v)
	}
}

func (c *cache[K, V]) store(k K, v V) {
	var exp time.Time
	if c.ttl > 0 {
		exp = time.Now().Add(c.ttl)
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		c.evict()
	}
	c.m[k] = cached[V]{v: v, expires: exp}
}

// evict makes room for one entry: expired ones go first; if none had,
// an eighth of the entries (at least one) go, whichever the map yields.
func (c *cache[K, V]) evict() {
	now := time.Now()
	for k, e := range c.m {
		if !e.expires.IsZero() && now.After(e.expires) {
			delete(c.m, k)
		}
	}
	drop := max(1, c.max/8) - (c.max - len(c.m))
	for k := range c.m {
		if drop <= 0 {
			break
		}
		delete(c.m, k)
		drop--
	}
}

// forget removes k's entry.
func (c *cache[K, V]) forget(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.gen++
	c.mu.Unlock()
}

// forgetIf removes the entries whose value match says to; for rare changes
// (a key revoked), as it looks at every entry.
func (c *cache[K, V]) forgetIf(match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.m {
		if match(e.v) {
			delete(c.m, k)
		}
	}
}

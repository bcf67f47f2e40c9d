package messaging

import (
	"fmt"
	"testing"
	"time"
)

// TestCacheBounded: however many entries are put, the cache holds at most
// its bound, and the latest put is there.
func TestCacheBounded(t *testing.T) {
	c := newCache[string, int](100, time.Hour)
	for i := range 10000 {
		k := fmt.Sprint(i)
		c.put(k, i)
		if v, ok := c.get(k); !ok || v != i {
			t.Fatalf("put %s, got %d %v", k, v, ok)
		}
		if len(c.m) > 100 {
			t.Fatalf("%d entries after %d puts; bound 100", len(c.m), i+1)
		}
	}
}

// TestCacheExpiresAndForgets: an entry is gone after its ttl, and after
// forget; a value read before a forget (putAt with the older generation)
// is not kept, as it may be what the forget announced changed.
func TestCacheExpiresAndForgets(t *testing.T) {
	c := newCache[string, string](10, 20*time.Millisecond)
	c.put("k", "v")
	time.Sleep(30 * time.Millisecond)
	if _, ok := c.get("k"); ok {
		t.Fatal("entry outlived its ttl")
	}
	gen := c.generation()
	c.forgetIf(func(v string) bool { return v == "revoked" })
	c.putAt("k", "stale", gen)
	if _, ok := c.get("k"); ok {
		t.Fatal("a value read before a forget was kept")
	}
	c.putAt("k", "fresh", c.generation())
	if v, ok := c.get("k"); !ok || v != "fresh" {
		t.Fatalf("got %q %v; want fresh", v, ok)
	}
	c.forget("k")
	if _, ok := c.get("k"); ok {
		t.Fatal("forgotten entry still there")
	}
	never := newCache[string, string](10, 0)
	never.put("k", "v")
	if _, ok := never.get("k"); !ok {
		t.Fatal("entry of a cache without ttl is gone")
	}
}

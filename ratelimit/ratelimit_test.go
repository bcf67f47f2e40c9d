package ratelimit

import (
	"testing"
	"time"
)

// TestBucket: a burst, then one token per 1/rate; keys are independent;
// AllowN takes all or nothing; nil allows everything.
func TestBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(10, time.Minute, 3) // a token every 6 s
	b.now = func() time.Time { return now }
	for i := range 3 {
		if ok, _ := b.Allow("a"); !ok {
			t.Fatalf("token %d refused", i+1)
		}
	}
	ok, wait := b.Allow("a")
	if ok || wait != 6*time.Second {
		t.Fatalf("4th: %v %v, want refused for 6 s", ok, wait)
	}
	if blocked, _ := b.Blocked("a"); !blocked {
		t.Error("Blocked says no")
	}
	if ok, _ := b.Allow("b"); !ok {
		t.Error("another key refused")
	}
	now = now.Add(6 * time.Second)
	if ok, _ := b.Allow("a"); !ok {
		t.Error("refilled token refused")
	}
	now = now.Add(time.Hour)
	if ok, _ := b.AllowN("a", 4); ok {
		t.Error("AllowN over the burst allowed")
	}
	if ok, _ := b.AllowN("a", 3); !ok {
		t.Error("AllowN of the full bucket refused")
	}
	var off *Bucket
	if ok, _ := off.AllowN("a", 1000); !ok || New(0, time.Second, 1) != nil {
		t.Error("a nil bucket limits")
	}
}

// TestOnRefusal: the hook is called for each refusal, never for a token
// given; a nil bucket takes it and ignores it.
func TestOnRefusal(t *testing.T) {
	b := New(1, time.Hour, 2)
	n := 0
	b.OnRefusal(func() { n++ })
	for range 5 {
		b.Allow("k")
	}
	if n != 3 {
		t.Errorf("%d refusals counted, want 3", n)
	}
	var none *Bucket
	none.OnRefusal(func() { n++ })
	none.Allow("k")
	if n != 3 {
		t.Errorf("a nil bucket counted a refusal")
	}
}

package messaging

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
)

// TestAdvance: a report moves the delivery forward only; read and failed
// are final, a late delivered does not undo read, and repeats change
// nothing.
func TestAdvance(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	at := func(tm time.Time) *time.Time { return &tm }
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name   string
		cur    delivery
		r      channels.Receipt
		want   delivery
		change bool
	}{
		{"none, sent", delivery{}, channels.Receipt{State: "sent", At: t0}, delivery{State: "sent"}, true},
		{"sent, delivered", delivery{State: "sent"}, channels.Receipt{State: "delivered", At: t0},
			delivery{State: "delivered", DeliveredAt: at(t0)}, true},
		{"delivered, read", delivery{State: "delivered", DeliveredAt: at(t0)}, channels.Receipt{State: "read", At: t1},
			delivery{State: "read", DeliveredAt: at(t0), ReadAt: at(t1)}, true},
		{"none, read: delivered then at the latest", delivery{}, channels.Receipt{State: "read", At: t1},
			delivery{State: "read", DeliveredAt: at(t1), ReadAt: at(t1)}, true},
		{"read, delivered", delivery{State: "read", ReadAt: at(t1), DeliveredAt: at(t1)}, channels.Receipt{State: "delivered", At: t0},
			delivery{State: "read", ReadAt: at(t1), DeliveredAt: at(t1)}, false},
		{"delivered, sent", delivery{State: "delivered", DeliveredAt: at(t0)}, channels.Receipt{State: "sent", At: t1},
			delivery{State: "delivered", DeliveredAt: at(t0)}, false},
		{"delivered, delivered", delivery{State: "delivered", DeliveredAt: at(t0)}, channels.Receipt{State: "delivered", At: t1},
			delivery{State: "delivered", DeliveredAt: at(t0)}, false},
		{"delivered, failed", delivery{State: "delivered", DeliveredAt: at(t0)}, channels.Receipt{State: "failed", Code: "30007", Reason: "filtered", At: t1},
			delivery{State: "failed", DeliveredAt: at(t0), Code: str("30007"), Reason: str("filtered")}, true},
		{"failed, failed", delivery{State: "failed", Code: str("30007")}, channels.Receipt{State: "failed", Code: "30008", At: t1},
			delivery{State: "failed", Code: str("30007")}, false},
		{"failed, read", delivery{State: "failed"}, channels.Receipt{State: "read", At: t1}, delivery{State: "failed"}, false},
		{"read, failed", delivery{State: "read"}, channels.Receipt{State: "failed", At: t1}, delivery{State: "read"}, false},
		{"none, failed without a code", delivery{}, channels.Receipt{State: "failed", At: t1}, delivery{State: "failed"}, true},
	} {
		got, change := advance(c.cur, c.r)
		if change != c.change || !same(got, c.want) {
			t.Errorf("%s: advance = %+v, %v; want %+v, %v", c.name, got, change, c.want, c.change)
		}
	}
}

func same(a, b delivery) bool {
	eqs := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqt := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.State == b.State && eqs(a.Code, b.Code) && eqs(a.Reason, b.Reason) &&
		eqt(a.DeliveredAt, b.DeliveredAt) && eqt(a.ReadAt, b.ReadAt)
}

// TestCleanReceipt: unknown states and missing or oversized ids are
// refused; code and reason are cut, kept only on failed; a missing or
// future time is the arrival time.
func TestCleanReceipt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := &Service{now: func() time.Time { return now }}
	for _, r := range []channels.Receipt{
		{MessageID: "SM1", State: "bounced"},
		{MessageID: "SM1"},
		{State: "delivered"},
		{MessageID: strings.Repeat("x", MaxReceiptMessageID+1), State: "delivered"},
	} {
		if _, err := s.cleanReceipt(r); err == nil {
			t.Errorf("cleanReceipt(%+v) accepted it", r)
		}
	}
	got, err := s.cleanReceipt(channels.Receipt{MessageID: "SM1", State: "failed",
		Code: strings.Repeat("9", 100), Reason: "line\none\xff" + strings.Repeat("é", MaxReceiptReason), At: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Code) > MaxReceiptCode || len(got.Reason) > MaxReceiptReason || strings.Contains(got.Reason, "\n") || !utf8.ValidString(got.Reason) ||
		!strings.HasPrefix(got.Reason, "line one\uFFFD") || !got.At.Equal(now) {
		t.Errorf("cleaned to %+v", got)
	}
	got, _ = s.cleanReceipt(channels.Receipt{MessageID: "SM1", State: "delivered", Code: "1", Reason: "r", At: now.Add(-time.Minute)})
	if got.Code != "" || got.Reason != "" || !got.At.Equal(now.Add(-time.Minute)) {
		t.Errorf("delivered cleaned to %+v", got)
	}
	if f := failureText("30007", "filtered"); f != "not delivered: filtered (code 30007)" {
		t.Errorf("failureText = %q", f)
	}
}

package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestSessionStopsBeforeLeaseLapses: a session whose renewals fail (the
// database cannot be reached) is stopped leaseMargin before its lease, as
// last renewed, could lapse, and not restarted: by then another replica
// may run it. While renewals succeed, it runs on.
func TestSessionStopsBeforeLeaseLapses(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	d := &Sessions{Lease: lease, MaxBackoff: time.Minute, DegradedAfter: 3, Logger: slog.New(slog.DiscardHandler)}
	var failing atomic.Bool
	var lastOK atomic.Int64 // when the last renewal that succeeded began, since start
	start := time.Now()
	stopped := make(chan time.Time, 1)
	claimed := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.loop(context.Background(), claimed.Add(lease), task{
			name: "conn_test",
			poll: func(ctx context.Context, healthy func()) error {
				<-ctx.Done()
				stopped <- time.Now()
				return ctx.Err()
			},
			renew: func(ctx context.Context) (bool, error) {
				at := time.Since(start)
				if failing.Load() {
					return false, errors.New("database unreachable")
				}
				lastOK.Store(int64(at))
				return true, nil
			},
			release: func(ctx context.Context) error { return nil },
		})
	}()
	// Renewals succeed for three leases: the session runs on.
	select {
	case <-stopped:
		t.Fatal("the session stopped while its lease was renewed")
	case <-time.After(3 * lease):
	}
	failing.Store(true)
	var at time.Time
	select {
	case at = <-stopped:
	case <-time.After(3 * lease):
		t.Fatal("the session ran on with its renewals failing")
	}
	<-done
	lapse := start.Add(time.Duration(lastOK.Load()) + lease)
	if margin := lapse.Sub(at); margin < leaseMargin(lease)-50*time.Millisecond {
		t.Errorf("the session stopped %s before its lease could lapse; want at least the margin %s", margin, leaseMargin(lease))
	}
	if at.After(lapse) {
		t.Errorf("the session stopped %s after its lease could lapse", at.Sub(lapse))
	}
}

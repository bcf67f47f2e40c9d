package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/messaging"
)

// Sessions runs the long-lived inbound sessions of connections
// (channels.Poller: Telegram getUpdates, a gateway websocket): at most one
// per connection across every replica, on the replica holding the
// connection's lease in the database. A replica that dies stops renewing;
// another takes its sessions over once the lease lapses (within Lease plus
// ClaimInterval). The holder renews every Lease/3 and stops a session
// leaseMargin before the lease it last renewed runs out, even when the
// database cannot be reached to say so, so two replicas never run one
// session at once. A session that fails is started again after a backoff
// that doubles up to MaxBackoff, so a crash loop never hammers the
// provider or burns a customer's token; one the provider refuses for good
// (revoked credentials) stops and the connection says so.
type Sessions struct {
	Service *messaging.Service
	Logger  *slog.Logger
	// Owner names this replica in leases; random if empty.
	Owner string
	// Lease is how long a claim lasts without renewal (DefaultLease).
	Lease time.Duration
	// ClaimInterval is how often unowned sessions are looked for
	// (default 1 s).
	ClaimInterval time.Duration
	// MaxBackoff caps the wait between restarts of a failing session
	// (default 1 min).
	MaxBackoff time.Duration
	// DegradedAfter is how many failures in a row mark the connection
	// degraded (default 3).
	DegradedAfter int

	abandon atomic.Bool // tests: stop as if the process died, leases kept
}

// DefaultLease is how long a worker's claim (of a webhook endpoint, of a
// provider session) lasts without renewal: a replica that dies hands its
// work over within it (plus the claim interval, 1 s). It is renewed every
// third of it, so a shorter lease costs a database write per leased item
// more often; the work stops a margin (a fifth of it, at most 1 s) before
// it runs out, which must exceed the clock skew between replicas.
const DefaultLease = 3 * time.Second

// replicaName names this replica in leases: random, so that two processes
// never share one.
func replicaName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "replica-" + hex.EncodeToString(b)
}

// Run claims and runs sessions until ctx ends, then stops them and
// releases their leases so another replica takes over at once.
func (d *Sessions) Run(ctx context.Context) {
	if d.Owner == "" {
		d.Owner = replicaName()
	}
	if d.Lease <= 0 {
		d.Lease = DefaultLease
	}
	if d.ClaimInterval <= 0 {
		d.ClaimInterval = time.Second
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = time.Minute
	}
	if d.DegradedAfter <= 0 {
		d.DegradedAfter = 3
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	work := newLeased()
	defer work.wait()
	tick := time.NewTicker(d.ClaimInterval)
	defer tick.Stop()
	for {
		// The leases claimed end Lease after this instant at the latest
		// (each is written from a clock read after it).
		t0 := time.Now()
		ss, err := d.Service.ClaimSessions(ctx, d.Owner, d.Lease, work.has)
		if err != nil && ctx.Err() == nil {
			d.Logger.Warn("sessions: claim", "err", err)
		}
		for _, s := range ss {
			work.start(s.Conn.ID, func() { d.run(ctx, s, t0.Add(d.Lease)) })
		}
		d.claimApps(ctx, work)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// claimApps starts the operator's app sessions this replica can take the
// lease of (and that run nowhere here yet).
func (d *Sessions) claimApps(ctx context.Context, work *leased) {
	apps, err := d.Service.AppSessions(ctx)
	if err != nil && ctx.Err() == nil {
		d.Logger.Warn("sessions: app sessions", "err", err)
	}
	for _, a := range apps {
		if work.has(a.Lease) {
			continue
		}
		t0 := time.Now()
		held, err := d.Service.ClaimLease(ctx, a.Lease, d.Owner, d.Lease)
		if err != nil && ctx.Err() == nil {
			d.Logger.Warn("sessions: claim", "session", a.Lease, "err", err)
		}
		if held {
			work.start(a.Lease, func() { d.runApp(ctx, a, t0.Add(d.Lease)) })
		}
	}
}

// task is one long-lived session as the loop below runs it: a
// connection's (a Poller) or the operator's app's (an AppSession).
type task struct {
	name string // for the log: a connection id, or app-session:<channel>
	// poll runs the session once, until ctx ends or it fails; healthy is
	// called after every message it stored.
	poll func(ctx context.Context, healthy func()) error
	// renew extends the lease; false when it is lost.
	renew func(ctx context.Context) (bool, error)
	// release hands the lease over (at shutdown).
	release func(ctx context.Context) error
	// status moves the connection to a state (nil for app sessions,
	// which serve many connections).
	status func(ctx context.Context, status, reason string)
}

// run runs a connection's session while this replica holds its lease
// (claimed until at the latest).
func (d *Sessions) run(ctx context.Context, s messaging.Session, until time.Time) {
	d.loop(ctx, until, task{
		name: s.Conn.ID,
		poll: func(ctx context.Context, healthy func()) error {
			emit := d.Service.ReceiveFunc(ctx, s.Conn)
			return s.Poller.Poll(ctx, func(ins ...channels.Inbound) error {
				if err := emit(ins...); err != nil {
					return err
				}
				healthy()
				return nil
			})
		},
		renew:   func(ctx context.Context) (bool, error) { return d.Service.RenewSession(ctx, s.Conn, d.Owner, d.Lease) },
		release: func(ctx context.Context) error { return d.Service.ReleaseSession(ctx, s.Conn, d.Owner) },
		status: func(ctx context.Context, status, reason string) {
			if err := d.Service.SetConnectionStatus(ctx, s.Conn, status, reason); err != nil {
				d.Logger.Warn("sessions: status", "connection", s.Conn.ID, "err", err)
			}
		},
	})
}

// runApp runs the operator's app's session of a channel while this
// replica holds its lease (claimed until at the latest).
func (d *Sessions) runApp(ctx context.Context, s messaging.AppSession, until time.Time) {
	d.loop(ctx, until, task{
		name: s.Lease,
		poll: func(ctx context.Context, healthy func()) error {
			emit := d.Service.RouteFunc(ctx, s.Channel)
			return s.Session.Run(ctx, func(key string, ins ...channels.Inbound) error {
				if err := emit(key, ins...); err != nil {
					return err
				}
				healthy()
				return nil
			})
		},
		renew:   func(ctx context.Context) (bool, error) { return d.Service.ClaimLease(ctx, s.Lease, d.Owner, d.Lease) },
		release: func(ctx context.Context) error { return d.Service.ReleaseLease(ctx, s.Lease, d.Owner) },
	})
}

// loop runs t while the lease is held: restarted with a backoff when it
// fails, stopped for good when the provider revokes the credentials. The
// lease, claimed until at the latest, is renewed every Lease/3; the
// session stops leaseMargin before the end of the lease as last renewed
// (a timer re-armed on each renewal, from the time taken before the
// renewing statement), so a replica cut off from the database stops before
// another may take over.
func (d *Sessions) loop(ctx context.Context, until time.Time, t task) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	margin := leaseMargin(d.Lease)
	deadline := time.AfterFunc(time.Until(until.Add(-margin)), cancel)
	defer deadline.Stop()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(d.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			t0 := time.Now()
			ok, err := t.renew(sctx)
			if err != nil {
				// A database hiccup: keep going while the lease lasts
				// (the deadline stops the session when it does not); the
				// next renewal decides.
				if sctx.Err() == nil {
					d.Logger.Warn("sessions: renew", "session", t.name, "err", err)
				}
				continue
			}
			if !ok {
				cancel() // taken over, deleted or revoked
				return
			}
			deadline.Reset(time.Until(t0.Add(d.Lease - margin)))
		}
	}()
	status := func(st, reason string) {
		if t.status != nil {
			t.status(context.WithoutCancel(sctx), st, reason)
		}
	}
	failures := 0
	degraded := false
	healthy := func() {
		if degraded {
			degraded = false
			status(messaging.StatusActive, "")
		}
		failures = 0
	}
	for sctx.Err() == nil {
		started := time.Now()
		err := t.poll(sctx, healthy)
		if sctx.Err() != nil {
			break
		}
		if err == nil {
			err = errors.New("the session ended on its own")
		}
		if time.Since(started) > d.MaxBackoff {
			failures = 0 // it ran a good while: a new failure, not a loop
		}
		failures++
		d.Logger.Warn("sessions: session failed", "session", t.name, "failures", failures, "err", err)
		if errors.Is(err, channels.ErrRevoked) {
			status(messaging.StatusRevoked, err.Error())
			break
		}
		if !degraded && (failures >= d.DegradedAfter || errors.Is(err, channels.ErrPermanent)) {
			degraded = true
			status(messaging.StatusDegraded, err.Error())
		}
		wait := min(time.Second<<min(failures-1, 10), d.MaxBackoff)
		wait = max(wait, min(channels.RetryAfter(err), d.MaxBackoff))
		select {
		case <-sctx.Done():
		case <-time.After(wait):
		}
	}
	cancel()
	<-renewed
	if ctx.Err() != nil && !d.abandon.Load() {
		// Shutdown: hand the session over at once. Poll has returned, so
		// two replicas never poll at the same time.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := t.release(rctx); err != nil {
			d.Logger.Warn("sessions: release", "session", t.name, "err", err)
		}
		rcancel()
	}
}

package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
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
// ClaimInterval). A session that fails is started again after a backoff
// that doubles up to MaxBackoff, so a crash loop never hammers the
// provider or burns a customer's token; one the provider refuses for good
// (revoked credentials) stops and the connection says so.
type Sessions struct {
	Service *messaging.Service
	Logger  *slog.Logger
	// Owner names this replica in leases; random if empty.
	Owner string
	// Lease is how long a claim lasts without renewal (default 15 s).
	Lease time.Duration
	// ClaimInterval is how often unowned sessions are looked for
	// (default 2 s).
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
// work over within it.
const DefaultLease = 15 * time.Second

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
		d.ClaimInterval = 2 * time.Second
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
	var (
		mu      sync.Mutex
		running = map[string]bool{}
		wg      sync.WaitGroup
	)
	defer wg.Wait()
	tick := time.NewTicker(d.ClaimInterval)
	defer tick.Stop()
	for {
		ss, err := d.Service.ClaimSessions(ctx, d.Owner, d.Lease, func(id string) bool {
			mu.Lock()
			defer mu.Unlock()
			return running[id]
		})
		if err != nil && ctx.Err() == nil {
			d.Logger.Warn("sessions: claim", "err", err)
		}
		for _, s := range ss {
			mu.Lock()
			running[s.Conn.ID] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.run(ctx, s)
				mu.Lock()
				delete(running, s.Conn.ID)
				mu.Unlock()
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// run runs one session while this replica holds its lease.
func (d *Sessions) run(ctx context.Context, s messaging.Session) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
			ok, err := d.Service.RenewSession(sctx, s.Conn, d.Owner, d.Lease)
			if err != nil && sctx.Err() == nil {
				// A database hiccup: keep going while the lease lasts;
				// the next renewal decides.
				d.Logger.Warn("sessions: renew", "connection", s.Conn.ID, "err", err)
				continue
			}
			if !ok {
				cancel() // taken over, deleted or revoked
				return
			}
		}
	}()
	emit := d.Service.ReceiveFunc(sctx, s.Conn)
	failures := 0
	degraded := false
	healthy := func(in channels.Inbound) error {
		if err := emit(in); err != nil {
			return err
		}
		if degraded {
			degraded = false
			if err := d.Service.SetConnectionStatus(context.WithoutCancel(sctx), s.Conn, messaging.StatusActive, ""); err != nil {
				d.Logger.Warn("sessions: status", "connection", s.Conn.ID, "err", err)
			}
		}
		failures = 0
		return nil
	}
	for sctx.Err() == nil {
		started := time.Now()
		err := s.Poller.Poll(sctx, healthy)
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
		d.Logger.Warn("sessions: session failed", "connection", s.Conn.ID, "failures", failures, "err", err)
		if errors.Is(err, channels.ErrRevoked) {
			if serr := d.Service.SetConnectionStatus(context.WithoutCancel(sctx), s.Conn, messaging.StatusRevoked, err.Error()); serr != nil {
				d.Logger.Warn("sessions: status", "connection", s.Conn.ID, "err", serr)
			}
			break
		}
		if !degraded && (failures >= d.DegradedAfter || errors.Is(err, channels.ErrPermanent)) {
			degraded = true
			if serr := d.Service.SetConnectionStatus(context.WithoutCancel(sctx), s.Conn, messaging.StatusDegraded, err.Error()); serr != nil {
				d.Logger.Warn("sessions: status", "connection", s.Conn.ID, "err", serr)
			}
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
		if err := d.Service.ReleaseSession(rctx, s.Conn, d.Owner); err != nil {
			d.Logger.Warn("sessions: release", "connection", s.Conn.ID, "err", err)
		}
		rcancel()
	}
}

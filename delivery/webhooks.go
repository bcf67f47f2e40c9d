package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/netguard"
	"github.com/comm-gateway/comm/signature"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/webhook"
)

// Webhooks pushes each project's event stream to its registered URL: one
// goroutine per endpoint this replica leases, in seq order, from the
// endpoint's acknowledged cursor, woken right after each commit.
type Webhooks struct {
	// Hooks is the webhook feature whose endpoints are delivered to.
	Hooks *webhook.Hooks
	// Client posts deliveries; it must refuse private targets unless they
	// are allowed (netguard.NewClient).
	Client *http.Client
	Logger *slog.Logger
	// Owner names this replica in leases; random if empty.
	Owner string
	// Lease is how long a claim lasts without renewal (DefaultLease): a
	// replica that dies hands its endpoints over within it (plus up to
	// PollInterval). The holder renews it every Lease/3, during a delivery
	// too, and gives a delivery up leaseMargin before the lease it last
	// renewed runs out: past it another replica may deliver too. So a
	// delivery may take as long as the client's timeout, whatever the lease.
	Lease time.Duration
	// DisableAfter disables an endpoint failing continuously this long
	// (default 72 h).
	DisableAfter time.Duration
	// PollInterval is the safety-net poll (default 1 s).
	PollInterval time.Duration
	// Observer, if not nil, is told about every attempt (metrics).
	Observer WebhookObserver

	abandon atomic.Bool // tests: stop as if the process died, leases kept
}

// WebhookObserver is told about every delivery attempt, for metrics: its
// outcome (AttemptOutcome) and how long it took.
type WebhookObserver interface {
	WebhookAttempted(outcome string, d time.Duration)
}

// AttemptOutcome classifies an attempt in a few words, for metrics: "ok",
// "gone" (410), "http_4xx", "http_5xx", "http_other" or "error" (no
// answer: refused, timed out, unreachable).
func AttemptOutcome(a webhook.Attempt) string {
	switch {
	case a.OK:
		return "ok"
	case a.Gone:
		return "gone"
	case a.StatusCode >= 500:
		return "http_5xx"
	case a.StatusCode >= 400:
		return "http_4xx"
	case a.StatusCode != 0:
		return "http_other"
	}
	return "error"
}

// Run delivers until ctx ends, then releases its leases.
func (d *Webhooks) Run(ctx context.Context) {
	if d.Owner == "" {
		d.Owner = replicaName()
	}
	if d.Lease <= 0 {
		d.Lease = DefaultLease
	}
	if d.DisableAfter <= 0 {
		d.DisableAfter = 72 * time.Hour
	}
	if d.PollInterval <= 0 {
		d.PollInterval = time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	work := newLeased()
	defer work.wait()
	tick := time.NewTicker(d.PollInterval)
	defer tick.Stop()
	for {
		ids, err := d.Hooks.Claim(ctx, d.Owner, d.Lease, work.has)
		if err != nil && ctx.Err() == nil {
			d.Logger.Warn("webhooks: claim", "err", err)
		}
		for _, id := range ids {
			work.start(id, func() { d.endpoint(ctx, id) })
		}
		select {
		case <-ctx.Done():
			return
		case <-d.Hooks.Wake():
		case <-tick.C:
		}
	}
}

const deliveryPage = 100

// stateTTL bounds how long an endpoint's state is used without re-reading.
const stateTTL = 5 * time.Second

// endpoint delivers to one endpoint while this replica holds its lease.
func (d *Webhooks) endpoint(ctx context.Context, id string) {
	log := d.Hooks.Log()
	var (
		ep     *webhook.Endpoint
		follow *stream.Follower
	)
	defer func() {
		if follow != nil {
			follow.Close()
		}
		if ep != nil && ctx.Err() != nil && !d.abandon.Load() {
			d.Hooks.Release(context.WithoutCancel(ctx), ep, d.Owner) //nolint:errcheck // the lease runs out anyway
		}
	}()
	// The endpoint's state is re-read when it may have changed: after an
	// acknowledgement that did not apply (replayed, re-registered, deleted,
	// lease lost: it is conditional on all of them), a failure, a
	// registration change, and at least every stateTTL. In between, a
	// stream of deliveries costs no state query.
	stale, readAt := true, time.Time{}
	for ctx.Err() == nil {
		if stale || time.Since(readAt) > stateTTL {
			state, err := d.Hooks.State(ctx, id, d.Owner)
			if err != nil || state == nil {
				if err != nil && ctx.Err() == nil {
					d.Logger.Warn("webhooks: state", "webhook", id, "err", err)
				}
				return
			}
			if ep == nil {
				ep = state
			} else {
				ep.Refresh(state)
			}
			stale, readAt = false, time.Now()
		}
		if follow == nil {
			// Before the first read: a commit after it wakes the first wait.
			follow = log.Hub().Follow(ep.ProjectID, min(d.PollInterval, d.Lease/3))
		}
		// Keep the lease while idle or backing off, so that the endpoint
		// stays with this replica.
		if time.Until(ep.LeaseUntil) < d.Lease*2/3 && !d.renew(ctx, ep) {
			return
		}
		if ep.NextAttemptAt != nil && time.Now().Before(*ep.NextAttemptAt) {
			if !d.wait(ctx, time.Until(*ep.NextAttemptAt)) {
				return
			}
			stale = true
			continue
		}
		envs, err := log.ReadEnvelopes(ctx, ep.ProjectID, ep.Cursor, deliveryPage, "")
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Code == fault.ErrCursorExpired.Code {
			// Retention deleted events this endpoint never got: disable it
			// with the reason rather than skip them (webhook.Hooks.Expire).
			if _, err := d.Hooks.Expire(ctx, ep, d.Owner, fe.EarliestSeq); err != nil && ctx.Err() == nil {
				d.Logger.Warn("webhooks: expire", "webhook", id, "err", err)
				d.wait(ctx, d.PollInterval)
			} else if err == nil {
				d.Logger.Warn("webhooks: endpoint disabled: its cursor is older than the earliest kept event",
					"webhook", id, "project", ep.ProjectID, "cursor", ep.Cursor, "earliest_seq", fe.EarliestSeq)
			}
			stale = true
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				d.Logger.Warn("webhooks: read", "webhook", id, "err", err)
			}
			d.wait(ctx, d.PollInterval)
			stale = true
			continue
		}
		if len(envs) == 0 {
			switch follow.Wait(ctx, d.Hooks.Wake()) {
			case stream.WakeDone:
				return
			case stream.WakeOther: // the registration changed
				stale = true
			}
			continue
		}
		for _, e := range envs {
			// Start with most of a lease (a busy endpoint has it: every
			// Record extends it); attempt keeps it while the post lasts.
			if time.Until(ep.LeaseUntil) < d.Lease*2/3 && !d.renew(ctx, ep) {
				return
			}
			a := d.attempt(ctx, ep, e)
			if d.Observer != nil {
				d.Observer.WebhookAttempted(AttemptOutcome(a), a.Latency)
			}
			if ctx.Err() != nil {
				// Shutting down: keep an acknowledgement that arrived,
				// so the event is not delivered again.
				if a.OK && !d.abandon.Load() {
					d.Hooks.Record(context.WithoutCancel(ctx), ep, d.Owner, d.Lease, d.DisableAfter, a) //nolint:errcheck // redelivered if lost
				}
				return
			}
			current, err := d.Hooks.Record(ctx, ep, d.Owner, d.Lease, d.DisableAfter, a)
			if err != nil {
				d.Logger.Warn("webhooks: record", "webhook", id, "err", err)
				d.wait(ctx, d.PollInterval)
				stale = true
				break
			}
			if !current || !a.OK {
				stale = true
				break // re-read: backoff, replay, new registration, or lease lost
			}
		}
	}
}

// renew extends the lease of ep; false when it is lost (or cannot be
// renewed), and the endpoint must be left alone.
func (d *Webhooks) renew(ctx context.Context, ep *webhook.Endpoint) bool {
	ok, err := d.Hooks.Renew(ctx, ep, d.Owner, d.Lease)
	if err != nil && ctx.Err() == nil {
		d.Logger.Warn("webhooks: renew lease", "webhook", ep.ID, "err", err)
	}
	return err == nil && ok
}

// leaseMargin is how long before its lease runs out a delivery is given
// up: room for the clocks of the replicas and the database.
func (d *Webhooks) leaseMargin() time.Duration { return leaseMargin(d.Lease) }

// leaseMargin is how long before a lease runs out its holder stops the
// leased work: room for the clocks of the replicas (another replica
// compares the lease's end with its own clock) and the database.
func leaseMargin(lease time.Duration) time.Duration { return min(time.Second, lease/5) }

// attempt posts e while keeping ep's lease. Every Lease/3 of a post still
// running, the lease is renewed, and the post may run until leaseMargin
// before the end of the lease as last renewed: the deadline is a timer
// re-armed on each renewal from this process's monotonic clock read before
// the renewing statement (a duration measured here, never another
// replica's clock, nor a wall-clock jump).
// A renewal that finds the lease lost cancels the post at once; one that
// fails (the database) leaves the timer as it is, so the post never
// outlives the lease either way. ep.LeaseUntil ends up the latest renewal.
func (d *Webhooks) attempt(ctx context.Context, ep *webhook.Endpoint, e stream.Envelope) webhook.Attempt {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	margin := d.leaseMargin()
	deadline := time.AfterFunc(time.Until(ep.LeaseUntil.Add(-margin)), cancel)
	defer deadline.Stop()
	// The keeper renews on a copy of ep (post reads ep meanwhile).
	kept := *ep
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(d.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			t0 := time.Now() // the lease renewed ends Lease after this, at the latest
			ok, err := d.Hooks.Renew(pctx, &kept, d.Owner, d.Lease)
			switch {
			case err != nil:
				if pctx.Err() == nil {
					d.Logger.Warn("webhooks: renew lease during a delivery", "webhook", ep.ID, "err", err)
				}
			case !ok:
				cancel() // taken over, disabled or deleted
				return
			default:
				deadline.Reset(time.Until(t0.Add(d.Lease - margin)))
			}
		}
	}()
	a := d.post(pctx, ep, e)
	cancel()
	<-done
	if kept.LeaseUntil.After(ep.LeaseUntil) {
		ep.LeaseUntil = kept.LeaseUntil
	}
	return a
}

// wait sleeps for dur (at most five poll intervals, and a third of the
// lease so that it is renewed in time, after which the caller looks again) or until the registrations change; false when ctx ended.
// It is a pause (a retry's backoff, a failed read's), not a follow: commits
// do not end it.
func (d *Webhooks) wait(ctx context.Context, dur time.Duration) bool {
	t := time.NewTimer(min(dur, d.PollInterval*5, d.Lease/3))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-d.Hooks.Wake():
	}
	return true
}

// responsePrefix is all of a receiver's answer that is ever read.
const responsePrefix = 4 << 10

// post delivers one event: the body is exactly its {seq, type, data}.
func (d *Webhooks) post(ctx context.Context, ep *webhook.Endpoint, e stream.Envelope) webhook.Attempt {
	a := webhook.Attempt{Seq: e.Seq}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(e.Body))
	if err != nil {
		a.Err = "bad url: " + err.Error()
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "comm-webhooks/1")
	signature.SetHeaders(req.Header, ep.Key, ep.ProjectID+"_"+strconv.FormatInt(e.Seq, 10), time.Now(), e.Body)
	t0 := time.Now()
	resp, err := d.Client.Do(req)
	a.Latency = time.Since(t0)
	if err != nil {
		// The tenant sees neutral words; what the name resolved to and
		// why the dial failed is for the operator's log.
		a.Err = netguard.Describe(err)
		d.Logger.Info("webhooks: delivery failed", "project", ep.ProjectID, "webhook", ep.ID, "seq", e.Seq, "err", err)
		return a
	}
	netguard.ReadLimited(resp.Body, responsePrefix) //nolint:errcheck // the answer's body is not used
	resp.Body.Close()
	a.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.OK = true
	case resp.StatusCode == http.StatusGone:
		a.Gone = true
		a.Err = "410 Gone"
	default:
		a.Err = fmt.Sprintf("receiver answered %d", resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			a.Err += " (redirects are not followed)"
		}
		a.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	}
	return a
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), capped
// at an hour.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Hour)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), time.Hour)
	}
	return 0
}

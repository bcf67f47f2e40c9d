package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/ent"
	entwh "github.com/comm-gateway/comm/ent/webhook"
	entwha "github.com/comm-gateway/comm/ent/webhookattempt"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/signature"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Endpoint is a webhook as the replica delivering to it sees it.
type Endpoint struct {
	ID, ProjectID, URL string
	// Key signs deliveries (the opened secret).
	Key           []byte
	Cursor        int64
	NextAttemptAt *time.Time
	FailingSince  *time.Time
	// LeaseUntil is when owner's lease runs out, as last written by this
	// replica (or read back): another replica may deliver after it.
	LeaseUntil time.Time

	// sealed is the stored secret: it changes with every registration, so
	// it tells whether the endpoint was registered again meanwhile.
	sealed             []byte
	failures           int // consecutive failures, as read
	attemptsSincePrune int
}

// Claim leases the endpoints no replica is delivering to (or whose
// replica's lease ran out) to owner, and returns their ids. Endpoints for
// which skip returns true are left alone.
func (s *Hooks) Claim(ctx context.Context, owner string, lease time.Duration, skip func(id string) bool) ([]string, error) {
	now := s.now()
	ws, err := s.read.Webhook.Query().Where(entwh.StatusNEQ(entwh.StatusDisabled),
		entwh.Or(entwh.LeaseUntilIsNil(), entwh.LeaseUntilLT(now), entwh.LeaseOwner(owner))).
		Select(entwh.FieldID, entwh.FieldProjectID).All(tenant.System(ctx))
	if err != nil {
		return nil, fmt.Errorf("webhooks: claim: %w", err)
	}
	var ids []string
	for _, w := range ws {
		if skip(w.ID) {
			continue
		}
		claimed := false
		_, err := s.log.Write(tenant.WithProject(ctx, w.ProjectID), w.ProjectID, func(tx *stream.Tx) error {
			n, err := tx.Client().Webhook.Update().Where(entwh.ID(w.ID), entwh.StatusNEQ(entwh.StatusDisabled),
				entwh.Or(entwh.LeaseUntilIsNil(), entwh.LeaseUntilLT(now), entwh.LeaseOwner(owner))).
				SetLeaseOwner(owner).SetLeaseUntil(now.Add(lease)).Save(tx.Context())
			claimed = n == 1
			return err
		})
		if err != nil {
			return ids, fmt.Errorf("webhooks: claim %s: %w", w.ID, err)
		}
		if claimed {
			ids = append(ids, w.ID)
		}
	}
	return ids, nil
}

// State reads an endpoint leased to owner; nil when it was deleted,
// disabled, or is leased to another replica now.
func (s *Hooks) State(ctx context.Context, id, owner string) (*Endpoint, error) {
	w, err := s.read.Webhook.Get(tenant.System(ctx), id)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if w.Status == entwh.StatusDisabled || w.LeaseOwner != owner || w.LeaseUntil == nil || w.LeaseUntil.Before(s.now()) {
		return nil, nil
	}
	plain, err := s.box.Open(w.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", id, err)
	}
	key, err := signature.Key(string(plain))
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", id, err)
	}
	return &Endpoint{ID: w.ID, ProjectID: w.ProjectID, URL: w.URL, Key: key, Cursor: w.Cursor,
		NextAttemptAt: w.NextAttemptAt, FailingSince: w.FailingSince, LeaseUntil: *w.LeaseUntil, sealed: w.Secret, failures: w.Failures}, nil
}

// Attempt is the outcome of one delivery.
type Attempt struct {
	Seq        int64
	OK         bool
	StatusCode int
	Latency    time.Duration
	Err        string
	// Gone: the receiver answered 410; the endpoint is disabled at once.
	Gone bool
	// RetryAfter is the receiver's Retry-After, if any.
	RetryAfter time.Duration
}

// Record stores an attempt and its consequence: the cursor advances
// past an acknowledged event; a failure schedules a retry with backoff, or
// disables the endpoint (410, or failing for longer than disableAfter,
// with webhook.disabled in the stream). It extends owner's lease. It
// reports false when the endpoint changed meanwhile (replayed,
// re-registered, deleted, lease lost): the caller re-reads it. An attempt
// on an endpoint deleted meanwhile is not stored.
func (s *Hooks) Record(ctx context.Context, ep *Endpoint, owner string, lease, disableAfter time.Duration, a Attempt) (bool, error) {
	now := s.now()
	ctx = tenant.WithProject(ctx, ep.ProjectID)
	current := false
	var disabled *ent.Webhook
	failingSince := now
	if ep.FailingSince != nil {
		failingSince = *ep.FailingSince
	}
	prune := ep.attemptsSincePrune+1 >= 100
	_, err := s.log.Write(ctx, ep.ProjectID, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		disabled, current = nil, false
		// The same registration (its sealed secret changes with every
		// PUT), at the cursor this replica delivered from, still leased
		// to it.
		upd := cl.Webhook.Update().Where(entwh.ID(ep.ID), entwh.LeaseOwner(owner), entwh.Cursor(ep.Cursor),
			entwh.Secret(ep.sealed), entwh.StatusNEQ(entwh.StatusDisabled)).SetLeaseUntil(now.Add(lease))
		reason := ""
		if a.OK {
			upd.SetCursor(a.Seq).SetFailures(0).SetStatus(entwh.StatusActive).
				ClearFailingSince().ClearNextAttemptAt().ClearLastError()
		} else {
			switch {
			case a.Gone:
				reason = "the receiver answered 410 Gone"
			case now.Sub(failingSince) >= disableAfter:
				reason = fmt.Sprintf("deliveries failed continuously for %s", now.Sub(failingSince).Round(time.Second))
			}
			upd.AddFailures(1).SetFailingSince(failingSince).SetLastError(a.Err)
			if reason != "" {
				upd.SetStatus(entwh.StatusDisabled).SetDisabledReason(reason).ClearLeaseOwner().ClearLeaseUntil()
			} else {
				// The update below is conditional on the state read, so its
				// failure count is the current one.
				wait := max(a.RetryAfter, messaging.Backoff(ep.failures+1))
				upd.SetStatus(entwh.StatusFailing).SetNextAttemptAt(now.Add(wait))
			}
		}
		n, err := upd.Save(tctx)
		if err != nil {
			return err
		}
		current = n == 1
		if !current {
			// Replayed, re-registered or leased away: the attempt still
			// happened. Deleted: its attempts went with it.
			exists, err := cl.Webhook.Query().Where(entwh.ID(ep.ID)).Exist(tctx)
			if err != nil || !exists {
				return err
			}
		}
		var errText any // NULL
		if a.Err != "" {
			errText = a.Err
		}
		if err := tx.Bulk(&insertAttempt, ident.New(ident.WebhookAttempt), time.Now().UTC().Truncate(time.Microsecond),
			ep.ProjectID, ep.ID, ep.URL, a.Seq, int64(a.StatusCode), int64(a.Latency/time.Millisecond), errText, a.OK); err != nil {
			return err
		}
		if prune {
			if err := pruneAttempts(tctx, cl, ep.ID); err != nil {
				return err
			}
		}
		if !current || reason == "" {
			return nil
		}
		if disabled, err = cl.Webhook.Get(tctx, ep.ID); err != nil {
			return err
		}
		return tx.Append(stream.WebhookDisabled, api.WebhookEvent{Webhook: webhookOf(disabled), Reason: reason})
	})
	if err != nil {
		return false, err
	}
	ep.attemptsSincePrune++
	if prune {
		ep.attemptsSincePrune = 0
	}
	if current {
		ep.LeaseUntil = now.Add(lease)
		if a.OK {
			ep.Cursor, ep.FailingSince, ep.NextAttemptAt = a.Seq, nil, nil
		}
	}
	return current && disabled == nil, nil
}

// insertAttempt records an attempt, as ent's WebhookAttempt.Create
// would: every delivery writes one, so on PostgreSQL a batch's are
// inserted in one statement (stream.Bulk). The pruning below does not see
// the rows of its own batch; the history is kept to MaxAttemptHistory
// give or take a batch.
var insertAttempt = stream.Bulk{
	Row: `INSERT INTO webhook_attempts (id, created_at, project_id, webhook_id, url, seq, status_code, latency_ms, error, ok)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	Rows: `INSERT INTO webhook_attempts (id, created_at, project_id, webhook_id, url, seq, status_code, latency_ms, error, ok)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
			$8::bigint[], $9::text[], $10::bool[])`,
}

// Refresh updates ep with cur, a newer read of the same endpoint from
// State, keeping this replica's bookkeeping (when to prune the
// attempt history).
func (ep *Endpoint) Refresh(cur *Endpoint) {
	n := ep.attemptsSincePrune
	*ep = *cur
	ep.attemptsSincePrune = n
}

func pruneAttempts(ctx context.Context, cl *ent.Client, webhookID string) error {
	ids, err := cl.WebhookAttempt.Query().Where(entwha.WebhookID(webhookID)).
		Order(ent.Desc(entwha.FieldID)).Offset(MaxAttemptHistory).Limit(1).IDs(ctx)
	if err != nil || len(ids) == 0 {
		return err
	}
	_, err = cl.WebhookAttempt.Delete().Where(entwha.WebhookID(webhookID), entwha.IDLTE(ids[0])).Exec(ctx)
	return err
}

// Renew extends owner's lease of an endpoint (and ep.LeaseUntil);
// false when the lease is lost.
func (s *Hooks) Renew(ctx context.Context, ep *Endpoint, owner string, lease time.Duration) (bool, error) {
	ok := false
	now := s.now()
	_, err := s.log.Write(tenant.WithProject(ctx, ep.ProjectID), ep.ProjectID, func(tx *stream.Tx) error {
		n, err := tx.Client().Webhook.Update().Where(entwh.ID(ep.ID), entwh.LeaseOwner(owner),
			entwh.StatusNEQ(entwh.StatusDisabled)).SetLeaseUntil(now.Add(lease)).Save(tx.Context())
		ok = n == 1
		return err
	})
	if ok && err == nil {
		ep.LeaseUntil = now.Add(lease)
	}
	return ok, err
}

// Release gives up owner's lease (at shutdown), so another replica
// can take over at once.
func (s *Hooks) Release(ctx context.Context, ep *Endpoint, owner string) error {
	_, err := s.log.Write(tenant.WithProject(ctx, ep.ProjectID), ep.ProjectID, func(tx *stream.Tx) error {
		return tx.Client().Webhook.Update().Where(entwh.ID(ep.ID), entwh.LeaseOwner(owner)).
			ClearLeaseOwner().ClearLeaseUntil().Exec(tx.Context())
	})
	return err
}

// Expire disables an endpoint whose cursor retention overtook: the events
// after its cursor up to earliest-1 were deleted before they were
// delivered. Skipping them silently would lose them for the receiver, so
// the endpoint stops (status disabled, last_error cursor_expired, the
// reason in disabled_reason and in webhook.disabled) until its owner
// registers it again with a from_seq of earliest-1 or later (a
// re-registration keeps the expired cursor otherwise, and stops again).
// It reports false when the endpoint changed meanwhile (replayed,
// re-registered, deleted, lease lost): the caller re-reads it.
func (s *Hooks) Expire(ctx context.Context, ep *Endpoint, owner string, earliest int64) (bool, error) {
	ctx = tenant.WithProject(ctx, ep.ProjectID)
	reason := fmt.Sprintf("cursor_expired: the events after the cursor %d up to %d were deleted by the event retention "+
		"(COMM_EVENT_RETENTION) before they were delivered; earliest_seq is %d: register the webhook again "+
		"(PUT /v1/webhook) with from_seq %d or later to resume",
		ep.Cursor, earliest-1, earliest, earliest-1)
	lastErr := fmt.Sprintf("cursor_expired: earliest_seq %d", earliest)
	current := false
	_, err := s.log.Write(ctx, ep.ProjectID, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		n, err := cl.Webhook.Update().Where(entwh.ID(ep.ID), entwh.LeaseOwner(owner), entwh.Cursor(ep.Cursor),
			entwh.Secret(ep.sealed), entwh.StatusNEQ(entwh.StatusDisabled)).
			SetStatus(entwh.StatusDisabled).SetDisabledReason(reason).SetLastError(lastErr).
			ClearNextAttemptAt().ClearLeaseOwner().ClearLeaseUntil().Save(tctx)
		if err != nil {
			return err
		}
		if current = n == 1; !current {
			return nil
		}
		disabled, err := cl.Webhook.Get(tctx, ep.ID)
		if err != nil {
			return err
		}
		return tx.Append(stream.WebhookDisabled, api.WebhookEvent{Webhook: webhookOf(disabled), Reason: reason})
	})
	return current, err
}

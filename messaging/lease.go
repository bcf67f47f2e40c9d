package messaging

import (
	"context"
	"errors"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entlease "github.com/comm-gateway/comm/ent/lease"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// An AppSession is the operator's app's long-lived session of a channel
// (channels.AppSession) that this replica may run.
type AppSession struct {
	Channel string
	Session channels.AppSession
	// Lease names the database lease of the session.
	Lease string
}

// AppSessions lists the channels whose operator's app runs a session and
// that at least one live connection was installed for (so a gateway whose
// operator's app nobody installed does not connect to the provider).
func (s *Service) AppSessions(ctx context.Context) ([]AppSession, error) {
	var out []AppSession
	for _, d := range s.channels.Descriptors() {
		if d.Session == nil {
			continue
		}
		q := s.read.Connection.Query().Where(entconn.Channel(d.Channel), entconn.RouteKeyNotNil())
		if d.Shared != nil {
			q = s.read.Connection.Query().Where(entconn.Channel(d.Channel), entconn.Provider(d.Provider),
				entconn.Or(entconn.RouteKeyNotNil(), entconn.LineNotNil()))
		}
		used, err := q.Exist(tenant.System(ctx))
		if err != nil {
			return nil, err
		}
		if used {
			out = append(out, AppSession{Channel: d.Channel, Session: d.Session, Lease: "app-session:" + d.Channel})
		}
	}
	return out, nil
}

// ClaimLease takes the named lease for owner when nobody holds it (or its
// holder's time ran out), or renews it when owner holds it, and reports
// whether owner holds it now.
func (s *Service) ClaimLease(ctx context.Context, name, owner string, lease time.Duration) (bool, error) {
	sys := tenant.System(ctx)
	now := s.now()
	held := false
	_, err := s.log.Write(sys, name, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		n, err := cl.Lease.Update().Where(entlease.ID(name), entlease.Or(entlease.UntilLT(now), entlease.Owner(owner))).
			SetOwner(owner).SetUntil(now.Add(lease)).Save(tctx)
		if err != nil {
			return err
		}
		if n == 1 {
			held = true
			return nil
		}
		err = cl.Lease.Create().SetID(name).SetOwner(owner).SetUntil(now.Add(lease)).Exec(tctx)
		if ent.IsConstraintError(err) {
			// Held by another replica. The error is returned, not
			// swallowed: on PostgreSQL the failed insert aborted the
			// transaction, and only the unit's savepoint rollback
			// (which an error triggers) makes it usable again.
			return errLeaseHeld
		}
		held = err == nil
		return err
	})
	if errors.Is(err, errLeaseHeld) {
		return false, nil
	}
	return held, err
}

var errLeaseHeld = errors.New("lease held by another owner")

// ReleaseLease gives up owner's lease, so another replica takes the work
// over at once.
func (s *Service) ReleaseLease(ctx context.Context, name, owner string) error {
	_, err := s.log.Write(tenant.System(ctx), name, func(tx *stream.Tx) error {
		return tx.Client().Lease.Update().Where(entlease.ID(name), entlease.Owner(owner)).
			SetUntil(time.Unix(0, 0).UTC()).Exec(tx.Context())
	})
	return err
}

// RouteFunc returns the emit function of a channel's app session: the
// messages are stored on the live connection holding their routing key
// (in one transaction) before it returns; a key no connection holds stores
// nothing.
func (s *Service) RouteFunc(ctx context.Context, channel string) func(key string, ins ...channels.Inbound) error {
	if d, ok := s.appDescriptor(channel, func(d channels.Descriptor) bool { return d.Session != nil }); ok && d.Shared != nil {
		// A shared channel's session emits by line: routed as its
		// app-level webhook's messages are.
		return func(line string, ins ...channels.Inbound) error {
			items := make([]channels.LineInbound, len(ins))
			for i, in := range ins {
				items[i] = channels.LineInbound{Line: line, Inbound: in}
			}
			return s.routeLines(ctx, d, items)
		}
	}
	return func(key string, ins ...channels.Inbound) error {
		if len(ins) == 0 {
			return nil
		}
		c, err := s.read.Connection.Query().Where(entconn.RouteKey(RouteKey(channel, key))).Only(tenant.System(ctx))
		if ent.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return s.ReceiveBatch(ctx, c, ins)
	}
}

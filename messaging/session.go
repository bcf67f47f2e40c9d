package messaging

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Connection states beyond pending and active.
const (
	// StatusAuthorized: the provider accepted the credentials (OAuth
	// channels), the set-up is not finished.
	StatusAuthorized = "authorized"
	// StatusDegraded: the provider is failing; comm keeps trying.
	StatusDegraded = "degraded"
	// StatusRevoked: the provider rejected the credentials; the
	// connection neither sends nor receives until it is made again.
	StatusRevoked = "revoked"
)

// statusEvents are the events of each connection state.
var statusEvents = map[string]string{
	StatusActive:     stream.ConnectionActive,
	StatusAuthorized: stream.ConnectionAuthorized,
	StatusDegraded:   stream.ConnectionDegraded,
	StatusRevoked:    stream.ConnectionRevoked,
}

// SetConnectionStatus moves a live connection to status (with the reason
// for degraded and revoked) and appends the state's event, once: a
// connection already in status is left as it is.
func (s *Service) SetConnectionStatus(ctx context.Context, c *ent.Connection, status, reason string) error {
	typ, ok := statusEvents[status]
	if !ok {
		return fmt.Errorf("connection %s: unknown status %q", c.ID, status)
	}
	if len(reason) > 1000 {
		reason = reason[:1000]
	}
	_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
		upd := tx.Client().Connection.Update().Where(entconn.ID(c.ID), entconn.DeletedAtIsNil(), entconn.StatusNEQ(status)).
			SetStatus(status)
		if status == StatusActive {
			upd.ClearStatusReason()
		} else {
			upd.SetStatusReason(reason)
		}
		if status == StatusRevoked {
			// No session until the connection is made again.
			upd.ClearSessionOwner().ClearSessionUntil()
		}
		n, err := upd.Save(tx.Context())
		if err != nil || n == 0 {
			return err
		}
		now, err := tx.Client().Connection.Get(tx.Context(), c.ID)
		if err != nil {
			return err
		}
		ev := api.ConnectionEvent{CustomerID: now.CustomerID, AgentID: now.AgentID, Connection: connectionOf(now)}
		if status != StatusActive {
			ev.Reason = reason
		}
		return tx.Append(typ, ev)
	})
	return err
}

// A Session is a connection's long-lived inbound session (channels.Poller)
// that this replica holds the lease of.
type Session struct {
	Conn   *ent.Connection
	Poller channels.Poller
}

// ClaimSessions leases to owner the sessions of live connections that no
// replica runs (or whose replica's lease ran out), and returns them with
// their pollers. Connections for which skip returns true (running here
// already) are left alone.
func (s *Service) ClaimSessions(ctx context.Context, owner string, lease time.Duration, skip func(id string) bool) ([]Session, error) {
	now := s.now()
	sys := tenant.System(ctx)
	cs, err := s.read.Connection.Query().Where(entconn.SessionUntilNotNil(),
		entconn.Or(entconn.SessionUntilLT(now), entconn.SessionOwner(owner))).
		Select(entconn.FieldID, entconn.FieldProjectID).All(sys)
	if err != nil {
		return nil, fmt.Errorf("sessions: claim: %w", err)
	}
	var out []Session
	for _, c := range cs {
		if skip(c.ID) {
			continue
		}
		claimed := false
		_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
			n, err := tx.Client().Connection.Update().Where(entconn.ID(c.ID), entconn.DeletedAtIsNil(), entconn.SessionUntilNotNil(),
				entconn.Or(entconn.SessionUntilLT(now), entconn.SessionOwner(owner))).
				SetSessionOwner(owner).SetSessionUntil(now.Add(lease)).Save(tx.Context())
			claimed = n == 1
			return err
		})
		if err != nil {
			return out, fmt.Errorf("sessions: claim %s: %w", c.ID, err)
		}
		if !claimed {
			continue
		}
		full, err := s.read.Connection.Get(sys, c.ID)
		if ent.IsNotFound(err) {
			continue // deleted since: no session
		}
		if err != nil {
			return out, fmt.Errorf("sessions: claim %s: %w", c.ID, err)
		}
		a, err := s.adapter(ctx, full)
		if err != nil {
			s.logger.Warn("session: cannot build the adapter", "connection", c.ID, "err", err)
			continue
		}
		p, ok := a.(channels.Poller)
		if !ok {
			// The connection no longer polls (made in another mode): no
			// session to run.
			s.endSession(ctx, full)
			continue
		}
		out = append(out, Session{Conn: full, Poller: p})
	}
	return out, nil
}

// RenewSession extends owner's lease of a connection's session; false
// when the lease is lost (taken over, the connection deleted or revoked).
func (s *Service) RenewSession(ctx context.Context, c *ent.Connection, owner string, lease time.Duration) (bool, error) {
	ok := false
	_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
		n, err := tx.Client().Connection.Update().Where(entconn.ID(c.ID), entconn.DeletedAtIsNil(), entconn.SessionOwner(owner),
			entconn.SessionUntilNotNil()).SetSessionUntil(s.now().Add(lease)).Save(tx.Context())
		ok = n == 1
		return err
	})
	return ok, err
}

// ReleaseSession gives up owner's lease (at shutdown), so another replica
// takes the session over at once.
func (s *Service) ReleaseSession(ctx context.Context, c *ent.Connection, owner string) error {
	_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
		return tx.Client().Connection.Update().Where(entconn.ID(c.ID), entconn.SessionOwner(owner), entconn.SessionUntilNotNil()).
			ClearSessionOwner().SetSessionUntil(time.Unix(0, 0).UTC()).Exec(tx.Context())
	})
	return err
}

// endSession marks a connection as having no session to run.
func (s *Service) endSession(ctx context.Context, c *ent.Connection) {
	_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
		return tx.Client().Connection.UpdateOneID(c.ID).ClearSessionOwner().ClearSessionUntil().Exec(tx.Context())
	})
	if err != nil {
		s.logger.Warn("session: end", "connection", c.ID, "err", err)
	}
}

// ReceiveFunc returns the emit function of a connection's session: the
// messages are stored (and message.received appended), in one
// transaction, before it returns.
func (s *Service) ReceiveFunc(ctx context.Context, c *ent.Connection) channels.Emit {
	return func(ins ...channels.Inbound) error {
		if len(ins) == 0 {
			return nil
		}
		return s.ReceiveBatch(ctx, c, ins)
	}
}

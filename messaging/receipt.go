package messaging

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"entgo.io/ent/dialect/sql"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entmsg "github.com/comm-gateway/comm/ent/message"
	entpending "github.com/comm-gateway/comm/ent/pendingreceipt"
	"github.com/comm-gateway/comm/ent/predicate"
	"github.com/comm-gateway/comm/ent/schema"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Receipts are a provider's reports on outbound messages (channels.Receipt:
// status callbacks, delivery and read receipts). A report is applied to
// the outbound message of the same connection whose provider id it names:
// the delivery state moves forward only (sent, delivered, read; failed from
// any state but read), and a message sent, then reported failed, becomes
// failed with message.failed appended, once. A report naming no message of
// the connection is kept while the connection has messages whose send is
// not recorded yet (a status callback can beat the send's answer), bounded
// per connection and in age, and applied when the send records the id;
// otherwise it is dropped quietly.

// Bounds of receipts.
const (
	// DefaultPendingReceipts is the default of Options.PendingReceipts.
	DefaultPendingReceipts = 1000
	// PendingReceiptAge is how long a report waits for the send of its
	// message to be recorded; an older one is dropped.
	PendingReceiptAge = 10 * time.Minute
	// MaxReceiptCode and MaxReceiptReason cut a report's code and reason
	// (between characters); MaxReceiptMessageID bounds the provider id a
	// report names (a longer one names no message and is dropped).
	MaxReceiptCode      = 64
	MaxReceiptReason    = 1000
	MaxReceiptMessageID = 512
)

// ReceiptOutcome is what became of a provider's report.
type ReceiptOutcome int

// Receipt outcomes.
const (
	// ReceiptApplied: the message's delivery moved forward.
	ReceiptApplied ReceiptOutcome = iota
	// ReceiptUnchanged: the message had the state or a later one already
	// (a repeat, a late report).
	ReceiptUnchanged
	// ReceiptPending: no message has the id yet but sends of the
	// connection are in flight: kept until one records it.
	ReceiptPending
	// ReceiptUnknown: no message of the connection has the id and none
	// is in flight (or the report is malformed): dropped.
	ReceiptUnknown
	// ReceiptFull: it would have waited, but the connection has as many
	// reports waiting as it may: dropped.
	ReceiptFull
)

// ReceiptResult is the outcome of a report and the message it is about
// (nil unless applied or unchanged).
type ReceiptResult struct {
	Outcome ReceiptOutcome
	Message *Message
	// MessageID is the provider id the report named; ExpiresAt is when a
	// pending report is dropped.
	MessageID string
	ExpiresAt time.Time
}

// delivery is a message's delivery state as stored.
type delivery struct {
	State       string
	Code        *string
	Reason      *string
	DeliveredAt *time.Time
	ReadAt      *time.Time
}

// deliveryRank orders the states; a report moves a message only to a
// higher rank, so read and failed are final and a late delivered does not
// undo read.
var deliveryRank = map[string]int{
	"": 0, channels.ReceiptSent: 1, channels.ReceiptDelivered: 2, channels.ReceiptRead: 3, channels.ReceiptFailed: 3,
}

// advance returns the delivery a report moves cur to, or false when it
// changes nothing. A read message counts as delivered then at the latest.
func advance(cur delivery, r channels.Receipt) (delivery, bool) {
	if deliveryRank[r.State] <= deliveryRank[cur.State] {
		return cur, false
	}
	next, at := cur, r.At
	next.State = r.State
	switch r.State {
	case channels.ReceiptDelivered:
		next.DeliveredAt = &at
	case channels.ReceiptRead:
		next.ReadAt = &at
		if next.DeliveredAt == nil {
			next.DeliveredAt = &at
		}
	case channels.ReceiptFailed:
		next.Code, next.Reason = nonEmpty(r.Code), nonEmpty(r.Reason)
	}
	return next, true
}

func deliveryOf(m *ent.Message) delivery {
	d := delivery{Code: m.DeliveryCode, Reason: m.DeliveryReason, DeliveredAt: m.DeliveredAt, ReadAt: m.ReadAt}
	if m.DeliveryState != nil {
		d.State = string(*m.DeliveryState)
	}
	return d
}

// DeliveryOf is a message's delivery as the API shows it: nil until the
// provider reported on it.
func DeliveryOf(m *ent.Message) *api.Delivery {
	if m.DeliveryState == nil {
		return nil
	}
	return &api.Delivery{State: string(*m.DeliveryState), Code: m.DeliveryCode, Reason: m.DeliveryReason,
		DeliveredAt: utc(m.DeliveredAt), ReadAt: utc(m.ReadAt)}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// failureText is the error of a message a report says was not delivered.
func failureText(code, reason string) string {
	msg := "not delivered"
	if reason != "" {
		msg += ": " + reason
	}
	if code != "" {
		msg += " (code " + code + ")"
	}
	return msg
}

// cleanReceipt checks a report and bounds what it carries: a known state,
// a provider id, code and reason cut to their caps, and a time that is not
// ahead of the gateway's (the arrival time when the provider gave none).
func (s *Service) cleanReceipt(r channels.Receipt) (channels.Receipt, error) {
	if _, ok := deliveryRank[r.State]; !ok || r.State == "" {
		return r, fmt.Errorf("unknown receipt state %q", r.State)
	}
	if r.MessageID == "" || len(r.MessageID) > MaxReceiptMessageID {
		return r, fmt.Errorf("receipt message id of %d bytes", len(r.MessageID))
	}
	clean := func(v string, n int) string {
		v = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(v, "\uFFFD"))
		if len(v) > n {
			v, _ = truncateJSON(v, n)
		}
		return strings.TrimSpace(v)
	}
	r.Code, r.Reason = clean(r.Code, MaxReceiptCode), clean(r.Reason, MaxReceiptReason)
	if r.State != channels.ReceiptFailed {
		r.Code, r.Reason = "", ""
	}
	now := s.now()
	if r.At.IsZero() || r.At.After(now) {
		r.At = now
	}
	r.At = r.At.UTC().Truncate(time.Microsecond)
	return r, nil
}

// Receipt applies a provider's report to the outbound message of
// connection c it names (see the top of this file). The tenant is the
// connection's: a report never touches another connection's message.
func (s *Service) Receipt(ctx context.Context, c *ent.Connection, r channels.Receipt) (ReceiptResult, error) {
	ctx = tenant.WithProject(ctx, c.ProjectID)
	r, err := s.cleanReceipt(r)
	if err != nil {
		s.logger.Warn("receipt dropped", "connection", c.ID, "err", err)
		return ReceiptResult{Outcome: ReceiptUnknown, MessageID: r.MessageID}, nil
	}
	// Whether sends are in flight is read before the message is looked
	// up: a send in flight now is either recorded before the look-up
	// (which finds it) or after it (and then applies what waits).
	inflight, err := s.read.Message.Query().Where(entmsg.ConnectionID(c.ID), inFlight()).Exist(ctx)
	if err != nil {
		return ReceiptResult{}, fmt.Errorf("receipt %s: %w", r.MessageID, err)
	}
	var (
		res ReceiptResult
		msg *ent.Message
	)
	_, err = s.log.Write(ctx, c.ProjectID, func(tx *stream.Tx) error {
		res, msg = ReceiptResult{MessageID: r.MessageID}, nil
		m, err := outboundByProviderID(tx, c, r.MessageID)
		switch {
		case err == nil:
			msg, res.Outcome, err = s.record(tx, c, m, r)
			return err
		case !ent.IsNotFound(err):
			return err
		case !inflight:
			res.Outcome = ReceiptUnknown
			return nil
		}
		res.Outcome, res.ExpiresAt, err = s.park(tx, c, r)
		return err
	})
	if err != nil {
		return ReceiptResult{}, fmt.Errorf("receipt %s: %w", r.MessageID, err)
	}
	switch res.Outcome {
	case ReceiptUnknown:
		s.logger.Debug("receipt for no message of the connection dropped", "connection", c.ID, "provider_id", r.MessageID)
	case ReceiptFull:
		s.logger.Warn("receipt dropped: too many reports wait for their sends", "connection", c.ID,
			"provider_id", r.MessageID, "limit", s.pendingReceipts)
	case ReceiptPending:
		// The send may have been recorded meanwhile (on another replica),
		// and looked for waiting reports before this one committed.
		sent, err := s.read.Message.Query().Where(entmsg.ConnectionID(c.ID), entmsg.ProviderMessageID(r.MessageID),
			entmsg.DirectionEQ(entmsg.DirectionOutbound)).Exist(ctx)
		if err != nil || !sent {
			return res, err
		}
		m, applied, err := s.applyPending(ctx, c, r.MessageID)
		if err != nil {
			return res, fmt.Errorf("receipt %s: %w", r.MessageID, err)
		}
		if m != nil {
			msg, res.Outcome, res.ExpiresAt = m, ReceiptUnchanged, time.Time{}
			if applied {
				res.Outcome = ReceiptApplied
			}
		}
	}
	if msg != nil {
		res.Message = messageOf(msg)
	}
	return res, nil
}

// inFlight keeps the outbound messages whose send is not recorded yet
// (queued or sending), in the words of the partial index that holds them
// (schema.InFlight).
func inFlight() predicate.Message {
	return predicate.Message(func(sel *sql.Selector) { sel.Where(sql.ExprP(schema.InFlight)) })
}

// outboundByProviderID finds the outbound message of connection c with a
// provider id (the unique (project, connection, provider id) index).
func outboundByProviderID(tx *stream.Tx, c *ent.Connection, providerID string) (*ent.Message, error) {
	return tx.Client().Message.Query().Where(entmsg.ConnectionID(c.ID), entmsg.ProviderMessageID(providerID),
		entmsg.DirectionEQ(entmsg.DirectionOutbound)).Only(tx.Context())
}

// record moves m's delivery as the report says, when it moves it forward:
// a message sent and then failed becomes failed, with message.failed. The
// update is conditional on the state read, so reports applied at once (on
// two replicas) both count: the later one reads the state again.
func (s *Service) record(tx *stream.Tx, c *ent.Connection, m *ent.Message, r channels.Receipt) (*ent.Message, ReceiptOutcome, error) {
	cl, tctx := tx.Client(), tx.Context()
	for range 3 {
		cur := deliveryOf(m)
		next, ok := advance(cur, r)
		if !ok {
			return m, ReceiptUnchanged, nil
		}
		upd := cl.Message.Update().Where(entmsg.ID(m.ID)).SetDeliveryState(entmsg.DeliveryState(next.State)).
			SetNillableDeliveryCode(next.Code).SetNillableDeliveryReason(next.Reason).
			SetNillableDeliveredAt(next.DeliveredAt).SetNillableReadAt(next.ReadAt)
		if cur.State == "" {
			upd.Where(entmsg.DeliveryStateIsNil())
		} else {
			upd.Where(entmsg.DeliveryStateEQ(entmsg.DeliveryState(cur.State)))
		}
		failed := next.State == channels.ReceiptFailed && m.Status == entmsg.StatusSent
		if failed {
			upd.SetStatus(entmsg.StatusFailed).SetError(failureText(r.Code, r.Reason))
		}
		n, err := upd.Save(tctx)
		if err != nil {
			return m, 0, err
		}
		if m, err = cl.Message.Get(tctx, m.ID); err != nil {
			return m, 0, err
		}
		if n == 0 {
			continue // changed since it was read: again, from what it is now
		}
		if failed {
			ev := messageEvent{CustomerID: c.CustomerID, AgentID: c.AgentID, Message: s.outboundEvent(m)}
			if err := tx.Append(stream.MessageFailed, ev); err != nil {
				return m, 0, err
			}
			if err := s.refund(tx, c, m.ID); err != nil {
				return m, 0, err
			}
		}
		return m, ReceiptApplied, nil
	}
	return m, 0, fmt.Errorf("message %s: its delivery state keeps changing", m.ID)
}

// park keeps a report for a message whose send is not recorded yet. The
// project's reports older than PendingReceiptAge go first; a repeat of a
// report waiting already is not kept twice; a connection with
// s.pendingReceipts reports waiting keeps no more.
func (s *Service) park(tx *stream.Tx, c *ent.Connection, r channels.Receipt) (ReceiptOutcome, time.Time, error) {
	cl, tctx := tx.Client(), tx.Context()
	now := s.now()
	if _, err := cl.PendingReceipt.Delete().Where(entpending.CreatedAtLT(now.Add(-PendingReceiptAge))).Exec(tctx); err != nil {
		return 0, time.Time{}, err
	}
	same, err := cl.PendingReceipt.Query().Where(entpending.ConnectionID(c.ID), entpending.ProviderMessageID(r.MessageID),
		entpending.State(r.State)).First(tctx)
	if err == nil {
		return ReceiptPending, same.CreatedAt.Add(PendingReceiptAge), nil
	}
	if !ent.IsNotFound(err) {
		return 0, time.Time{}, err
	}
	n, err := cl.PendingReceipt.Query().Where(entpending.ConnectionID(c.ID)).Count(tctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	if n >= s.pendingReceipts {
		return ReceiptFull, time.Time{}, nil
	}
	err = cl.PendingReceipt.Create().SetConnectionID(c.ID).SetProviderMessageID(r.MessageID).SetState(r.State).
		SetCode(r.Code).SetReason(r.Reason).SetAt(r.At).SetCreatedAt(now).Exec(tctx)
	return ReceiptPending, now.Add(PendingReceiptAge), err
}

// applyPending applies the reports waiting for connection c's message with
// providerID, once that message has the id: each report is taken (deleted)
// by one transaction only, and applied by it, in the order they came.
// It returns the message (nil when none has the id yet) and whether a
// report changed it.
func (s *Service) applyPending(ctx context.Context, c *ent.Connection, providerID string) (*ent.Message, bool, error) {
	ctx = tenant.WithProject(ctx, c.ProjectID)
	var (
		msg     *ent.Message
		applied bool
	)
	_, err := s.log.Write(ctx, c.ProjectID, func(tx *stream.Tx) error {
		msg, applied = nil, false
		cl, tctx := tx.Client(), tx.Context()
		m, err := outboundByProviderID(tx, c, providerID)
		if ent.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		waiting, err := cl.PendingReceipt.Query().Where(entpending.ConnectionID(c.ID), entpending.ProviderMessageID(providerID)).
			Order(ent.Asc(entpending.FieldID)).All(tctx)
		if err != nil {
			return err
		}
		cutoff := s.now().Add(-PendingReceiptAge)
		for _, p := range waiting {
			n, err := cl.PendingReceipt.Delete().Where(entpending.ID(p.ID)).Exec(tctx)
			if err != nil {
				return err
			}
			if n == 0 || p.CreatedAt.Before(cutoff) {
				continue // another transaction took it, or it waited too long
			}
			var out ReceiptOutcome
			m, out, err = s.record(tx, c, m, channels.Receipt{MessageID: providerID, State: p.State,
				Code: p.Code, Reason: p.Reason, At: p.At})
			if err != nil {
				return err
			}
			applied = applied || out == ReceiptApplied
		}
		msg = m
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("pending receipts of %s: %w", providerID, err)
	}
	return msg, applied, nil
}

// receiptsAfterSend applies the reports that came for a message before its
// send was recorded with providerID. The message went out whatever happens
// here: a failure is logged, and the reports expire.
func (s *Service) receiptsAfterSend(ctx context.Context, c *ent.Connection, providerID string) {
	waiting, err := s.read.PendingReceipt.Query().Where(entpending.ConnectionID(c.ID), entpending.ProviderMessageID(providerID)).
		Exist(tenant.WithProject(ctx, c.ProjectID))
	if err == nil && waiting {
		_, _, err = s.applyPending(ctx, c, providerID)
	}
	if err != nil {
		s.logger.Warn("outbox: reports that came before the send", "connection", c.ID, "provider_id", providerID, "err", err)
	}
}

package messaging

import (
	"context"
	"errors"
	"fmt"
	"github.com/comm-gateway/comm/ent/schema"
	"math/rand/v2"
	"time"

	"entgo.io/ent/dialect/sql"
	"github.com/comm-gateway/comm/ent/predicate"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entconv "github.com/comm-gateway/comm/ent/conversation"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Outbox policy.
const (
	// SendLease is how long a claimed message is reserved for the worker
	// that claimed it; a worker that dies hands it over when it runs out.
	SendLease = 30 * time.Second
	// MaxAttempts bounds the tries of a message with transient failures.
	MaxAttempts = 10
	// SendTimeout bounds one provider call.
	SendTimeout = 20 * time.Second
)

// OutboxWake is signalled after an outbound message commits.
func (s *Service) OutboxWake() <-chan struct{} { return s.outbox }

func (s *Service) wakeOutbox() {
	select {
	case s.outbox <- struct{}{}:
	default:
	}
}

// headOfConversation keeps the outbound messages that no earlier one of
// their conversation is still waiting to go before: a conversation's
// messages go out one at a time, in the order they were queued. A message
// held back by a provider's rate limit (Retry-After) therefore holds back
// the ones after it, which neither overtake it nor hammer the provider
// meanwhile. (Ids are time-ordered, so an earlier id was queued earlier.)
func headOfConversation() predicate.Message {
	return predicate.Message(func(sel *sql.Selector) {
		earlier := sql.Table(entmsg.Table).As("earlier")
		sel.Where(sql.NotExists(sql.Select(earlier.C(entmsg.FieldID)).From(earlier).Where(sql.And(
			sql.ColumnsEQ(earlier.C(entmsg.FieldConversationID), sel.C(entmsg.FieldConversationID)),
			// In the very words of the partial index's condition, so that
			// the message_conversation_in_flight index serves it.
			sql.ExprP("earlier."+schema.InFlight),
			sql.ColumnsLT(earlier.C(entmsg.FieldID), sel.C(entmsg.FieldID)),
		))))
	})
}

// Claim is an outbound message reserved for delivery by this process.
type Claim struct {
	msg     *ent.Message
	outcome string
	class   string
}

// Channel is the channel of the claimed message.
func (c *Claim) Channel() string { return c.msg.Channel }

// Outcome says, after Deliver, what became of the attempt: "sent",
// "retry" (it will be tried again) or "failed" (for good); "" when Deliver
// has not decided (a database error).
func (c *Claim) Outcome() string { return c.outcome }

// ErrorClass says, after Deliver, what kind of error the provider answered
// ("" when it took the message or was not called): revoked (the
// credentials), permanent, rate_limited (it asked to wait), timeout, or
// transient.
func (c *Claim) ErrorClass() string { return c.class }

func errorClass(err error) string {
	switch {
	case errors.Is(err, channels.ErrRevoked):
		return "revoked"
	case errors.Is(err, channels.ErrPermanent):
		return "permanent"
	case channels.RetryAfter(err) > 0:
		return "rate_limited"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "transient"
}

// ClaimDue reserves up to n outbound messages whose attempt is due (queued,
// or sending under an expired lease), across all projects. Each claim is a
// conditional update, so replicas never claim the same message.
func (s *Service) ClaimDue(ctx context.Context, n int) ([]*Claim, error) {
	now := s.now()
	sys := tenant.System(ctx)
	due, err := s.read.Message.Query().
		Where(entmsg.StatusIn(entmsg.StatusQueued, entmsg.StatusSending), entmsg.NextAttemptAtLTE(now), headOfConversation()).
		Order(ent.Asc(entmsg.FieldNextAttemptAt)).Limit(n).All(sys)
	if err != nil {
		return nil, fmt.Errorf("outbox: due: %w", err)
	}
	var claims []*Claim
	for _, m := range due {
		var claimed *ent.Message
		_, err := s.log.Write(tenant.WithProject(ctx, m.ProjectID), m.ProjectID, func(tx *stream.Tx) error {
			cl, tctx := tx.Client(), tx.Context()
			k, err := cl.Message.Update().
				Where(entmsg.ID(m.ID), entmsg.StatusIn(entmsg.StatusQueued, entmsg.StatusSending), entmsg.NextAttemptAtLTE(now)).
				SetStatus(entmsg.StatusSending).AddAttempts(1).SetNextAttemptAt(now.Add(SendLease)).Save(tctx)
			if err != nil || k == 0 {
				return err
			}
			claimed, err = cl.Message.Get(tctx, m.ID)
			return err
		})
		if err != nil {
			return claims, fmt.Errorf("outbox: claim %s: %w", m.ID, err)
		}
		if claimed != nil {
			claims = append(claims, &Claim{msg: claimed})
		}
	}
	return claims, nil
}

// Deliver sends a claimed message through its connection's adapter and
// records the outcome: sent (and message.sent), a retry later with
// backoff, or failed (and message.failed) with the reason on the message.
// The outbox is woken afterwards: the next message of the conversation,
// held back while this one was out, may go now.
func (s *Service) Deliver(ctx context.Context, c *Claim) error {
	defer s.wakeOutbox()
	c.outcome = "failed"
	m := c.msg
	tctx := tenant.WithProject(ctx, m.ProjectID)
	conn, err := s.read.Connection.Query().Where(entconn.ID(m.ConnectionID)).Only(IncludeDeleted(tctx))
	if err != nil {
		return s.fail(tctx, m, nil, fmt.Sprintf("connection %s: %v", m.ConnectionID, err))
	}
	if conn.DeletedAt != nil {
		return s.fail(tctx, m, conn, "connection was deleted before the message could be sent")
	}
	a, err := s.adapter(tctx, conn)
	if err != nil {
		return s.fail(tctx, m, conn, err.Error())
	}
	out := channels.Outbound{MessageID: m.ID, To: m.Recipient, Subject: m.Subject, Text: m.Text, HTML: m.HTML,
		References: m.References, ConversationID: m.ConversationID, Template: templateOf(m.Details)}
	if conv, err := s.read.Conversation.Get(tctx, m.ConversationID); err == nil {
		out.ThreadKey = conv.ThreadKey
	}
	if n := len(m.References); n > 0 {
		out.InReplyTo = m.References[n-1]
	} else if m.InReplyTo != nil {
		if orig, err := s.read.Message.Get(tctx, *m.InReplyTo); err == nil && orig.ProviderMessageID != nil {
			out.InReplyTo = *orig.ProviderMessageID
		}
	}
	sctx, cancel := context.WithTimeout(ctx, SendTimeout)
	res, err := a.Send(sctx, out)
	cancel()
	if err != nil {
		c.class = errorClass(err)
	}
	switch {
	case err == nil:
		c.outcome = "sent"
		return s.sent(tctx, m, conn, res)
	case errors.Is(err, channels.ErrRevoked):
		if serr := s.SetConnectionStatus(ctx, conn, StatusRevoked, err.Error()); serr != nil {
			s.logger.Warn("connection status", "connection", conn.ID, "err", serr)
		}
		return s.fail(tctx, m, conn, err.Error())
	case errors.Is(err, channels.ErrPermanent) || m.Attempts >= MaxAttempts:
		return s.fail(tctx, m, conn, err.Error())
	default:
		c.outcome = "retry"
		return s.retry(tctx, m, err.Error(), channels.RetryAfter(err))
	}
}

func (s *Service) sent(ctx context.Context, m *ent.Message, conn *ent.Connection, res channels.SendResult) error {
	err := s.recordSent(ctx, m, conn, res)
	if res.ProviderID != "" && ent.IsConstraintError(err) {
		// The provider gave an id another message of the connection has
		// (ids reused across directions): the message went out all the
		// same, and sending it again would repeat it to the person.
		s.logger.Warn("outbox: provider id taken; recorded without it", "message", m.ID, "provider_id", res.ProviderID)
		return s.recordSent(ctx, m, conn, channels.SendResult{})
	}
	if err == nil && res.ProviderID != "" {
		s.receiptsAfterSend(ctx, conn, res.ProviderID)
	}
	return err
}

func (s *Service) recordSent(ctx context.Context, m *ent.Message, conn *ent.Connection, res channels.SendResult) error {
	now := s.now()
	_, err := s.log.Write(ctx, m.ProjectID, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		upd := cl.Message.UpdateOneID(m.ID).SetStatus(entmsg.StatusSent).SetSentAt(now).ClearError().ClearNextAttemptAt()
		if res.ProviderID != "" {
			upd.SetProviderMessageID(res.ProviderID)
		}
		done, err := upd.Save(tctx)
		if err != nil {
			return err
		}
		// The reply ends the typing indicator, unless the indicator was
		// shown again after this reply was queued (for the next message).
		if err := cl.Conversation.Update().Where(entconv.ID(m.ConversationID),
			entconv.TypingUntilLTE(m.CreatedAt.Add(TypingLease))).ClearTypingUntil().Exec(tctx); err != nil {
			return err
		}
		return tx.Append(stream.MessageSent, messageEvent{CustomerID: conn.CustomerID, AgentID: conn.AgentID, Message: s.outboundEvent(done)})
	})
	return err
}

// MaxRetryAfter caps how long a provider's Retry-After may hold a message
// back.
const MaxRetryAfter = time.Hour

// retry queues m again after the backoff of its attempts, or after as
// long as the provider asked (after), whichever is longer.
func (s *Service) retry(ctx context.Context, m *ent.Message, reason string, after time.Duration) error {
	wait := max(Backoff(m.Attempts), min(after, MaxRetryAfter))
	_, err := s.log.Write(ctx, m.ProjectID, func(tx *stream.Tx) error {
		return tx.Client().Message.UpdateOneID(m.ID).SetStatus(entmsg.StatusQueued).
			SetError(fmt.Sprintf("attempt %d failed, retrying: %s", m.Attempts, reason)).
			SetNextAttemptAt(s.now().Add(wait)).Exec(tx.Context())
	})
	return err
}

func (s *Service) fail(ctx context.Context, m *ent.Message, conn *ent.Connection, reason string) error {
	_, err := s.log.Write(ctx, m.ProjectID, func(tx *stream.Tx) error {
		done, err := tx.Client().Message.UpdateOneID(m.ID).SetStatus(entmsg.StatusFailed).
			SetError(reason).ClearNextAttemptAt().Save(tx.Context())
		if err != nil {
			return err
		}
		if err := s.refund(tx, conn, m.ID); err != nil {
			return err
		}
		ev := messageEvent{Message: s.outboundEvent(done)}
		if conn != nil {
			ev.CustomerID, ev.AgentID = conn.CustomerID, conn.AgentID
		}
		return tx.Append(stream.MessageFailed, ev)
	})
	return err
}

// Backoff is the wait before attempt n+1 of a send or of a webhook
// delivery: exponential from 1 s, capped at 10 minutes, with ±20% jitter.
func Backoff(n int) time.Duration {
	d := time.Second << min(max(n-1, 0), 10)
	d = min(d, 10*time.Minute)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// outboundEvent is the message object of message.sent and message.failed.
func (s *Service) outboundEvent(m *ent.Message) api.SentMessage {
	out := api.SentMessage{
		ReceivedMessage: api.ReceivedMessage{ID: m.ID, ConversationID: m.ConversationID, ConnectionID: m.ConnectionID,
			Channel: m.Channel, Sender: m.Sender, Subject: m.Subject, Text: m.Text, HTML: m.HTML},
		Recipient: m.Recipient, InReplyTo: m.InReplyTo, Status: string(m.Status), Error: m.Error, Attempts: m.Attempts,
		Delivery: DeliveryOf(m),
	}
	if m.SentAt != nil {
		t := m.SentAt.UTC()
		out.SentAt = &t
	}
	s.envelope(&out.ReceivedMessage)
	return out
}

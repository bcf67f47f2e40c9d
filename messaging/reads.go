package messaging

import (
	"context"
	"time"

	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/ent/intercept"
)

// Read rules. The front doors read through the domain under the same
// rules, kept here once: REST through the Service's methods, GraphQL
// through ent queries on the read client (Service.Ent) and these
// functions for the fields it computes.
//
//   - A deleted connection is gone from every read of the read client:
//     lists, look-ups by id, counts, GraphQL's node and nodes (liveOnly,
//     installed by New). Code that must see deleted connections asks for
//     them with IncludeDeleted. Its conversations and messages stay
//     readable. (Transactions of stream.Log read through their own client,
//     without this rule: a writer says what it means.)
//   - Fields computed from a row are computed by the domain, with the
//     service clock (Options.Now): Service.TypingUntil, Optional,
//     AttachmentsOf.
//   - Pages of messages and conversations keep the byte budget of a page
//     (Service.BoundPage, pagebytes.go); a limit the caller gave as 0 is
//     refused (Limit).

type includeDeletedKey struct{}

// IncludeDeleted returns a context under which reads of connections
// through the read client see deleted connections too: internal look-ups
// by id of a connection that may have been deleted since (the outbox
// failing a message of a deleted connection, releasing a deleted
// connection's provider setup, an inbox address's quarantine).
func IncludeDeleted(ctx context.Context) context.Context {
	return context.WithValue(ctx, includeDeletedKey{}, true)
}

func includesDeleted(ctx context.Context) bool {
	v, _ := ctx.Value(includeDeletedKey{}).(bool)
	return v
}

// liveOnly hides deleted connections from every query of connections,
// unless its context asks for them (IncludeDeleted).
func liveOnly() ent.Interceptor {
	return intercept.TraverseConnection(func(ctx context.Context, q *ent.ConnectionQuery) error {
		if !includesDeleted(ctx) {
			q.Where(entconn.DeletedAtIsNil())
		}
		return nil
	})
}

// TypingUntil is when a conversation's typing indicator ends, by the
// service clock; nil when it is not showing (no lease, or the lease ran
// out). REST's typing and typing_until and GraphQL's typingUntil.
func (s *Service) TypingUntil(c *ent.Conversation) *time.Time {
	if c.TypingUntil == nil || !c.TypingUntil.After(s.now()) {
		return nil
	}
	t := c.TypingUntil.UTC()
	return &t
}

// Optional is an optional string field as the API shows it: ent stores an
// absent value as "", which both doors answer as null.
func Optional(s string) *string { return nonEmpty(s) }

// Limit is the page size a caller gave for the argument param of a list
// whose pages hold at most max: nil (absent) is 0, which the list's
// validation takes for its default; an explicit 0 is refused, not taken
// for the default.
func Limit(param string, n *int, max int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if *n == 0 {
		return 0, Invalid(param, "must be between 1 and %d", max)
	}
	return *n, nil
}

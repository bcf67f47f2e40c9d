package messaging

import (
	"context"
	"strings"

	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/comm-gateway/comm/ent"
	entconv "github.com/comm-gateway/comm/ent/conversation"
	entdomain "github.com/comm-gateway/comm/ent/domain"
	entmsg "github.com/comm-gateway/comm/ent/message"
)

// DefaultMessagePageBytes is the default byte budget of a page of
// messages or conversations (Options.MessagePageBytes).
const DefaultMessagePageBytes = 4 << 20

// Pages of messages, conversations and custom domains have a byte budget as well as a
// count, as pages of events do: a page stops before the row that would
// take the bytes of its variable columns past the budget. Never a partial
// row; a row larger than the budget comes alone, as the first of its page.
// Outsiders set these columns: a mail's text, HTML and headers (Subject,
// From, Message-ID, References) are bounded only by the mail's size.
//
// The budget is decided in the database before any row is loaded: a first
// query reads only the ids and the byte lengths of the page's rows
// (octet_length reads a value's length without loading it on SQLite, and
// for text on PostgreSQL), then only the rows that fit are loaded. REST
// (ConversationMessagesPage, ConversationsPage, DomainsPage) and GraphQL
// (BoundPage, through interceptors of entgql's pagination; domains through
// DomainsPage) share it.

// sizedMessageColumns are the message columns a page's bytes are counted
// from: every one whose length an outsider sets. The others are ids,
// enums, numbers and times.
var sizedMessageColumns = []string{
	entmsg.FieldText, entmsg.FieldHTML, entmsg.FieldDetails, entmsg.FieldAttachments, entmsg.FieldSubject,
	entmsg.FieldSender, entmsg.FieldRecipient, entmsg.FieldProviderMessageID, entmsg.FieldInReplyTo,
	entmsg.FieldReferences, entmsg.FieldError, entmsg.FieldDeliveryCode, entmsg.FieldDeliveryReason,
}

// sizedConversationColumns are the conversation columns a page's bytes
// are counted from.
var sizedConversationColumns = []string{entconv.FieldSubject, entconv.FieldThreadKey, entconv.FieldParticipant}

// jsonColumns are stored as jsonb on PostgreSQL, which has no octet_length
// of its own.
var jsonColumns = map[string]bool{entmsg.FieldDetails: true, entmsg.FieldAttachments: true, entmsg.FieldReferences: true,
	entdomain.FieldPlan: true, entdomain.FieldChecks: true}

// sizeExpr is an SQL expression of the bytes of columns of a row.
func sizeExpr(s *sql.Selector, columns []string) string {
	if len(columns) == 0 {
		return "0"
	}
	terms := make([]string, len(columns))
	for i, c := range columns {
		col := s.C(c)
		if s.Dialect() == dialect.Postgres && jsonColumns[c] {
			col += "::text"
		}
		terms[i] = "COALESCE(octet_length(" + col + "), 0)"
	}
	return strings.Join(terms, " + ")
}

// sized is a row of a sizing query.
type sized struct {
	ID string `sql:"id"`
	N  int64  `sql:"n"`
}

// sizing is the aggregate of a sizing query: the row's id and its size,
// whatever columns the query had selected (they are reset; the aggregate
// is both).
func sizing(columns []string) func(*sql.Selector) string {
	return func(sel *sql.Selector) string {
		sel.Select()
		return sel.C("id") + ", " + sizeExpr(sel, columns) + " AS n"
	}
}

// fit returns the ids of the leading rows within budget (at least one),
// and whether rows past them were measured and left out.
func fit(rows []sized, budget int) (ids []string, cut bool) {
	var sum int64
	for i, r := range rows {
		sum += r.N
		if i > 0 && sum > int64(budget) {
			return ids, true
		}
		ids = append(ids, r.ID)
	}
	return ids, false
}

// fitMessages reads the ids and byte sizes of up to n rows of q (filtered,
// ordered and past its cursors; its own limit is replaced by n), counting
// the given columns, and returns the ids of the leading rows within the
// byte budget (at least one). cut reports that rows past them were
// measured and did not fit.
func fitMessages(ctx context.Context, q *ent.MessageQuery, n, budget int, columns []string) ([]string, bool, error) {
	var rows []sized
	if err := q.Limit(n).Aggregate(sizing(columns)).Scan(ctx, &rows); err != nil {
		return nil, false, err
	}
	ids, cut := fit(rows, budget)
	return ids, cut, nil
}

// fitConversations is fitMessages for conversations.
func fitConversations(ctx context.Context, q *ent.ConversationQuery, n, budget int, columns []string) ([]string, bool, error) {
	var rows []sized
	if err := q.Limit(n).Aggregate(sizing(columns)).Scan(ctx, &rows); err != nil {
		return nil, false, err
	}
	ids, cut := fit(rows, budget)
	return ids, cut, nil
}

// Fit reads the ids and byte sizes of up to n rows of a query (filtered,
// ordered and past its cursors; limit it to n), counting the given
// columns, and returns the ids of the leading rows within budget (at
// least one) and whether rows past them were measured and did not fit.
// Features outside the core page their own rows with it:
//
//	ids, cut, err := messaging.Fit(func(agg func(*sql.Selector) string, rows any) error {
//		return q.Limit(n).Aggregate(agg).Scan(ctx, rows)
//	}, budget, columns)
func Fit(scan func(agg func(*sql.Selector) string, rows any) error, budget int, columns []string) ([]string, bool, error) {
	var rows []sized
	if err := scan(sizing(columns), &rows); err != nil {
		return nil, false, err
	}
	ids, cut := fit(rows, budget)
	return ids, cut, nil
}

// pageBudget is what BoundPage puts in a context for the interceptors of
// message and conversation queries (installed on the service's ent client).
type pageBudget struct {
	bytes        int
	applied, cut bool
}

type pageBudgetKey struct{}

// BoundPage returns a context under which the first message or
// conversation query loading rows (All) loads only the leading rows of its
// page that fit the service's byte budget of a page, and a function
// telling whether that left rows out (then the page has more rows after
// it, in the query's order). Only the columns the query selects are
// counted (all of them when it selects every column). GraphQL's messages
// and conversations connections run entgql's pagination under it.
func (s *Service) BoundPage(ctx context.Context) (context.Context, func() bool) {
	b := &pageBudget{bytes: s.messagePageBytes}
	return context.WithValue(ctx, pageBudgetKey{}, b), func() bool { return b.cut }
}

// selected narrows columns to those the query selects, if it selects any.
func selected(columns, fields []string) []string {
	if len(fields) == 0 {
		return columns
	}
	var out []string
	for _, c := range columns {
		for _, f := range fields {
			if f == c {
				out = append(out, c)
			}
		}
	}
	return out
}

// pageInterceptor applies BoundPage's budget to message and conversation
// queries; other queries, and those outside BoundPage, pass through.
func (s *Service) pageInterceptor() entgo.Interceptor {
	return entgo.InterceptFunc(func(next entgo.Querier) entgo.Querier {
		return entgo.QuerierFunc(func(ctx context.Context, query entgo.Query) (entgo.Value, error) {
			b, _ := ctx.Value(pageBudgetKey{}).(*pageBudget)
			qc := entgo.QueryFromContext(ctx)
			if b == nil || b.applied || qc == nil || qc.Op != entgo.OpQueryAll || qc.Limit == nil {
				return next.Query(ctx, query)
			}
			switch q := query.(type) {
			case *ent.MessageQuery:
				b.applied = true
				ids, cut, err := fitMessages(ctx, q.Clone(), *qc.Limit, b.bytes, selected(sizedMessageColumns, qc.Fields))
				if err != nil {
					return nil, err
				}
				if cut {
					b.cut = true
					q.Where(entmsg.IDIn(ids...)).Limit(len(ids))
				}
			case *ent.ConversationQuery:
				b.applied = true
				ids, cut, err := fitConversations(ctx, q.Clone(), *qc.Limit, b.bytes, selected(sizedConversationColumns, qc.Fields))
				if err != nil {
					return nil, err
				}
				if cut {
					b.cut = true
					q.Where(entconv.IDIn(ids...)).Limit(len(ids))
				}
			}
			return next.Query(ctx, query)
		})
	})
}

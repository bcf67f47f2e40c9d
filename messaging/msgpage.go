package messaging

import (
	"context"
	"strings"

	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/comm-gateway/comm/ent"
	entmsg "github.com/comm-gateway/comm/ent/message"
)

// DefaultMessagePageBytes is the default byte budget of a page of
// messages (Options.MessagePageBytes).
const DefaultMessagePageBytes = 4 << 20

// Pages of messages have a byte budget as well as a count, as pages of
// events do: a page stops before the message that would take the bytes of
// its large columns (text, html, details, attachments) past the budget.
// Never a partial message; a message larger than the budget comes alone,
// as the first of its page. The budget is decided in the database before
// any row is loaded: a first query reads only the ids and the byte lengths
// of the page's rows (octet_length reads a value's length without loading
// it on SQLite and for text on PostgreSQL), then only the rows that fit
// are loaded. REST (ConversationMessagesPage) and GraphQL
// (BoundMessagePage, through an interceptor of entgql's pagination) share
// it.

// sizedColumns are the message columns a page's bytes are counted from:
// the ones an outsider can make large. The others are bounded by their
// own validation (ids, addresses, a subject, times).
var sizedColumns = []string{entmsg.FieldText, entmsg.FieldHTML, entmsg.FieldDetails, entmsg.FieldAttachments}

// sizeExpr is an SQL expression of the bytes of columns of a message row.
func sizeExpr(s *sql.Selector, columns []string) string {
	if len(columns) == 0 {
		return "0"
	}
	terms := make([]string, len(columns))
	for i, c := range columns {
		col := s.C(c)
		if s.Dialect() == dialect.Postgres && (c == entmsg.FieldDetails || c == entmsg.FieldAttachments) {
			col += "::text" // jsonb has no octet_length of its own
		}
		terms[i] = "COALESCE(octet_length(" + col + "), 0)"
	}
	return strings.Join(terms, " + ")
}

// sized is a row of the sizing query.
type sized struct {
	ID string `sql:"id"`
	N  int64  `sql:"n"`
}

// fitMessages reads the ids and byte sizes of up to n rows of q (filtered,
// ordered and past its cursors; its own limit is replaced by n), counting
// the given columns, and returns the ids of the leading rows within the
// byte budget (at least one). cut reports that rows past them were
// measured and did not fit.
func fitMessages(ctx context.Context, q *ent.MessageQuery, n, budget int, columns []string) (ids []string, cut bool, err error) {
	var rows []sized
	err = q.Limit(n).Aggregate(func(sel *sql.Selector) string {
		// The sizing query reads the id and the size, whatever columns
		// the query had selected: reset them, and the aggregate is both.
		sel.Select()
		return sel.C(entmsg.FieldID) + ", " + sizeExpr(sel, columns) + " AS n"
	}).Scan(ctx, &rows)
	if err != nil {
		return nil, false, err
	}
	var sum int64
	for i, r := range rows {
		sum += r.N
		if i > 0 && sum > int64(budget) {
			return ids, true, nil
		}
		ids = append(ids, r.ID)
	}
	return ids, false, nil
}

// messageBudget is what BoundMessagePage puts in a context for the
// interceptor of message queries (installed on the service's ent client).
type messageBudget struct {
	bytes        int
	applied, cut bool
}

type messageBudgetKey struct{}

// BoundMessagePage returns a context under which the first message query
// loading rows (All) loads only the leading rows of its page that fit the
// service's byte budget of a page of messages, and a function telling
// whether that left rows out (then the page has more rows after it, in the
// query's order). Only the columns the query selects are counted (all of
// the large ones when it selects every column). GraphQL's messages
// connection runs entgql's pagination under it.
func (s *Service) BoundMessagePage(ctx context.Context) (context.Context, func() bool) {
	b := &messageBudget{bytes: s.messagePageBytes}
	return context.WithValue(ctx, messageBudgetKey{}, b), func() bool { return b.cut }
}

// messagePageInterceptor applies BoundMessagePage's budget.
func (s *Service) messagePageInterceptor() entgo.Interceptor {
	return entgo.InterceptFunc(func(next entgo.Querier) entgo.Querier {
		return entgo.QuerierFunc(func(ctx context.Context, query entgo.Query) (entgo.Value, error) {
			b, _ := ctx.Value(messageBudgetKey{}).(*messageBudget)
			q, ok := query.(*ent.MessageQuery)
			qc := entgo.QueryFromContext(ctx)
			if b == nil || b.applied || !ok || qc == nil || qc.Op != entgo.OpQueryAll || qc.Limit == nil {
				return next.Query(ctx, query)
			}
			b.applied = true
			columns := sizedColumns
			if len(qc.Fields) > 0 {
				columns = nil
				for _, c := range sizedColumns {
					for _, f := range qc.Fields {
						if f == c {
							columns = append(columns, c)
						}
					}
				}
			}
			ids, cut, err := fitMessages(ctx, q.Clone(), *qc.Limit, b.bytes, columns)
			if err != nil {
				return nil, err
			}
			if cut {
				b.cut = true
				q.Where(entmsg.IDIn(ids...)).Limit(len(ids))
			}
			return next.Query(ctx, q)
		})
	})
}

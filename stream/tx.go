package stream

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/comm-gateway/comm/ent"
)

// Tx is the transaction a Write's function runs in.
type Tx struct {
	ctx     context.Context
	project string
	conn    *unitConn
	dialect string
	client  *ent.Client
	events  []Event
	bulk    *bulkRows // nil: Bulk rows are written at once
}

// Context returns the caller's context, detached from its cancellation.
func (t *Tx) Context() context.Context { return t.ctx }

// Project returns the project the write is for.
func (t *Tx) Project() string { return t.project }

// Client returns an ent client bound to the transaction.
func (t *Tx) Client() *ent.Client {
	if t.client == nil {
		t.client = ent.NewClient(ent.Driver(unitDriver{conn: entsql.Conn{ExecQuerier: t.conn}, dialect: t.dialect}))
	}
	return t.client
}

// Exec runs a raw statement in the transaction.
func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(t.ctx, query, args...)
}

// Query runs a raw query in the transaction (in the dialect's placeholders;
// see Rebind). Close the rows before the next statement.
func (t *Tx) Query(query string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(t.ctx, query, args...)
}

// Postgres reports whether the transaction is PostgreSQL's (else SQLite's),
// for the rare statement the two write differently.
func (t *Tx) Postgres() bool { return t.dialect == dialect.Postgres }

// Rebind turns a query written with ? placeholders into the dialect's.
func (t *Tx) Rebind(query string) string {
	if t.dialect != dialect.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Append adds an event to the write's project; its seq is assigned at
// commit and returned by Log.Write.
func (t *Tx) Append(typ string, data any) error {
	raw, err := marshal(typ, data)
	if err != nil {
		return err
	}
	t.events = append(t.events, Event{Type: typ, Data: raw})
	return nil
}

// unitDriver is the ent driver of a unit: statements run in the shared
// transaction, and the transactions ent opens itself (UpdateOne does) are
// no-ops inside it.
type unitDriver struct {
	conn    entsql.Conn
	dialect string
}

var _ dialect.Driver = unitDriver{}

func (d unitDriver) Exec(ctx context.Context, query string, args, v any) error {
	return d.conn.Exec(ctx, query, args, v)
}

func (d unitDriver) Query(ctx context.Context, query string, args, v any) error {
	return d.conn.Query(ctx, query, args, v)
}

func (d unitDriver) Tx(context.Context) (dialect.Tx, error) { return dialect.NopTx(d), nil }
func (d unitDriver) Close() error                           { return nil }
func (d unitDriver) Dialect() string                        { return d.dialect }

// unitConn runs statements in the shared transaction, taking the unit's
// savepoint before the first one.
type unitConn struct {
	tx        *sql.Tx
	savepoint bool
}

func (c *unitConn) begin(ctx context.Context) error {
	if c.savepoint {
		return nil
	}
	if _, err := c.tx.ExecContext(ctx, "SAVEPOINT u"); err != nil {
		return err
	}
	c.savepoint = true
	return nil
}

// ExecContext implements entsql.ExecQuerier.
func (c *unitConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	return c.tx.ExecContext(ctx, query, args...)
}

// QueryContext implements entsql.ExecQuerier.
func (c *unitConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	return c.tx.QueryContext(ctx, query, args...)
}

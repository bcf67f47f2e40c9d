package store

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"

	"github.com/lib/pq"
)

// lib/pq runs a statement with arguments in two round trips: Parse and
// Describe, wait, then Bind and Execute. A statement prepared once on a
// connection runs in one (Bind and Execute). The gateway sends the same few
// statements over and over (ent builds the same text for the same call), so
// each connection keeps the statements it ran last prepared: a write of an
// inbound message, a handful of statements in a transaction, costs half the
// round trips. PostgreSQL holds a prepared statement per connection until it
// closes; the cache keeps at most stmtCacheSize per connection.

// DefaultStatementCache is the number of prepared statements a PostgreSQL
// connection keeps (Config.StatementCache).
const DefaultStatementCache = 100

// Statements that are not kept: ones with many arguments (a multi-row
// insert, whose text changes with its row count, or a long IN list) and
// long texts. They run as lib/pq runs them.
const (
	stmtCacheMaxArgs = 64
	stmtCacheMaxText = 4 << 10
)

// pqConn is what lib/pq's connection implements and database/sql uses.
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type stmtCacheConnector struct {
	driver.Connector
	size int
}

func (c stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := cn.(pqConn)
	if !ok {
		return cn, nil
	}
	return &stmtCacheConn{pqConn: pc, size: c.size, byText: map[string]*list.Element{}, lru: list.New()}, nil
}

// stmtCacheConn is a lib/pq connection with a cache of prepared
// statements, least recently used first out. database/sql uses a
// connection from one goroutine at a time, so it needs no lock.
type stmtCacheConn struct {
	pqConn
	size   int
	byText map[string]*list.Element
	lru    *list.List // of *cachedStmt, most recently used first
}

type cachedStmt struct {
	text string
	st   driver.Stmt
}

// stmt returns the prepared statement for query, preparing it if needed;
// nil when query is not to be kept.
func (c *stmtCacheConn) stmt(ctx context.Context, query string, args int) (driver.Stmt, error) {
	if args == 0 || args > stmtCacheMaxArgs || len(query) > stmtCacheMaxText {
		return nil, nil
	}
	if e, ok := c.byText[query]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cachedStmt).st, nil
	}
	st, err := c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.byText[query] = c.lru.PushFront(&cachedStmt{text: query, st: st})
	return st, nil
}

// forget drops query's statement after an error that may mean the server
// no longer has it (a pooler that reset the session) or that its plan no
// longer fits (the table changed under it); it is prepared again next time.
func (c *stmtCacheConn) forget(query string, err error) {
	var pe *pq.Error
	if !errors.As(err, &pe) {
		return
	}
	switch pe.Code {
	case "26000", // invalid_sql_statement_name: the server lost it
		"0A000": // feature_not_supported: "cached plan must not change result type"
	default:
		return
	}
	if e, ok := c.byText[query]; ok {
		c.lru.Remove(e)
		delete(c.byText, query)
		// Not closed: the connection may be in a failed transaction. The
		// server frees it when the connection closes.
	}
}

func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, err := c.stmt(ctx, query, len(args))
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
	if err != nil {
		c.forget(query, err)
	}
	return res, err
}

func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, err := c.stmt(ctx, query, len(args))
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		c.forget(query, err)
	}
	return rows, err
}

// ResetSession runs before the pool hands the connection out again, out of
// any transaction: statements past the cache's size are closed here, the
// least recently used first.
func (c *stmtCacheConn) ResetSession(ctx context.Context) error {
	if err := c.pqConn.ResetSession(ctx); err != nil {
		return err
	}
	for c.lru.Len() > c.size {
		e := c.lru.Back()
		cs := e.Value.(*cachedStmt)
		c.lru.Remove(e)
		delete(c.byText, cs.text)
		if err := cs.st.Close(); err != nil {
			return driver.ErrBadConn
		}
	}
	return nil
}

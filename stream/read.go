package stream

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/comm-gateway/comm/store"
)

type readStmts struct {
	all, typed, head   *sql.Stmt
	allJSON, typedJSON *sql.Stmt // allJSON: SQLite's
	allBodies          *sql.Stmt // PostgreSQL's page of all types, as rows
	floor, typeFloor   *sql.Stmt
}

// Pages have a byte budget as well as a count: a page holds the events
// after the cursor, in order, up to its limit, and stops before the event
// that would take its envelopes' bytes past the budget (never a partial
// event; an event larger than the budget comes alone, as the first of its
// page). The budget is reckoned in the database, from the sizes stored
// with the events (pages of all types) or from the bodies' lengths (pages
// of one type), and only the events within the budget are fetched whole.

// An event stores its envelope's size and pos, the sum of the sizes of
// its project's events up to and including it (see store). A page of all
// types, the hot path, costs one walk of the primary key, as a page without
// a budget does: the events of a page after a are the seqs a+1 .. a+limit
// (seqs are dense), the page's bytes up to event e are pos(e) - base, where
// base is the first event's pos minus its size, so the page is the events
// of that range with pos <= bound, bound = base + budget (or the first
// event's pos, if it alone is larger). bound costs one seek. An event
// without pos (a log upgraded while an older replica appended) counts as
// fitting, and a page starting at one is not budgeted.

// bound is the last byte a page after ? (parameters: budget, budget,
// project, after) may end at.
const bound = `coalesce((SELECT CASE WHEN size < ? THEN pos + ? - size ELSE pos END
		FROM events WHERE project_id = ? AND seq > ? ORDER BY seq LIMIT 1), 9223372036854775807)`

// allBodies is pageBodies for events of all types. Parameters: project,
// after, after+limit, then bound's, then limit (allArgs).
const allBodies = `SELECT seq, body FROM events WHERE project_id = ? AND seq > ? AND seq <= ?
	AND coalesce(pos, 0) <= ` + bound + ` ORDER BY seq LIMIT ?`

// allRows is pageRows for events of all types: the events within the
// budget, then the first that is not (the one that straddles bound) with
// a NULL body. Parameters: bound's, project, after, after+limit, bound's,
// limit (allRowArgs).
const allRows = `SELECT seq, type, CASE WHEN coalesce(pos, 0) <= ` + bound + ` THEN body END FROM events
	WHERE project_id = ? AND seq > ? AND seq <= ? AND coalesce(pos - size, 0) <= ` + bound + ` ORDER BY seq LIMIT ?`

func boundArgs(args []any, project string, after int64, budget int) []any {
	return append(args, budget, budget, project, after)
}

func allArgs(project string, after int64, limit, budget int) []any {
	args := make([]any, 0, 8)
	args = append(args, project, after, after+int64(limit))
	return append(boundArgs(args, project, after, budget), limit)
}

func allRowArgs(project string, after int64, limit, budget int) []any {
	args := make([]any, 0, 12)
	args = boundArgs(args, project, after, budget)
	args = append(args, project, after, after+int64(limit))
	return append(boundArgs(args, project, after, budget), limit)
}

// Pages of one type are not dense in seq: their budget is reckoned from
// the bodies' lengths, as follows.

// window numbers the (at most limit) events of the page and sums their
// bytes; filter selects them (project, optionally type, after seq).
func window(filter string) string {
	return `SELECT seq, type, n, row_number() OVER (ORDER BY seq) AS rn,
		sum(n) OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum
		FROM (SELECT seq, type, octet_length(body) AS n FROM events WHERE ` + filter + ` ORDER BY seq LIMIT ?) AS i`
}

// pageRows yields the page's events as rows (seq, type, body), and one more
// row with a NULL body when the budget cut the page short: the first event
// that did not fit (the marker). The marker's seq is computed once, first:
// when the page's lengths sum within the budget (most pages) nothing is
// windowed; then the events are walked by primary key as a plain page is.
// Parameters: see rowArgs.
func pageRows(filter string) string {
	return `WITH c AS MATERIALIZED (SELECT CASE WHEN s.total <= ? THEN 9223372036854775807
			ELSE coalesce((SELECT min(seq) FROM (` + window(filter) + `) AS w WHERE w.rn > 1 AND w.cum > ?), 9223372036854775807) END AS marker
		FROM (SELECT sum(octet_length(body)) AS total FROM (SELECT body FROM events WHERE ` + filter + ` ORDER BY seq LIMIT ?) AS l) AS s)
		SELECT seq, type, CASE WHEN seq < (SELECT marker FROM c) THEN body END FROM events
		WHERE ` + filter + ` AND seq <= (SELECT marker FROM c) ORDER BY seq LIMIT ?`
}

// rowArgs are the parameters of pageRows.
func rowArgs(filter []any, limit, budget int) []any {
	args := make([]any, 0, 3*len(filter)+5)
	args = append(args, budget)
	args = append(args, filter...)
	args = append(args, limit, budget)
	args = append(args, filter...)
	args = append(args, limit)
	args = append(args, filter...)
	return append(args, limit)
}

// pageBodies yields the bodies of the page's events, in order: the
// events up to a cutoff seq, walked by primary key as a plain page is. The
// cutoff costs one sum over the page's lengths when the page fits (most
// pages); only a page past the budget is windowed. Parameters: the
// filter's, the filter's, limit, the budget, the filter's, limit, the
// budget, limit (pageArgs).
func pageBodies(filter string) string {
	return `SELECT seq, body FROM events WHERE ` + filter + ` AND seq <= (CASE
		WHEN (SELECT sum(octet_length(body)) FROM (SELECT body FROM events WHERE ` + filter + ` ORDER BY seq LIMIT ?) AS l) <= ?
		THEN 9223372036854775807
		ELSE (SELECT max(seq) FROM (` + window(filter) + `) AS w WHERE w.rn = 1 OR w.cum <= ?) END)
		ORDER BY seq LIMIT ?`
}

// pageArgs are the parameters of pageBodies.
func pageArgs(filter []any, limit, budget int) []any {
	args := make([]any, 0, 3*len(filter)+5)
	args = append(args, filter...)
	args = append(args, filter...)
	args = append(args, limit, budget)
	args = append(args, filter...)
	return append(args, limit, budget, limit)
}

// pageJSON wraps a page query so the database encodes the page as a JSON
// array in one value: one row crosses the driver instead of a hundred.
// Types are known plain ASCII (checked on append) and data is stored JSON,
// so plain concatenation is exact.
//
// SQLite: group_concat consumes the subquery's rows in the order the
// subquery yields them (a co-routine walking the primary key); an ORDER BY
// inside the aggregate would sort them again and cost 40% of the read. The order is checked by the stream and server tests on every
// engine, and the SQLite version is pinned by go.mod. PostgreSQL sorts
// explicitly.
func pageJSON(db *store.DB, page string) string {
	agg := "group_concat(body, ',')"
	if db.IsPostgres() {
		agg = "string_agg(body, ',' ORDER BY seq)"
	}
	return `SELECT coalesce('[' || ` + agg + ` || ']', '[]') FROM (` + page + `) AS page`
}

func (s *readStmts) prepare(db *store.DB) error {
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.R.Prepare(db.Rebind(q))
		return st
	}
	const typed = "project_id = ? AND type = ? AND seq > ?"
	s.all = prep(allRows)
	s.typed = prep(pageRows(typed))
	if db.IsPostgres() {
		s.allBodies = prep(allBodies) // joined by joinRows
	} else {
		s.allJSON = prep(pageJSON(db, allBodies))
	}
	s.typedJSON = prep(pageJSON(db, pageBodies(typed)))
	s.head = prep("SELECT last_seq FROM projects WHERE id = ?")
	s.floor = prep("SELECT earliest_seq FROM event_floors WHERE project_id = ?")
	s.typeFloor = prep("SELECT deleted_seq FROM event_type_floors WHERE project_id = ? AND type = ?")
	if err != nil {
		return fmt.Errorf("stream: prepare: %w", err)
	}
	return nil
}

func (s *readStmts) close() {
	for _, st := range []*sql.Stmt{s.all, s.typed, s.head, s.allJSON, s.typedJSON, s.allBodies, s.floor, s.typeFloor} {
		if st != nil {
			st.Close()
		}
	}
}

// Read returns up to limit of project's events with seq greater than
// afterSeq, in seq order, of type typ if it is not empty, within the log's
// page budget (Options.PageBytes). The caller is responsible for naming
// only the authenticated project.
//
// Every read fails with a fault.ErrCursorExpired error (carrying the
// earliest kept seq) when afterSeq is older than the earliest event
// retention kept (afterSeq < Earliest-1): the events after it were
// deleted, and a page would skip them silently. A read of one type fails
// only when events of that type after afterSeq were deleted. See
// retention.go.
func (l *Log) Read(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]Event, error) {
	evs, _, err := l.ReadPage(ctx, project, afterSeq, limit, typ)
	return evs, err
}

// ReadPage is Read, also telling whether the byte budget cut the page
// short of limit: then more events follow.
func (l *Log) ReadPage(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]Event, bool, error) {
	envs, cut, err := l.ReadEnvelopesWithin(ctx, project, afterSeq, limit, l.pageBytes, typ)
	if err != nil {
		return nil, false, err
	}
	out := make([]Event, len(envs))
	for i, e := range envs {
		data, err := e.Data()
		if err != nil {
			return nil, false, err
		}
		out[i] = Event{Seq: e.Seq, Type: e.Type, Data: data}
	}
	return out, cut, nil
}

// PageBytes returns the log's page budget: the most bytes of event
// envelopes a page holds (a larger event still comes, alone).
func (l *Log) PageBytes() int { return l.pageBytes }

// ReadJSON is Read, returning the page already encoded as a JSON array of
// {seq, type, data} objects, as the REST API serves it.
func (l *Log) ReadJSON(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]byte, error) {
	var (
		page []byte
		err  error
	)
	switch {
	case typ == "" && l.db.IsPostgres():
		page, err = l.joinRows(ctx, allArgs(project, afterSeq, limit, l.pageBytes))
	case typ == "":
		page, err = readValue(ctx, l.read.allJSON, allArgs(project, afterSeq, limit, l.pageBytes))
	default:
		page, err = readValue(ctx, l.read.typedJSON, pageArgs([]any{project, typ, afterSeq}, limit, l.pageBytes))
	}
	if err != nil {
		return nil, err
	}
	if err := l.checkCursor(ctx, project, afterSeq, firstSeq(page), typ); err != nil {
		ReleasePage(page)
		return nil, err
	}
	return page, nil
}

// Pages read as JSON (ReadJSON) are built in buffers reused once the
// caller is done with them (ReleasePage): a busy reader would otherwise
// make a page's worth of garbage per page, and the collector's work
// would grow with it. Buffers past pooledPage are not kept.
var pages = sync.Pool{New: func() any { return new([]byte) }}

const pooledPage = 256 << 10

func newPage() []byte { return (*pages.Get().(*[]byte))[:0] }

// ReleasePage gives back a page ReadJSON returned, for a later page, once
// it is written and nothing refers to it any more.
func ReleasePage(page []byte) {
	if cap(page) == 0 || cap(page) > pooledPage {
		return
	}
	pages.Put(&page)
}

// readValue reads the one value stmt yields (a page the database encoded)
// into a pooled buffer.
func readValue(ctx context.Context, stmt *sql.Stmt, args []any) ([]byte, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("stream: read: %w", err)
		}
		return nil, fmt.Errorf("stream: read: no page")
	}
	var v sql.RawBytes
	if err := rows.Scan(&v); err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	return append(newPage(), v...), nil
}

// joinRows is allJSON's page on PostgreSQL: the bodies come as rows and
// are joined here. PostgreSQL's string_agg over a page costs it more than
// sending the rows (a page of 100 events: 4,200 against 5,500 pages a
// second on two cores), and the database is the busier side.
func (l *Log) joinRows(ctx context.Context, args []any) ([]byte, error) {
	rows, err := l.read.allBodies.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	defer rows.Close()
	page := append(newPage(), '[')
	var (
		seq  int64
		body sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &body); err != nil {
			ReleasePage(page)
			return nil, fmt.Errorf("stream: read: %w", err)
		}
		if len(page) > 1 {
			page = append(page, ',')
		}
		page = append(page, body...)
	}
	if err := rows.Err(); err != nil {
		ReleasePage(page)
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	return append(page, ']'), nil
}

// firstSeq is the seq of the first event of a JSON page (0 for an empty
// page): stored envelopes begin with {"seq":N.
func firstSeq(page []byte) int64 {
	const open = `[{"seq":`
	if len(page) <= len(open) || string(page[:len(open)]) != open {
		return 0
	}
	var n int64
	for _, c := range page[len(open):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// Head returns the seq of project's last committed event (0 if none).
func (l *Log) Head(ctx context.Context, project string) (int64, error) {
	var head int64
	if err := l.read.head.QueryRowContext(ctx, project).Scan(&head); err != nil {
		if err == sql.ErrNoRows {
			return 0, ErrNoProject
		}
		return 0, fmt.Errorf("stream: head: %w", err)
	}
	return head, nil
}

// Envelope is a stored event as its JSON envelope, {"seq","type","data"},
// ready to be sent as it is.
type Envelope struct {
	Seq  int64
	Type string
	Body []byte
}

// ReadEnvelopes is Read without decoding: the events' stored envelopes.
func (l *Log) ReadEnvelopes(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]Envelope, error) {
	envs, _, err := l.ReadEnvelopesWithin(ctx, project, afterSeq, limit, l.pageBytes, typ)
	return envs, err
}

// ReadEnvelopesWithin is ReadEnvelopes with a byte budget of its own
// (maxBytes; the log's if not positive): the page stops before the event
// that would take it past maxBytes, but its first event always comes. cut
// reports that the budget stopped the page before limit, so more events
// follow.
func (l *Log) ReadEnvelopesWithin(ctx context.Context, project string, afterSeq int64, limit, maxBytes int, typ string) (envs []Envelope, cut bool, err error) {
	if maxBytes <= 0 {
		maxBytes = l.pageBytes
	}
	var rows *sql.Rows
	if typ == "" {
		rows, err = l.read.all.QueryContext(ctx, allRowArgs(project, afterSeq, limit, maxBytes)...)
	} else {
		rows, err = l.read.typed.QueryContext(ctx, rowArgs([]any{project, typ, afterSeq}, limit, maxBytes)...)
	}
	if err != nil {
		return nil, false, fmt.Errorf("stream: read: %w", err)
	}
	defer rows.Close()
	out := make([]Envelope, 0, min(limit, 128))
	for rows.Next() {
		var e Envelope
		if err := rows.Scan(&e.Seq, &e.Type, &e.Body); err != nil {
			return nil, false, fmt.Errorf("stream: read: %w", err)
		}
		if e.Body == nil { // the first event past the budget
			cut = true
			break
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("stream: read: %w", err)
	}
	var first int64
	if len(out) > 0 {
		first = out[0].Seq
	}
	if err := l.checkCursor(ctx, project, afterSeq, first, typ); err != nil {
		return nil, false, err
	}
	return out, cut, nil
}

// Data returns the event's data, the "data" member of the envelope.
func (e Envelope) Data() (json.RawMessage, error) { return unwrapEnvelope(e.Body, e.Seq, e.Type) }

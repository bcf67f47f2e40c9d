package stream

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/comm-gateway/comm/store"
)

type readStmts struct {
	all, typed, head   *sql.Stmt
	allJSON, typedJSON *sql.Stmt
}

// pageJSON wraps a page query so the database encodes the page as a JSON
// array in one value: one row crosses the driver instead of a hundred.
// Types are known plain ASCII (checked on append) and data is stored JSON,
// so plain concatenation is exact.
//
// SQLite: group_concat consumes the subquery's rows in the order the
// subquery yields them (a co-routine walking the primary key); an ORDER BY
// inside the aggregate would sort them again and cost 40% of the read. The
// order is checked by the stream and server tests on every engine, and the
// SQLite version is pinned by go.mod. PostgreSQL sorts explicitly.
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
	const (
		all   = "SELECT seq, type, body FROM events WHERE project_id = ? AND seq > ? ORDER BY seq LIMIT ?"
		typed = "SELECT seq, type, body FROM events WHERE project_id = ? AND type = ? AND seq > ? ORDER BY seq LIMIT ?"
	)
	s.all = prep(all)
	s.typed = prep(typed)
	s.allJSON = prep(pageJSON(db, all))
	s.typedJSON = prep(pageJSON(db, typed))
	s.head = prep("SELECT last_seq FROM projects WHERE id = ?")
	if err != nil {
		return fmt.Errorf("stream: prepare: %w", err)
	}
	return nil
}

func (s *readStmts) close() {
	for _, st := range []*sql.Stmt{s.all, s.typed, s.head, s.allJSON, s.typedJSON} {
		if st != nil {
			st.Close()
		}
	}
}

// Read returns up to limit of project's events with seq greater than
// afterSeq, in seq order, of type typ if it is not empty. The caller is
// responsible for naming only the authenticated project.
func (l *Log) Read(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]Event, error) {
	envs, err := l.ReadEnvelopes(ctx, project, afterSeq, limit, typ)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(envs))
	for i, e := range envs {
		data, err := e.Data()
		if err != nil {
			return nil, err
		}
		out[i] = Event{Seq: e.Seq, Type: e.Type, Data: data}
	}
	return out, nil
}

// ReadJSON is Read, returning the page already encoded as a JSON array of
// {seq, type, data} objects, as the REST API serves it.
func (l *Log) ReadJSON(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]byte, error) {
	var row *sql.Row
	if typ == "" {
		row = l.read.allJSON.QueryRowContext(ctx, project, afterSeq, limit)
	} else {
		row = l.read.typedJSON.QueryRowContext(ctx, project, typ, afterSeq, limit)
	}
	var page []byte
	if err := row.Scan(&page); err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	return page, nil
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
	var (
		rows *sql.Rows
		err  error
	)
	if typ == "" {
		rows, err = l.read.all.QueryContext(ctx, project, afterSeq, limit)
	} else {
		rows, err = l.read.typed.QueryContext(ctx, project, typ, afterSeq, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	defer rows.Close()
	out := make([]Envelope, 0, min(limit, 128))
	for rows.Next() {
		var e Envelope
		if err := rows.Scan(&e.Seq, &e.Type, &e.Body); err != nil {
			return nil, fmt.Errorf("stream: read: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	return out, nil
}

// Data returns the event's data, the "data" member of the envelope.
func (e Envelope) Data() (json.RawMessage, error) { return unwrapEnvelope(e.Body, e.Seq, e.Type) }

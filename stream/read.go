package stream

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/comm-gateway/comm/store"
)

type readStmts struct {
	all, typed, head *sql.Stmt
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
	s.all = prep("SELECT seq, type, data FROM events WHERE project_id = ? AND seq > ? ORDER BY seq LIMIT ?")
	s.typed = prep("SELECT seq, type, data FROM events WHERE project_id = ? AND type = ? AND seq > ? ORDER BY seq LIMIT ?")
	s.head = prep("SELECT last_seq FROM projects WHERE id = ?")
	if err != nil {
		return fmt.Errorf("stream: prepare: %w", err)
	}
	return nil
}

func (s *readStmts) close() {
	for _, st := range []*sql.Stmt{s.all, s.typed, s.head} {
		if st != nil {
			st.Close()
		}
	}
}

// Read returns up to limit of project's events with seq greater than
// afterSeq, in seq order, of type typ if it is not empty. The caller is
// responsible for naming only the authenticated project.
func (l *Log) Read(ctx context.Context, project string, afterSeq int64, limit int, typ string) ([]Event, error) {
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
	out := make([]Event, 0, min(limit, 128))
	for rows.Next() {
		var e Event
		var data []byte
		if err := rows.Scan(&e.Seq, &e.Type, &data); err != nil {
			return nil, fmt.Errorf("stream: read: %w", err)
		}
		e.Data = data
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stream: read: %w", err)
	}
	return out, nil
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

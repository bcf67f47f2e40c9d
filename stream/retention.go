package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/comm-gateway/comm/fault"
)

// Retention bounds the log (COMM_EVENT_RETENTION): events older than a
// period are deleted from the front of each project's log, a batch at a
// time, by a background job.
//
// What stays true:
//
//   - A project's log stays a contiguous run of seqs: events are deleted
//     from its front only, up to the first one that is not old enough.
//   - The project's head event (seq = projects.last_seq) is never deleted,
//     so seqs never restart (they come from the counter row, not from the
//     events left) and a new event's pos continues its predecessor's.
//   - event_floors.earliest_seq, the earliest kept seq, and
//     event_type_floors.deleted_seq, the last deleted seq of each type,
//     move in the transaction that deletes, and only forward. A read whose
//     cursor is older than earliest_seq-1 (a read of one type: older than
//     its type's last deleted seq) fails with cursor_expired (and
//     earliest_seq) instead of skipping the deleted events: readers check
//     after reading (a page's first seq tells, since seqs are dense; the
//     floor is read when it does not), and as the floors only grow, a
//     floor that passes after the read also passed at it.
//   - Appends never wait on a whole pass: each batch is a short
//     transaction of its own (at most Batch events), so an append waits
//     at most one batch (SQLite's one writer); on PostgreSQL deletes and
//     appends touch different rows and do not wait on each other.
//
// Only the event log is bounded: messages, conversations and their
// attachments are kept as they are.

// Earliest returns the seq of project's earliest kept event: every event
// before it was deleted by retention; 1 when none was.
func (l *Log) Earliest(ctx context.Context, project string) (int64, error) {
	var floor int64
	switch err := l.read.floor.QueryRowContext(ctx, project).Scan(&floor); {
	case errors.Is(err, sql.ErrNoRows):
		return 1, nil
	case err != nil:
		return 0, fmt.Errorf("stream: earliest: %w", err)
	}
	return floor, nil
}

// CheckCursor fails with cursor_expired (naming param) when a cursor
// after is older than project's earliest kept event, as reads do; for
// cursors stored to be read later (a webhook's from_seq).
func (l *Log) CheckCursor(ctx context.Context, project, param string, after int64) error {
	floor, err := l.Earliest(ctx, project)
	if err != nil {
		return err
	}
	if after < floor-1 { // not after+1 < floor: after may be math.MaxInt64
		return fault.CursorExpired(param, floor)
	}
	return nil
}

// checkCursor checks a page just read after afterSeq whose first event
// is first (0: empty). A page of all types that starts right after its
// cursor skipped nothing (seqs are dense); any other page asks the floor.
// A page of one type asks its type's floor: a reader of a rare type keeps
// a cursor at its type's last event, which may be older than the earliest
// kept event though nothing of its type was deleted.
func (l *Log) checkCursor(ctx context.Context, project string, afterSeq, first int64, typ string) error {
	if typ == "" {
		if first == afterSeq+1 {
			return nil
		}
		return l.CheckCursor(ctx, project, "after_seq", afterSeq)
	}
	var deleted int64
	switch err := l.read.typeFloor.QueryRowContext(ctx, project, typ).Scan(&deleted); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("stream: earliest: %w", err)
	}
	if afterSeq >= deleted {
		return nil
	}
	floor, err := l.Earliest(ctx, project)
	if err != nil {
		return err
	}
	return fault.CursorExpired("after_seq", floor)
}

// Trim deletes up to batch of project's oldest events created before
// before, in one transaction, never the project's head event nor any
// event after one that is not old enough; it moves the project's earliest
// kept seq past them. more reports that the batch was full, so more may
// be due.
func (l *Log) Trim(ctx context.Context, project string, before time.Time, batch int) (deleted int64, more bool, err error) {
	if batch <= 0 {
		batch = DefaultTrimBatch
	}
	db := l.db
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("stream: trim: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	var head, floor int64
	if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT last_seq,
		coalesce((SELECT earliest_seq FROM event_floors WHERE project_id = ?), 1) FROM projects WHERE id = ?`),
		project, project).Scan(&head, &floor); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil // deleted meanwhile
		}
		return 0, false, fmt.Errorf("stream: trim %s: %w", project, err)
	}
	rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT seq, created_at FROM events
		WHERE project_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?`), project, floor, head, batch)
	if err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: %w", project, err)
	}
	cutoff := before.UnixMilli()
	upto, n, young := floor, 0, false
	for rows.Next() {
		var seq, at int64
		if err := rows.Scan(&seq, &at); err != nil {
			rows.Close()
			return 0, false, fmt.Errorf("stream: trim %s: %w", project, err)
		}
		n++
		if at >= cutoff {
			young = true
			break
		}
		upto = seq + 1
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: %w", project, err)
	}
	if upto == floor {
		return 0, false, nil
	}
	greatest := "max"
	if db.IsPostgres() {
		greatest = "greatest"
	}
	if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO event_type_floors (project_id, type, deleted_seq)
		SELECT project_id, type, max(seq) FROM events WHERE project_id = ? AND seq >= ? AND seq < ? GROUP BY project_id, type
		ON CONFLICT (project_id, type) DO UPDATE SET deleted_seq = `+greatest+`(event_type_floors.deleted_seq, excluded.deleted_seq)`),
		project, floor, upto); err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: type floors: %w", project, err)
	}
	res, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM events WHERE project_id = ? AND seq < ?`), project, upto)
	if err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: delete: %w", project, err)
	}
	deleted, _ = res.RowsAffected()
	if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO event_floors (project_id, earliest_seq) VALUES (?, ?)
		ON CONFLICT (project_id) DO UPDATE SET earliest_seq = `+greatest+`(event_floors.earliest_seq, excluded.earliest_seq)`),
		project, upto); err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: floor: %w", project, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("stream: trim %s: commit: %w", project, err)
	}
	return deleted, n == batch && !young, nil
}

// DefaultTrimBatch is how many events one trim transaction deletes at
// most.
const DefaultTrimBatch = 200

// Retention is the background job that bounds every project's log: each
// pass deletes the events older than Keep (see Trim), project by project.
type Retention struct {
	// Log is the log trimmed.
	Log *Log
	// Keep is how long events are kept; it must be positive.
	Keep time.Duration
	// Every is the time between passes (default 1 minute).
	Every time.Duration
	// Batch bounds the events one transaction deletes (default
	// DefaultTrimBatch): how long an append may wait on SQLite.
	Batch int
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Logger receives the job's failures; slog.Default() if nil.
	Logger *slog.Logger
	// Observer, if not nil, is told about the events each batch deleted
	// (metrics).
	Observer RetentionObserver
}

// RetentionObserver is told about retention's deletions, for metrics.
type RetentionObserver interface {
	Trimmed(events int64)
}

// Run makes a pass every Every until ctx ends.
func (r *Retention) Run(ctx context.Context) {
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	every := r.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("event retention", "deleted", n, "err", err)
		} else if n > 0 {
			r.Logger.Info("event retention", "deleted", n, "keep", r.Keep.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass deletes, in every project, the events created before now-Keep
// (but each project's head event) and returns how many it deleted. A
// project whose trim fails is skipped until the next pass; the first such
// error is returned.
func (r *Retention) Pass(ctx context.Context) (int64, error) {
	if r.Keep <= 0 {
		return 0, errors.New("stream: retention: Keep must be positive")
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	before := now().Add(-r.Keep)
	db := r.Log.db
	list := db.Rebind("SELECT id, last_seq FROM projects WHERE id > ? ORDER BY id LIMIT 500")
	first := db.Rebind("SELECT seq, created_at FROM events WHERE project_id = ? ORDER BY seq LIMIT 1")
	var (
		total    int64
		firstErr error
		after    string
	)
	for {
		type proj struct {
			id   string
			head int64
		}
		var page []proj
		rows, err := db.R.QueryContext(ctx, list, after)
		if err != nil {
			return total, fmt.Errorf("stream: retention: list projects: %w", err)
		}
		for rows.Next() {
			var p proj
			if err := rows.Scan(&p.id, &p.head); err != nil {
				rows.Close()
				return total, fmt.Errorf("stream: retention: list projects: %w", err)
			}
			page = append(page, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("stream: retention: list projects: %w", err)
		}
		for _, p := range page {
			// The front of the log, read without a write transaction:
			// most projects have nothing due.
			var seq, at int64
			err := db.R.QueryRowContext(ctx, first, p.id).Scan(&seq, &at)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && (seq >= p.head || at >= before.UnixMilli())) {
				continue
			}
			if err == nil {
				var n int64
				n, err = r.trim(ctx, p.id, before)
				total += n
			}
			if err != nil {
				if ctx.Err() != nil {
					return total, ctx.Err()
				}
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		if len(page) < 500 {
			return total, firstErr
		}
		after = page[len(page)-1].id
	}
}

// trim deletes project's due events, batch after batch.
func (r *Retention) trim(ctx context.Context, project string, before time.Time) (int64, error) {
	var total int64
	for {
		start := time.Now()
		n, more, err := r.Log.Trim(ctx, project, before, r.Batch)
		total += n
		if n > 0 && r.Observer != nil {
			r.Observer.Trimmed(n)
		}
		if err != nil || !more {
			return total, err
		}
		// Yield the writer as long as the batch held it, so appends
		// queued meanwhile commit before the next batch (SQLite has one
		// writer): the job takes at most half the write time.
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(time.Since(start)):
		}
	}
}

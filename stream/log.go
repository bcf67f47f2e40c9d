package stream

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/comm-gateway/comm/store"
)

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("stream: log closed")

// ErrNoProject is returned when events are appended to a project that does
// not exist.
var ErrNoProject = errors.New("stream: no such project")

// Options tune a Log.
type Options struct {
	// Writers is the number of group-commit writers, each with its own
	// connection; projects are sharded over them. SQLite always uses one.
	// Default 2 on PostgreSQL.
	Writers int
	// MaxBatch bounds the pieces of work committed together (default 512).
	MaxBatch int
	// PageBytes is the byte budget of a read page: the most bytes of event
	// envelopes one read returns (an event larger than it still comes,
	// alone). Default DefaultPageBytes.
	PageBytes int
	// Hub receives a wake-up after every commit; a new one is made if nil.
	Hub *Hub
	// Logger receives warnings; slog.Default() if nil.
	Logger *slog.Logger
	// Observer, if not nil, is told about every group commit (metrics).
	Observer Observer
}

// Observer is told about the log's group commits, for metrics. Committed
// runs on the writer goroutine after each batch, so it must be quick: units
// is the number of pieces of work in the batch, events the events they
// appended, failed the pieces that returned an error, and d the time the
// batch took, retries included.
type Observer interface {
	Committed(units, events, failed int, d time.Duration)
}

// DefaultPageBytes is the default byte budget of a read page.
const DefaultPageBytes = 4 << 20

// Log reads and appends the event streams of all projects.
type Log struct {
	db        *store.DB
	hub       *Hub
	writers   []*writer
	read      readStmts
	pageBytes int

	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup

	// PostgreSQL only: announce commits to other replicas, hear theirs.
	notify     *notifier
	stopListen chan struct{}
	listenDone chan struct{}
}

// Open starts the log's writers on db.
func Open(db *store.DB, opts Options) (*Log, error) {
	n := opts.Writers
	if n <= 0 {
		n = 2
	}
	if !db.IsPostgres() {
		n = 1
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if opts.Hub == nil {
		opts.Hub = NewHub()
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = DefaultPageBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{db: db, hub: opts.Hub, pageBytes: opts.PageBytes}
	if err := l.read.prepare(db); err != nil {
		return nil, err
	}
	if db.IsPostgres() && db.URL != "" {
		l.notify = &notifier{log: l, logger: opts.Logger, pending: map[string]int64{},
			kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		go l.notify.run()
		l.stopListen, l.listenDone = make(chan struct{}), make(chan struct{})
		go l.listen(opts.Logger, l.stopListen, l.listenDone)
	}
	for range n {
		w := &writer{log: l, queue: make(chan *unit, 4*opts.MaxBatch), maxBatch: opts.MaxBatch, obs: opts.Observer}
		l.writers = append(l.writers, w)
		l.wg.Add(1)
		go w.run()
	}
	return l, nil
}

// Hub returns the hub the log publishes commits to.
func (l *Log) Hub() *Hub { return l.hub }

// DB returns the database the log writes to.
func (l *Log) DB() *store.DB { return l.db }

// Close lets queued work finish, then stops the writers.
func (l *Log) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	for _, w := range l.writers {
		close(w.queue)
	}
	l.mu.Unlock()
	l.wg.Wait()
	if l.notify != nil {
		close(l.notify.stop)
		<-l.notify.done
		close(l.stopListen)
		<-l.listenDone
	}
	l.read.close()
}

// Write runs fn in a write transaction and commits it together with its
// events. fn runs on a writer goroutine, possibly in one transaction with
// other callers' work (inside its own savepoint), and may run a second time
// if the shared transaction fails; so it must touch the database only
// through tx and have no other side effects. When fn returns an error,
// everything it did is undone and that error is returned.
//
// The result holds the events fn appended, with their seqs, once committed.
// Once queued, the work is carried out even if ctx is cancelled, and Write
// waits for its outcome.
func (l *Log) Write(ctx context.Context, project string, fn func(tx *Tx) error) ([]Event, error) {
	return l.submit(ctx, &unit{ctx: ctx, project: project, fn: fn})
}

// WriteKeyed is Write for work that may run beside the project's other
// work. On PostgreSQL, Write runs all of a project's work on one writer,
// one statement after another; WriteKeyed spreads it over the writers by
// key (work with the same key stays on one writer, in order), so one busy
// project's round trips overlap. The transactions meet only at the end,
// where they take the project's seqs in turn, so events keep one order and
// no seq is skipped. Give work that updates the same rows the same key
// (say, the conversation a message joins): rows locked in opposite orders
// by two writers would deadlock until PostgreSQL breaks it, and the
// batches would then be retried one piece at a time. On SQLite (one
// writer) it is Write.
func (l *Log) WriteKeyed(ctx context.Context, project, key string, fn func(tx *Tx) error) ([]Event, error) {
	return l.submit(ctx, &unit{ctx: ctx, project: project, key: key, fn: fn})
}

// Append appends one event to project's stream in a transaction of its own
// (shared with concurrent writes) and returns its seq.
func (l *Log) Append(ctx context.Context, project, typ string, data any) (int64, error) {
	raw, err := marshal(typ, data)
	if err != nil {
		return 0, err
	}
	ev, err := l.submit(ctx, &unit{ctx: ctx, project: project, events: []Event{{Type: typ, Data: raw}}})
	if err != nil {
		return 0, err
	}
	return ev[0].Seq, nil
}

func (l *Log) submit(ctx context.Context, u *unit) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u.done = make(chan struct{})
	u.pre = len(u.events)
	w := l.writers[0]
	if len(l.writers) > 1 {
		h := fnv.New32a()
		h.Write([]byte(u.project))
		if u.key != "" {
			h.Write([]byte{0})
			h.Write([]byte(u.key))
		}
		w = l.writers[h.Sum32()%uint32(len(l.writers))]
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case w.queue <- u:
	case <-ctx.Done():
		l.mu.RUnlock()
		return nil, ctx.Err()
	}
	l.mu.RUnlock()
	<-u.done
	if u.err != nil {
		return nil, u.err
	}
	return u.events, nil
}

func marshal(typ string, data any) (json.RawMessage, error) {
	if !KnownType(typ) {
		return nil, fmt.Errorf("stream: append: %w", UnknownTypeError(typ))
	}
	if raw, ok := data.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("stream: append %s: data is not valid JSON", typ)
		}
		return raw, nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("stream: append %s: %w", typ, err)
	}
	return raw, nil
}

// unit is one caller's piece of work.
type unit struct {
	ctx     context.Context
	project string
	key     string // spreads a project's work over writers (WriteKeyed)
	fn      func(*Tx) error
	events  []Event // appended events; the first pre were given up front
	pre     int
	err     error
	done    chan struct{}
}

type writer struct {
	log      *Log
	queue    chan *unit
	maxBatch int
	obs      Observer
}

func (w *writer) run() {
	defer w.log.wg.Done()
	batch := make([]*unit, 0, w.maxBatch)
	for {
		u, ok := <-w.queue
		if !ok {
			return
		}
		batch = append(batch[:0], u)
	drain:
		for len(batch) < w.maxBatch {
			select {
			case u, ok := <-w.queue:
				if !ok {
					break drain
				}
				batch = append(batch, u)
			default:
				break drain
			}
		}
		w.commit(batch)
	}
}

// commit runs a batch in one transaction. If the transaction as a whole
// fails (a lost connection, a deadlock, a project that vanished), each
// piece of work is retried alone, so one bad piece fails only its caller.
func (w *writer) commit(batch []*unit) {
	var start time.Time
	if w.obs != nil {
		start = time.Now()
	}
	err := w.try(batch, w.log.db.IsPostgres())
	if errors.Is(err, errPieceFailed) || errors.Is(err, errBulkFailed) {
		if len(batch) == 1 && errors.Is(err, errPieceFailed) {
			// The piece's own error; rolling back the transaction undid it.
			err = nil
		} else {
			// Undo everything and run the batch again, each piece inside a
			// savepoint, so the failed one fails alone.
			for _, u := range batch {
				u.reset()
			}
			err = w.try(batch, false)
		}
	}
	if err != nil && len(batch) > 1 {
		for _, u := range batch {
			u.reset()
			if err := w.try([]*unit{u}, false); err != nil {
				u.err = err
			}
		}
	} else if err != nil {
		batch[0].err = err
	}
	heads := map[string]int64{}
	var (
		kept  map[string][]Envelope // the committed events of projects the hub keeps
		keeps map[string]bool
	)
	events, failed := 0, 0
	for _, u := range batch {
		if u.err == nil && len(u.events) > 0 {
			heads[u.project] = max(heads[u.project], u.events[len(u.events)-1].Seq)
			events += len(u.events)
			k, asked := keeps[u.project]
			if !asked {
				if keeps == nil {
					keeps, kept = map[string]bool{}, map[string][]Envelope{}
				}
				k = w.log.hub.keeps(u.project)
				keeps[u.project] = k
			}
			if k {
				for i := range u.events {
					e := &u.events[i]
					kept[u.project] = append(kept[u.project], Envelope{Seq: e.Seq, Type: e.Type, Body: appendEnvelope(nil, e)})
				}
			}
		}
		if u.err != nil {
			failed++
		}
	}
	if w.obs != nil {
		w.obs.Committed(len(batch), events, failed, time.Since(start))
	}
	// The hub hears of the commit before the writes return, so that once
	// an append returns, this process's followers and long polls know of
	// its events.
	for p, head := range heads {
		w.log.hub.publish(p, head, kept[p])
		if w.log.notify != nil {
			w.log.notify.note(p, head)
		}
	}
	for _, u := range batch {
		close(u.done)
	}
}

func (u *unit) reset() {
	u.events = u.events[:u.pre]
	for i := range u.events {
		u.events[i].Seq = 0
	}
	u.err = nil
}

// errPieceFailed is try's answer when, run optimistically, a piece of
// work failed (its error is in u.err): the transaction was rolled back.
var errPieceFailed = errors.New("stream: a piece of the batch failed")

// try runs the batch in one transaction. It returns an error only when the
// transaction as a whole failed; a piece of work that failed alone has its
// error in u.err and its changes rolled back to its savepoint.
//
// Optimistic, the pieces run without savepoints: two round trips fewer
// each on PostgreSQL, where every statement is one; and the rows they give
// bulk statements (Tx.Bulk) are written together, one statement each.
// Then a piece that fails fails the whole transaction (errPieceFailed), as
// does a bulk statement that fails (errBulkFailed), and commit runs the
// batch again with savepoints, each piece's rows written at once. Pieces
// rarely fail (a repeated provider id, a project deleted meanwhile), so
// this is the cheap path.
func (w *writer) try(batch []*unit, optimistic bool) (err error) {
	db := w.log.db
	ctx := context.Background()
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("stream: begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback() //nolint:errcheck // the error that got us here matters more
		}
	}()
	counts := map[string]int64{}
	var bulk *bulkRows
	if optimistic {
		bulk = &bulkRows{}
	}
	for _, u := range batch {
		if u.fn != nil {
			if e := u.ctx.Err(); e != nil {
				u.err = e
				continue
			}
			if err := w.runUnit(tx, u, bulk); err != nil {
				return err
			}
		}
		if u.err == nil && len(u.events) > 0 {
			counts[u.project] += int64(len(u.events))
		}
	}
	if bulk != nil {
		if err := bulk.flush(ctx, tx); err != nil {
			return err
		}
	}
	if len(counts) == 0 {
		return tx.Commit()
	}
	// Allocate seqs, locking counter rows in a fixed order so replicas
	// appending to the same projects cannot deadlock on them.
	projects := make([]string, 0, len(counts))
	for p := range counts {
		projects = append(projects, p)
	}
	slices.Sort(projects)
	next, prev, err := w.advance(ctx, tx, projects, counts)
	if err != nil {
		return err
	}
	pos, err := w.positions(ctx, tx, projects, next, prev)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	rows := make([]row, 0, 64)
	for _, u := range batch {
		if u.err != nil {
			continue
		}
		for i := range u.events {
			u.events[i].Seq = next[u.project]
			next[u.project]++
			rows = append(rows, row{u.project, &u.events[i]})
		}
	}
	if err := w.insert(ctx, tx, rows, pos, now); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("stream: commit: %w", err)
	}
	return nil
}

// advance moves the counter rows of projects (sorted) forward by their
// counts and returns each project's first new seq, and the pos of the
// event before it (NULL for none, or one stored without pos), read in the
// same statement so an append costs no round trip more.
func (w *writer) advance(ctx context.Context, tx *sql.Tx, projects []string, counts map[string]int64) (map[string]int64, map[string]sql.NullInt64, error) {
	next := make(map[string]int64, len(projects))
	prev := make(map[string]sql.NullInt64, len(projects))
	if w.log.db.IsPostgres() && len(projects) > 1 {
		// Two round trips whatever the number of projects: lock the rows in
		// id order (so replicas cannot deadlock), then advance them all.
		ns := make([]int64, len(projects))
		for i, p := range projects {
			ns[i] = counts[p]
		}
		rows, err := tx.QueryContext(ctx, "SELECT id FROM projects WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE", pq.Array(projects))
		if err != nil {
			return nil, nil, fmt.Errorf("stream: lock counters: %w", err)
		}
		rows.Close()
		rows, err = tx.QueryContext(ctx, `UPDATE projects AS p SET last_seq = p.last_seq + v.n
			FROM unnest($1::text[], $2::bigint[]) AS v(id, n) WHERE p.id = v.id
			RETURNING p.id, p.last_seq,
				(SELECT e.pos FROM events AS e WHERE e.project_id = p.id AND e.seq = p.last_seq - v.n)`, pq.Array(projects), pq.Array(ns))
		if err != nil {
			return nil, nil, fmt.Errorf("stream: advance counters: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id   string
				head int64
				pos  sql.NullInt64
			)
			if err := rows.Scan(&id, &head, &pos); err != nil {
				return nil, nil, fmt.Errorf("stream: advance counters: %w", err)
			}
			next[id], prev[id] = head-counts[id]+1, pos
		}
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("stream: advance counters: %w", err)
		}
		for _, p := range projects {
			if _, ok := next[p]; !ok {
				return nil, nil, fmt.Errorf("%w: %s", ErrNoProject, p)
			}
		}
		return next, prev, nil
	}
	bump := w.log.db.Rebind(`UPDATE projects SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq,
		(SELECT pos FROM events WHERE events.project_id = projects.id AND events.seq = projects.last_seq - ?)`)
	for _, p := range projects {
		var (
			head int64
			pos  sql.NullInt64
		)
		if err := tx.QueryRowContext(ctx, bump, counts[p], p, counts[p]).Scan(&head, &pos); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil, fmt.Errorf("%w: %s", ErrNoProject, p)
			}
			return nil, nil, fmt.Errorf("stream: advance %s: %w", p, err)
		}
		next[p], prev[p] = head-counts[p]+1, pos
	}
	return next, prev, nil
}

type row struct {
	project string
	ev      *Event
}

const insertChunk = 200

// positions returns, for each project of the batch, the pos of the event
// before its first new one (next-1): the sum of the sizes of the events
// already stored, which the new events' pos continue. advance read it
// (prev). A log upgraded in place while an older replica still appended
// may hold events without pos; then the sum is computed from the bodies,
// once.
func (w *writer) positions(ctx context.Context, tx *sql.Tx, projects []string, next map[string]int64, prev map[string]sql.NullInt64) (map[string]int64, error) {
	db := w.log.db
	pos := make(map[string]int64, len(projects))
	known := make(map[string]bool, len(projects))
	for _, p := range projects {
		switch {
		case next[p] <= 1:
			pos[p], known[p] = 0, true
		case prev[p].Valid:
			pos[p], known[p] = prev[p].Int64, true
		}
	}
	// advance read prev in its statement's snapshot. When it waited for the
	// counter row (another writer or replica appended to the project and
	// committed meanwhile), that snapshot predates the event before ours:
	// read its pos again now, in a statement of its own.
	last := db.Rebind("SELECT pos FROM events WHERE project_id = ? AND seq = ?")
	sum := db.Rebind("SELECT coalesce(sum(octet_length(body)), 0) FROM events WHERE project_id = ? AND seq < ?")
	for _, p := range projects {
		if known[p] || next[p] <= 1 {
			continue
		}
		var v sql.NullInt64
		if err := tx.QueryRowContext(ctx, last, p, next[p]-1).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("stream: read pos: %w", err)
		}
		if v.Valid {
			pos[p] = v.Int64
			continue
		}
		if err := tx.QueryRowContext(ctx, sum, p, next[p]).Scan(&v.Int64); err != nil {
			return nil, fmt.Errorf("stream: sum sizes: %w", err)
		}
		pos[p] = v.Int64
	}
	return pos, nil
}

// insertEvents (PostgreSQL) stores a batch's events in one statement
// whose text does not depend on their number, so it is prepared once.
const insertEvents = `INSERT INTO events (project_id, seq, type, size, pos, body, created_at)
	SELECT p, s, t, n, o, b, $7 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[]) AS v(p, s, t, n, o, b)`

func (w *writer) insert(ctx context.Context, tx *sql.Tx, rows []row, pos map[string]int64, now int64) error {
	db := w.log.db
	var body []byte
	if db.IsPostgres() {
		// The columns as PostgreSQL arrays' text (appendElement), sent
		// once per maxBulkBytes of bodies.
		var cols [6][]byte
		for len(rows) > 0 {
			for k := range cols {
				cols[k] = append(cols[k][:0], '{')
			}
			n := 0
			for _, r := range rows {
				if n > 0 && len(cols[5]) >= maxBulkBytes {
					break
				}
				body = appendEnvelope(body[:0], r.ev)
				p := pos[r.project] + int64(len(body))
				pos[r.project] = p
				if n > 0 {
					for k := range cols {
						cols[k] = append(cols[k], ',')
					}
				}
				cols[0] = appendQuoted(cols[0], r.project)
				cols[1] = strconv.AppendInt(cols[1], r.ev.Seq, 10)
				cols[2] = appendQuoted(cols[2], r.ev.Type)
				cols[3] = strconv.AppendInt(cols[3], int64(len(body)), 10)
				cols[4] = strconv.AppendInt(cols[4], p, 10)
				cols[5] = appendQuoted(cols[5], body)
				n++
			}
			args := make([]any, 0, 7)
			for k := range cols {
				args = append(args, string(append(cols[k], '}')))
			}
			if _, err := tx.ExecContext(ctx, insertEvents, append(args, now)...); err != nil {
				return fmt.Errorf("stream: insert events: %w", err)
			}
			rows = rows[n:]
		}
		return nil
	}
	// SQLite: a multi-row insert per insertChunk events.
	for len(rows) > 0 {
		n := min(len(rows), insertChunk)
		var b strings.Builder
		b.WriteString("INSERT INTO events (project_id, seq, type, size, pos, body, created_at) VALUES ")
		args := make([]any, 0, 7*n)
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?)")
			body = appendEnvelope(body[:0], r.ev)
			p := pos[r.project] + int64(len(body))
			pos[r.project] = p
			args = append(args, r.project, r.ev.Seq, r.ev.Type, len(body), p, string(body), now)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("stream: insert events: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

// runUnit calls u.fn inside a savepoint taken before its first statement. It
// returns an error only if the savepoint itself could not be managed, or,
// optimistic (no savepoint; bulk not nil, and gathering the rows given to
// bulk statements), errPieceFailed when fn failed.
func (w *writer) runUnit(tx *sql.Tx, u *unit, bulk *bulkRows) error {
	optimistic := bulk != nil
	c := &unitConn{tx: tx, savepoint: optimistic} // optimistic: as if one were taken
	t := &Tx{ctx: context.WithoutCancel(u.ctx), project: u.project, conn: c, dialect: w.log.db.Dialect, bulk: bulk}
	ferr := call(u.fn, t)
	if optimistic {
		if ferr != nil {
			u.err = ferr
			return errPieceFailed
		}
		u.events = append(u.events, t.events...)
		return nil
	}
	if ferr == nil {
		if c.savepoint {
			if _, err := tx.ExecContext(t.ctx, "RELEASE SAVEPOINT u"); err != nil {
				return fmt.Errorf("stream: release savepoint: %w", err)
			}
		}
		u.events = append(u.events, t.events...)
		return nil
	}
	u.err = ferr
	if c.savepoint {
		if _, err := tx.ExecContext(t.ctx, "ROLLBACK TO SAVEPOINT u"); err != nil {
			return fmt.Errorf("stream: rollback to savepoint: %w", err)
		}
		if _, err := tx.ExecContext(t.ctx, "RELEASE SAVEPOINT u"); err != nil {
			return fmt.Errorf("stream: release savepoint: %w", err)
		}
	}
	return nil
}

func call(fn func(*Tx) error, t *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stream: write panicked: %v", r)
		}
	}()
	return fn(t)
}

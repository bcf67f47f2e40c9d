// Package store opens comm's database, SQLite (the embedded default) or
// PostgreSQL (for several replicas), and brings its schema up to date.
//
// It hands out two pools: W for writes (on SQLite a single connection, since
// SQLite has one writer; stream.Log owns it) and R for reads. Everything
// above this package writes through stream.Log.Write, never through W
// directly.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/lib/pq"
	"github.com/mattn/go-sqlite3"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/ent/migrate"
	_ "github.com/comm-gateway/comm/ent/runtime" // schema hooks and interceptors
)

// Config selects and tunes the database.
type Config struct {
	// URL is a postgres:// or postgresql:// URL. Empty selects SQLite in DataDir.
	URL string
	// DataDir holds comm.db when SQLite is used.
	DataDir string
	// SQLiteSync is the SQLite synchronous setting: "full" (default; every
	// acknowledged commit survives power loss) or "normal" (survives a crash
	// of the process; a power loss may lose the last commits).
	SQLiteSync string
	// ReadConns bounds the read pool (default 8).
	ReadConns int
	// StatementCache is how many prepared statements each PostgreSQL
	// connection keeps, so a statement run again costs one round trip
	// instead of two (default DefaultStatementCache; negative: none, for a
	// pooler in transaction mode that cannot keep them).
	StatementCache int
	// Release is the running comm's version (X.Y.Z[-pre]). Open refuses a
	// database a later release brought up to date (ErrNewerDatabase) and
	// records this one after migrating; empty checks and records nothing.
	Release string
}

// DB is an open, migrated database.
type DB struct {
	// Dialect is dialect.SQLite or dialect.Postgres.
	Dialect string
	// W is the write pool; R the read pool (the same pool on PostgreSQL).
	W, R *sql.DB
	// Ent reads through R. Writes go through stream.Log.
	Ent *ent.Client
	// Where describes the database for the start-up line, without secrets.
	Where string
	// URL is the PostgreSQL URL (empty for SQLite), for dedicated
	// connections such as LISTEN.
	URL string

	stopCheckpoint context.CancelFunc
	wg             sync.WaitGroup
	migrated       bool
}

// Migrated reports whether the schema was brought up to date (Open does
// it before returning; /readyz reports it).
func (db *DB) Migrated() bool { return db.migrated }

// IsPostgres reports whether db is PostgreSQL.
func (db *DB) IsPostgres() bool { return db.Dialect == dialect.Postgres }

// Open connects, migrates and returns the database.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	var (
		db  *DB
		err error
	)
	if cfg.URL != "" {
		db, err = openPostgres(cfg)
	} else {
		db, err = openSQLite(cfg)
	}
	if err != nil {
		return nil, err
	}
	if err := db.migrate(ctx, cfg.Release); err != nil {
		db.Close()
		return nil, err
	}
	db.migrated = true
	if !db.IsPostgres() {
		cctx, cancel := context.WithCancel(context.Background())
		db.stopCheckpoint = cancel
		db.wg.Add(1)
		go db.checkpointLoop(cctx)
	}
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	if db.stopCheckpoint != nil {
		db.stopCheckpoint()
		db.wg.Wait()
	}
	err := db.W.Close()
	if db.R != db.W {
		err = errors.Join(err, db.R.Close())
	}
	return err
}

// Rebind turns ?-placeholders into $n for PostgreSQL.
func (db *DB) Rebind(q string) string {
	if !db.IsPostgres() {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

func openPostgres(cfg Config) (*DB, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("store: database url must be postgres:// or postgresql://")
	}
	conn, err := pq.NewConnector(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	var connector driver.Connector = conn
	if n := cfg.StatementCache; n >= 0 {
		if n == 0 {
			n = DefaultStatementCache
		}
		connector = stmtCacheConnector{Connector: conn, size: n}
	}
	p := sql.OpenDB(connector)
	p.SetMaxOpenConns(max(cfg.ReadConns, 8) + 8)
	p.SetMaxIdleConns(max(cfg.ReadConns, 8) + 8)
	p.SetConnMaxIdleTime(5 * time.Minute)
	where := "postgresql://" + u.Host + u.Path
	return &DB{
		Dialect: dialect.Postgres, W: p, R: p, Where: where, URL: cfg.URL,
		Ent: ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, p))),
	}, nil
}

var (
	registerSQLite sync.Once
	migrateMu      sync.Mutex
)

const sqliteDriver = "comm_sqlite3"

// registerSQLiteDriver registers comm's SQLite driver (sqliteDriver) once.
func registerSQLiteDriver() {
	registerSQLite.Do(func() {
		sql.Register(sqliteDriver, &sqlite3.SQLiteDriver{
			ConnectHook: func(c *sqlite3.SQLiteConn) error {
				// Checkpoints run in the background (checkpointLoop), off the
				// commit path.
				// Reads map the database file instead of copying pages
				// through read(2).
				_, err := c.Exec("PRAGMA wal_autocheckpoint=0; PRAGMA mmap_size=4294967296", nil)
				return err
			},
		})
	})
}

// SQLitePath is the SQLite database file in the data dir dataDir (empty:
// comm-data).
func SQLitePath(dataDir string) string {
	if dataDir == "" {
		dataDir = "comm-data"
	}
	return filepath.Join(dataDir, "comm.db")
}

func openSQLite(cfg Config) (*DB, error) {
	registerSQLiteDriver()
	path := SQLitePath(cfg.DataDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: data dir: %w", err)
	}
	sync := strings.ToUpper(cfg.SQLiteSync)
	if sync == "" {
		sync = "FULL"
	}
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("store: sqlite sync must be full or normal, not %q", cfg.SQLiteSync)
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_journal_mode=WAL&_foreign_keys=on&_busy_timeout=10000&_synchronous=" + sync +
		"&_cache_size=-65536&_stmt_cache_size=64"
	w, err := sql.Open(sqliteDriver, base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("store: sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: sqlite %s: %w", path, err)
	}
	r, err := sql.Open(sqliteDriver, base+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: sqlite: %w", err)
	}
	n := cfg.ReadConns
	if n <= 0 {
		n = 8
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(0)
	return &DB{
		Dialect: dialect.SQLite, W: w, R: r, Where: "sqlite " + path + " (synchronous=" + strings.ToLower(sync) + ")",
		Ent: ent.NewClient(ent.Driver(entsql.OpenDB(dialect.SQLite, r))),
	}, nil
}

// checkpointLoop copies the WAL back into the database file in the
// background, so commits never pay for it. PASSIVE never blocks the writer;
// when the WAL has grown large a TRUNCATE checkpoint (which waits for
// readers briefly) keeps it bounded.
func (db *DB) checkpointLoop(ctx context.Context) {
	defer db.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			db.R.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)") //nolint:errcheck // best effort at exit
			return
		case <-t.C:
		}
		var busy, logPages, done int
		row := db.R.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		if err := row.Scan(&busy, &logPages, &done); err != nil {
			continue
		}
		if logPages > 200_000 { // about 800 MB of WAL: restart it
			db.R.ExecContext(ctx, "PRAGMA wal_checkpoint(RESTART)") //nolint:errcheck // retried next tick
		}
	}
}

// migrate brings the schema up to date: ent's tables, then the event log,
// which ent cannot express (a clustered primary key on project and seq),
// after checking that no later release than release did (checkRelease).
// Running it again changes nothing.
func (db *DB) migrate(ctx context.Context, release string) error {
	// ent's migration mutates its package-level table descriptions.
	migrateMu.Lock()
	defer migrateMu.Unlock()
	if db.IsPostgres() {
		conn, err := db.W.Conn(ctx)
		if err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		defer conn.Close()
		// Replicas starting together migrate one at a time.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(7726221)"); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
		defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(7726221)") //nolint:errcheck // released with the session anyway
	}
	if err := db.checkRelease(ctx, release); err != nil {
		return err
	}
	drv := entsql.OpenDB(db.Dialect, db.W)
	if err := migrate.NewSchema(drv).Create(ctx, schema.WithDropIndex(false), schema.WithDropColumn(false)); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	ddl := sqliteEvents
	if db.IsPostgres() {
		ddl = slices.Concat(postgresEvents, postgresRateLimits)
	}
	for _, stmt := range ddl {
		if _, err := db.W.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("store: migrate events: %w", err)
		}
	}
	if err := db.migrateEventSizes(ctx); err != nil {
		return err
	}
	return db.recordRelease(ctx, release)
}

// migrateEventSizes gives a log created before events had sizes its size
// and pos columns, filled in for the rows already stored (one statement;
// running it again finds the columns and changes nothing).
func (db *DB) migrateEventSizes(ctx context.Context) error {
	var missing bool
	if db.IsPostgres() {
		if err := db.W.QueryRowContext(ctx, `SELECT count(*) < 2 FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'events' AND column_name IN ('size', 'pos')`).Scan(&missing); err != nil {
			return fmt.Errorf("store: migrate events: %w", err)
		}
	} else {
		var n int
		if err := db.W.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('events') WHERE name IN ('size', 'pos')`).Scan(&n); err != nil {
			return fmt.Errorf("store: migrate events: %w", err)
		}
		missing = n < 2
	}
	if !missing {
		return nil
	}
	stmts := []string{`ALTER TABLE events ADD COLUMN size INTEGER`, `ALTER TABLE events ADD COLUMN pos INTEGER`}
	if db.IsPostgres() {
		stmts = []string{`ALTER TABLE events ADD COLUMN IF NOT EXISTS size INTEGER, ADD COLUMN IF NOT EXISTS pos BIGINT`}
	}
	stmts = append(stmts, `UPDATE events SET size = w.n, pos = w.p
		FROM (SELECT project_id, seq, octet_length(body) AS n,
			sum(octet_length(body)) OVER (PARTITION BY project_id ORDER BY seq) AS p FROM events) AS w
		WHERE events.project_id = w.project_id AND events.seq = w.seq AND events.pos IS NULL`)
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate events: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("store: migrate events: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate events: %w", err)
	}
	return nil
}

// The rate limits' use, shared by the replicas on PostgreSQL
// (ratelimit.PostgresLedger): what each replica took per bucket, key and
// one-second slot. Rows older than a minute are swept; SQLite (one
// process) has none.
var postgresRateLimits = []string{
	`CREATE TABLE IF NOT EXISTS ratelimit_usage (
		bucket TEXT NOT NULL,
		key TEXT NOT NULL,
		replica TEXT NOT NULL,
		slot BIGINT NOT NULL,
		used BIGINT NOT NULL,
		PRIMARY KEY (bucket, key, replica, slot)
	)`,
	`CREATE INDEX IF NOT EXISTS ratelimit_usage_slot ON ratelimit_usage (slot)`,
}

// The event log. body is the event's JSON envelope {"seq","type","data"},
// encoded once at append (see stream); size is its length in bytes and pos
// the sum of the sizes of the project's events up to and including this one
// (so a page's bytes are a difference of two pos, see stream/read.go);
// created_at is Unix milliseconds. A log created before size and pos is
// given them, filled in, by migrateEventSizes (there they follow created_at;
// stream reads NULLs as unknown). On SQLite the table is
// clustered on (project_id, seq), so appends and page reads touch few pages.
//
// event_floors holds, per project whose log retention has trimmed, the
// seq of its earliest kept event (every event before it was deleted; a
// project without a row keeps them all), and event_type_floors, per
// project and type, the seq of the last event of that type deleted (so
// a reader of one type is told only when events of its type went). Both
// only grow, and move in the transaction that deletes: see
// stream/retention.go.
var (
	sqliteEvents = []string{
		`CREATE TABLE IF NOT EXISTS events (
			project_id TEXT NOT NULL,
			seq INTEGER NOT NULL,
			type TEXT NOT NULL,
			size INTEGER,
			pos INTEGER,
			body TEXT NOT NULL,
			created_at INTEGER NOT NULL,
			PRIMARY KEY (project_id, seq)
		) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS events_project_type ON events (project_id, type, seq)`,
		`CREATE TABLE IF NOT EXISTS event_floors (
			project_id TEXT NOT NULL PRIMARY KEY,
			earliest_seq INTEGER NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS event_type_floors (
			project_id TEXT NOT NULL,
			type TEXT NOT NULL,
			deleted_seq INTEGER NOT NULL,
			PRIMARY KEY (project_id, type)
		) WITHOUT ROWID`,
	}
	postgresEvents = []string{
		`CREATE TABLE IF NOT EXISTS events (
			project_id TEXT NOT NULL,
			seq BIGINT NOT NULL,
			type TEXT NOT NULL,
			size INTEGER,
			pos BIGINT,
			body TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			PRIMARY KEY (project_id, seq)
		)`,
		`CREATE INDEX IF NOT EXISTS events_project_type ON events (project_id, type, seq)`,
		`CREATE TABLE IF NOT EXISTS event_floors (
			project_id TEXT NOT NULL PRIMARY KEY,
			earliest_seq BIGINT NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS event_type_floors (
			project_id TEXT NOT NULL,
			type TEXT NOT NULL,
			deleted_seq BIGINT NOT NULL,
			PRIMARY KEY (project_id, type)
		)`,
	}
)

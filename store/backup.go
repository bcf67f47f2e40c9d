package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Backups of the SQLite database.
//
// BackupSQLite copies the database with SQLite's online backup API in one
// step: the step reads every page inside one read transaction, so the copy
// is the database as of one commit, and in WAL mode a read transaction
// never blocks the gateway's writer (its commits go on into the WAL while
// the pages are copied). Stepping a few pages at a time would not help
// here: a write by another process between two steps restarts the backup
// from its first page, so under a steady load it would never finish.
// VACUUM INTO is as consistent, but it rebuilds every table and index
// (more CPU and temporary space on a serving machine) where the backup API
// copies pages as they are.

// BackupInfo describes a backup taken.
type BackupInfo struct {
	Source string        // the database file copied
	Bytes  int64         // size of the backup
	Took   time.Duration // from the start of the copy to the verified file
}

// BackupSQLite writes a consistent copy of the SQLite database in dataDir
// to dest, while gateways may be writing to it. The copy is a single file
// (rollback journal mode; a gateway opening it switches it to WAL), checked
// with PRAGMA integrity_check, synced, and renamed into place, so dest is
// either a whole verified backup or not there. An existing dest is
// replaced only with force.
func BackupSQLite(ctx context.Context, dataDir, dest string, force bool) (BackupInfo, error) {
	src := SQLitePath(dataDir)
	info := BackupInfo{Source: src}
	if _, err := os.Stat(src); err != nil {
		return info, fmt.Errorf("no database to back up: %w", err)
	}
	if err := checkDest(dest, force); err != nil {
		return info, err
	}
	t0 := time.Now()
	tmp, err := tempPath(dest)
	if err != nil {
		return info, err
	}
	defer removeDB(tmp)
	if err := copyOnline(ctx, src, tmp); err != nil {
		return info, err
	}
	if err := checkSQLite(ctx, tmp, "the copy of "+src); err != nil {
		return info, err
	}
	if err := syncFile(tmp); err != nil {
		return info, err
	}
	if err := checkDest(dest, force); err != nil {
		return info, err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return info, err
	}
	syncDir(filepath.Dir(dest))
	st, err := os.Stat(dest)
	if err != nil {
		return info, err
	}
	info.Bytes, info.Took = st.Size(), time.Since(t0)
	return info, nil
}

// copyOnline copies the database src to the new file dest with the
// online backup API, in one step (see above).
func copyOnline(ctx context.Context, src, dest string) error {
	registerSQLiteDriver()
	// mode=rw: never create an empty database where there was none.
	sdb, err := sql.Open(sqliteDriver, fileDSN(src)+"?mode=rw&_busy_timeout=10000&_query_only=1")
	if err != nil {
		return err
	}
	defer sdb.Close()
	ddb, err := sql.Open(sqliteDriver, fileDSN(dest)+"?_journal_mode=OFF&_synchronous=OFF")
	if err != nil {
		return err
	}
	defer ddb.Close()
	sc, err := sdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("opening %s: %w", src, err)
	}
	defer sc.Close()
	dc, err := ddb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("creating %s: %w", dest, err)
	}
	defer dc.Close()
	err = dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error {
			b, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			for {
				// -1: all pages in this step (one read transaction).
				done, err := b.Step(-1)
				if err == nil && !done {
					continue // cannot happen with -1; Step again if it does
				}
				if err != nil {
					var se sqlite3.Error
					if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) && ctx.Err() == nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					b.Finish() //nolint:errcheck // err says what went wrong
					return err
				}
				return b.Finish()
			}
		})
	})
	if err != nil {
		return fmt.Errorf("backing up %s: %w", src, err)
	}
	// The copy has the source's header, which says WAL: make it one file
	// that needs no -wal beside it.
	if _, err := dc.ExecContext(ctx, "PRAGMA journal_mode=DELETE"); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// comm's tables that every comm database has had from the start; later
// ones are added by the migration when a gateway opens an older database.
var coreTables = []string{"events", "projects", "api_keys", "connections", "messages"}

// CheckSQLite verifies that path is a sound comm database:
// PRAGMA integrity_check and foreign_key_check find nothing, and comm's
// core tables are there. It does not change the file.
func CheckSQLite(ctx context.Context, path string) error {
	return checkSQLite(ctx, path, path)
}

// checkSQLite is CheckSQLite of path, naming it name in errors.
func checkSQLite(ctx context.Context, path, name string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	registerSQLiteDriver()
	db, err := sql.Open(sqliteDriver, fileDSN(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var found []string
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table'")
	if err != nil {
		return fmt.Errorf("%s is not an SQLite database: %w", name, err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		found = append(found, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s is not an SQLite database: %w", name, err)
	}
	var missing []string
	for _, t := range coreTables {
		if !slices.Contains(found, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s is not a comm database: it has no table %s", name, strings.Join(missing, ", "))
	}
	for _, pragma := range []string{"integrity_check", "foreign_key_check"} {
		problems, err := pragmaRows(ctx, db, pragma)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", name, pragma, err)
		}
		if pragma == "integrity_check" && len(problems) == 1 && problems[0] == "ok" {
			continue
		}
		if len(problems) > 0 {
			if len(problems) > 5 {
				problems = append(problems[:5], fmt.Sprintf("(%d more)", len(problems)-5))
			}
			return fmt.Errorf("%s fails %s: %s", name, pragma, strings.Join(problems, "; "))
		}
	}
	return nil
}

// pragmaRows runs a checking pragma and returns its rows, each row's
// columns joined with spaces.
func pragmaRows(ctx context.Context, db *sql.DB, pragma string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, v.String)
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out, rows.Err()
}

// RestoreInfo describes a restore.
type RestoreInfo struct {
	Path string // the database file written
	// Previous is where the database that was there was moved (with its
	// -wal), empty when there was none.
	Previous string
}

// ErrInUse is returned by RestoreSQLite when a process has the data
// dir's database open.
var ErrInUse = errors.New("the database is in use")

// RestoreSQLite puts the backup src in place as the SQLite database of
// dataDir. It refuses while a process (a gateway) has that database
// open, refuses to replace an existing database without force, and
// installs only a copy that passes CheckSQLite. A database it replaces is
// moved aside, with its WAL, to comm.db.before-restore-<time> in the data
// dir (delete it once the restored gateway runs as it should).
func RestoreSQLite(ctx context.Context, src, dataDir string, force bool) (RestoreInfo, error) {
	path := SQLitePath(dataDir)
	info := RestoreInfo{Path: path}
	if _, err := os.Stat(src); err != nil {
		return info, err
	}
	if st, err := os.Stat(src + "-wal"); err == nil && st.Size() > 0 {
		return info, fmt.Errorf("%s has a write-ahead log beside it (%s-wal): it is a live database, or a copy of one taken while it was in use; take backups with comm backup", src, src)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return info, fmt.Errorf("data dir: %w", err)
	}
	if err := notInUse(path); err != nil {
		return info, err
	}
	if _, err := os.Stat(path); err == nil && !force {
		return info, fmt.Errorf("%s already has a database: --force replaces it (it is kept as %s.before-restore-<time>)", filepath.Dir(path), filepath.Base(path))
	}
	tmp := path + ".restoring"
	removeDB(tmp)
	defer removeDB(tmp)
	if err := copyFile(src, tmp); err != nil {
		return info, err
	}
	if err := checkSQLite(ctx, tmp, src); err != nil {
		return info, err
	}
	if err := syncFile(tmp); err != nil {
		return info, err
	}
	if err := notInUse(path); err != nil {
		return info, err
	}
	if _, err := os.Stat(path); err == nil {
		if !force {
			return info, fmt.Errorf("%s already has a database: --force replaces it", filepath.Dir(path))
		}
		info.Previous = path + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		// The WAL goes with its database: left beside the restored file,
		// its frames would be replayed into it.
		if err := os.Rename(path, info.Previous); err != nil {
			return info, err
		}
		if err := os.Rename(path+"-wal", info.Previous+"-wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return info, err
		}
	}
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(path + side); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return info, err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return info, err
	}
	syncDir(filepath.Dir(path))
	return info, nil
}

// notInUse returns ErrInUse (wrapped, naming the process) when a process
// has the database at path open.
func notInUse(path string) error {
	pid, err := sqliteHolder(path)
	if err != nil {
		return fmt.Errorf("%s: %w; stop the gateway and use --force", path, err)
	}
	if pid != 0 {
		return fmt.Errorf("%w: process %d (a gateway?) has %s open: stop it first", ErrInUse, pid, path)
	}
	return nil
}

// checkDest refuses an existing dest unless force.
func checkDest(dest string, force bool) error {
	st, err := os.Stat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory; name the backup file", dest)
	case !force:
		return fmt.Errorf("%s exists: --force replaces it", dest)
	}
	return nil
}

// tempPath is a new file name beside dest.
func tempPath(dest string) (string, error) {
	dir := filepath.Dir(dest)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("no directory %s for the backup", dir)
	}
	return filepath.Join(dir, "."+filepath.Base(dest)+".tmp-"+rand.Text()[:8]), nil
}

// removeDB removes an SQLite file and its side files, if there.
func removeDB(path string) {
	for _, s := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(path + s)
	}
}

func copyFile(src, dest string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a rename in dir durable (best effort: not every system
// syncs directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // best effort
		d.Close()
	}
}

// fileDSN is path as an SQLite file: URI without parameters.
func fileDSN(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath()
}

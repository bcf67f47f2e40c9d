package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupChecks: a backup of a database this process writes restores
// into another data dir; what is not a comm database, or is a live one
// with its WAL beside it, is refused.
func TestBackupChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, Config{DataDir: filepath.Join(dir, "a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.Exec(`INSERT INTO events (project_id, seq, type, body, created_at) VALUES ('p', 1, 't', '{}', 0)`); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "b.db")
	if _, err := BackupSQLite(ctx, filepath.Join(dir, "a"), dest, false); err != nil {
		t.Fatal(err)
	}
	if _, err := BackupSQLite(ctx, filepath.Join(dir, "a"), dest, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("backup over a file: %v", err)
	}
	// The live database has its WAL beside it.
	if _, err := RestoreSQLite(ctx, SQLitePath(filepath.Join(dir, "a")), filepath.Join(dir, "c"), false); err == nil || !strings.Contains(err.Error(), "write-ahead log") {
		t.Errorf("restore of a live database: %v", err)
	}
	db.Close()
	if _, err := RestoreSQLite(ctx, dest, filepath.Join(dir, "c"), false); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, Config{DataDir: filepath.Join(dir, "c")})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.R.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 1 {
		t.Errorf("restored events: %d %v", n, err)
	}
	db.Close()

	other := filepath.Join(dir, "other.db")
	o, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	o.Exec(`CREATE TABLE events (x)`)
	o.Close()
	if err := CheckSQLite(ctx, other); err == nil || !strings.Contains(err.Error(), "not a comm database") {
		t.Errorf("another SQLite database: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "text.db"), []byte("not a database at all, just some text of some length"), 0o600)
	if _, err := RestoreSQLite(ctx, filepath.Join(dir, "text.db"), filepath.Join(dir, "d"), false); err == nil || !strings.Contains(err.Error(), "not an SQLite database") {
		t.Errorf("a text file: %v", err)
	}
	if _, err := os.Stat(SQLitePath(filepath.Join(dir, "d"))); err == nil {
		t.Error("a refused restore left a database")
	}
}

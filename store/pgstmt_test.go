package store

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lib/pq"
)

// openCached opens a pool of one PostgreSQL connection keeping up to size
// prepared statements, in a fresh schema.
func openCached(t *testing.T, size int) *sql.DB {
	t.Helper()
	base := os.Getenv("COMM_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("COMM_TEST_DATABASE_URL is not set")
	}
	u, drop, err := ScratchSchema(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	conn, err := pq.NewConnector(u)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(stmtCacheConnector{Connector: conn, size: size})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func prepared(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	// No arguments: a simple query, never kept.
	if err := db.QueryRow("SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatementCache: a statement run again on a connection reuses the one
// prepared statement; the cache is trimmed to its size between uses of
// the connection; statements with many arguments are not kept.
func TestStatementCache(t *testing.T) {
	db := openCached(t, 3)
	for i := range 20 {
		var got int
		if err := db.QueryRow("SELECT $1::int + 1", i).Scan(&got); err != nil || got != i+1 {
			t.Fatalf("query %d: %d, %v", i, got, err)
		}
	}
	if n := prepared(t, db); n != 1 {
		t.Fatalf("%d prepared statements after one statement run 20 times, want 1", n)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		var got int
		if err := tx.QueryRow("SELECT $1::int + "+strings.Repeat("1 + ", i)+"0", i).Scan(&got); err != nil {
			t.Fatal(err)
		}
	}
	var inTx int
	if err := tx.QueryRow("SELECT count(*) FROM pg_prepared_statements").Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if inTx != 7 {
		t.Fatalf("%d prepared statements inside the transaction, want 7 (none closed during it)", inTx)
	}
	if n := prepared(t, db); n != 3 {
		t.Fatalf("%d prepared statements after the connection went back to the pool, want 3 (the cache's size)", n)
	}
	args := make([]any, 100)
	ph := make([]string, 100)
	for i := range args {
		args[i], ph[i] = i, "$"+strconv.Itoa(i+1)
	}
	var sum int
	if err := db.QueryRow("SELECT "+strings.Join(ph, "::int + ")+"::int", args...).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 4950 {
		t.Fatalf("sum %d", sum)
	}
	if n := prepared(t, db); n != 3 {
		t.Fatalf("%d prepared statements after a statement of 100 arguments, want 3 (it is not kept)", n)
	}
}

// TestStatementCacheAfterSchemaChange: a kept statement whose table
// changed under it (another replica migrated) fails once at most, and is
// prepared again.
func TestStatementCacheAfterSchemaChange(t *testing.T) {
	db := openCached(t, 10)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (a int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t (a) VALUES ($1)", 1); err != nil {
		t.Fatal(err)
	}
	count := func() (int, error) {
		rows, err := db.QueryContext(ctx, "SELECT * FROM t WHERE a = $1", 1)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		return len(cols), rows.Err()
	}
	if n, err := count(); err != nil || n != 1 {
		t.Fatalf("before: %d columns, %v", n, err)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE t ADD COLUMN b int"); err != nil {
		t.Fatal(err)
	}
	n, err := count()
	if err != nil {
		// The server refused the old plan; the statement is forgotten.
		n, err = count()
	}
	if err != nil || n != 2 {
		t.Fatalf("after the change: %d columns, %v", n, err)
	}
}

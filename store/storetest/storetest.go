// Package storetest runs tests against every database engine comm supports:
// SQLite always, and PostgreSQL when COMM_TEST_DATABASE_URL is set. Each
// test gets a database of its own (a temporary directory, or a fresh
// PostgreSQL schema dropped at the end).
package storetest

import (
	"context"
	"os"
	"testing"

	_ "github.com/lib/pq"

	"github.com/comm-gateway/comm/store"
)

// EnvURL names the variable holding the PostgreSQL URL for tests.
const EnvURL = "COMM_TEST_DATABASE_URL"

// Run runs fn as a subtest once per engine, each with a fresh database.
func Run(t *testing.T, fn func(t *testing.T, cfg store.Config)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	if os.Getenv(EnvURL) != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
	}
}

// SQLite returns the configuration of a fresh SQLite database. Tests use
// synchronous=normal: still safe against a crash of the process.
func SQLite(t testing.TB) store.Config {
	return store.Config{DataDir: t.TempDir(), SQLiteSync: "normal"}
}

// Postgres returns the configuration of a fresh schema in the test
// PostgreSQL database, skipping the test when none is configured.
func Postgres(t testing.TB) store.Config {
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skip(EnvURL + " is not set")
	}
	u, drop, err := store.ScratchSchema(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return store.Config{URL: u}
}

// Open opens cfg and closes it at the end of the test.
func Open(t testing.TB, cfg store.Config) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.URL, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

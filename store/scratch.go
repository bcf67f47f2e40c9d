package store

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
)

// ScratchSchema creates a fresh, empty schema in the PostgreSQL database at
// baseURL and returns a URL whose connections use it, and a function that
// drops it. Tests and benchmarks use it for isolation.
func ScratchSchema(baseURL string) (string, func(), error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("postgres", baseURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("store: create schema: %w", err)
	}
	drop := func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE") //nolint:errcheck // best effort
		admin.Close()
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

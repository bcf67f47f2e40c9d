package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNewerDatabase is the error of Open when a later release than
// Config.Release has brought the database's schema up to date: this
// binary does not know that schema, so it does not run on it.
var ErrNewerDatabase = errors.New("the database was brought up to date by a later release of comm")

// The release that last brought the schema up to date is one row of
// comm_release. Only releases that know of it (0.4.0 on) read or write
// it; a database without it is older and is migrated.
const releaseDDL = `CREATE TABLE IF NOT EXISTS comm_release (id INTEGER PRIMARY KEY, version TEXT NOT NULL)`

// checkRelease refuses a database a later release than release migrated.
// An empty release (tests, tools) or one that is not X.Y.Z[-pre] checks
// nothing.
func (db *DB) checkRelease(ctx context.Context, release string) error {
	if _, ok := parseRelease(release); !ok {
		return nil
	}
	if _, err := db.W.ExecContext(ctx, releaseDDL); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	recorded, err := db.recordedRelease(ctx)
	if err != nil {
		return err
	}
	if c, ok := compareReleases(recorded, release); ok && c > 0 {
		return fmt.Errorf("store: %w: comm %s last opened it and this is comm %s, which does not know its schema; "+
			"run comm %s or later, or restore the backup taken before the upgrade", ErrNewerDatabase, recorded, release, recorded)
	}
	return nil
}

// recordRelease notes release as the one that brought the schema up to
// date, unless a later one already did.
func (db *DB) recordRelease(ctx context.Context, release string) error {
	if _, ok := parseRelease(release); !ok {
		return nil
	}
	recorded, err := db.recordedRelease(ctx)
	if err != nil {
		return err
	}
	if c, ok := compareReleases(recorded, release); ok && c >= 0 {
		return nil
	}
	if _, err := db.W.ExecContext(ctx, db.Rebind(`INSERT INTO comm_release (id, version) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`), release); err != nil {
		return fmt.Errorf("store: migrate: record the release: %w", err)
	}
	return nil
}

// recordedRelease is the release in comm_release ("" when none).
func (db *DB) recordedRelease(ctx context.Context) (string, error) {
	var v string
	err := db.W.QueryRowContext(ctx, `SELECT version FROM comm_release WHERE id = 1`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: migrate: read the release: %w", err)
	}
	return v, nil
}

// release is a parsed X.Y.Z[-pre].
type release struct {
	num [3]int
	pre string
}

func parseRelease(s string) (release, bool) {
	var r release
	core, pre, hasPre := strings.Cut(s, "-")
	if hasPre && pre == "" {
		return r, false
	}
	r.pre = pre
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return r, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return r, false
		}
		r.num[i] = n
	}
	return r, true
}

// compareReleases compares two releases as semantic versions (a
// pre-release before its release; pre-releases by their text); ok is
// false when either is not X.Y.Z[-pre].
func compareReleases(a, b string) (int, bool) {
	ra, okA := parseRelease(a)
	rb, okB := parseRelease(b)
	if !okA || !okB {
		return 0, false
	}
	for i := range ra.num {
		if ra.num[i] != rb.num[i] {
			if ra.num[i] < rb.num[i] {
				return -1, true
			}
			return 1, true
		}
	}
	switch {
	case ra.pre == rb.pre:
		return 0, true
	case ra.pre == "":
		return 1, true
	case rb.pre == "":
		return -1, true
	}
	return strings.Compare(ra.pre, rb.pre), true
}

package ratelimit

import (
	"context"
	"database/sql"

	"github.com/lib/pq"
)

// PostgresLedger keeps the replicas' use in PostgreSQL's ratelimit_usage
// table (store creates it): one row per bucket, key, replica and slot,
// added to with an upsert.
type PostgresLedger struct{ db *sql.DB }

// NewPostgresLedger returns the ledger in db (a PostgreSQL pool).
func NewPostgresLedger(db *sql.DB) *PostgresLedger { return &PostgresLedger{db: db} }

// maxRows bounds the rows of one upsert statement.
const maxRows = 5000

// Exchange implements Ledger: one upsert per maxRows rows reported, one
// read.
func (l *PostgresLedger) Exchange(ctx context.Context, replica string, use []Usage, since int64) ([]Usage, error) {
	for len(use) > 0 {
		part := use[:min(len(use), maxRows)]
		use = use[len(part):]
		buckets, keys, slots, ns := make([]string, len(part)), make([]string, len(part)), make([]int64, len(part)), make([]int64, len(part))
		for i, u := range part {
			buckets[i], keys[i], slots[i], ns[i] = u.Bucket, u.Key, u.Slot, u.N
		}
		if _, err := l.db.ExecContext(ctx, `INSERT INTO ratelimit_usage (bucket, key, replica, slot, used)
			SELECT b, k, $1, s, n FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u(b, k, s, n)
			ON CONFLICT (bucket, key, replica, slot) DO UPDATE SET used = ratelimit_usage.used + EXCLUDED.used`,
			replica, pq.Array(buckets), pq.Array(keys), pq.Array(slots), pq.Array(ns)); err != nil {
			return nil, err
		}
	}
	rows, err := l.db.QueryContext(ctx, `SELECT bucket, key, replica, slot, used FROM ratelimit_usage
		WHERE slot >= $1 AND replica <> $2`, since, replica)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		if err := rows.Scan(&u.Bucket, &u.Key, &u.Replica, &u.Slot, &u.N); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// Sweep implements Ledger.
func (l *PostgresLedger) Sweep(ctx context.Context, before int64) error {
	_, err := l.db.ExecContext(ctx, `DELETE FROM ratelimit_usage WHERE slot < $1`, before)
	return err
}

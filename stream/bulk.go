package stream

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A Bulk is a statement that writes one row, which a batch runs once for
// the rows all its pieces gave it (Tx.Bulk). On PostgreSQL every statement
// costs a round trip, and the rows a busy project's messages write would
// cost one each; together they cost one per batch, as its events do.
//
// A piece's bulk rows are written after every piece of the batch ran and
// before its events: a piece must not read back the rows it gave a Bulk,
// nor count on a later piece seeing them. A bulk statement that fails
// (a row breaking a unique index) fails the batch, which is then run again
// with each piece in its savepoint and its rows written at once, so the
// piece that gave the bad row gets the error and the others are stored.
type Bulk struct {
	// Row writes one row, with one ? placeholder per value, in order; it
	// is what runs on SQLite, and when a batch is run again piece by
	// piece.
	Row string
	// Rows writes many rows on PostgreSQL: $k is the array of the k-th
	// values of all the rows (cast it: $1::text[], $2::timestamptz[]),
	// as in INSERT ... SELECT * FROM unnest($1::text[], ...). Its text is
	// the same however many rows there are, so it is prepared once.
	Rows string
}

// Bulk gives b a row: values are its columns, nil for NULL (string,
// []byte for text, int64, bool, time.Time). It runs at once outside a
// batch's first, optimistic run on PostgreSQL, and for a row larger than
// maxBulkRow (a long mail), which gains nothing from company and would
// make the batch's statement as large as all of them.
func (t *Tx) Bulk(b *Bulk, values ...any) error {
	if t.bulk == nil || rowBytes(values) > maxBulkRow {
		_, err := t.conn.ExecContext(t.ctx, t.Rebind(b.Row), values...)
		return err
	}
	t.bulk.add(b, values)
	return nil
}

// A bulk statement's rows are sent in statements of at most
// maxBulkBytes of values (one row at least), so a batch's statement,
// and the buffers that build it, stay bounded whatever the batch holds.
const (
	maxBulkRow   = 64 << 10
	maxBulkBytes = 4 << 20
)

// rowBytes is about how many bytes a row's values take as text.
func rowBytes(values []any) int {
	n := 0
	for _, v := range values {
		switch v := v.(type) {
		case string:
			n += len(v) + 3
		case []byte:
			n += len(v) + 3
		default:
			n += 24
		}
	}
	return n
}

// bulkRows are the rows a batch's pieces gave its bulk statements, in the
// order the statements were first used.
type bulkRows struct {
	order []*Bulk
	rows  map[*Bulk][][]any
}

func (r *bulkRows) add(b *Bulk, values []any) {
	if r.rows == nil {
		r.rows = map[*Bulk][][]any{}
	}
	if _, ok := r.rows[b]; !ok {
		r.order = append(r.order, b)
	}
	r.rows[b] = append(r.rows[b], values)
}

// errBulkFailed is try's answer when a bulk statement failed: the
// transaction was rolled back, and commit runs the batch again piece by
// piece.
var errBulkFailed = errors.New("stream: a bulk statement of the batch failed")

// flush runs each bulk statement for its rows: once, or once per
// maxBulkBytes of them.
func (r *bulkRows) flush(ctx context.Context, tx *sql.Tx) error {
	for _, b := range r.order {
		rows := r.rows[b]
		for len(rows) > 0 {
			k, size := 1, rowBytes(rows[0])
			for k < len(rows) && size+rowBytes(rows[k]) <= maxBulkBytes {
				size += rowBytes(rows[k])
				k++
			}
			if err := runBulk(ctx, tx, b, rows[:k]); err != nil {
				return err
			}
			rows = rows[k:]
		}
	}
	return nil
}

// runBulk runs b's Rows statement for rows: column k's values become
// the text of the array $k+1.
func runBulk(ctx context.Context, tx *sql.Tx, b *Bulk, rows [][]any) error {
	n := len(rows[0])
	args := make([]any, n)
	var buf []byte
	for k := range n {
		buf = append(buf[:0], '{')
		for i, row := range rows {
			if len(row) != n {
				return fmt.Errorf("stream: bulk statement given rows of %d and %d values", n, len(row))
			}
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendElement(buf, row[k]); err != nil {
				return err
			}
		}
		args[k] = string(append(buf, '}'))
	}
	if _, err := tx.ExecContext(ctx, b.Rows, args...); err != nil {
		return fmt.Errorf("%w: %w", errBulkFailed, err)
	}
	return nil
}

// appendElement appends v to the text of a PostgreSQL array: NULL, a
// number or boolean as it is, text in double quotes (with " and \
// escaped), times in RFC 3339.
func appendElement(b []byte, v any) ([]byte, error) {
	if vl, ok := v.(driver.Valuer); ok {
		dv, err := vl.Value()
		if err != nil {
			return b, fmt.Errorf("stream: bulk value: %w", err)
		}
		v = dv
	}
	switch v := v.(type) {
	case nil:
		return append(b, "NULL"...), nil
	case string:
		return appendQuoted(b, v), nil
	case []byte:
		return appendQuoted(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case time.Time: // RFC 3339 needs no escaping
		b = append(b, '"')
		b = v.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	return b, fmt.Errorf("stream: bulk value of type %T", v)
}

// appendQuoted appends s as a quoted element of an array's text.
func appendQuoted[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, s[last:i]...)
			b = append(b, '\\', c)
			last = i + 1
		}
	}
	b = append(b, s[last:]...)
	return append(b, '"')
}

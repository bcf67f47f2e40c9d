package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// floorRow gives event_type_floors a row (a table of the package's own,
// with a primary key to break).
var floorRow = stream.Bulk{
	Row: "INSERT INTO event_type_floors (project_id, type, deleted_seq) VALUES (?, ?, ?)",
	Rows: `INSERT INTO event_type_floors (project_id, type, deleted_seq)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`,
}

// typeOf is the text write i stores: some with what an array's text must
// escape or quote.
func typeOf(i int) string {
	switch i % 4 {
	case 1:
		return fmt.Sprintf(`t%d "quoted" back\slash \"`, i)
	case 2:
		return fmt.Sprintf("t%d {a,b} NULL ünï", i)
	case 3:
		return fmt.Sprintf("t%d", i)
	}
	return fmt.Sprintf("t%d ,", i)
}

// TestBulkRows: concurrent writes give rows to one bulk statement; on
// PostgreSQL they are batched into one statement. The writes whose row
// breaks the primary key fail alone, with the database's error, and
// neither their rows nor their events are stored; every other write's
// row and event are.
func TestBulkRows(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{Writers: 2})
		p := newProject(t, l)
		ctx := tenant.WithProject(context.Background(), p)
		if _, err := l.Write(ctx, p, func(tx *stream.Tx) error {
			return tx.Bulk(&floorRow, p, "taken", int64(0))
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var failed, ok atomic.Int64
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				typ := typeOf(i)
				if i%5 == 0 {
					typ = "taken"
				}
				_, err := l.WriteKeyed(ctx, p, fmt.Sprint(i%3), func(tx *stream.Tx) error {
					if err := tx.Bulk(&floorRow, p, typ, int64(i)); err != nil {
						return err
					}
					return tx.Append(stream.ConnectionActive, map[string]int{"i": i})
				})
				switch {
				case err == nil:
					ok.Add(1)
				case sqlgraph.IsUniqueConstraintError(err):
					failed.Add(1)
				default:
					t.Errorf("write %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 12 || ok.Load() != 48 {
			t.Fatalf("failed %d ok %d; want 12 and 48", failed.Load(), ok.Load())
		}
		rows, err := l.DB().R.Query(l.DB().Rebind("SELECT type, deleted_seq FROM event_type_floors WHERE project_id = ?"), p)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]int64{}
		for rows.Next() {
			var typ string
			var n int64
			if err := rows.Scan(&typ, &n); err != nil {
				t.Fatal(err)
			}
			got[typ] = n
		}
		if len(got) != 49 || got["taken"] != 0 {
			t.Fatalf("%d rows stored (taken: %d); want 49, taken 0", len(got), got["taken"])
		}
		for i := range 60 {
			if n, stored := got[typeOf(i)]; (i%5 != 0) != stored || (stored && n != int64(i)) {
				t.Fatalf("row of write %d: stored %v, value %d", i, stored, n)
			}
		}
		evs, err := l.Read(ctx, p, 0, 1000, "")
		if err != nil || len(evs) != 48 || evs[47].Seq != 48 {
			t.Fatalf("read %d events (%v); want 48", len(evs), err)
		}
	})
}

// bigRow inserts a row of the events table for a project of its own, a
// table with a large column outside any index.
var bigRow = stream.Bulk{
	Row: "INSERT INTO events (project_id, seq, type, size, pos, body, created_at) VALUES (?, ?, 'x', 0, 0, ?, 0)",
	Rows: `INSERT INTO events (project_id, seq, type, size, pos, body, created_at)
		SELECT p, s, 'x', 0, 0, b, 0 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS v(p, s, b)`,
}

// TestBulkLargeRows: rows too large to wait for the batch's statement go at
// once; the others are sent in statements of bounded size; a batch's
// events too. Every row and event is stored whole.
func TestBulkLargeRows(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{Writers: 1})
		p := newProject(t, l)
		ctx := tenant.WithProject(context.Background(), p)
		scratch := "bulk-" + p
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				size := 30 << 10 // 200 of them: 6 MB, more than one statement's worth
				if i%20 == 0 {
					size = 300 << 10 // written at once
				}
				_, err := l.Write(ctx, p, func(tx *stream.Tx) error {
					return tx.Bulk(&bigRow, scratch, int64(i), strings.Repeat(string(rune('a'+i%26)), size))
				})
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		var n, bytes int64
		if err := l.DB().R.QueryRow(l.DB().Rebind("SELECT count(*), sum(length(body)) FROM events WHERE project_id = ?"), scratch).
			Scan(&n, &bytes); err != nil {
			t.Fatal(err)
		}
		if want := int64(190*(30<<10) + 10*(300<<10)); n != 200 || bytes != want {
			t.Fatalf("%d rows of %d bytes; want 200 of %d", n, bytes, want)
		}

		// 60 events of 100 KB in one write: 6 MB of events.
		big := json.RawMessage(`"` + strings.Repeat("e", 100<<10) + `"`)
		evs, err := l.Write(ctx, p, func(tx *stream.Tx) error {
			for range 60 {
				if err := tx.Append(stream.ConnectionActive, big); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || len(evs) != 60 {
			t.Fatalf("append: %d events, %v", len(evs), err)
		}
		var got []stream.Event
		for len(got) < 60 { // pages of at most 4 MB
			page, err := l.Read(ctx, p, int64(len(got)), 100, "")
			if err != nil || len(page) == 0 {
				t.Fatalf("read after %d: %d events (%v)", len(got), len(page), err)
			}
			got = append(got, page...)
		}
		for i, e := range got {
			if e.Seq != int64(i+1) || string(e.Data) != string(big) {
				t.Fatalf("event %d: seq %d, %d bytes of data", i, e.Seq, len(e.Data))
			}
		}
	})
}

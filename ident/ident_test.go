package ident_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/comm-gateway/comm/ident"
)

var prefixes = []string{
	ident.Project, ident.Customer, ident.Agent, ident.APIKey, ident.Connection,
	ident.Conversation, ident.Message, ident.Webhook, ident.Device,
}

// crockford is the lowercase ULID alphabet (Crockford's base32: no i, l, o, u).
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// TestNewCheck: a new id of every kind has its prefix, an underscore and
// 26 lowercase ULID characters, checks against its own prefix and no other,
// and carries the current time.
func TestNewCheck(t *testing.T) {
	t.Parallel()
	for _, p := range prefixes {
		before := time.Now().Add(-time.Millisecond)
		id := ident.New(p)
		after := time.Now().Add(time.Millisecond)
		if !strings.HasPrefix(id, p+"_") || len(id) != len(p)+1+ulid.EncodedSize {
			t.Fatalf("New(%q) = %q: want %q + 26 characters", p, id, p+"_")
		}
		body := id[len(p)+1:]
		if strings.Trim(body, crockford) != "" {
			t.Errorf("New(%q) = %q: body is not lowercase Crockford base32", p, id)
		}
		if err := ident.Check(id, p); err != nil {
			t.Errorf("Check(New(%q)) = %v", p, err)
		}
		u, err := ulid.ParseStrict(body)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if ts := ulid.Time(u.Time()); ts.Before(before) || ts.After(after) {
			t.Errorf("%q: timestamp %v outside [%v, %v]", id, ts, before, after)
		}
		for _, q := range prefixes {
			if q == p {
				continue
			}
			if err := ident.Check(id, q); !errors.Is(err, ident.ErrMalformed) {
				t.Errorf("Check(%q, %q) = %v, want ErrMalformed", id, q, err)
			}
		}
	}
}

// TestUniqueAndSorted: ids made one after another are distinct and sort in
// the order they were made, also when many share a millisecond (the ULID's
// monotonic entropy then orders them).
func TestUniqueAndSorted(t *testing.T) {
	t.Parallel()
	const n = 20000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ident.New(ident.Message)
	}
	if !slices.IsSorted(ids) {
		for i := 1; i < n; i++ {
			if ids[i-1] >= ids[i] {
				t.Fatalf("ids out of order at %d: %q then %q", i, ids[i-1], ids[i])
			}
		}
	}
	sameMilli, maxRun, run := 0, 1, 1
	for i := 1; i < n; i++ {
		if ids[i-1] == ids[i] {
			t.Fatalf("duplicate id %q", ids[i])
		}
		// The first 10 characters of a ULID are its millisecond timestamp.
		if ids[i-1][:len(ident.Message)+11] == ids[i][:len(ident.Message)+11] {
			sameMilli++
			run++
			maxRun = max(maxRun, run)
		} else {
			run = 1
		}
	}
	if sameMilli == 0 {
		t.Fatalf("no two of %d ids share a millisecond; the test proves nothing about monotonic entropy", n)
	}
	t.Logf("%d of %d ids share a millisecond with their predecessor; longest run %d", sameMilli, n, maxRun)
}

// TestConcurrentNew: ids made concurrently are distinct, and each
// goroutine's ids sort in the order that goroutine made them.
func TestConcurrentNew(t *testing.T) {
	t.Parallel()
	const goroutines, per = 8, 2000
	out := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, per)
			for i := range ids {
				ids[i] = ident.New(ident.Conversation)
			}
			out[g] = ids
		}()
	}
	wg.Wait()
	seen := make(map[string]bool, goroutines*per)
	for g, ids := range out {
		if !slices.IsSorted(ids) {
			t.Errorf("goroutine %d: ids not in order", g)
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %q", id)
			}
			seen[id] = true
		}
	}
}

// TestCheckRejects: malformed ids fail with ErrMalformed before any
// lookup. The canonical form is lowercase (what New makes and what is
// stored; the database compares ids byte for byte), so an upper- or
// mixed-case body is rejected rather than passed on to a lookup that could
// never match.
func TestCheckRejects(t *testing.T) {
	t.Parallel()
	id := ident.New(ident.Connection)
	body := id[len(ident.Connection)+1:]
	cases := map[string]string{
		"empty":               "",
		"prefix only":         "conn_",
		"no underscore":       "conn" + body,
		"other prefix":        "conv_" + body,
		"prefix extended":     "connx_" + body,
		"prefix upper-case":   "CONN_" + body,
		"double underscore":   "conn__" + body,
		"body only":           body,
		"one short":           id[:len(id)-1],
		"one long":            id + "0",
		"two ids":             id + id,
		"upper-case body":     "conn_" + strings.ToUpper(body),
		"one upper-case char": "conn_" + body[:25] + strings.ToUpper(lastLetter(body)),
		"letter i":            "conn_" + body[:25] + "i",
		"letter l":            "conn_" + body[:25] + "l",
		"letter o":            "conn_" + body[:25] + "o",
		"letter u":            "conn_" + body[:25] + "u",
		"dash":                "conn_" + body[:25] + "-",
		"space":               "conn_" + body[:25] + " ",
		"NUL":                 "conn_" + body[:25] + "\x00",
		"non-ASCII, same len": "conn_" + body[:24] + "é",
		"long s (folds to S)": "conn_" + body[:24] + "ſ",
		"invalid UTF-8":       "conn_" + body[:25] + "\xff",
		"trailing newline":    id + "\n",
		"leading space":       " " + id,
		"overflow (8...)":     "conn_8" + body[1:],
		"overflow (z...)":     "conn_z" + body[1:],
		"UUID":                "conn_0191c1a6-7b5e-7c1a-9f3e-2d4b6a8c0e1f",
	}
	for name, s := range cases {
		if err := ident.Check(s, ident.Connection); !errors.Is(err, ident.ErrMalformed) {
			t.Errorf("%s: Check(%q) = %v, want ErrMalformed", name, s, err)
		}
	}
	// The extremes of the ULID range are well-formed.
	for _, s := range []string{"conn_" + strings.Repeat("0", 26), "conn_7" + strings.Repeat("z", 25)} {
		if err := ident.Check(s, ident.Connection); err != nil {
			t.Errorf("Check(%q) = %v", s, err)
		}
	}
}

// lastLetter returns a letter of body as a one-character string, so the
// case test changes something even when the body ends in a digit.
func lastLetter(body string) string {
	if c := body[25]; c >= 'a' && c <= 'z' {
		return string(c)
	}
	return "a"
}

// FuzzCheck: Check never panics; it fails only with ErrMalformed; and
// whatever it accepts is the prefix, an underscore and the canonical
// (lowercase) text of a ULID. The seed corpus runs with go test.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"conn_01jd8x5m3r7q6y2b9v0c4k1n8t",
		"msg_01jd8x5m3r7q6y2b9v0c4k1n8t",
		"conn_01JD8X5M3R7Q6Y2B9V0C4K1N8T",
		"conn_01jd8x5m3r7q6y2b9v0c4k1n8",
		"conn_01jd8x5m3r7q6y2b9v0c4k1n8tt",
		"conn_81jd8x5m3r7q6y2b9v0c4k1n8t",
		"conn_01jd8x5m3r7q6y2b9v0c4k1n8i",
		"conn_01jd8x5m3r7q6y2b9v0c4k1nſ",
		"conn_7zzzzzzzzzzzzzzzzzzzzzzzzz",
		"conn_00000000000000000000000000",
		"conn_",
		"_",
		"",
		"conn" + strings.Repeat("\xff", 27),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range append(prefixes, "") {
			err := ident.Check(s, p)
			if err != nil {
				if !errors.Is(err, ident.ErrMalformed) {
					t.Fatalf("Check(%q, %q) = %v, not ErrMalformed", s, p, err)
				}
				continue
			}
			body, ok := strings.CutPrefix(s, p+"_")
			if !ok || len(body) != ulid.EncodedSize {
				t.Fatalf("Check(%q, %q) accepted a wrong prefix or length", s, p)
			}
			u, err := ulid.ParseStrict(body)
			if err != nil {
				t.Fatalf("Check(%q, %q) accepted a body ulid rejects: %v", s, p, err)
			}
			if canon := strings.ToLower(u.String()); canon != body {
				t.Fatalf("Check(%q, %q) accepted a non-canonical body; canonical is %q", s, p, canon)
			}
		}
	})
}

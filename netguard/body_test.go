package netguard_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/netguard"
)

// endless is an infinite body that counts the bytes handed out.
type endless struct{ served int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.served += int64(len(p))
	return len(p), nil
}

func TestReadLimited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		limit   int64
		want    string
		wantErr bool
	}{
		{name: "short", body: "ok", limit: 10, want: "ok"},
		{name: "exact", body: "0123456789", limit: 10, want: "0123456789"},
		{name: "long", body: "0123456789abc", limit: 10, want: "0123456789"},
		{name: "empty", body: "", limit: 10, want: ""},
		{name: "zero limit", body: "abc", limit: 0, want: ""},
		{name: "negative limit", body: "abc", limit: -1, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := netguard.ReadLimited(strings.NewReader(tc.body), tc.limit)
			if err != nil {
				t.Fatalf("ReadLimited: %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("ReadLimited = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadLimitedHugeBody(t *testing.T) {
	t.Parallel()
	body := &endless{}
	got, err := netguard.ReadLimited(body, netguard.BodyPrefix)
	if err != nil {
		t.Fatalf("ReadLimited: %v", err)
	}
	if len(got) != netguard.BodyPrefix {
		t.Fatalf("read %d bytes, want %d", len(got), netguard.BodyPrefix)
	}
	if body.served != netguard.BodyPrefix {
		t.Fatalf("pulled %d bytes from the body, want exactly %d", body.served, netguard.BodyPrefix)
	}
}

func TestReadLimitedError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), errReader{boom})
	got, err := netguard.ReadLimited(r, 10)
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want it to wrap %v", err, boom)
	}
	if string(got) != "abc" {
		t.Fatalf("prefix %q, want %q", got, "abc")
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

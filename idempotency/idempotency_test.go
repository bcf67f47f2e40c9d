package idempotency_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/idempotency"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"7f1c2f4e-1c3b-4f7e-9a51-6b1b0c2d3e4f", true},
		{"with space and ~!@#$%^&*()", true},
		{strings.Repeat("k", idempotency.MaxKeyLen), true},
		{"", false},
		{strings.Repeat("k", idempotency.MaxKeyLen+1), false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"clé", false},
	} {
		err := idempotency.CheckKey(c.key)
		if c.ok != (err == nil) {
			t.Errorf("CheckKey(%q) = %v, want ok %v", c.key, err, c.ok)
		}
		var e *fault.Error
		if err != nil && (!errors.As(err, &e) || e.Code != "invalid_parameter" || e.Param != idempotency.Header) {
			t.Errorf("CheckKey(%q) = %v, want invalid_parameter naming %s", c.key, err, idempotency.Header)
		}
	}
}

// TestFingerprint: every part counts, and parts cannot run into each other.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := idempotency.Fingerprint("POST", "/v1/messages", "", []byte(`{"text":"a"}`))
	if len(base) != 32 {
		t.Fatalf("fingerprint of %d bytes", len(base))
	}
	if again := idempotency.Fingerprint("POST", "/v1/messages", "", []byte(`{"text":"a"}`)); !bytes.Equal(base, again) {
		t.Error("the same request has two fingerprints")
	}
	for name, fp := range map[string][]byte{
		"method": idempotency.Fingerprint("PUT", "/v1/messages", "", []byte(`{"text":"a"}`)),
		"path":   idempotency.Fingerprint("POST", "/v1/message", "", []byte(`{"text":"a"}`)),
		"query":  idempotency.Fingerprint("POST", "/v1/messages", "x=1", []byte(`{"text":"a"}`)),
		"body":   idempotency.Fingerprint("POST", "/v1/messages", "", []byte(`{"text":"b"}`)),
		"shift":  idempotency.Fingerprint("POST", "/v1/messages", `{"text":"a"}`, nil),
	} {
		if bytes.Equal(fp, base) {
			t.Errorf("another %s, the same fingerprint", name)
		}
	}
}

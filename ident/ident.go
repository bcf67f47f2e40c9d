// Package ident makes and checks comm's prefixed identifiers: a short type
// prefix, an underscore and a lowercase ULID (for example
// "conn_01jd8x5m3r7q6y2b9v0c4k1n8t"). ULIDs keep identifiers sortable by
// creation time; the prefix tells a reader, and the parser, what an id names.
package ident

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes of every kind of identifier comm hands out.
const (
	Project        = "proj"
	Customer       = "cus"
	Agent          = "agt"
	APIKey         = "key"
	Connection     = "conn"
	Conversation   = "conv"
	Message        = "msg"
	Webhook        = "whk"
	WebhookAttempt = "wha"
	Device         = "dev"
	Attachment     = "att"
	Domain         = "dom"
	Account        = "acct"
	DeviceRequest  = "dreq"
	CreditEntry    = "cred"
	WebSession     = "wses"
	Binding        = "bnd"
	IdempotencyKey = "idk"
)

// ErrMalformed is wrapped by every parse failure.
var ErrMalformed = errors.New("malformed id")

var (
	mu      sync.Mutex
	entropy = ulid.Monotonic(rand.Reader, 0)
)

// New returns a fresh identifier with the given prefix.
func New(prefix string) string {
	mu.Lock()
	u := ulid.MustNew(ulid.Timestamp(time.Now()), entropy)
	mu.Unlock()
	return prefix + "_" + strings.ToLower(u.String())
}

// Check reports whether s is a well-formed identifier with the given prefix.
// It never touches storage, so callers can reject junk before a query.
//
// Only the canonical, lowercase form New makes is well-formed: ids are
// stored and compared byte for byte, so an upper-case spelling of a real id
// could never be found, and must not be stored as a second id either.
func Check(s, prefix string) error {
	body, ok := strings.CutPrefix(s, prefix+"_")
	if !ok {
		return fmt.Errorf("%w: want prefix %q", ErrMalformed, prefix+"_")
	}
	if len(body) != ulid.EncodedSize {
		return fmt.Errorf("%w: want %d characters after the prefix", ErrMalformed, ulid.EncodedSize)
	}
	if strings.ContainsFunc(body, func(r rune) bool { return r >= 'A' && r <= 'Z' }) {
		return fmt.Errorf("%w: want lowercase characters after the prefix", ErrMalformed)
	}
	// ParseStrict accepts both cases of Crockford's base32.
	if _, err := ulid.ParseStrict(body); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

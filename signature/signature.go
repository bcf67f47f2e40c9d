// Package signature signs and verifies push deliveries with the Standard
// Webhooks scheme: headers webhook-id (stable across retries of one event),
// webhook-timestamp (Unix seconds) and webhook-signature
// ("v1,<base64 HMAC-SHA256 of id.timestamp.body>", several space-separated
// signatures allowed). A secret starting with "whsec_" is the base64 of the
// key; any other secret is used as its bytes.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock.
const Tolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMissingHeaders = errors.New("signature: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp      = errors.New("signature: timestamp outside the tolerance")
	ErrMismatch       = errors.New("signature: no signature matches")
)

// Key returns the HMAC key of a secret.
func Key(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("signature: a whsec_ secret must be base64 after the prefix: %w", err)
		}
		if len(key) == 0 {
			return nil, errors.New("signature: empty whsec_ secret")
		}
		return key, nil
	}
	if secret == "" {
		return nil, errors.New("signature: empty secret")
	}
	return []byte(secret), nil
}

// Sign returns the webhook-signature value for one delivery.
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SetHeaders sets the three headers of a delivery on h.
func SetHeaders(h http.Header, key []byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(key, id, ts, body))
}

// Verify checks a delivery's headers against its raw body, at time now.
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := Key(secret)
	if err != nil {
		return err
	}
	id, tsRaw, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsRaw == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	ts := time.Unix(sec, 0)
	if ts.Before(now.Add(-Tolerance)) || ts.After(now.Add(Tolerance)) {
		return ErrTimestamp
	}
	want := Sign(key, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrMismatch
}

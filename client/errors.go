package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/api"
)

// Error is an error answer of the gateway: its JSON error body
// ({"error":{"code","message","param","earliest_seq","request_id"}}) and HTTP status.
// Compare with errors.Is against the sentinels below (ErrNotFound,
// ErrPaymentRequired ...), which match any Error of the same Code; use
// errors.As to read the fields.
type Error struct {
	// Status is the HTTP status code (402, 404 ...).
	Status int
	// Code is the machine-readable code ("payment_required", "not_found"
	// ...). An answer without the JSON error body (from a proxy in front of
	// the gateway, say) gets the code that fits its status.
	Code string
	// Message is the human-readable explanation.
	Message string
	// Param names the offending request parameter or field, if any.
	Param string
	// RequestID identifies the request in the gateway's log.
	RequestID string
	// RetryAfter is the delay the gateway asked for in a Retry-After
	// header (429 and 503), zero if none.
	RetryAfter time.Duration
	// EarliestSeq, on cursor_expired (410), is the seq of the earliest
	// event the stream still keeps: resume from EarliestSeq-1.
	EarliestSeq int64
}

// Error formats the error as "comm: <status> <code>: [param: ]message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("comm: ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d ", e.Status)
	}
	b.WriteString(e.Code)
	if e.Param != "" {
		b.WriteString(": ")
		b.WriteString(e.Param)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request ")
		b.WriteString(e.RequestID)
		b.WriteString(")")
	}
	return b.String()
}

// Is reports whether target is an *Error of the same code, so that
// errors.Is(err, client.ErrNotFound) matches every not_found answer.
// Codes match exactly: route_not_found is not ErrNotFound.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// Sentinels of the gateway's error codes, for errors.Is.
var (
	// ErrInvalid is invalid_parameter (400): Param names the parameter.
	ErrInvalid = &Error{Code: "invalid_parameter"}
	// ErrMalformedJSON is malformed_json (400).
	ErrMalformedJSON = &Error{Code: "malformed_json"}
	// ErrUnauthenticated is unauthenticated (401): missing, malformed,
	// unknown or revoked API key.
	ErrUnauthenticated = &Error{Code: "unauthenticated"}
	// ErrPaymentRequired is payment_required (402): a paid channel with an
	// anonymous key; sign in (comm login) and repeat with the signed-in key.
	ErrPaymentRequired = &Error{Code: "payment_required"}
	// ErrForbidden is forbidden (403).
	ErrForbidden = &Error{Code: "forbidden"}
	// ErrNotFound is not_found (404): an unknown id, or another project's.
	ErrNotFound = &Error{Code: "not_found"}
	// ErrRouteNotFound is route_not_found (404): no such endpoint, usually
	// a wrong base URL.
	ErrRouteNotFound = &Error{Code: "route_not_found"}
	// ErrMethodNotAllowed is method_not_allowed (405).
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed"}
	// ErrConflict is conflict (409).
	ErrConflict = &Error{Code: "conflict"}
	// ErrCursorExpired is cursor_expired (410): the cursor is older than
	// the earliest event the stream keeps (the gateway's retention deleted
	// the ones after it); EarliestSeq says where the stream starts now.
	ErrCursorExpired = &Error{Code: "cursor_expired"}
	// ErrPayloadTooLarge is payload_too_large (413).
	ErrPayloadTooLarge = &Error{Code: "payload_too_large"}
	// ErrUnsupportedMediaType is unsupported_media_type (415).
	ErrUnsupportedMediaType = &Error{Code: "unsupported_media_type"}
	// ErrIdempotencyKeyReused is idempotency_key_reused (422): an
	// Idempotency-Key sent again with another request. The client makes
	// a new key per call, so this comes only from a raw request.
	ErrIdempotencyKeyReused = &Error{Code: "idempotency_key_reused"}
	// ErrRateLimited is rate_limited (429).
	ErrRateLimited = &Error{Code: "rate_limited"}
	// ErrInternal is internal_error (500).
	ErrInternal = &Error{Code: "internal_error"}
	// ErrNotImplemented is not_implemented (501): e.g. a channel whose
	// adapter this gateway does not have.
	ErrNotImplemented = &Error{Code: "not_implemented"}
	// ErrUnavailable is unavailable (502, 503, 504).
	ErrUnavailable = &Error{Code: "unavailable"}
)

// ErrNoAPIKey is returned by New when no API key was found anywhere.
var ErrNoAPIKey = errors.New("comm: no API key: set COMM_API_KEY in the environment or in a .env file " +
	"(in the working directory or beside the executable), or pass client.WithAPIKey")

// codeOfStatus is the code given to an error answer without the gateway's
// JSON error body.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return ErrInvalid.Code
	case http.StatusUnauthorized:
		return ErrUnauthenticated.Code
	case http.StatusPaymentRequired:
		return ErrPaymentRequired.Code
	case http.StatusForbidden:
		return ErrForbidden.Code
	case http.StatusNotFound:
		return ErrRouteNotFound.Code
	case http.StatusMethodNotAllowed:
		return ErrMethodNotAllowed.Code
	case http.StatusConflict:
		return ErrConflict.Code
	case http.StatusRequestEntityTooLarge:
		return ErrPayloadTooLarge.Code
	case http.StatusUnsupportedMediaType:
		return ErrUnsupportedMediaType.Code
	case http.StatusTooManyRequests:
		return ErrRateLimited.Code
	case http.StatusNotImplemented:
		return ErrNotImplemented.Code
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ErrUnavailable.Code
	}
	if status >= 500 {
		return ErrInternal.Code
	}
	return fmt.Sprintf("http_%d", status)
}

// errorOf builds the Error of a non-2xx answer from its body.
func errorOf(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var b api.ErrorBody
	if json.Unmarshal(body, &b) == nil && b.Error.Code != "" {
		e.Code, e.Message, e.Param, e.EarliestSeq = b.Error.Code, b.Error.Message, b.Error.Param, b.Error.EarliestSeq
		if b.Error.RequestID != "" {
			e.RequestID = b.Error.RequestID
		}
		return e
	}
	e.Code = codeOfStatus(resp.StatusCode)
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

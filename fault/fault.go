// Package fault holds the errors a caller of comm can act on, their codes,
// and the one presenter that turns any error into what a front door
// answers (REST's status and error body, GraphQL's extensions.code, the
// websocket's error frames).
//
// It imports only the standard library, so every domain package can build
// its errors with it.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Error is a failure a caller can act on. Its Code is part of the API (the
// REST error body's "code" and GraphQL's extensions.code). Compare with
// errors.Is against the sentinels below, which match any Error of the same
// code. Build one with the constructor of its code (Invalid, NotFound,
// Conflict ...).
type Error struct {
	Code    string
	Message string
	// Param names the offending request parameter or field, if any, by its
	// REST name (GraphQL renames it to its argument's name).
	Param string
	// RetryAfter, on ErrRateLimited, is how long until a retry can
	// succeed (REST sends it as Retry-After).
	RetryAfter time.Duration
	// EarliestSeq, on ErrCursorExpired, is the seq of the earliest event
	// the log still keeps: a cursor of EarliestSeq-1 or later reads on.
	EarliestSeq int64
}

func (e *Error) Error() string {
	if e.Param != "" {
		return e.Code + ": " + e.Param + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Is matches errors of the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// WithParam returns a copy of e naming param as the offending parameter.
func (e *Error) WithParam(param string) *Error {
	c := *e
	c.Param = param
	return &c
}

// Error codes; each sentinel matches every Error with its code.
var (
	// The domain's codes.
	ErrInvalid         = &Error{Code: "invalid_parameter"}
	ErrUnauthenticated = &Error{Code: "unauthenticated"}
	ErrPaymentRequired = &Error{Code: "payment_required"}
	// ErrInsufficientCredit: the account's balance does not cover a paid
	// message (402, like payment_required).
	ErrInsufficientCredit = &Error{Code: "insufficient_credit"}
	ErrForbidden          = &Error{Code: "forbidden"}
	ErrNotFound           = &Error{Code: "not_found"}
	ErrConflict           = &Error{Code: "conflict"}
	ErrRateLimited        = &Error{Code: "rate_limited"}
	// ErrIdempotencyKeyReused: an Idempotency-Key came again with a
	// request other than the one it was first used for (422).
	ErrIdempotencyKeyReused = &Error{Code: "idempotency_key_reused"}
	ErrNotImplemented       = &Error{Code: "not_implemented"}
	// ErrCursorExpired: a cursor (after_seq, a webhook's from_seq) points
	// before the earliest event the log keeps, whose older events were
	// deleted by retention (410, with earliest_seq).
	ErrCursorExpired = &Error{Code: "cursor_expired"}
	// ErrProviderUnavailable: a provider did not answer (a connection's
	// set-up could not reach it, a webhook's media could not be fetched);
	// retrying later may succeed.
	ErrProviderUnavailable = &Error{Code: "provider_unavailable"}

	// Codes of the front doors: the request itself (HTTP) and the server.
	ErrMalformedJSON    = &Error{Code: "malformed_json"}
	ErrUnsupportedMedia = &Error{Code: "unsupported_media_type"}
	ErrTooLarge         = &Error{Code: "payload_too_large"}
	ErrRouteNotFound    = &Error{Code: "route_not_found"}
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed"}
	ErrInternal         = &Error{Code: "internal_error"}
	ErrUnavailable      = &Error{Code: "unavailable"}
	// ErrResponseTooLarge: a GraphQL response would pass its byte budget.
	ErrResponseTooLarge = &Error{Code: "response_too_large"}
)

func newf(code *Error, param, format string, args ...any) *Error {
	return &Error{Code: code.Code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports a bad request parameter.
func Invalid(param, format string, args ...any) *Error {
	return newf(ErrInvalid, param, format, args...)
}

// NotFound reports an unknown id (or one of another project: the two are
// indistinguishable by design).
func NotFound(what, id string) *Error {
	return newf(ErrNotFound, "", "no %s %q", what, id)
}

// NotFoundf reports something missing in words of its own.
func NotFoundf(format string, args ...any) *Error {
	return newf(ErrNotFound, "", format, args...)
}

// Unauthenticated reports a missing, malformed or unknown credential.
func Unauthenticated(format string, args ...any) *Error {
	return newf(ErrUnauthenticated, "", format, args...)
}

// PaymentRequired reports something the caller's plan or credit does not
// cover.
func PaymentRequired(format string, args ...any) *Error {
	return newf(ErrPaymentRequired, "", format, args...)
}

// InsufficientCredit reports a paid message the account's balance does
// not cover.
func InsufficientCredit(format string, args ...any) *Error {
	return newf(ErrInsufficientCredit, "", format, args...)
}

// Forbidden reports something the caller's credential may not do.
func Forbidden(format string, args ...any) *Error {
	return newf(ErrForbidden, "", format, args...)
}

// Conflict reports a request the current state refuses (a duplicate, a
// limit reached, a decision already taken).
func Conflict(format string, args ...any) *Error {
	return newf(ErrConflict, "", format, args...)
}

// IdempotencyKeyReused reports an idempotency key sent again with a
// different request; param names the header that carried it.
func IdempotencyKeyReused(param, format string, args ...any) *Error {
	return newf(ErrIdempotencyKeyReused, param, format, args...)
}

// RateLimited reports a budget used up; retryAfter is how long until a
// retry can succeed (0: unknown).
func RateLimited(retryAfter time.Duration, format string, args ...any) *Error {
	e := newf(ErrRateLimited, "", format, args...)
	e.RetryAfter = retryAfter
	return e
}

// CursorExpired reports a cursor, named by param (its REST name), older
// than the log's earliest kept event, earliest: the events after it up to
// earliest-1 were deleted by retention, so reading on from it would skip
// them silently.
func CursorExpired(param string, earliest int64) *Error {
	e := newf(ErrCursorExpired, param, "events before seq %d were deleted by the retention policy (COMM_EVENT_RETENTION); resume from earliest_seq - 1 = %d or later", earliest, earliest-1)
	e.EarliestSeq = earliest
	return e
}

// ProviderUnavailable reports a provider that did not answer.
func ProviderUnavailable(format string, args ...any) *Error {
	return newf(ErrProviderUnavailable, "", format, args...)
}

// NotImplemented reports a feature this gateway does not offer (yet).
func NotImplemented(format string, args ...any) *Error {
	return newf(ErrNotImplemented, "", format, args...)
}

// MalformedJSON reports a request body that is not the JSON asked for.
func MalformedJSON(format string, args ...any) *Error {
	return newf(ErrMalformedJSON, "", format, args...)
}

// UnsupportedMedia reports a request body of a type not taken.
func UnsupportedMedia(format string, args ...any) *Error {
	return newf(ErrUnsupportedMedia, "", format, args...)
}

// TooLarge reports a request body past its limit.
func TooLarge(format string, args ...any) *Error {
	return newf(ErrTooLarge, "", format, args...)
}

// RouteNotFound reports a path no route serves.
func RouteNotFound(format string, args ...any) *Error {
	return newf(ErrRouteNotFound, "", format, args...)
}

// MethodNotAllowed reports a method a route does not serve.
func MethodNotAllowed(format string, args ...any) *Error {
	return newf(ErrMethodNotAllowed, "", format, args...)
}

// Internal reports a failure of the server itself, in words safe to show.
// An error that is not an Error is presented as internal too, without its
// text.
func Internal(format string, args ...any) *Error {
	return newf(ErrInternal, "", format, args...)
}

// Unavailable reports a dependency (the database) out of reach.
func Unavailable(format string, args ...any) *Error {
	return newf(ErrUnavailable, "", format, args...)
}

// ResponseTooLarge reports a GraphQL response past its byte budget.
func ResponseTooLarge(format string, args ...any) *Error {
	return newf(ErrResponseTooLarge, "", format, args...)
}

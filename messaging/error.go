package messaging

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Error is a failure a caller can act on. Its Code is part of the API (the
// REST error body's "code" and GraphQL's extensions.code); front doors map
// codes to their status once. Compare with errors.Is against the sentinel
// values below, which match any Error of the same code.
type Error struct {
	Code    string
	Message string
	// Param names the offending request parameter or field, if any.
	Param string
	// RetryAfter, on ErrRateLimited, is how long until a retry can
	// succeed (REST sends it as Retry-After).
	RetryAfter time.Duration
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

// Error codes; each sentinel matches every Error with its code.
var (
	ErrInvalid         = &Error{Code: "invalid_parameter"}
	ErrUnauthenticated = &Error{Code: "unauthenticated"}
	ErrPaymentRequired = &Error{Code: "payment_required"}
	ErrForbidden       = &Error{Code: "forbidden"}
	ErrNotFound        = &Error{Code: "not_found"}
	ErrConflict        = &Error{Code: "conflict"}
	ErrRateLimited     = &Error{Code: "rate_limited"}
	ErrNotImplemented  = &Error{Code: "not_implemented"}
	// ErrUnavailable is a provider that did not answer (a connection's
	// set-up could not reach it); retrying later may succeed.
	ErrUnavailable = &Error{Code: "provider_unavailable"}
)

// Invalid reports a bad request parameter.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Code: ErrInvalid.Code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports an unknown id (or one of another project: the two are
// indistinguishable by design).
func NotFound(what, id string) *Error {
	return &Error{Code: ErrNotFound.Code, Message: fmt.Sprintf("no %s %q", what, id)}
}

func unauthenticated(msg string) *Error {
	return &Error{Code: ErrUnauthenticated.Code, Message: msg}
}

// NULPath returns the path ("name", "config.to[2]", below path) of the
// first string, or key, of a decoded JSON value that contains U+0000,
// which PostgreSQL cannot store in text and no field has a use for. REST
// bodies and GraphQL inputs are both checked with it.
func NULPath(v any, path string) (string, bool) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v := v.(type) {
	case string:
		return path, strings.ContainsRune(v, 0)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if strings.ContainsRune(k, 0) {
				return join(strings.ReplaceAll(k, "\x00", `\u0000`)), true
			}
			if p, ok := NULPath(v[k], join(k)); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range v {
			if p, ok := NULPath(e, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

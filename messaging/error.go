package messaging

import (
	"fmt"
	"slices"
	"strings"

	"github.com/comm-gateway/comm/fault"
)

// Error is a failure a caller can act on (fault.Error; the names below
// keep the package's callers compiling while they move to package fault).
type Error = fault.Error

// Error codes; each sentinel matches every Error with its code.
var (
	ErrInvalid             = fault.ErrInvalid
	ErrUnauthenticated     = fault.ErrUnauthenticated
	ErrPaymentRequired     = fault.ErrPaymentRequired
	ErrForbidden           = fault.ErrForbidden
	ErrNotFound            = fault.ErrNotFound
	ErrConflict            = fault.ErrConflict
	ErrRateLimited         = fault.ErrRateLimited
	ErrNotImplemented      = fault.ErrNotImplemented
	ErrProviderUnavailable = fault.ErrProviderUnavailable
)

// Invalid reports a bad request parameter (fault.Invalid).
func Invalid(param, format string, args ...any) *Error {
	return fault.Invalid(param, format, args...)
}

// NotFound reports an unknown id (fault.NotFound).
func NotFound(what, id string) *Error { return fault.NotFound(what, id) }

func unauthenticated(msg string) *Error { return fault.Unauthenticated("%s", msg) }

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

package fault

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// statusOf is the HTTP status of each code; this is the only place that
// maps codes to statuses.
var statusOf = map[string]int{
	ErrInvalid.Code:              http.StatusBadRequest,
	ErrUnauthenticated.Code:      http.StatusUnauthorized,
	ErrPaymentRequired.Code:      http.StatusPaymentRequired,
	ErrInsufficientCredit.Code:   http.StatusPaymentRequired,
	ErrForbidden.Code:            http.StatusForbidden,
	ErrNotFound.Code:             http.StatusNotFound,
	ErrConflict.Code:             http.StatusConflict,
	ErrRateLimited.Code:          http.StatusTooManyRequests,
	ErrIdempotencyKeyReused.Code: http.StatusUnprocessableEntity,
	ErrNotImplemented.Code:       http.StatusNotImplemented,
	ErrCursorExpired.Code:        http.StatusGone,
	ErrProviderUnavailable.Code:  http.StatusBadGateway,
	ErrMalformedJSON.Code:        http.StatusBadRequest,
	ErrUnsupportedMedia.Code:     http.StatusUnsupportedMediaType,
	ErrTooLarge.Code:             http.StatusRequestEntityTooLarge,
	ErrRouteNotFound.Code:        http.StatusNotFound,
	ErrMethodNotAllowed.Code:     http.StatusMethodNotAllowed,
	ErrInternal.Code:             http.StatusInternalServerError,
	ErrUnavailable.Code:          http.StatusServiceUnavailable,
	ErrResponseTooLarge.Code:     http.StatusRequestEntityTooLarge,
}

// InternalMessage is the message of an error that is not an Error: its
// text stays in the server's log.
const InternalMessage = "internal error"

// Problem is an error as a front door answers it.
type Problem struct {
	// Status is the HTTP status of Code (500 for a code without one).
	Status  int
	Code    string
	Message string
	// Param is the offending parameter's REST name, if any.
	Param string
	// RetryAfter, when positive, is how long until a retry can succeed.
	RetryAfter time.Duration
	// EarliestSeq, when positive, is the earliest seq the log keeps (a
	// cursor_expired problem).
	EarliestSeq int64
	// Internal is set when the error was not an Error: the problem says
	// only InternalMessage, and the caller logs the error itself.
	Internal bool
	// Gone is set when the error is the cancellation of ctx, whose caller
	// went away: there is no one to answer.
	Gone bool
}

// RetrySeconds is RetryAfter in whole seconds, rounded up past any
// fraction (what Retry-After and extensions.retry_after carry), or 0 when
// there is no RetryAfter.
func (p Problem) RetrySeconds() int {
	if p.RetryAfter <= 0 {
		return 0
	}
	return int(p.RetryAfter.Seconds()) + 1
}

// Present turns err, the failure of a request made in ctx, into the
// problem a front door answers. An Error anywhere in err's chain speaks
// for itself; any other error is internal.
func Present(ctx context.Context, err error) Problem {
	var e *Error
	if !errors.As(err, &e) {
		return Problem{
			Status:   http.StatusInternalServerError,
			Code:     ErrInternal.Code,
			Message:  InternalMessage,
			Internal: true,
			Gone:     errors.Is(err, context.Canceled) && ctx.Err() != nil,
		}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	return Problem{Status: status, Code: e.Code, Message: e.Message, Param: e.Param, RetryAfter: e.RetryAfter, EarliestSeq: e.EarliestSeq}
}

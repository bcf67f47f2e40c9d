package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/messaging"
)

// statusOf maps the domain's error codes to HTTP statuses; this is the
// only place that does.
var statusOf = map[string]int{
	messaging.ErrInvalid.Code:         http.StatusBadRequest,
	messaging.ErrUnauthenticated.Code: http.StatusUnauthorized,
	messaging.ErrPaymentRequired.Code: http.StatusPaymentRequired,
	messaging.ErrForbidden.Code:       http.StatusForbidden,
	messaging.ErrNotFound.Code:        http.StatusNotFound,
	messaging.ErrConflict.Code:        http.StatusConflict,
	messaging.ErrRateLimited.Code:     http.StatusTooManyRequests,
	messaging.ErrNotImplemented.Code:  http.StatusNotImplemented,
	messaging.ErrUnavailable.Code:     http.StatusBadGateway,
	codeMalformedJSON:                 http.StatusBadRequest,
	codeUnsupportedMedia:              http.StatusUnsupportedMediaType,
	codeTooLarge:                      http.StatusRequestEntityTooLarge,
	codeRouteNotFound:                 http.StatusNotFound,
	codeMethodNotAllowed:              http.StatusMethodNotAllowed,
	codeInternal:                      http.StatusInternalServerError,
	codeUnavailable:                   http.StatusServiceUnavailable,
}

// Codes only the HTTP front door produces.
const (
	codeMalformedJSON    = "malformed_json"
	codeUnsupportedMedia = "unsupported_media_type"
	codeTooLarge         = "payload_too_large"
	codeRouteNotFound    = "route_not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeInternal         = "internal_error"
	codeUnavailable      = "unavailable"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Param     string `json:"param,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError renders err in the one JSON error shape. Errors that are not
// the domain's are logged and reported as internal, without their text.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		e       *messaging.Error
		invalid *ent.ValidationError
	)
	switch {
	case errors.As(err, &e):
	case ent.IsNotFound(err):
		e = &messaging.Error{Code: messaging.ErrNotFound.Code, Message: "not found"}
	case errors.As(err, &invalid):
		// A schema validator refused a value the domain let through: the
		// caller's input is at fault, not the server.
		e = messaging.Invalid(invalid.Name, "%v", innermost(invalid))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client went away
	default:
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "err", err)
		e = &messaging.Error{Code: codeInternal, Message: "internal error; the server log has details under this request id"}
	}
	var ra *retryAfter
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(int(ra.wait.Seconds())+1))
	} else if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds())+1))
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="comm"`)
	}
	writeJSON(w, status, errorBody{Error: errorDetail{
		Code: e.Code, Message: e.Message, Param: e.Param, RequestID: requestID(r.Context()),
	}})
}

// innermost returns the error at the end of err's wrap chain: for ent's
// validation errors, the validator's own words without ent's type names.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func httpError(code, msg string) *messaging.Error {
	return &messaging.Error{Code: code, Message: msg}
}

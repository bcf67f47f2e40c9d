package server

import (
	"net/http"
	"strconv"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/fault/entfault"
)

// writeError renders err in the one JSON error shape, as fault.Present
// says. Errors that are not the domain's are logged and reported as
// internal, without their text.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := fault.Present(r.Context(), entfault.Of(err))
	if p.Gone {
		return // the client went away
	}
	if p.Internal {
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(r.Context()), "err", err)
		p.Message += "; the server log has details under this request id"
	}
	if secs := p.RetrySeconds(); secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="comm"`)
	}
	writeJSON(w, p.Status, api.ErrorBody{Error: api.ErrorDetail{
		Code: p.Code, Message: p.Message, Param: p.Param, EarliestSeq: p.EarliestSeq, RequestID: requestID(r.Context()),
	}})
}

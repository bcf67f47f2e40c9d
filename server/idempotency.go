package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/idempotency"
)

// creating is writing for a POST that creates or sends: it honours an
// Idempotency-Key header (idempotent). The key's write token is taken
// first, so a replay costs one like any request.
func (s *Server) creating(h handlerFunc) http.Handler {
	return s.writing(s.idempotent(h))
}

// idempotent runs h under the request's Idempotency-Key, if it has one
// (package idempotency): the first request with a key runs and its answer
// is kept before it is sent; a retry with the same key and the same
// request (method, path, query, body) gets that answer again, marked
// Idempotent-Replayed: true; the same key with another request answers
// 422 idempotency_key_reused; while the first runs, 409 with Retry-After.
// 5xx and 429 answers are not kept: the key is released, so the client's
// retry runs afresh. A request with a key runs to its end even if the
// client goes away, so that its retry finds the answer.
func (s *Server) idempotent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		values := r.Header.Values(idempotency.Header)
		if len(values) == 0 {
			return h(w, r)
		}
		if len(values) > 1 {
			return fault.Invalid(idempotency.Header, "send one %s header, not %d", idempotency.Header, len(values))
		}
		key := values[0]
		if err := idempotency.CheckKey(key); err != nil {
			return err
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return decodeError(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		claim, kept, err := s.idem.Begin(r.Context(), key, idempotency.Fingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body))
		if err != nil {
			return err
		}
		if kept != nil {
			for k, v := range kept.Header {
				w.Header()[k] = v
			}
			w.Header().Set(idempotency.ReplayedHeader, "true")
			w.Header().Set("Content-Length", strconv.Itoa(len(kept.Body)))
			w.WriteHeader(kept.Status)
			w.Write(kept.Body)
			return nil
		}

		r = r.WithContext(context.WithoutCancel(r.Context()))
		ctx := r.Context()
		rec := &statusRecorder{header: http.Header{}}
		func() {
			// A handler that panics answers 500 (ServeHTTP): release
			// the key, as for any 5xx.
			defer func() {
				if v := recover(); v != nil {
					if err := claim.Release(ctx); err != nil {
						s.logger.Warn("idempotency: release key", "request_id", requestID(ctx), "err", err)
					}
					panic(v)
				}
			}()
			if err := h(rec, r); err != nil {
				s.writeError(rec, r, err)
			}
		}()
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if status >= 500 || status == http.StatusTooManyRequests {
			if err := claim.Release(ctx); err != nil {
				s.logger.Warn("idempotency: release key", "request_id", requestID(ctx), "err", err)
			}
		} else if err := claim.Finish(ctx, idempotency.Response{Status: status, Header: rec.header, Body: rec.body.Bytes()}); err != nil {
			// The answer is sent all the same; the key stays started,
			// and a retry after the lease runs afresh.
			s.logger.Warn("idempotency: keep answer", "request_id", requestID(ctx), "err", err)
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Write(rec.body.Bytes())
		return nil
	}
}

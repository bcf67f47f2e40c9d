package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/comm-gateway/comm/fault"
)

// hook is a provider's request to a connection's ingress,
// /hooks/{channel}/{connection_id} (GET for handshakes, POST for events).
// There is no API key: the connection in the URL names the tenant, and its
// adapter verifies the request (signature, shared secret) before anything
// is stored. The body is read whole (within the body limit), since
// signatures cover the raw bytes.
func (s *Server) hook(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fault.TooLarge("body is larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return fault.Invalid("body", "could not read the request body: %v", err)
	}
	resp, err := s.svc.Hook(r.Context(), r.PathValue("channel"), r.PathValue("id"), r, body)
	if err != nil {
		return err
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if len(resp.Body) > 0 && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(status)
	w.Write(resp.Body)
	return nil
}

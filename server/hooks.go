package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/fault"
)

// hook is a provider's request to a connection's ingress,
// /hooks/{channel}/{connection_id} (GET for handshakes, POST for events).
// There is no API key: the connection in the URL names the tenant, and its
// adapter verifies the request (signature, shared secret) before anything
// is stored.
func (s *Server) hook(w http.ResponseWriter, r *http.Request) error {
	body, err := readHookBody(r)
	if err != nil {
		return err
	}
	resp, err := s.svc.Hook(r.Context(), r.PathValue("channel"), r.PathValue("id"), r, body)
	if err != nil {
		return err
	}
	writeHookResponse(w, resp)
	return nil
}

// appHook is a provider's request to its channel's app-level webhook,
// /hooks/{channel}, for providers that send every tenant's events to one
// URL: the app's secret verifies it, then the routing keys connections
// registered choose the tenants.
func (s *Server) appHook(w http.ResponseWriter, r *http.Request) error {
	body, err := readHookBody(r)
	if err != nil {
		return err
	}
	resp, err := s.svc.AppHook(r.Context(), r.PathValue("channel"), r, body)
	if err != nil {
		return err
	}
	writeHookResponse(w, resp)
	return nil
}

// readHookBody reads a provider request's body whole (within the body
// limit): signatures cover the raw bytes.
func readHookBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fault.TooLarge("body is larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return nil, fault.Invalid("body", "could not read the request body: %v", err)
	}
	return body, nil
}

// writeHookResponse writes an adapter's answer (200 and no body when it
// has nothing to say).
func writeHookResponse(w http.ResponseWriter, resp *channels.Response) {
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
}

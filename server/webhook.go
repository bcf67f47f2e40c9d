package server

import (
	"net/http"

	"github.com/comm-gateway/comm/webhook"
)

func (s *Server) setWebhook(w http.ResponseWriter, r *http.Request) error {
	var in webhook.Input
	if err := decode(r, &in); err != nil {
		return err
	}
	wh, err := s.hooks.Set(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wh)
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	wh, err := s.hooks.Get(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wh)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	if err := s.hooks.Delete(r.Context()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) replayWebhook(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		FromSeq *int64 `json:"from_seq"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	wh, err := s.hooks.Replay(r.Context(), in.FromSeq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wh)
	return nil
}

func (s *Server) webhookAttempts(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	as, err := s.hooks.Attempts(r.Context(), pg)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, as)
	return nil
}

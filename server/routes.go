package server

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

func sorted(s []string) []string { slices.Sort(s); return s }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Ping(r.Context()); err != nil {
		s.logger.Warn("health check", "err", err)
		return fault.Unavailable("database unreachable")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyTimeout bounds the checks of one GET /readyz.
const readyTimeout = 2 * time.Second

// readyz answers 200 when this gateway can serve (the database answers
// within 2 s and every ReadyCheck passes), else 503; the body names each
// check with "ok" or what is wrong.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	checks := map[string]string{"database": "ok"}
	ready := true
	if err := s.svc.Ping(ctx); err != nil {
		s.logger.Warn("readiness: database", "err", err)
		checks["database"], ready = "unreachable", false
	}
	for _, c := range s.ready {
		checks[c.Name] = "ok"
		if err := c.Check(ctx); err != nil {
			checks[c.Name], ready = err.Error(), false
		}
	}
	status, code := "ready", http.StatusOK
	if !ready {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
	return nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := limited(s.sandboxLimit, limitKey(s.clientIP(r)), "sandbox projects created"); err != nil {
		return err
	}
	var in struct {
		Name string `json:"name"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	sb, err := s.svc.CreateSandbox(r.Context(), in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sb)
	return nil
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) error {
	pr, err := s.svc.Project(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pr)
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	limit := int(q.int("limit", messaging.DefaultEventLimit))
	eq := messaging.EventQuery{
		AfterSeq: q.int("after_seq", 0),
		Type:     q.str("type"),
		Wait:     time.Duration(q.int("wait", 0)) * time.Second,
	}
	if err := q.done(); err != nil {
		return err
	}
	var err error
	if eq.Limit, err = messaging.Limit("limit", &limit, messaging.MaxEventLimit); err != nil {
		return err
	}
	page, err := s.svc.EventsJSON(r.Context(), eq)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, page)
	stream.ReleasePage(page)
	return nil
}

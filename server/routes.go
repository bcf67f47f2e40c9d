package server

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

func sorted(s []string) []string { slices.Sort(s); return s }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Ping(r.Context()); err != nil {
		s.logger.Warn("health check", "err", err)
		return httpError(codeUnavailable, "database unreachable")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
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

func (s *Server) getProject(w http.ResponseWriter, r *http.Request, p *messaging.Principal) error {
	pr, err := s.svc.Project(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pr)
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, p *messaging.Principal) error {
	q := newQuery(r)
	eq := messaging.EventQuery{
		AfterSeq: q.int("after_seq", 0),
		Limit:    int(q.int("limit", messaging.DefaultEventLimit)),
		Type:     q.str("type"),
		Wait:     time.Duration(q.int("wait", 0)) * time.Second,
	}
	if err := q.done(); err != nil {
		return err
	}
	if eq.Limit == 0 {
		return messaging.Invalid("limit", "must be between 1 and %d", messaging.MaxEventLimit)
	}
	evs, err := s.svc.Events(r.Context(), p, eq)
	if err != nil {
		return err
	}
	bp := eventBufs.Get().(*[]byte)
	b := appendEvents((*bp)[:0], evs)
	writeRaw(w, http.StatusOK, b)
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		eventBufs.Put(bp)
	}
	return nil
}

var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// appendEvents encodes a page of events as a JSON array; the stored data
// is already JSON and is copied as it is.
func appendEvents(b []byte, evs []stream.Event) []byte {
	b = append(b, '[')
	for i, e := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendInt(b, e.Seq, 10)
		b = append(b, `,"type":`...)
		b = strconv.AppendQuote(b, e.Type) // types are plain ASCII
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}

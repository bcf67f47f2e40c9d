package server

import (
	"mime"
	"net/http"
	"strconv"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/graph"
)

func (s *Server) createDomain(w http.ResponseWriter, r *http.Request) error {
	mail, err := s.mailHost()
	if err != nil {
		return err
	}
	var in struct {
		Domain string `json:"domain"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	d, err := mail.CreateDomain(r.Context(), in.Domain)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

func (s *Server) listDomains(w http.ResponseWriter, r *http.Request) error {
	mail, err := s.mailHost()
	if err != nil {
		return err
	}
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	ds, more, err := mail.DomainsPage(r.Context(), pg)
	if err != nil {
		return err
	}
	if more && len(ds) > 0 {
		setNextLink(w, r, ds[len(ds)-1].ID, pg.Limit)
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

func (s *Server) getDomain(w http.ResponseWriter, r *http.Request) error {
	mail, err := s.mailHost()
	if err != nil {
		return err
	}
	d, err := mail.Domain(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) verifyDomain(w http.ResponseWriter, r *http.Request) error {
	mail, err := s.mailHost()
	if err != nil {
		return err
	}
	d, err := mail.VerifyDomain(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) deleteDomain(w http.ResponseWriter, r *http.Request) error {
	mail, err := s.mailHost()
	if err != nil {
		return err
	}
	if err := mail.DeleteDomain(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getAttachment serves an attachment's bytes as a download: never
// rendered inline by a browser, whatever its declared type.
func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request) error {
	a, err := s.svc.Attachment(r.Context(), r.PathValue("id"), r.PathValue("attachment"))
	if err != nil {
		return err
	}
	ct := a.ContentType
	if _, _, err := mime.ParseMediaType(ct); err != nil || ct == "" {
		ct = "application/octet-stream"
	}
	name := a.Filename
	if name == "" {
		name = a.ID
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(int64(len(a.Data)), 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.Data)
	}
	return nil
}

// mailHost is the email side of the gateway, or not_implemented.
func (s *Server) mailHost() (graph.Domains, error) {
	if s.mail == nil {
		return nil, fault.NotImplemented("email is not available on this gateway")
	}
	return s.mail, nil
}

package server

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/fault"
)

// The /device page, where a person approves a device sign-in started by
// `comm login` (docs/security.md, "Device sign-in"). Server-rendered HTML
// that works without JavaScript:
//
//	GET  /device                  the form to type a code
//	GET  /device?code=BCDF-GHJK   the sign-in, and sign-in or Approve/Deny
//	GET  /device/signin?code=     to the identity provider (OIDC)
//	GET  /device/callback         back from the identity provider
//	POST /device/signin/local     local operator sign-in (no provider)
//	POST /device/approve          {code, csrf}
//	POST /device/deny             {code, csrf}
//	POST /device/signout          {csrf}

//go:embed templates/*.html
var templateFS embed.FS

var pageFuncs = template.FuncMap{
	"utc": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"ago": ago,
}

// htmlPages are the templates by file name, each with the layout.
var htmlPages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"code.html", "signin.html", "confirm.html", "message.html", "dashboard.html"} {
		out[name] = template.Must(template.New(name).Funcs(pageFuncs).ParseFS(templateFS, "templates/layout.html", "templates/"+name))
	}
	return out
}()

// ago is "just now", "1 minute ago", "12 minutes ago", "2 hours ago".
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < 2*time.Minute:
		return "1 minute ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " minutes ago"
	case d < 2*time.Hour:
		return "1 hour ago"
	default:
		return strconv.Itoa(int(d/time.Hour)) + " hours ago"
	}
}

// signInRoutes sets up sign-in and registers the /device htmlPages.
func (s *Server) signInRoutes(opts SignInOptions) {
	s.signin = newSignIn(opts, s.baseURL, s.logger)
	s.signin.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderMessage(w, r, http.StatusForbidden, "Cross-site request refused",
			"This form was sent from another site. Nothing was changed. Open the sign-in page of this gateway and retry.", "/device")
	}))
	post := func(h http.HandlerFunc) http.Handler { return s.signin.cop.Handler(h) }
	s.mux.Handle("GET /device", http.HandlerFunc(s.devicePage))
	s.mux.Handle("GET /device/signin", http.HandlerFunc(s.oidcSignIn))
	s.mux.Handle("GET /device/callback", http.HandlerFunc(s.oidcCallback))
	s.mux.Handle("POST /device/signin/local", post(s.localSignIn))
	s.mux.Handle("POST /device/approve", post(s.deviceDecide(true)))
	s.mux.Handle("POST /device/deny", post(s.deviceDecide(false)))
	s.mux.Handle("POST /device/signout", post(s.signOut))
}

// htmlPage is what the templates show.
type htmlPage struct {
	Title string
	// Error is shown above the content; Message is a message page's text.
	Error, Message string
	// Link goes back from a message page.
	Link string
	// Code is the user code (formatted when valid; as typed otherwise).
	Code    string
	Device  *account.DeviceView
	Account *account.Account
	CSRF    string
	// Mode is how people sign in: "oidc", "local" or "" (not configured).
	Mode   string
	Issuer string
	// Owner is whose the project to carry over is: "" (nobody's yet),
	// "you" or "other".
	Owner         string
	NotConfigured string
	// Brand names the part of the gateway ("device sign-in" when empty);
	// Next is where sign-in and sign-out go back to ("" for /device).
	Brand, Next string
}

func (s *Server) newPage(r *http.Request, sess *webSession, acct *account.Account) *htmlPage {
	p := &htmlPage{Account: acct, Mode: s.signin.mode, Issuer: s.signin.opts.OIDCIssuer, NotConfigured: notConfigured}
	if sess != nil {
		p.CSRF = s.signin.csrfToken(sess)
	}
	return p
}

// render writes a page with the headers every page has.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p *htmlPage) {
	var buf bytes.Buffer
	if err := htmlPages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		s.logger.Error("device page: template", "page", name, "request_id", requestID(r.Context()), "err", err)
		http.Error(w, "internal error; the server log has details under request id "+requestID(r.Context()), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer browsers send
	// "Origin: null" on the page's own form POSTs, which cross-origin
	// protection must refuse when plain HTTP gives it no Sec-Fetch-Site.
	// Either way the code in the URL never reaches another site.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (s *Server) renderMessage(w http.ResponseWriter, r *http.Request, status int, title, msg, link string) {
	s.render(w, r, status, "message.html", &htmlPage{Title: title, Message: msg, Link: link})
}

// renderFailure logs an unexpected error and shows a 500 page.
func (s *Server) renderFailure(w http.ResponseWriter, r *http.Request, err error) {
	s.logger.Error("device page failed", "method", r.Method, "path", r.URL.Path,
		"request_id", requestID(r.Context()), "err", err)
	s.renderMessage(w, r, http.StatusInternalServerError, "Something went wrong",
		"An internal error occurred; the server log has details under request id "+requestID(r.Context())+".", "/device")
}

func (s *Server) renderLimited(w http.ResponseWriter, r *http.Request, wait time.Duration, what string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	mins := int(wait/time.Minute) + 1
	s.renderMessage(w, r, http.StatusTooManyRequests, "Too many attempts",
		fmt.Sprintf("%s Try again in %d minute%s.", what, mins, map[bool]string{true: "", false: "s"}[mins == 1]), "/device")
}

// codeKeys are the wrong-code budgets a request draws on: its IP and, when
// signed in, its account.
func (s *Server) codeKeys(r *http.Request, acct *account.Account) []string {
	keys := []string{"ip:" + limitKey(s.clientIP(r))}
	if acct != nil {
		keys = append(keys, "acct:"+acct.ID)
	}
	return keys
}

// codesBlocked checks the wrong-code budgets before a code is looked up.
func (s *Server) codesBlocked(w http.ResponseWriter, r *http.Request, acct *account.Account) bool {
	for _, k := range s.codeKeys(r, acct) {
		if over, wait := s.signin.codeLimit.Blocked(k); over {
			s.renderLimited(w, r, wait, "Too many wrong codes were entered from here.")
			return true
		}
	}
	return false
}

// wrongCode counts an unknown code; it reports whether the budget is now
// exceeded (and has answered 429 then).
func (s *Server) wrongCode(w http.ResponseWriter, r *http.Request, acct *account.Account) bool {
	over, wait := false, time.Duration(0)
	for _, k := range s.codeKeys(r, acct) {
		if ok, d := s.signin.codeLimit.Allow(k); !ok {
			over, wait = true, max(wait, d)
		}
	}
	args := []any{"ip", s.clientIP(r)}
	if acct != nil {
		args = append(args, "account", acct.ID)
	}
	s.logger.Log(r.Context(), slog.LevelInfo, "device sign-in: wrong code", args...)
	if over {
		s.renderLimited(w, r, wait, "Too many wrong codes were entered from here.")
	}
	return over
}

// devicePage is GET /device[?code=...].
func (s *Server) devicePage(w http.ResponseWriter, r *http.Request) {
	sess, err := s.ensureSession(w, r)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	acct, err := s.sessionAccount(r.Context(), sess)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	p := s.newPage(r, sess, acct)
	p.Title = "Sign in a device"
	raw := r.URL.Query().Get("code")
	if raw == "" {
		s.render(w, r, http.StatusOK, "code.html", p)
		return
	}
	norm, err := account.NormalizeUserCode(raw)
	if err != nil {
		p.Code, p.Error = raw, errorText(err)
		s.render(w, r, http.StatusBadRequest, "code.html", p)
		return
	}
	p.Code = account.FormatUserCode(norm)
	if s.codesBlocked(w, r, acct) {
		return
	}
	dv, err := s.acct.DeviceByUserCode(r.Context(), p.Code)
	if errors.Is(err, fault.ErrNotFound) {
		if s.wrongCode(w, r, acct) {
			return
		}
		p.Error = errorText(err)
		s.render(w, r, http.StatusNotFound, "code.html", p)
		return
	}
	if err != nil {
		s.renderError(w, r, err, p.Code)
		return
	}
	p.Device = dv
	if acct == nil {
		p.Title = "Sign in to approve"
		s.render(w, r, http.StatusOK, "signin.html", p)
		return
	}
	p.Title = "Approve sign-in?"
	if dv.ProjectAccountID != nil {
		p.Owner = "other"
		if *dv.ProjectAccountID == acct.ID {
			p.Owner = "you"
		}
	}
	s.render(w, r, http.StatusOK, "confirm.html", p)
}

// deviceDecide is POST /device/approve and /device/deny {code, csrf}.
func (s *Server) deviceDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.postForm(w, r)
		if !ok {
			return
		}
		raw := r.PostForm.Get("code")
		back := returnTo(raw)
		acct, err := s.sessionAccount(r.Context(), sess)
		if err != nil {
			s.renderFailure(w, r, err)
			return
		}
		if acct == nil {
			s.renderMessage(w, r, http.StatusUnauthorized, "Sign in first", "Sign in before approving or denying a sign-in.", back)
			return
		}
		norm, err := account.NormalizeUserCode(raw)
		if err != nil {
			s.renderError(w, r, err, "")
			return
		}
		code := account.FormatUserCode(norm)
		if s.codesBlocked(w, r, acct) {
			return
		}
		if !approve {
			err := s.acct.DenyDevice(r.Context(), acct.ID, code)
			if err != nil {
				s.decideError(w, r, acct, err, back)
				return
			}
			s.logger.Info("device sign-in denied", "account", acct.ID, "ip", s.clientIP(r))
			s.renderMessage(w, r, http.StatusOK, "Denied",
				"Denied. The sign-in "+code+" was refused and your terminal will say so; no key was made.", "")
			return
		}
		dv, err := s.acct.DeviceByUserCode(r.Context(), code)
		if err != nil {
			s.decideError(w, r, acct, err, back)
			return
		}
		a, err := s.acct.ApproveDevice(r.Context(), acct.ID, code)
		if err != nil {
			s.decideError(w, r, acct, err, back)
			return
		}
		s.logger.Info("device sign-in approved", "account", acct.ID, "project", a.ProjectID, "carried_over", a.CarriedOver, "ip", s.clientIP(r))
		project := "the new project " + a.ProjectID
		if a.CarriedOver && dv.Project != nil {
			project = fmt.Sprintf("project %s (%s)", dv.Project.Name, a.ProjectID)
		}
		s.renderMessage(w, r, http.StatusOK, "Approved",
			"Approved. Return to your terminal; it now has a signed-in key for "+project+".", "")
	}
}

func (s *Server) decideError(w http.ResponseWriter, r *http.Request, acct *account.Account, err error, back string) {
	if errors.Is(err, fault.ErrNotFound) && s.wrongCode(w, r, acct) {
		return
	}
	s.renderError(w, r, err, back)
}

// renderError shows a domain error as a page with its status; other
// errors are internal.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, err error, back string) {
	p := fault.Present(r.Context(), err)
	if p.Internal {
		s.renderFailure(w, r, err)
		return
	}
	title := map[string]string{
		fault.ErrConflict.Code: "Cannot complete this sign-in",
		fault.ErrNotFound.Code: "Unknown code",
		fault.ErrInvalid.Code:  "Not a sign-in code",
	}[p.Code]
	if title == "" {
		title = "Cannot do that"
	}
	if back == "" {
		back = "/device"
	}
	s.renderMessage(w, r, p.Status, title, errorText(err), back)
}

// errorText is the message of a domain error, capitalized, without its
// code.
func errorText(err error) string {
	var e *fault.Error
	if !errors.As(err, &e) {
		return "Something went wrong."
	}
	msg := e.Message
	if msg != "" && msg[0] >= 'a' && msg[0] <= 'z' {
		msg = string(msg[0]-'a'+'A') + msg[1:]
	}
	return msg
}

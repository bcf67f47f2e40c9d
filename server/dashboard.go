package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/webasset"
)

// The dashboard: a signed-in person's web console over the GraphQL API.
// A single page written in plain JavaScript modules (no build step, no
// framework; dashboard/assets), embedded in the binary.
//
//	GET  /dashboard                       sign-in, a first project, or the app
//	GET  /dashboard/assets/{version}/{name...}  the app's files
//	POST /dashboard/projects              {name, csrf}: a new project of the account
//	POST /dashboard/graphql               GraphQL (X-Comm-Project, X-CSRF-Token)
//	GET  /dashboard/graphql               the same over a websocket ({project, csrf} in connection_init)
//	GET  /dashboard/projects/{project}/messages/{id}/attachments/{attachment}
//
// The session is the /device page's (one cookie, one sign-in). It works
// only here: /graphql and /v1 take API keys, never the cookie, and the
// dashboard's endpoints take the cookie, never a key. A request acts for
// one project of the session's account (X-Comm-Project), as its
// principal, whose credential is the browser session: signing out ends it
// at once, websockets included. Every GraphQL request carries the CSRF
// token (a header, which a cross-site form cannot send) and passes
// net/http's cross-origin protection; the websocket must come from the
// gateway's own origin.

//go:embed dashboard/index.html dashboard/assets
var dashboardFS embed.FS

// dashboardShell is the app's page; its data is dashboardBoot.
var dashboardShell = template.Must(template.ParseFS(dashboardFS, "dashboard/index.html"))

// dashboardAssets are the app's files by name (under dashboard/assets);
// dashboardVersion is a hash of them all, in the page's links to them.
var dashboardAssets, dashboardVersion = loadAssets()

func loadAssets() (map[string]*webasset.File, string) {
	out := map[string]*webasset.File{}
	all := sha256.New()
	err := fs.WalkDir(dashboardFS, "dashboard/assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := dashboardFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "dashboard/assets/")
		f := webasset.NewFile(name, body)
		all.Write([]byte(name + "\x00" + f.Version()))
		out[name] = f
		return nil
	})
	if err != nil {
		panic("dashboard assets: " + err.Error())
	}
	return out, hex.EncodeToString(all.Sum(nil)[:6])
}

// dashboardCSP allows the app its own files and its own websocket only:
// no inline script or style, nothing from elsewhere.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"

func (s *Server) dashboardRoutes() {
	s.mux.Handle("GET /dashboard", http.HandlerFunc(s.dashboardPage))
	s.mux.Handle("GET /dashboard/{$}", http.RedirectHandler(dashboardPath, http.StatusMovedPermanently))
	s.mux.Handle("GET /dashboard/assets/{name...}", http.HandlerFunc(serveAsset))
	s.mux.Handle("POST /dashboard/projects", s.signin.cop.Handler(http.HandlerFunc(s.dashboardNewProject)))
	s.mux.Handle("POST /dashboard/graphql", s.public(s.dashboardGraphQL))
	s.mux.Handle("GET /dashboard/graphql", http.HandlerFunc(s.dashboardSocket))
	s.mux.Handle("GET /dashboard/projects/{project}/messages/{id}/attachments/{attachment}", s.public(s.dashboardAttachment))
}

// dashboardBoot is what the app starts with.
type dashboardBoot struct {
	Account  dashboardAccount         `json:"account"`
	Projects []account.ProjectSummary `json:"projects"`
	CSRF     string                   `json:"csrf"`
	SignOut  string                   `json:"signOut"`
	Version  string                   `json:"version"`
}

type dashboardAccount struct {
	ID     string `json:"id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Issuer string `json:"issuer"`
}

// dashboardPage is GET /dashboard: the sign-in page, the first project's
// form for an account without one, or the app.
func (s *Server) dashboardPage(w http.ResponseWriter, r *http.Request) {
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
	p.Brand, p.Next = "dashboard", dashboardPath
	if acct == nil {
		p.Title = "Sign in to the dashboard"
		s.render(w, r, http.StatusOK, "dashboard.html", p)
		return
	}
	projects, err := s.acct.Projects(r.Context(), acct.ID)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	if len(projects) == 0 {
		p.Title = "Your first project"
		s.render(w, r, http.StatusOK, "dashboard.html", p)
		return
	}
	boot := dashboardBoot{Account: dashboardAccount{ID: acct.ID, Email: acct.Email, Name: acct.Name, Issuer: acct.Issuer},
		Projects: projects, CSRF: p.CSRF, SignOut: "/device/signout", Version: dashboardVersion}
	// json.Marshal escapes <, > and & (and U+2028/9), so the JSON cannot
	// end the script element it is put in.
	raw, err := json.Marshal(boot)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	var buf bytes.Buffer
	if err := dashboardShell.Execute(&buf, map[string]any{"BootJSON": template.JS(raw), "V": dashboardVersion}); err != nil {
		s.renderFailure(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", dashboardCSP)
	webasset.Write(w, r, http.StatusOK, buf.Bytes())
}

// serveAsset is GET /dashboard/assets/{name...}. The page links its files
// under the current version (/dashboard/assets/<version>/app.js), so the
// modules they import by relative URL carry it too: those are immutable.
// Any other version (a page from before an upgrade) gets today's file,
// revalidated by ETag, as does a name without a version.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	name, current := r.PathValue("name"), false
	if v, rest, ok := strings.Cut(name, "/"); ok && isAssetVersion(v) {
		name, current = rest, v == dashboardVersion
	}
	a, ok := dashboardAssets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	a.Serve(w, r, current)
}

// isAssetVersion reports whether s has the form of dashboardVersion.
func isAssetVersion(s string) bool {
	if len(s) != len(dashboardVersion) {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// dashboardNewProject is POST /dashboard/projects {name, csrf}.
func (s *Server) dashboardNewProject(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.postForm(w, r)
	if !ok {
		return
	}
	acct, err := s.sessionAccount(r.Context(), sess)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	if acct == nil {
		http.Redirect(w, r, dashboardPath, http.StatusSeeOther)
		return
	}
	pr, err := s.acct.CreateProject(r.Context(), acct.ID, r.PostForm.Get("name"))
	var fe *fault.Error
	if errors.As(err, &fe) {
		p := s.newPage(r, sess, acct)
		p.Brand, p.Next, p.Title, p.Error = "dashboard", dashboardPath, "Your first project", fe.Message
		s.render(w, r, http.StatusBadRequest, "dashboard.html", p)
		return
	}
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	s.logger.Info("dashboard: project created", "account", acct.ID, "project", pr.ID)
	http.Redirect(w, r, dashboardPath+"#/p/"+url.PathEscape(pr.ID)+"/overview", http.StatusSeeOther)
}

// dashboardPrincipal authorises a dashboard request for project: the
// session cookie of a signed-in person whose account owns the project,
// and, unless the request only reads (a download), the session's CSRF
// token. The principal's credential is the browser session.
func (s *Server) dashboardPrincipal(r *http.Request, project, csrf string, reading bool) (*messaging.Principal, error) {
	sess, ok := s.signin.readSession(r)
	if !ok || sess.Account == "" {
		return nil, fault.Unauthenticated("not signed in: open /dashboard and sign in")
	}
	if !reading && !s.signin.checkCSRF(sess, csrf) {
		return nil, fault.Forbidden("missing or wrong CSRF token (X-CSRF-Token): reload the dashboard")
	}
	id, acct, err := s.acct.WebSession(r.Context(), sess.hash())
	if err != nil {
		return nil, err
	}
	if acct == "" || acct != sess.Account {
		return nil, fault.Unauthenticated("your session ended (signed out or expired): sign in again at /dashboard")
	}
	if project == "" {
		return nil, fault.Invalid("X-Comm-Project", "required: the id of the project to act for")
	}
	owns, err := s.acct.Owns(r.Context(), acct, project)
	if err != nil {
		return nil, err
	}
	if !owns {
		return nil, fault.Forbidden("project %q is not a project of your account", project)
	}
	return &messaging.Principal{ProjectID: project, KeyID: id, Kind: messaging.KindSignedIn}, nil
}

// dashboardGraphQL is POST /dashboard/graphql.
func (s *Server) dashboardGraphQL(w http.ResponseWriter, r *http.Request) error {
	if err := s.signin.cop.Check(r); err != nil {
		return fault.Forbidden("cross-origin request refused: the dashboard's API answers only the dashboard's own pages")
	}
	p, err := s.dashboardPrincipal(r, r.Header.Get("X-Comm-Project"), r.Header.Get("X-CSRF-Token"), false)
	if err != nil {
		return err
	}
	r.Header.Del("Authorization")
	noteProject(r.Context(), p.ProjectID)
	return s.graphql(w, r.WithContext(messaging.WithPrincipal(r.Context(), p)))
}

// dashboardSocket is GET /dashboard/graphql: the GraphQL websocket of
// the dashboard. Only the gateway's own pages may open it (Origin), and
// connection_init names the project and carries the CSRF token.
func (s *Server) dashboardSocket(w http.ResponseWriter, r *http.Request) {
	if !live.IsUpgrade(r) {
		s.writeError(w, r, fault.MethodNotAllowed("GET /dashboard/graphql is the dashboard's websocket; send queries with POST"))
		return
	}
	if !s.ownOrigin(r) {
		s.writeError(w, r, fault.Forbidden("websocket from another origin refused: the dashboard's socket answers only the dashboard's own pages"))
		return
	}
	// The socket outlives the upgrade request (its context ends when the
	// handler returns): the session is checked under the socket's context.
	s.live.ServeWith(w, r, func(ctx context.Context, payload json.RawMessage) (*messaging.Principal, error) {
		var in struct {
			Project string `json:"project"`
			CSRF    string `json:"csrf"`
		}
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, errors.New(`connection_init payload must be {"project": ..., "csrf": ...}`)
		}
		p, err := s.dashboardPrincipal(r.WithContext(ctx), in.Project, in.CSRF, false)
		var fe *fault.Error
		if errors.As(err, &fe) {
			return nil, errors.New(fe.Message)
		}
		return p, err
	})
}

// ownOrigin reports whether a browser request comes from the gateway's
// own origin: its public base URL, or the host it was sent to. A request
// without Origin is not a browser's websocket and is refused too.
func (s *Server) ownOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if origin == "" || err != nil || u.Host == "" {
		return false
	}
	if base, err := url.Parse(s.baseURL); err == nil && strings.EqualFold(u.Scheme+"://"+u.Host, base.Scheme+"://"+base.Host) {
		return true
	}
	return strings.EqualFold(u.Host, r.Host)
}

// dashboardAttachment is an attachment's download for the dashboard,
// authorised by the session alone: a link cannot carry the CSRF header,
// and a download changes nothing (another site may send the browser to
// it, but cannot read it).
func (s *Server) dashboardAttachment(w http.ResponseWriter, r *http.Request) error {
	p, err := s.dashboardPrincipal(r, r.PathValue("project"), "", true)
	if err != nil {
		return err
	}
	noteProject(r.Context(), p.ProjectID)
	return s.getAttachment(w, r.WithContext(messaging.WithPrincipal(r.Context(), p)))
}

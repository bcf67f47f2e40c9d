package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ratelimit"
)

// Sign-in on the /device page (docs/security.md, "Device sign-in"): a
// person signs in with OpenID Connect, or, when no identity provider is
// configured, with the local operator password or token on a loopback
// listener. A signed-in browser holds a session cookie: an HMAC-signed
// {session id, account id, expiry}. Every POST is checked twice against
// cross-site requests: net/http's CrossOriginProtection, and a
// synchronizer token (the csrf form field) that is an HMAC of the session
// id. Anonymous visitors get a session too, so the local sign-in form is
// protected the same way.

// SignInOptions configure sign-in on the /device page.
type SignInOptions struct {
	// OIDCIssuer, when set, signs people in with OpenID Connect at this
	// issuer (discovery happens on first use, so the gateway starts even
	// when the provider is down). OIDCClientID is required with it; the
	// redirect URL is BaseURL + "/device/callback".
	OIDCIssuer, OIDCClientID, OIDCClientSecret string
	// LocalPassword and LocalToken are the secrets the local operator
	// sign-in accepts (either one); it is offered only without an OIDC
	// issuer, and only when LoopbackListener or LocalAllowRemote.
	LocalPassword, LocalToken string
	// LoopbackListener says the HTTP listener is on a loopback address.
	LoopbackListener bool
	// LocalAllowRemote offers the local sign-in on any listener.
	LocalAllowRemote bool
	// CookieKey signs the session and sign-in cookies (HMAC-SHA256).
	// Random per process when empty: sessions then do not survive a
	// restart nor span replicas.
	CookieKey []byte
	// HTTPClient talks to the identity provider (a 15 s timeout if nil).
	HTTPClient *http.Client
	// WrongCodes is how many unknown codes a client IP, and a signed-in
	// account, may enter per 15 minutes (default 10); LocalAttempts how
	// many local sign-ins a client IP may try per 15 minutes (default 10).
	WrongCodes, LocalAttempts int
}

// Sign-in modes of the page.
const (
	modeNone  = ""
	modeOIDC  = "oidc"
	modeLocal = "local"
)

const (
	sessionCookie   = "comm_session"
	oidcStateCookie = "comm_oidc"
	// The session is the /device page's and the dashboard's.
	cookiePath      = "/"
	sessionLifetime = 12 * time.Hour
	oidcStateLife   = 10 * time.Minute
	limitWindow     = 15 * time.Minute
	maxFormBytes    = 16 << 10
)

// LocalIssuer is the issuer of accounts made by the local sign-in.
const LocalIssuer = "local"

// signIn is the state of the /device htmlPages.
type signIn struct {
	opts    SignInOptions
	mode    string
	baseURL string
	secure  bool
	logger  *slog.Logger

	sessionKey, csrfKey, stateKey []byte

	codeLimit  *ratelimit.Bucket // wrong codes, per "ip:" and "acct:" key
	localLimit *ratelimit.Bucket // local sign-in attempts per IP
	cop        *http.CrossOriginProtection

	oidc *oidcClient
}

func newSignIn(opts SignInOptions, baseURL string, logger *slog.Logger) *signIn {
	if len(opts.CookieKey) == 0 {
		opts.CookieKey = make([]byte, 32)
		rand.Read(opts.CookieKey)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if opts.WrongCodes <= 0 {
		opts.WrongCodes = 10
	}
	if opts.LocalAttempts <= 0 {
		opts.LocalAttempts = 10
	}
	si := &signIn{opts: opts, baseURL: baseURL, secure: strings.HasPrefix(baseURL, "https://"), logger: logger,
		sessionKey: subKey(opts.CookieKey, "session"), csrfKey: subKey(opts.CookieKey, "csrf"),
		stateKey:   subKey(opts.CookieKey, "oidc-state"),
		codeLimit:  ratelimit.New(opts.WrongCodes, limitWindow, opts.WrongCodes),
		localLimit: ratelimit.New(opts.LocalAttempts, limitWindow, opts.LocalAttempts),
		cop:        http.NewCrossOriginProtection()}
	switch {
	case opts.OIDCIssuer != "":
		si.mode = modeOIDC
		si.oidc = &oidcClient{issuer: opts.OIDCIssuer, redirectURL: baseURL + "/device/callback",
			clientID: opts.OIDCClientID, clientSecret: opts.OIDCClientSecret, client: opts.HTTPClient}
	case (opts.LoopbackListener || opts.LocalAllowRemote) && (opts.LocalPassword != "" || opts.LocalToken != ""):
		si.mode = modeLocal
	}
	if u, err := url.Parse(baseURL); err == nil && u.Scheme != "" && u.Host != "" {
		// Behind a proxy that rewrites Host, the public origin still counts.
		_ = si.cop.AddTrustedOrigin(u.Scheme + "://" + u.Host)
	}
	return si
}

// subKey derives a key for one purpose from the cookie key.
func subKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("comm device sign-in: " + purpose))
	return m.Sum(nil)
}

func hmacOf(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

var cookieB64 = base64.RawURLEncoding

// signValue encodes v as base64url(JSON) "." base64url(HMAC).
func signValue(key []byte, name string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	payload := cookieB64.EncodeToString(raw)
	return payload + "." + cookieB64.EncodeToString(hmacOf(key, name, payload)), nil
}

// openValue checks the signature of a value made by signValue and decodes
// it into v.
func openValue(key []byte, name, value string, v any) bool {
	payload, sig, ok := strings.Cut(value, ".")
	if !ok {
		return false
	}
	got, err := cookieB64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, hmacOf(key, name, payload)) {
		return false
	}
	raw, err := cookieB64.DecodeString(payload)
	return err == nil && json.Unmarshal(raw, v) == nil
}

// webSession is the content of the session cookie.
type webSession struct {
	ID      string `json:"sid"`
	Account string `json:"acct,omitempty"`
	Expires int64  `json:"exp"`
}

func (si *signIn) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: cookiePath, MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: si.secure, SameSite: http.SameSiteLaxMode}
}

// readSession returns the valid session of the request, if any. A
// browser may send two session cookies (one from before the cookie's path
// became "/", at "/device", first): the first valid one counts.
func (si *signIn) readSession(r *http.Request) (*webSession, bool) {
	for _, c := range r.CookiesNamed(sessionCookie) {
		var s webSession
		if openValue(si.sessionKey, sessionCookie, c.Value, &s) && s.ID != "" && time.Now().Unix() < s.Expires {
			return &s, true
		}
	}
	return nil, false
}

// legacyCookiePath is where the session cookie lived before the dashboard
// shared it; setSession expires a cookie left there, which would
// otherwise shadow the new one on /device.
const legacyCookiePath = "/device"

// setSession starts a new session (a new id: signing in never keeps the
// id an anonymous visitor had) for account ("" for an anonymous one).
//
// A signed-in session is recorded in the database (the cookie alone does
// not make it valid), so that signing out ends it everywhere.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, account string) (*webSession, error) {
	si := s.signin
	ws := &webSession{ID: rand.Text(), Account: account, Expires: time.Now().Add(sessionLifetime).Unix()}
	v, err := signValue(si.sessionKey, sessionCookie, ws)
	if err != nil {
		return nil, err
	}
	if account != "" {
		if err := s.acct.StartWebSession(r.Context(), account, ws.hash(), time.Unix(ws.Expires, 0)); err != nil {
			return nil, err
		}
	}
	http.SetCookie(w, si.cookie(sessionCookie, v, sessionLifetime))
	if _, err := r.Cookie(sessionCookie); err == nil {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: legacyCookiePath, MaxAge: -1,
			HttpOnly: true, Secure: si.secure, SameSite: http.SameSiteLaxMode})
	}
	return ws, nil
}

// hash is what the database knows of a session: the SHA-256 of its id.
func (ws *webSession) hash() []byte {
	h := sha256.Sum256([]byte("comm web session\x00" + ws.ID))
	return h[:]
}

// ensureSession returns the request's session, starting an anonymous one
// if it has none.
func (s *Server) ensureSession(w http.ResponseWriter, r *http.Request) (*webSession, error) {
	if ws, ok := s.signin.readSession(r); ok {
		return ws, nil
	}
	return s.setSession(w, r, "")
}

// csrfToken is the synchronizer token of a session.
func (si *signIn) csrfToken(s *webSession) string {
	return cookieB64.EncodeToString(hmacOf(si.csrfKey, s.ID))
}

// checkCSRF reports whether the form's csrf field belongs to the session.
func (si *signIn) checkCSRF(s *webSession, token string) bool {
	got, err := cookieB64.DecodeString(token)
	return err == nil && s != nil && hmac.Equal(got, hmacOf(si.csrfKey, s.ID))
}

// account returns the signed-in account of a session, or nil.
func (s *Server) sessionAccount(ctx context.Context, sess *webSession) (*account.Account, error) {
	if sess == nil || sess.Account == "" {
		return nil, nil
	}
	// The cookie is signed, but only the database says whether the
	// session is still signed in.
	acct, err := s.acct.WebSessionAccount(ctx, sess.hash())
	if err != nil {
		return nil, err
	}
	if acct != sess.Account {
		return nil, nil // signed out, expired, or never recorded
	}
	a, err := s.acct.AccountByID(ctx, sess.Account)
	if errors.Is(err, fault.ErrNotFound) {
		return nil, nil // the account is gone: signed out
	}
	return a, err
}

// oidcClient is the relying party, set up on first use.
type oidcClient struct {
	issuer, clientID, clientSecret, redirectURL string
	client                                      *http.Client

	mu       sync.Mutex
	config   *oauth2.Config
	verifier *oidc.IDTokenVerifier
	lastErr  error
	lastTry  time.Time
}

// setup runs discovery once it succeeds; a failure is remembered for a
// few seconds so a burst of visitors does not hammer a provider that is
// down.
func (c *oidcClient) setup(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config != nil {
		return c.config, c.verifier, nil
	}
	if c.clientID == "" {
		return nil, nil, errors.New("no OIDC client id is configured (--oidc-client-id)")
	}
	if c.lastErr != nil && time.Since(c.lastTry) < 5*time.Second {
		return nil, nil, c.lastErr
	}
	c.lastTry = time.Now()
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), c.client), 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, c.issuer)
	if err != nil {
		c.lastErr = fmt.Errorf("discovery at %s failed: %w", c.issuer, err)
		return nil, nil, c.lastErr
	}
	c.lastErr = nil
	c.config = &oauth2.Config{ClientID: c.clientID, ClientSecret: c.clientSecret, Endpoint: p.Endpoint(),
		RedirectURL: c.redirectURL, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
	c.verifier = p.Verifier(&oidc.Config{ClientID: c.clientID})
	return c.config, c.verifier, nil
}

// oidcState is the content of the short-lived cookie that carries a
// sign-in from /device/signin to /device/callback.
type oidcState struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Code     string `json:"code,omitempty"`
	Next     string `json:"next,omitempty"`
	Expires  int64  `json:"exp"`
}

// dashboardPath is the dashboard's page, the one other page sign-in goes
// back to (a "next" parameter that names it).
const dashboardPath = "/dashboard"

// returnTo is the page to go back to after signing in: the dashboard
// when next names it, else the /device page (with the code, if valid).
// No other next is followed: it would be an open redirect.
func returnTo(code string, next ...string) string {
	if len(next) > 0 && next[0] == dashboardPath {
		return dashboardPath
	}
	if norm, err := account.NormalizeUserCode(code); err == nil {
		return "/device?code=" + url.QueryEscape(account.FormatUserCode(norm))
	}
	return "/device"
}

// oidcSignIn is GET /device/signin?code=...: it sends the browser to the
// identity provider.
func (s *Server) oidcSignIn(w http.ResponseWriter, r *http.Request) {
	si := s.signin
	if si.mode != modeOIDC {
		s.renderMessage(w, r, http.StatusNotFound, "Sign-in", "Sign-in with an identity provider is not configured on this gateway.", returnTo(r.URL.Query().Get("code")))
		return
	}
	cfg, _, err := si.oidc.setup(r.Context())
	if err != nil {
		s.logger.Warn("device sign-in: identity provider unavailable", "issuer", si.opts.OIDCIssuer, "err", err)
		s.renderMessage(w, r, http.StatusServiceUnavailable, "Identity provider unavailable",
			"The identity provider of this gateway ("+si.opts.OIDCIssuer+") cannot be reached right now, so signing in is not possible. Try again in a minute; if it persists, tell the operator of this gateway. ("+err.Error()+")",
			returnTo(r.URL.Query().Get("code")))
		return
	}
	st := oidcState{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(),
		Expires: time.Now().Add(oidcStateLife).Unix()}
	if norm, err := account.NormalizeUserCode(r.URL.Query().Get("code")); err == nil {
		st.Code = account.FormatUserCode(norm)
	}
	if r.URL.Query().Get("next") == dashboardPath {
		st.Next = dashboardPath
	}
	v, err := signValue(si.stateKey, oidcStateCookie, st)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	http.SetCookie(w, si.cookie(oidcStateCookie, v, oidcStateLife))
	http.Redirect(w, r, cfg.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), http.StatusFound)
}

// oidcCallback is GET /device/callback: the provider sends the browser
// back with a code, which is exchanged (with the PKCE verifier) for an ID
// token; its signature, audience, expiry and nonce are checked, and the
// account of its issuer and subject is signed in.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	si := s.signin
	if si.mode != modeOIDC {
		s.renderMessage(w, r, http.StatusNotFound, "Sign-in", "Sign-in with an identity provider is not configured on this gateway.", "/device")
		return
	}
	var st oidcState
	c, err := r.Cookie(oidcStateCookie)
	if err != nil || !openValue(si.stateKey, oidcStateCookie, c.Value, &st) || time.Now().Unix() >= st.Expires {
		s.renderMessage(w, r, http.StatusBadRequest, "Sign-in expired",
			"This sign-in took too long or was started in another browser. Start again from the sign-in page.", "/device")
		return
	}
	// The state is used once.
	http.SetCookie(w, si.cookie(oidcStateCookie, "", -1))
	back := returnTo(st.Code, st.Next)
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		s.renderMessage(w, r, http.StatusBadRequest, "Sign-in failed",
			"The answer of the identity provider does not belong to the sign-in this browser started. Start again.", back)
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "The identity provider did not sign you in (" + e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		s.renderMessage(w, r, http.StatusUnauthorized, "Sign-in failed", msg+").", back)
		return
	}
	cfg, verifier, err := si.oidc.setup(r.Context())
	if err != nil {
		s.renderMessage(w, r, http.StatusServiceUnavailable, "Identity provider unavailable",
			"The identity provider of this gateway cannot be reached right now. Try again in a minute. ("+err.Error()+")", back)
		return
	}
	ctx := oidc.ClientContext(r.Context(), si.opts.HTTPClient)
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		s.logger.Warn("device sign-in: code exchange failed", "issuer", si.opts.OIDCIssuer, "err", err)
		s.renderMessage(w, r, http.StatusBadGateway, "Sign-in failed",
			"The identity provider did not accept the sign-in. Start again.", back)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		s.renderMessage(w, r, http.StatusBadGateway, "Sign-in failed", "The identity provider sent no ID token. Start again.", back)
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		if err == nil {
			err = errors.New("nonce mismatch")
		}
		s.logger.Warn("device sign-in: ID token refused", "issuer", si.opts.OIDCIssuer, "err", err)
		s.renderMessage(w, r, http.StatusUnauthorized, "Sign-in failed", "The ID token of the identity provider was not valid. Start again.", back)
		return
	}
	var claims struct {
		Email             string `json:"email"`
		Name              string `json:"name"`
		PreferredUsername string `json:"preferred_username"`
	}
	if err := idt.Claims(&claims); err != nil {
		s.renderFailure(w, r, err)
		return
	}
	name := claims.Name
	if name == "" {
		name = claims.PreferredUsername
	}
	s.finishSignIn(w, r, account.Identity{Issuer: idt.Issuer, Subject: idt.Subject, Email: claims.Email, Name: name}, back)
}

// finishSignIn records the sign-in, starts a signed-in session and goes
// back to the page.
func (s *Server) finishSignIn(w http.ResponseWriter, r *http.Request, id account.Identity, back string) {
	a, err := s.acct.SignIn(r.Context(), id)
	if err != nil {
		s.renderFailure(w, r, err)
		return
	}
	if _, err := s.setSession(w, r, a.ID); err != nil {
		s.renderFailure(w, r, err)
		return
	}
	s.logger.Info("device sign-in: signed in", "account", a.ID, "issuer", a.Issuer, "new", a.New, "ip", s.clientIP(r))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// sameSecret compares a secret in constant time (hashes first, so the
// length is not revealed either).
func sameSecret(given, want string) bool {
	if want == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// localSignIn is POST /device/signin/local {password, code, csrf}.
func (s *Server) localSignIn(w http.ResponseWriter, r *http.Request) {
	si := s.signin
	if si.mode != modeLocal {
		msg := notConfigured
		if si.mode == modeOIDC {
			msg = "This gateway signs people in with its identity provider; the local operator sign-in is off."
		}
		s.renderMessage(w, r, http.StatusForbidden, "Local sign-in not available", msg, "/device")
		return
	}
	if !si.opts.LocalAllowRemote && !fromLoopback(r) {
		// The listener is on loopback, but a reverse proxy on this machine
		// may be forwarding someone else's request.
		s.logger.Warn("device sign-in: local sign-in refused to a remote client", "peer", r.RemoteAddr,
			"x_forwarded_for", r.Header.Values("X-Forwarded-For"), "forwarded", r.Header.Values("Forwarded"))
		s.renderMessage(w, r, http.StatusForbidden, "Local sign-in not available",
			"The local operator sign-in works only from the machine the gateway runs on, not through a proxy. Sign in on that machine, or ask the operator to configure an identity provider (--oidc-issuer).", "/device")
		return
	}
	sess, ok := s.postForm(w, r)
	if !ok {
		return
	}
	code := r.PostForm.Get("code")
	back := returnTo(code, r.PostForm.Get("next"))
	if ok, wait := si.localLimit.Allow(limitKey(s.clientIP(r))); !ok {
		s.renderLimited(w, r, wait, "Too many sign-in attempts from your address.")
		return
	}
	pw := r.PostForm.Get("password")
	// Both comparisons run, so timing does not tell which secret is set.
	byPassword, byToken := sameSecret(pw, si.opts.LocalPassword), sameSecret(pw, si.opts.LocalToken)
	if !byPassword && !byToken {
		s.logger.Warn("device sign-in: wrong local password", "ip", s.clientIP(r))
		p := s.newPage(r, sess, nil)
		p.Title, p.Error = "Sign in", "Wrong password or token."
		if norm, err := account.NormalizeUserCode(code); err == nil {
			p.Code = account.FormatUserCode(norm)
		}
		if back == dashboardPath {
			p.Title, p.Brand = "Sign in to the dashboard", "dashboard"
			s.render(w, r, http.StatusUnauthorized, "dashboard.html", p)
			return
		}
		s.render(w, r, http.StatusUnauthorized, "signin.html", p)
		return
	}
	s.finishSignIn(w, r, account.Identity{Issuer: LocalIssuer, Subject: "operator", Name: "Local operator"}, back)
}

// signOut is POST /device/signout {csrf}.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.postForm(w, r)
	if !ok {
		return
	}
	if sess.Account != "" {
		if err := s.acct.EndWebSession(r.Context(), sess.hash()); err != nil {
			s.renderFailure(w, r, err)
			return
		}
		s.logger.Info("device sign-in: signed out", "account", sess.Account, "ip", s.clientIP(r))
	}
	if _, err := s.setSession(w, r, ""); err != nil {
		s.renderFailure(w, r, err)
		return
	}
	http.Redirect(w, r, returnTo(r.PostForm.Get("code"), r.PostForm.Get("next")), http.StatusSeeOther)
}

// postForm reads a POSTed form and checks its csrf field against the
// session; on failure it has answered.
func (s *Server) postForm(w http.ResponseWriter, r *http.Request) (*webSession, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.renderMessage(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.", "/device")
		return nil, false
	}
	sess, ok := s.signin.readSession(r)
	if !ok || !s.signin.checkCSRF(sess, r.PostForm.Get("csrf")) {
		s.renderMessage(w, r, http.StatusForbidden, "Form expired",
			"This form did not come from this page, or your session ended. Nothing was changed. Open the sign-in page again and retry.",
			returnTo(r.PostForm.Get("code")))
		return nil, false
	}
	return sess, true
}

const notConfigured = "Sign-in is not configured on this gateway: the operator sets an identity provider (--oidc-issuer), or uses the local operator sign-in, which works only when the gateway listens on a loopback address (or with --local-signin-allow-remote)."

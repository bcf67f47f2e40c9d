// Package metatest is a fake Meta Graph API for tests and benchmarks: an
// httptest server speaking the parts the facebook and instagram channels
// use (the Facebook Login dialog simulated by Authorize and Deny, the code
// exchange, /me/accounts with Page tokens and linked Instagram accounts,
// GET /{page}, /{page}/subscribed_apps, the Send API /{id}/messages with
// Meta's error codes, attachment files on a CDN path), failure injection,
// and a webhook sender that batches entries, signs them with
// X-Hub-Signature-256 and retries as Meta does.
//
// It does not import testing. Everything it records is bounded.
package metatest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits on what the fake keeps.
const (
	MaxRecorded = 10000    // messages and typings kept per Page (the oldest go)
	MaxFiles    = 100      // CDN files
	MaxFileSize = 32 << 20 // bytes of one file
	maxBody     = 1 << 20  // a request body read
)

// Version is the Graph API version the fake serves.
const Version = "v23.0"

// Default credentials of the fake's app.
const (
	AppID       = "1234567890123456"
	AppSecret   = "fakeappsecret0123456789abcdef012"
	VerifyToken = "fake-verify-token"
)

// Server is a fake Meta. Its Graph API is APIURL (URL + "/v23.0"), its
// login dialog DialogURL (never fetched: use Authorize).
type Server struct {
	URL, APIURL, DialogURL string
	// AppID, AppSecret and VerifyToken are the operator app's
	// credentials the code exchange accepts and webhooks are signed with.
	AppID, AppSecret, VerifyToken string

	srv  *httptest.Server
	done chan struct{}
	stop sync.Once

	mu     sync.Mutex
	users  map[string]*User // by user token
	pages  map[string]*Page // by Page id
	tokens map[string]token // Page tokens
	codes  map[string]grant
	files  map[string]file
	order  []string // file ids, oldest first
	seq    int64
	calls  map[string]int // "METHOD /path-kind" -> count
	sentN  int64
	sentCh chan struct{}
}

type token struct {
	page   *Page
	secret string // the app secret its appsecret_proof is made with
}

type grant struct {
	user        *User
	redirectURI string
}

type file struct {
	contentType string
	data        []byte
}

// User is a person who logs in with the app and manages Pages.
type User struct {
	ID, Name, Token string
	s               *Server
	pages           []*Page
}

// Page is a Facebook Page, optionally with a linked Instagram
// professional account.
type Page struct {
	ID, Name string
	// Token and AppSecret are the Page's token of its owner's own app
	// and that app's secret (bring your own).
	Token, AppSecret string
	// OperatorToken is the Page token the operator's app gets at login.
	OperatorToken string
	// IGID and IGUsername are the linked Instagram account (empty when
	// none).
	IGID, IGUsername string
	s                *Server

	// guarded by s.mu
	revoked    bool
	subscribed []string
	sent       []SentMessage
	typings    []Typing
	fail       []Failure
	closed     map[string]bool // persons outside the 24-hour window
	instagram  map[string]bool // persons who are Instagram users
}

// SentMessage is a Send API call the fake accepted.
type SentMessage struct {
	// Path is the id in the URL (/{id}/messages).
	Path, Recipient, Text, MessagingType, MID string
	// Tag is the message tag (HUMAN_AGENT) of a MESSAGE_TAG send.
	Tag       string
	Instagram bool
	// At is when the fake took it: Meta's timestamp of the message, which
	// delivery and read watermarks name.
	At time.Time
}

// Typing is a sender action.
type Typing struct {
	Recipient, Action string
}

// Failure is how the next Send API call of a Page fails.
type Failure struct {
	Status        int // HTTP status; 400 when 0
	Code, Subcode int
	Type, Message string
	// RegainMinutes, when not 0, is sent in X-Business-Use-Case-Usage
	// as estimated_time_to_regain_access.
	RegainMinutes int
	// Hang holds the request until the caller gives up.
	Hang bool
}

// Failures Meta answers.
var (
	Unavailable   = Failure{Status: 500, Code: 2, Type: "OAuthException", Message: "An unexpected error has occurred. Please retry your request later."}
	Hang          = Failure{Hang: true}
	OutsideWindow = Failure{Code: 10, Subcode: 2018278, Type: "OAuthException", Message: "(#10) This message is sent outside of allowed window."}
	NotAvailable  = Failure{Code: 551, Subcode: 1545041, Type: "OAuthException", Message: "(#551) This person isn't available right now."}
	NoSuchUser    = Failure{Code: 100, Subcode: 2018001, Type: "OAuthException", Message: "(#100) No matching user found"}
	TokenExpired  = Failure{Code: 190, Subcode: 463, Type: "OAuthException", Message: "Error validating access token: Session has expired."}
)

// RateLimited is Meta's rate limit code (4, 17, 32, 613, 130429) sent
// with HTTP 400, with regain minutes in X-Business-Use-Case-Usage when
// not 0.
func RateLimited(code, regainMinutes int) Failure {
	return Failure{Code: code, Type: "OAuthException", Message: fmt.Sprintf("(#%d) Rate limit reached", code), RegainMinutes: regainMinutes}
}

// NewServer starts a fake Meta; Close it.
func NewServer() *Server {
	s := &Server{AppID: AppID, AppSecret: AppSecret, VerifyToken: VerifyToken, done: make(chan struct{}),
		users: map[string]*User{}, pages: map[string]*Page{}, tokens: map[string]token{}, codes: map[string]grant{},
		files: map[string]file{}, calls: map[string]int{}, sentCh: make(chan struct{})}
	mux := http.NewServeMux()
	p := "/" + Version
	mux.HandleFunc("GET "+p+"/oauth/access_token", s.accessToken)
	mux.HandleFunc("GET "+p+"/me/accounts", s.accounts)
	mux.HandleFunc("GET "+p+"/{id}", s.node)
	mux.HandleFunc(p+"/{id}/subscribed_apps", s.subscribedApps)
	mux.HandleFunc("POST "+p+"/{id}/messages", s.messages)
	mux.HandleFunc("GET /cdn/{id}/{name}", s.serveFile)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + p
	s.DialogURL = s.srv.URL + "/" + Version + "/dialog/oauth"
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.stop.Do(func() { close(s.done) })
	s.srv.Close()
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// numericID is a Graph-style numeric id.
func numericID() string {
	b := make([]byte, 7)
	_, _ = rand.Read(b)
	n := uint64(0)
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return strconv.FormatUint(100000000000000+n%899999999999999, 10)
}

// NewUser makes a person who can log in.
func (s *Server) NewUser(name string) *User {
	u := &User{ID: numericID(), Name: name, Token: "EAAU" + randomID(24), s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.Token] = u
	return u
}

// NewPage makes a Page the user manages.
func (u *User) NewPage(name string) *Page {
	s := u.s
	p := &Page{ID: numericID(), Name: name, Token: "EAAP" + randomID(24), AppSecret: randomID(16),
		OperatorToken: "EAAO" + randomID(24), s: s, closed: map[string]bool{}, instagram: map[string]bool{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.pages = append(u.pages, p)
	s.pages[p.ID] = p
	s.tokens[p.Token] = token{page: p, secret: p.AppSecret}
	s.tokens[p.OperatorToken] = token{page: p, secret: s.AppSecret}
	return p
}

// LinkInstagram links an Instagram professional account to the Page and
// returns its id.
func (p *Page) LinkInstagram(username string) string {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.IGID, p.IGUsername = numericID(), username
	return p.IGID
}

// Person returns a new page-scoped (or Instagram-scoped) id of someone
// who writes to the Page.
func (p *Page) Person(instagram bool) string {
	id := numericID()
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if instagram {
		p.instagram[id] = true
	}
	return id
}

// CloseWindow puts person outside the 24-hour window: sends to them fail
// with code 10 / 2018278.
func (p *Page) CloseWindow(person string) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.closed[person] = true
}

// Revoke expires the Page's tokens: calls answer code 190.
func (p *Page) Revoke() {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.revoked = true
}

// FailNext makes the next Send API call for the Page fail as f.
func (p *Page) FailNext(f Failure) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if len(p.fail) < 100 {
		p.fail = append(p.fail, f)
	}
}

// Subscribed returns the webhook fields the app is subscribed to on the
// Page (nil when it is not).
func (p *Page) Subscribed() []string {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return append([]string(nil), p.subscribed...)
}

// Sent returns the messages the Page sent, oldest first.
func (p *Page) Sent() []SentMessage {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return append([]SentMessage(nil), p.sent...)
}

// Typings returns the sender actions, oldest first.
func (p *Page) Typings() []Typing {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return append([]Typing(nil), p.typings...)
}

// SentTotal is how many messages every Page sent.
func (s *Server) SentTotal() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentN
}

// WaitSent waits until SentTotal reaches n.
func (s *Server) WaitSent(ctx context.Context, n int64) error {
	for {
		s.mu.Lock()
		got, ch := s.sentN, s.sentCh
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Calls is how many requests of kind ("POST messages", "POST
// subscribed_apps", "GET accounts", "GET access_token" ...) the fake took.
func (s *Server) Calls(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[kind]
}

func (s *Server) count(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[kind]++
}

// AddFile serves data at a CDN URL (no token needed, as Meta's signed
// attachment URLs) and returns it. Beyond MaxFiles the oldest is
// forgotten.
func (s *Server) AddFile(name, contentType string, data []byte) string {
	if len(data) > MaxFileSize {
		data = data[:MaxFileSize]
	}
	id := randomID(8)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) >= MaxFiles {
		delete(s.files, s.order[0])
		s.order = s.order[1:]
	}
	s.files[id] = file{contentType: contentType, data: bytes.Clone(data)}
	s.order = append(s.order, id)
	return s.URL + "/cdn/" + id + "/" + url.PathEscape(name)
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "URL signature expired", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	_, _ = w.Write(f.data)
}

// Authorize is the person at authorizeURL (as the adapter built it)
// logging in and granting the app their Pages: it checks client_id,
// redirect_uri, state and the permissions asked, and returns the
// redirect with a one-time code and the state.
func (s *Server) Authorize(authorizeURL string, u *User) (string, error) {
	q, redirect, err := s.dialogParams(authorizeURL)
	if err != nil {
		return "", err
	}
	code := "AQ" + randomID(24)
	s.mu.Lock()
	s.codes[code] = grant{user: u, redirectURI: q.Get("redirect_uri")}
	s.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	redirect.Fragment = "_=_" // Facebook appends it
	return redirect.String(), nil
}

// Deny is the person cancelling the login: the redirect carries
// error=access_denied (error_reason=user_denied) and the state.
func (s *Server) Deny(authorizeURL string) (string, error) {
	q, redirect, err := s.dialogParams(authorizeURL)
	if err != nil {
		return "", err
	}
	v := redirect.Query()
	v.Set("error", "access_denied")
	v.Set("error_code", "200")
	v.Set("error_description", "Permissions error")
	v.Set("error_reason", "user_denied")
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	return redirect.String(), nil
}

func (s *Server) dialogParams(authorizeURL string) (url.Values, *url.URL, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasPrefix(authorizeURL, s.DialogURL) {
		return nil, nil, fmt.Errorf("metatest: authorize: %q is not the login dialog %s", authorizeURL, s.DialogURL)
	}
	q := u.Query()
	if q.Get("client_id") != s.AppID {
		return nil, nil, fmt.Errorf("metatest: authorize: client_id %q is not the app's", q.Get("client_id"))
	}
	if q.Get("state") == "" || (q.Get("scope") == "" && q.Get("config_id") == "") {
		return nil, nil, errors.New("metatest: authorize: state and scope (or config_id) are required")
	}
	if sc := q.Get("scope"); sc != "" && !strings.Contains(sc, "pages_messaging") {
		return nil, nil, errors.New("metatest: authorize: the scope lacks pages_messaging")
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		return nil, nil, errors.New("metatest: authorize: redirect_uri is not an absolute URL")
	}
	return q, redirect, nil
}

// graphErr writes a Graph API error.
func graphErr(w http.ResponseWriter, status int, f Failure) {
	if status == 0 {
		status = http.StatusBadRequest
	}
	if f.Type == "" {
		f.Type = "OAuthException"
	}
	if f.RegainMinutes > 0 {
		u, _ := json.Marshal(map[string]any{"1": []map[string]any{{"type": "messenger", "call_count": 100, "total_cputime": 10, "total_time": 10, "estimated_time_to_regain_access": f.RegainMinutes}}})
		w.Header().Set("X-Business-Use-Case-Usage", string(u))
	}
	e := map[string]any{"message": f.Message, "type": f.Type, "code": f.Code, "fbtrace_id": "A" + randomID(8)}
	if f.Subcode != 0 {
		e["error_subcode"] = f.Subcode
	}
	answer(w, status, map[string]any{"error": e})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func badToken(w http.ResponseWriter) {
	graphErr(w, http.StatusBadRequest, Failure{Code: 190, Message: "Invalid OAuth access token - Cannot parse access token"})
}

// tokenOf is the request's access token.
func tokenOf(r *http.Request) string {
	if t := r.URL.Query().Get("access_token"); t != "" {
		return t
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// proofOK checks appsecret_proof when present; the operator app requires
// it.
func proofOK(r *http.Request, tok, secret string, required bool) bool {
	got := r.URL.Query().Get("appsecret_proof")
	if got == "" {
		return !required
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(tok))
	return hmac.Equal([]byte(got), []byte(hex.EncodeToString(m.Sum(nil))))
}

// pageOf resolves a Page token; it writes the error when it fails.
func (s *Server) pageOf(w http.ResponseWriter, r *http.Request) (*Page, bool) {
	tok := tokenOf(r)
	s.mu.Lock()
	t, ok := s.tokens[tok]
	revoked := ok && t.page.revoked
	required := ok && t.secret == s.AppSecret
	s.mu.Unlock()
	switch {
	case !ok:
		badToken(w)
		return nil, false
	case revoked:
		graphErr(w, http.StatusBadRequest, TokenExpired)
		return nil, false
	case !proofOK(r, tok, t.secret, required):
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "Invalid appsecret_proof provided in the API argument"})
		return nil, false
	}
	return t.page, true
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	s.count("GET access_token")
	q := r.URL.Query()
	if q.Get("client_id") != s.AppID || q.Get("client_secret") != s.AppSecret {
		graphErr(w, http.StatusBadRequest, Failure{Code: 1, Message: "Error validating client secret."})
		return
	}
	s.mu.Lock()
	g, ok := s.codes[q.Get("code")]
	delete(s.codes, q.Get("code"))
	s.mu.Unlock()
	switch {
	case !ok:
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Subcode: 36009, Message: "This authorization code has been used."})
		return
	case g.redirectURI != q.Get("redirect_uri"):
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Subcode: 36008, Message: "Error validating verification code. Please make sure your redirect_uri is identical to the one you used in the OAuth dialog request"})
		return
	}
	answer(w, http.StatusOK, map[string]any{"access_token": g.user.Token, "token_type": "bearer", "expires_in": 5183944})
}

func (s *Server) accounts(w http.ResponseWriter, r *http.Request) {
	s.count("GET accounts")
	tok := tokenOf(r)
	s.mu.Lock()
	u, ok := s.users[tok]
	var data []map[string]any
	if ok {
		for _, p := range u.pages {
			m := map[string]any{"id": p.ID, "name": p.Name, "access_token": p.OperatorToken, "category": "Product/service",
				"tasks": []string{"ANALYZE", "ADVERTISE", "MESSAGING", "MODERATE", "CREATE_CONTENT", "MANAGE"}}
			if p.IGID != "" {
				m["instagram_business_account"] = map[string]string{"id": p.IGID, "username": p.IGUsername}
			}
			data = append(data, m)
		}
	}
	s.mu.Unlock()
	if !ok {
		badToken(w)
		return
	}
	if !proofOK(r, tok, s.AppSecret, true) {
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "Invalid appsecret_proof provided in the API argument"})
		return
	}
	answer(w, http.StatusOK, map[string]any{"data": data, "paging": map[string]any{"cursors": map[string]string{"before": "QVFI", "after": "QVFJ"}}})
}

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	s.count("GET node")
	p, ok := s.pageOf(w, r)
	if !ok {
		return
	}
	if r.PathValue("id") != p.ID && r.PathValue("id") != "me" {
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Subcode: 33, Type: "GraphMethodException",
			Message: fmt.Sprintf("Unsupported get request. Object with ID '%s' does not exist, cannot be loaded due to missing permissions, or does not support this operation.", r.PathValue("id"))})
		return
	}
	s.mu.Lock()
	m := map[string]any{"id": p.ID, "name": p.Name}
	if p.IGID != "" {
		m["instagram_business_account"] = map[string]string{"id": p.IGID, "username": p.IGUsername}
	}
	s.mu.Unlock()
	answer(w, http.StatusOK, m)
}

func (s *Server) subscribedApps(w http.ResponseWriter, r *http.Request) {
	s.count(r.Method + " subscribed_apps")
	p, ok := s.pageOf(w, r)
	if !ok {
		return
	}
	if r.PathValue("id") != p.ID {
		graphErr(w, http.StatusForbidden, Failure{Code: 210, Message: "(#210) A page access token is required to request this resource."})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		f := r.URL.Query().Get("subscribed_fields")
		if f == "" {
			graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) The parameter subscribed_fields is required"})
			return
		}
		p.subscribed = strings.Split(f, ",")
		answer(w, http.StatusOK, map[string]bool{"success": true})
	case http.MethodDelete:
		p.subscribed = nil
		answer(w, http.StatusOK, map[string]bool{"success": true})
	case http.MethodGet:
		var data []map[string]any
		if p.subscribed != nil {
			data = append(data, map[string]any{"id": AppID, "subscribed_fields": p.subscribed})
		}
		answer(w, http.StatusOK, map[string]any{"data": data})
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// sendBody is a Send API request.
type sendBody struct {
	Recipient struct {
		ID string `json:"id"`
	} `json:"recipient"`
	MessagingType string `json:"messaging_type"`
	Tag           string `json:"tag"`
	SenderAction  string `json:"sender_action"`
	Message       *struct {
		Text string `json:"text"`
	} `json:"message"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	s.count("POST messages")
	p, ok := s.pageOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if id != p.ID && id != "me" && (p.IGID == "" || id != p.IGID) {
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Subcode: 33, Message: "Unsupported post request."})
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var b sendBody
	if err != nil || len(raw) > maxBody || json.Unmarshal(raw, &b) != nil {
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) Invalid JSON"})
		return
	}
	s.mu.Lock()
	var f *Failure
	if len(p.fail) > 0 {
		f = &p.fail[0]
		p.fail = p.fail[1:]
	}
	closed := p.closed[b.Recipient.ID]
	ig := p.instagram[b.Recipient.ID] || id == p.IGID && p.IGID != ""
	s.mu.Unlock()
	if f != nil {
		if f.Hang {
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			return
		}
		graphErr(w, f.Status, *f)
		return
	}
	switch {
	case b.Recipient.ID == "":
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) The parameter recipient is required"})
		return
	case b.SenderAction != "" && b.Message != nil:
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) sender_action cannot be sent with a message"})
		return
	case b.SenderAction != "":
		s.mu.Lock()
		p.typings = keep(append(p.typings, Typing{Recipient: b.Recipient.ID, Action: b.SenderAction}))
		s.mu.Unlock()
		answer(w, http.StatusOK, map[string]string{"recipient_id": b.Recipient.ID})
		return
	case b.Message == nil || b.Message.Text == "":
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) The parameter message is required"})
		return
	case b.MessagingType == "":
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) The parameter messaging_type is required"})
		return
	case b.MessagingType == "MESSAGE_TAG" && b.Tag == "" || b.Tag != "" && b.MessagingType != "MESSAGE_TAG":
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) A tag goes with messaging_type MESSAGE_TAG"})
		return
	case closed && b.Tag == "":
		graphErr(w, http.StatusBadRequest, OutsideWindow)
		return
	case ig && len(b.Message.Text) > 1000:
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Subcode: 2534015, Message: "(#100) Message text must be less than 1000 characters"})
		return
	case utf8.RuneCountInString(b.Message.Text) > 2000:
		graphErr(w, http.StatusBadRequest, Failure{Code: 100, Message: "(#100) Param message[text] must be UTF-8 encoded with 2000 or fewer characters"})
		return
	}
	s.mu.Lock()
	s.seq++
	mid := fmt.Sprintf("m_%s%d", randomID(10), s.seq)
	p.sent = keep(append(p.sent, SentMessage{Path: id, Recipient: b.Recipient.ID, Text: b.Message.Text, MessagingType: b.MessagingType, MID: mid, Tag: b.Tag, Instagram: ig, At: time.Now()}))
	s.sentN++
	close(s.sentCh)
	s.sentCh = make(chan struct{})
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]string{"recipient_id": b.Recipient.ID, "message_id": mid})
}

// keep bounds a record to its last MaxRecorded entries.
func keep[T any](s []T) []T {
	if len(s) > MaxRecorded {
		return append(s[:0:0], s[len(s)-MaxRecorded:]...)
	}
	return s
}

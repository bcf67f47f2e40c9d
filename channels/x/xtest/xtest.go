// Package xtest is a fake X API for tests and benchmarks: an httptest
// server speaking the parts of the X API v2 the x channel uses. OAuth 2.0
// with PKCE (an authorize step that simulates the person approving, a
// token endpoint checking the client's Basic credentials and the
// verifier against the challenge the authorize step saw, refresh-token
// rotation, expiring access tokens and a switch to revoke a grant),
// GET /2/users/me, webhook registration (/2/webhooks, which performs a
// CRC GET against the URL and checks the answer), X Activity API
// subscriptions, the DM send endpoints, GET /2/dm_events, failure
// injection, and a sender of signed activity events.
//
// Facts the public docs leave open are marked [M] and easy to change:
// the error X answers for an encrypted (X Chat) peer, the status of a
// refused refresh token.
//
// It does not import testing. Everything it records is bounded.
package xtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels/x"
)

// Limits on what the fake keeps.
const (
	MaxRecorded = 1000    // DMs and events kept per user (the oldest go)
	maxBody     = 1 << 20 // a request body read
)

// Default credentials of the fake's app.
const (
	ClientID       = "ZmFrZWNsaWVudGlkOjE6Y2k"
	ClientSecret   = "fake-client-secret-0123456789abcdefghijklmnopqrstuvwx"
	ConsumerSecret = "fakeconsumersecret0123456789abcdefghijklmnopqrstuv"
	BearerToken    = "AAAAAAAAAAAAAAAAAAAAAfakebearer0123456789"
)

// Server is a fake X. Its API is at URL, its authorize page is
// AuthorizeURL (never fetched: use Authorize).
type Server struct {
	URL          string
	AuthorizeURL string
	// ClientID, ClientSecret, ConsumerSecret and BearerToken are the
	// app's credentials: the token endpoint takes the client's, the CRC
	// and event signatures use the consumer secret (and the client
	// secret for the OAuth 2.0 header), /2/webhooks the bearer token.
	ClientID, ClientSecret, ConsumerSecret, BearerToken string

	srv    *httptest.Server
	done   chan struct{}
	stop   sync.Once
	client *http.Client

	mu        sync.Mutex
	now       func() time.Time
	expiresIn int
	users     map[string]*User // by id
	access    map[string]grantToken
	refresh   map[string]*User
	codes     map[string]code
	webhooks  map[string]*Webhook
	subs      map[string]*Subscription
	seq       int64
	refreshed int
}

// grantToken is an issued access token.
type grantToken struct {
	user    *User
	expires time.Time
}

// code is an issued authorization code.
type code struct {
	user                   *User
	redirectURI, challenge string
}

// Webhook is a registered webhook.
type Webhook struct {
	ID, URL string
	Valid   bool
}

// Subscription is an X Activity API subscription.
type Subscription struct {
	ID, EventType, UserID, WebhookID, Tag string
}

// User is an X account.
type User struct {
	ID, Username string
	s            *Server

	// guarded by s.mu
	revoked bool
	events  []Event // DM events of the account, oldest first
	fail    map[string][]Failure
	chat    map[string]bool // peers reachable only by X Chat
}

// Event is a DM event of an account: one it received or sent.
type Event struct {
	ID, SenderID, RecipientID, ConversationID, Text string
	CreatedAt                                       time.Time
}

// Failure is how the next call of an endpoint fails.
type Failure struct {
	// Status is the HTTP status.
	Status int
	// Detail is X's problem detail.
	Detail string
	// Reset, when not 0, is the x-rate-limit-reset header, in seconds
	// from now.
	Reset int
	// Hang holds the request until the caller gives up.
	Hang bool
}

// Failures.
var (
	Unavailable  = Failure{Status: http.StatusServiceUnavailable, Detail: "Service Unavailable"}
	Hang         = Failure{Hang: true}
	Unauthorized = Failure{Status: http.StatusUnauthorized, Detail: "Unauthorized"}
	Forbidden    = Failure{Status: http.StatusForbidden, Detail: "You cannot send messages to this user."}
)

// RateLimited is a 429 whose x-rate-limit-reset is seconds from now.
func RateLimited(seconds int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Detail: "Too Many Requests", Reset: seconds}
}

// Endpoints FailNext takes.
const (
	EndpointSend     = "send"
	EndpointDMEvents = "dm_events"
	EndpointMe       = "me"
)

// NewServer starts a fake X; Close it.
func NewServer() *Server {
	s := &Server{ClientID: ClientID, ClientSecret: ClientSecret, ConsumerSecret: ConsumerSecret, BearerToken: BearerToken,
		done: make(chan struct{}), now: time.Now, expiresIn: 7200, client: &http.Client{Timeout: 5 * time.Second},
		users: map[string]*User{}, access: map[string]grantToken{}, refresh: map[string]*User{}, codes: map[string]code{},
		webhooks: map[string]*Webhook{}, subs: map[string]*Subscription{}, seq: 1900000000000000000}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2/oauth2/token", s.token)
	mux.HandleFunc("GET /2/users/me", s.me)
	mux.HandleFunc("GET /2/webhooks", s.listWebhooks)
	mux.HandleFunc("POST /2/webhooks", s.createWebhook)
	mux.HandleFunc("PUT /2/webhooks/{id}", s.validateWebhook)
	mux.HandleFunc("DELETE /2/webhooks/{id}", s.deleteWebhook)
	mux.HandleFunc("POST /2/activity/subscriptions", s.subscribe)
	mux.HandleFunc("DELETE /2/activity/subscriptions/{id}", s.unsubscribe)
	mux.HandleFunc("POST /2/dm_conversations/with/{participant}/messages", s.sendWith)
	mux.HandleFunc("POST /2/dm_conversations/{conversation}/messages", s.sendTo)
	mux.HandleFunc("GET /2/dm_events", s.dmEvents)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.AuthorizeURL = s.srv.URL + "/i/oauth2/authorize"
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.stop.Do(func() { close(s.done) })
	s.srv.Close()
}

// SetExpiresIn sets the lifetime of the access tokens issued from now on
// (7200 s by default, as X's).
func (s *Server) SetExpiresIn(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiresIn = seconds
}

// Refreshed is how many refresh grants the token endpoint honoured.
func (s *Server) Refreshed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshed
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nextID is a fresh snowflake-like id, increasing.
func (s *Server) nextID() string {
	s.seq++
	return strconv.FormatInt(s.seq, 10)
}

// NewUser makes an account.
func (s *Server) NewUser(username string) *User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &User{ID: strconv.FormatInt(1000000000+int64(len(s.users))*7919+1, 10), Username: username, s: s,
		fail: map[string][]Failure{}, chat: map[string]bool{}}
	s.users[u.ID] = u
	return u
}

// Tokens issues an access and refresh token for u directly (a grant made
// earlier), expiring as SetExpiresIn says.
func (s *Server) Tokens(u *User) (access, refresh string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issue(u)
}

// issue makes tokens for u; s.mu held.
func (s *Server) issue(u *User) (string, string, time.Time) {
	access, refresh := "at-"+random(16), "rt-"+random(16)
	exp := s.now().Add(time.Duration(s.expiresIn) * time.Second)
	s.access[access] = grantToken{user: u, expires: exp}
	s.refresh[refresh] = u
	return access, refresh, exp
}

// Authorize is the person at authorizeURL (as the adapter built it)
// approving the app for u: it checks response_type, client_id, scope,
// redirect_uri and the S256 code challenge, and returns the redirect with
// a one-time code and the state.
func (s *Server) Authorize(authorizeURL string, u *User) (string, error) {
	q, redirect, err := s.authorizeParams(authorizeURL)
	if err != nil {
		return "", err
	}
	c := "code-" + random(12)
	s.mu.Lock()
	s.codes[c] = code{user: u, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge")}
	s.mu.Unlock()
	v := redirect.Query()
	v.Set("code", c)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	return redirect.String(), nil
}

// Deny is the person declining: the redirect carries error=access_denied
// and the state.
func (s *Server) Deny(authorizeURL string) (string, error) {
	q, redirect, err := s.authorizeParams(authorizeURL)
	if err != nil {
		return "", err
	}
	v := redirect.Query()
	v.Set("error", "access_denied")
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	return redirect.String(), nil
}

func (s *Server) authorizeParams(authorizeURL string) (url.Values, *url.URL, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return nil, nil, err
	}
	q := u.Query()
	switch {
	case q.Get("response_type") != "code":
		return nil, nil, errors.New("xtest: authorize: response_type must be code")
	case q.Get("client_id") != s.ClientID:
		return nil, nil, fmt.Errorf("xtest: authorize: client_id %q is not the app's", q.Get("client_id"))
	case q.Get("state") == "":
		return nil, nil, errors.New("xtest: authorize: state is required")
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		return nil, nil, errors.New("xtest: authorize: a code_challenge with code_challenge_method=S256 is required")
	}
	scopes := strings.Fields(q.Get("scope"))
	for _, want := range []string{"dm.read", "dm.write", "users.read", "tweet.read", "offline.access"} {
		if !slices.Contains(scopes, want) {
			return nil, nil, fmt.Errorf("xtest: authorize: scope %q lacks %s", q.Get("scope"), want)
		}
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		return nil, nil, errors.New("xtest: authorize: redirect_uri is not an absolute URL")
	}
	return q, redirect, nil
}

// Revoke revokes u's grants: its tokens stop working and refreshes are
// refused.
func (u *User) Revoke() {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	u.revoked = true
}

// ReachableByChatOnly makes peer reachable only by X Chat: classic DMs
// from u to it are refused (403 [M]).
func (u *User) ReachableByChatOnly(peer string) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	u.chat[peer] = true
}

// FailNext makes the next call of endpoint (EndpointSend ...) with u's
// token fail as f.
func (u *User) FailNext(endpoint string, f Failure) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	if len(u.fail[endpoint]) < 100 {
		u.fail[endpoint] = append(u.fail[endpoint], f)
	}
}

// Sent returns the DMs u sent, oldest first.
func (u *User) Sent() []Event {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	var out []Event
	for _, e := range u.events {
		if e.SenderID == u.ID {
			out = append(out, e)
		}
	}
	return out
}

// record appends e to u's events, bounded; s.mu held.
func (u *User) record(e Event) {
	u.events = append(u.events, e)
	if len(u.events) > MaxRecorded {
		u.events = slices.Clone(u.events[len(u.events)-MaxRecorded:])
	}
}

// Receive is a DM from senderID to u: it joins u's dm_events (for
// polling) and is returned, to be delivered by Push.
func (u *User) Receive(senderID, text string) Event {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	e := Event{ID: u.s.nextID(), SenderID: senderID, RecipientID: u.ID, ConversationID: x.Conversation(senderID, u.ID),
		Text: text, CreatedAt: u.s.now().UTC()}
	u.record(e)
	return e
}

// ReceiveWithID is Receive with the event id chosen by the caller (a
// numeric id; the same id twice is a redelivery and joins dm_events once).
func (u *User) ReceiveWithID(id, senderID, text string) Event {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	for _, e := range u.events {
		if e.ID == id {
			return e
		}
	}
	e := Event{ID: id, SenderID: senderID, RecipientID: u.ID, ConversationID: x.Conversation(senderID, u.ID),
		Text: text, CreatedAt: u.s.now().UTC()}
	u.record(e)
	return e
}

// DMReceived is the X Activity API dm.received delivery of e to the
// subscribed user (docs.x.com x-api/activity/event-payloads).
func DMReceived(userID string, e Event) []byte {
	return activity(userID, "dm.received", map[string]any{
		"direct_message_events": []any{dmEvent(e)},
		"users":                 map[string]any{},
	})
}

// ChatReceived is a chat.received delivery (an encrypted X Chat message:
// opaque encoded fields only).
func ChatReceived(userID, senderID string) []byte {
	return activity(userID, "chat.received", map[string]any{
		"conversation_token": "eyJhbGciOiJIUzI1NiJ9.opaque", "id": "e4f4d3fc-8bbf-4928-92eb-e5058d6bb6f6",
		"created_at_msec": "1784841183370", "sender_id": senderID, "conversation_id": senderID + ":" + userID,
		"encoded_event": "CwABAAAAEzIwODA0MDA4MjUy", "message_event_signature": map[string]any{"signature": "6IK9SZIMXBe5"},
	})
}

// OAuthRevoke is the oauth.revoke delivery for userID.
func OAuthRevoke(userID string) []byte {
	b, _ := json.Marshal(map[string]any{"data": map[string]any{"event_uuid": "5934540941047412905", "filter": map[string]any{},
		"event_type": "oauth.revoke", "payload": map[string]any{"date_time": "2026-07-23T21:44:05+00:00", "user_id": userID, "app_id": "29820954"}}})
	return b
}

// AccountActivity is the legacy Account Activity API delivery of e.
func AccountActivity(userID string, e Event) []byte {
	b, _ := json.Marshal(map[string]any{"for_user_id": userID, "direct_message_events": []any{dmEvent(e)}, "users": map[string]any{}})
	return b
}

func activity(userID, typ string, payload any) []byte {
	b, _ := json.Marshal(map[string]any{"data": map[string]any{"event_uuid": "-6850472171600526495",
		"filter": map[string]any{"user_id": userID}, "event_type": typ, "tag": "comm", "payload": payload}})
	return b
}

func dmEvent(e Event) map[string]any {
	return map[string]any{"type": "message_create", "id": e.ID, "created_timestamp": strconv.FormatInt(e.CreatedAt.UnixMilli(), 10),
		"message_create": map[string]any{"target": map[string]any{"recipient_id": e.RecipientID}, "sender_id": e.SenderID,
			"message_data": map[string]any{"text": e.Text, "entities": map[string]any{"hashtags": []any{}, "urls": []any{}}}}}
}

// Sign sets X's signature headers of body on h: the legacy one with the
// consumer secret, and the OAuth 2.0 one with the client secret.
func (s *Server) Sign(h http.Header, body []byte) {
	h.Set(x.SignatureHeader, x.Sign(s.ConsumerSecret, body))
	h.Set(x.SignatureHeaderOAuth2, x.Sign(s.ClientSecret, body))
}

// SignedRequest is X's POST of body to target, signed.
func (s *Server) SignedRequest(target string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	s.Sign(r.Header, body)
	return r
}

// Push delivers body to every valid webhook that has a subscription of
// eventType for userID, signed, and returns how many took it (answered
// 2xx).
func (s *Server) Push(ctx context.Context, userID, eventType string, body []byte) (int, error) {
	s.mu.Lock()
	var targets []string
	for _, sub := range s.subs {
		if sub.UserID == userID && sub.EventType == eventType {
			if w := s.webhooks[sub.WebhookID]; w != nil && w.Valid {
				targets = append(targets, w.URL)
			}
		}
	}
	s.mu.Unlock()
	n := 0
	for _, t := range targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t, bytes.NewReader(body))
		if err != nil {
			return n, err
		}
		req.Header.Set("Content-Type", "application/json")
		s.Sign(req.Header, body)
		resp, err := s.client.Do(req)
		if err != nil {
			return n, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return n, fmt.Errorf("xtest: push to %s: %s", t, resp.Status)
		}
		n++
	}
	return n, nil
}

// Webhooks returns the registered webhooks.
func (s *Server) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Webhook
	for _, w := range s.webhooks {
		out = append(out, *w)
	}
	return out
}

// Subscriptions returns the subscriptions of userID.
func (s *Server) Subscriptions(userID string) []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Subscription
	for _, sub := range s.subs {
		if sub.UserID == userID {
			out = append(out, *sub)
		}
	}
	return out
}

// answer writes a JSON answer.
func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problem writes X's problem details.
func problem(w http.ResponseWriter, status int, detail string) {
	answer(w, status, map[string]any{"title": http.StatusText(status), "detail": detail, "type": "about:blank", "status": status})
}

func readJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		return errors.New("body")
	}
	return json.Unmarshal(body, v)
}

// bearer returns the user of the request's access token, or answers 401.
func (s *Server) bearer(w http.ResponseWriter, r *http.Request, endpoint string) (*User, *Failure, bool) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[tok]
	if !ok || g.user.revoked || s.now().After(g.expires) {
		problem(w, http.StatusUnauthorized, "Unauthorized")
		return nil, nil, false
	}
	u := g.user
	var f *Failure
	if q := u.fail[endpoint]; len(q) > 0 {
		f = &q[0]
		u.fail[endpoint] = q[1:]
	}
	return u, f, true
}

// app checks the app-only bearer token.
func (s *Server) app(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+s.BearerToken {
		problem(w, http.StatusUnauthorized, "Unauthorized")
		return false
	}
	return true
}

// failWith answers as f says.
func (s *Server) failWith(w http.ResponseWriter, r *http.Request, f Failure) {
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if f.Reset > 0 {
		w.Header().Set("x-rate-limit-reset", strconv.FormatInt(s.now().Add(time.Duration(f.Reset)*time.Second).Unix(), 10))
	}
	problem(w, f.Status, f.Detail)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != s.ClientID || secret != s.ClientSecret {
		answer(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "Missing valid authorization header"})
		return
	}
	if err := r.ParseForm(); err != nil {
		answer(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var u *User
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		switch {
		case !ok:
			answer(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Value passed for the authorization code was invalid."})
			return
		case c.redirectURI != r.PostForm.Get("redirect_uri"):
			answer(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "redirect_uri does not match"})
			return
		case challenge(r.PostForm.Get("code_verifier")) != c.challenge:
			answer(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Value passed for the code verifier did not match the code challenge."})
			return
		}
		u = c.user
	case "refresh_token":
		old := r.PostForm.Get("refresh_token")
		u = s.refresh[old]
		delete(s.refresh, old) // rotation: a refresh token is good once
		if u == nil || u.revoked {
			// [M] X answers a spent or revoked refresh token 400
			// invalid_request.
			answer(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "Value passed for the token was invalid."})
			return
		}
		// The access tokens issued before stop working.
		for k, g := range s.access {
			if g.user == u {
				delete(s.access, k)
			}
		}
		s.refreshed++
	default:
		answer(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	access, refresh, _ := s.issue(u)
	answer(w, http.StatusOK, map[string]any{"token_type": "bearer", "expires_in": s.expiresIn, "access_token": access,
		"scope": "dm.read dm.write users.read offline.access tweet.read", "refresh_token": refresh})
}

// challenge is the S256 challenge of a verifier.
func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	u, f, ok := s.bearer(w, r, EndpointMe)
	if !ok {
		return
	}
	if f != nil {
		s.failWith(w, r, *f)
		return
	}
	answer(w, http.StatusOK, map[string]any{"data": map[string]string{"id": u.ID, "name": u.Username, "username": u.Username}})
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if !s.app(w, r) {
		return
	}
	hooks := s.Webhooks()
	answer(w, http.StatusOK, map[string]any{"data": hooks2json(hooks), "meta": map[string]int{"result_count": len(hooks)}})
}

func hooks2json(hs []Webhook) []map[string]any {
	out := []map[string]any{}
	for _, h := range hs {
		out = append(out, map[string]any{"id": h.ID, "url": h.URL, "valid": h.Valid, "created_at": "2026-01-15T12:00:00.000Z"})
	}
	return out
}

// crc performs the challenge-response check against target.
func (s *Server) crc(ctx context.Context, target string) error {
	token := random(16)
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("crc_token", token)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got struct {
		ResponseToken string `json:"response_token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&got) != nil {
		return fmt.Errorf("CRC answered %s", resp.Status)
	}
	if got.ResponseToken != x.Sign(s.ConsumerSecret, []byte(token)) {
		return errors.New("wrong response_token")
	}
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	if !s.app(w, r) {
		return
	}
	var in struct {
		URL string `json:"url"`
	}
	if err := readJSON(r, &in); err != nil || in.URL == "" {
		problem(w, http.StatusBadRequest, "UrlValidationFailed")
		return
	}
	s.mu.Lock()
	for _, h := range s.webhooks {
		if h.URL == in.URL {
			s.mu.Unlock()
			problem(w, http.StatusBadRequest, "DuplicateUrlFailed")
			return
		}
	}
	s.mu.Unlock()
	if err := s.crc(r.Context(), in.URL); err != nil {
		problem(w, http.StatusBadRequest, "CrcValidationFailed: "+err.Error())
		return
	}
	s.mu.Lock()
	h := &Webhook{ID: s.nextID(), URL: in.URL, Valid: true}
	s.webhooks[h.ID] = h
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"data": hooks2json([]Webhook{*h})[0]})
}

func (s *Server) validateWebhook(w http.ResponseWriter, r *http.Request) {
	if !s.app(w, r) {
		return
	}
	s.mu.Lock()
	h := s.webhooks[r.PathValue("id")]
	s.mu.Unlock()
	if h == nil {
		problem(w, http.StatusBadRequest, "WebhookIdInvalid")
		return
	}
	err := s.crc(r.Context(), h.URL)
	s.mu.Lock()
	h.Valid = err == nil
	s.mu.Unlock()
	if err != nil {
		problem(w, http.StatusBadRequest, "CrcValidationFailed")
		return
	}
	answer(w, http.StatusOK, map[string]any{"data": map[string]bool{"valid": true}})
}

// Invalidate marks a webhook invalid (a failed hourly CRC).
func (s *Server) Invalidate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.webhooks[id]; h != nil {
		h.Valid = false
	}
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if !s.app(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.webhooks[r.PathValue("id")] == nil {
		problem(w, http.StatusBadRequest, "WebhookIdInvalid")
		return
	}
	delete(s.webhooks, r.PathValue("id"))
	answer(w, http.StatusOK, map[string]any{"data": map[string]bool{"deleted": true}})
}

func (s *Server) subscribe(w http.ResponseWriter, r *http.Request) {
	u, _, ok := s.bearer(w, r, "subscribe")
	if !ok {
		return
	}
	var in struct {
		EventType string `json:"event_type"`
		Filter    struct {
			UserID string `json:"user_id"`
		} `json:"filter"`
		WebhookID string `json:"webhook_id"`
		Tag       string `json:"tag"`
	}
	if err := readJSON(r, &in); err != nil || in.EventType == "" {
		problem(w, http.StatusBadRequest, "invalid subscription request")
		return
	}
	if in.Filter.UserID != u.ID {
		// dm.received is private: only the authorizing user's own.
		problem(w, http.StatusForbidden, "Subscriptions for private events can only be created for users who have authorized your application")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.WebhookID != "" && s.webhooks[in.WebhookID] == nil {
		problem(w, http.StatusBadRequest, "WebhookIdInvalid")
		return
	}
	sub := &Subscription{ID: s.nextID(), EventType: in.EventType, UserID: u.ID, WebhookID: in.WebhookID, Tag: in.Tag}
	s.subs[sub.ID] = sub
	answer(w, http.StatusOK, map[string]any{"data": map[string]any{"subscription_id": sub.ID, "event_type": sub.EventType,
		"filter": map[string]string{"user_id": sub.UserID}, "webhook_id": sub.WebhookID, "tag": sub.Tag,
		"created_at": "2026-01-15T12:00:00.000Z", "updated_at": "2026-01-15T12:00:00.000Z"},
		"meta": map[string]int{"total_subscriptions": len(s.subs)}})
}

func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request) {
	if !s.app(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[r.PathValue("id")] == nil {
		problem(w, http.StatusNotFound, "subscription not found")
		return
	}
	delete(s.subs, r.PathValue("id"))
	answer(w, http.StatusOK, map[string]any{"data": map[string]bool{"deleted": true}, "meta": map[string]int{"total_subscriptions": len(s.subs)}})
}

func (s *Server) sendWith(w http.ResponseWriter, r *http.Request) {
	s.send(w, r, r.PathValue("participant"), "")
}

func (s *Server) sendTo(w http.ResponseWriter, r *http.Request) {
	s.send(w, r, "", r.PathValue("conversation"))
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, participant, conversation string) {
	u, f, ok := s.bearer(w, r, EndpointSend)
	if !ok {
		return
	}
	if f != nil {
		s.failWith(w, r, *f)
		return
	}
	var in struct {
		Text string `json:"text"`
	}
	if err := readJSON(r, &in); err != nil || in.Text == "" {
		problem(w, http.StatusBadRequest, "text is required")
		return
	}
	if len([]rune(in.Text)) > 10000 {
		problem(w, http.StatusBadRequest, "text is too long")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if participant != "" {
		if _, err := strconv.ParseUint(participant, 10, 64); err != nil || participant == u.ID {
			problem(w, http.StatusBadRequest, "The `participant_id` query parameter value ["+participant+"] is not valid")
			return
		}
		if u.chat[participant] {
			// [M] X's answer for a peer reachable only by X Chat.
			problem(w, http.StatusForbidden, "This conversation is end-to-end encrypted (XChat); legacy direct messages cannot be sent to it.")
			return
		}
		conversation = x.Conversation(u.ID, participant)
	}
	e := Event{ID: s.nextID(), SenderID: u.ID, RecipientID: participant, ConversationID: conversation, Text: in.Text, CreatedAt: s.now().UTC()}
	u.record(e)
	answer(w, http.StatusCreated, map[string]any{"data": map[string]string{"dm_conversation_id": conversation, "dm_event_id": e.ID}})
}

func (s *Server) dmEvents(w http.ResponseWriter, r *http.Request) {
	u, f, ok := s.bearer(w, r, EndpointDMEvents)
	if !ok {
		return
	}
	if f != nil {
		s.failWith(w, r, *f)
		return
	}
	q := r.URL.Query()
	n, err := strconv.Atoi(q.Get("max_results"))
	if q.Get("max_results") == "" {
		n, err = 100, nil
	}
	if err != nil || n < 1 || n > 100 {
		problem(w, http.StatusBadRequest, "max_results must be between 1 and 100")
		return
	}
	from := 0
	if t := q.Get("pagination_token"); t != "" {
		if from, err = strconv.Atoi(strings.TrimPrefix(t, "p")); err != nil || from < 0 {
			problem(w, http.StatusBadRequest, "invalid pagination_token")
			return
		}
	}
	s.mu.Lock()
	evs := slices.Clone(u.events)
	s.mu.Unlock()
	slices.Reverse(evs) // newest first
	data := []map[string]string{}
	end := min(from+n, len(evs))
	for _, e := range evs[min(from, len(evs)):end] {
		data = append(data, map[string]string{"id": e.ID, "event_type": "MessageCreate", "text": e.Text, "sender_id": e.SenderID,
			"dm_conversation_id": e.ConversationID, "created_at": e.CreatedAt.Format("2006-01-02T15:04:05.000Z")})
	}
	meta := map[string]any{"result_count": len(data)}
	if end < len(evs) {
		meta["next_token"] = "p" + strconv.Itoa(end)
	}
	answer(w, http.StatusOK, map[string]any{"data": data, "meta": meta})
}

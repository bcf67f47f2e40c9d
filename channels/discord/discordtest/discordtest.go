// Package discordtest is a fake Discord: an httptest server that speaks the
// parts of the REST API (v10) comm uses and the Gateway websocket
// protocol, for many bots at once, each with its own token and state.
//
// REST: GET /users/@me, GET /gateway and /gateway/bot, POST /oauth2/token
// (the code grant; Authorize and Deny stand in for the person approving or
// refusing the install), POST /channels/{id}/messages (2000-character
// limit, nonce + enforce_nonce dedup, per-route rate limit headers and 429
// when a limit is set), POST /channels/{id}/typing, POST
// /users/@me/channels (DM channels) and an attachments CDN (GET
// /attachments/...). Every bot call checks "Authorization: Bot <token>"
// (401 otherwise).
//
// Gateway (channels.md §16.4.1): HELLO, IDENTIFY (token checked: 4004;
// intents not allowed: 4014; a second identify: 4005; a payload before
// identify: 4003; identifies counted), READY with session_id and
// resume_gateway_url, heartbeat and ACK (SetAck(false) stops acking: a
// zombie connection), MESSAGE_CREATE dispatches with increasing seq, op 7
// RECONNECT, op 9 INVALID SESSION, RESUME replaying the dispatches after
// the given seq then RESUMED, close codes on demand and a drop of the TCP
// connection without a close frame. A session's log keeps the last MaxLog
// dispatches. Safe for concurrent use. It does not import testing.
package discordtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Caps.
const (
	// MaxRecorded is how many sent messages and typings a bot keeps.
	MaxRecorded = 1000
	// MaxLog is how many dispatches a session keeps for RESUME, and how
	// many a bot holds while no session exists.
	MaxLog = 1000
	// maxBody bounds a request body the fake reads.
	maxBody = 1 << 20
	// maxFrame bounds a gateway frame the fake reads.
	maxFrame = 1 << 20
)

// Intents comm asks for.
const (
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
)

// Server is a fake Discord hosting any number of bots.
type Server struct {
	// URL is the REST API's base URL (discord.Options.APIURL), ending in
	// /api/v10.
	URL string
	// GatewayURL is the websocket URL GET /gateway/bot answers.
	GatewayURL string
	// Base is the server's root URL (the CDN is under it).
	Base string
	// ClientID and ClientSecret are the operator's app the oauth2 token
	// endpoint accepts.
	ClientID, ClientSecret string

	srv *httptest.Server
	up  websocket.Upgrader

	mu      sync.Mutex
	bots    map[string]*Bot // by token
	codes   map[string]Guild
	next    int64
	heartMS int
	files   map[string][]byte
	done    chan struct{}

	closeOnce sync.Once
}

// Guild is a Discord server.
type Guild struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// NewServer starts a fake Discord. Close it when done.
func NewServer() *Server {
	s := &Server{
		bots:         map[string]*Bot{},
		codes:        map[string]Guild{},
		files:        map[string][]byte{},
		done:         make(chan struct{}),
		next:         1100000000000000000,
		heartMS:      45000,
		ClientID:     "1200000000000000001",
		ClientSecret: "fake-client-secret",
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.Base = s.srv.URL
	s.URL = s.srv.URL + "/api/v10"
	s.GatewayURL = "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway"
	return s
}

// Close stops the server and ends every gateway connection.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	bots := make([]*Bot, 0, len(s.bots))
	for _, b := range s.bots {
		bots = append(bots, b)
	}
	s.mu.Unlock()
	for _, b := range bots {
		b.Drop()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetHeartbeatInterval sets the heartbeat_interval HELLO announces
// (45 s by default); tests use a short one.
func (s *Server) SetHeartbeatInterval(d time.Duration) {
	s.mu.Lock()
	s.heartMS = max(1, int(d/time.Millisecond))
	s.mu.Unlock()
}

// randomHex is 16 random hex digits: tokens differ across servers.
func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Snowflake returns a new unique id.
func (s *Server) Snowflake() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return strconv.FormatInt(s.next, 10)
}

// NewBot registers a bot with a fresh token and id.
func (s *Server) NewBot(username string) *Bot {
	id := s.Snowflake()
	b := &Bot{
		srv:      s,
		ID:       id,
		Username: username,
		Token:    "fake." + id + "." + randomHex(),
		ack:      true,
		nonces:   map[string]Message{},
		channels: map[string]string{},
		dms:      map[string]string{},
		buckets:  map[string]*bucket{},
		fail:     map[string][]Failure{},
	}
	s.mu.Lock()
	s.bots[b.Token] = b
	s.mu.Unlock()
	return b
}

func (s *Server) bot(token string) *Bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bots[token]
}

// Authorize simulates a person approving the install of the operator's
// app into guild: it returns the code the redirect carries.
func (s *Server) Authorize(g Guild) string {
	code := "code-" + s.Snowflake()
	s.mu.Lock()
	s.codes[code] = g
	s.mu.Unlock()
	return code
}

// Deny simulates a person refusing the install: the redirect's query.
func (s *Server) Deny() map[string]string {
	return map[string]string{"error": "access_denied", "error_description": "The resource owner or authorization server denied the request"}
}

// AddFile serves data on the CDN and returns its URL.
func (s *Server) AddFile(name string, data []byte) string {
	id := s.Snowflake()
	s.mu.Lock()
	s.files[id+"/"+name] = append([]byte(nil), data...)
	s.mu.Unlock()
	return s.Base + "/attachments/" + id + "/" + name
}

// apiError writes Discord's error body.
func apiError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/gateway":
		s.serveGateway(w, r)
		return
	case strings.HasPrefix(path, "/attachments/"):
		s.mu.Lock()
		data, ok := s.files[strings.TrimPrefix(path, "/attachments/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
		return
	}
	api, ok := strings.CutPrefix(path, "/api/v10")
	if !ok {
		apiError(w, http.StatusNotFound, 0, "404: Not Found")
		return
	}
	if api == "/oauth2/token" && r.Method == http.MethodPost {
		s.token(w, r)
		return
	}
	if api == "/gateway" && r.Method == http.MethodGet {
		writeJSON(w, map[string]any{"url": s.GatewayURL})
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bot ")
	b := s.bot(tok)
	if !ok || b == nil {
		apiError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return
	}
	b.serveREST(w, r, api)
}

// token is POST /oauth2/token (authorization_code grant).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, 0, "bad form")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != s.ClientID || secret != s.ClientSecret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
		return
	}
	s.mu.Lock()
	g, ok := s.codes[r.PostForm.Get("code")]
	delete(s.codes, r.PostForm.Get("code"))
	s.mu.Unlock()
	if r.PostForm.Get("grant_type") != "authorization_code" || !ok || r.PostForm.Get("redirect_uri") == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid \"code\" in request."}`)
		return
	}
	writeJSON(w, map[string]any{
		"access_token": "at-" + s.Snowflake(), "token_type": "Bearer", "expires_in": 604800,
		"refresh_token": "rt-" + s.Snowflake(), "scope": "bot",
		"guild": map[string]any{"id": g.ID, "name": g.Name},
	})
}

// Failure is how the fake fails the next call of a route.
type Failure struct {
	Status     int
	Code       int
	Message    string
	RetryAfter float64 // seconds, for 429
	Hang       bool    // hold the request until the client gives up
}

// Failures.
var (
	Unauthorized   = Failure{Status: 401, Message: "401: Unauthorized"}
	UnknownChannel = Failure{Status: 404, Code: 10003, Message: "Unknown Channel"}
	MissingAccess  = Failure{Status: 403, Code: 50001, Message: "Missing Access"}
	BadGateway     = Failure{Status: 502, Message: "502 Bad Gateway"}
	Hang           = Failure{Hang: true}
)

// TooManyRequests is a 429 asking to wait seconds.
func TooManyRequests(seconds float64) Failure {
	return Failure{Status: 429, Message: "You are being rate limited.", RetryAfter: seconds}
}

// Message is a Discord Message, as the fake records and dispatches it.
type Message struct {
	ID               string       `json:"id"`
	ChannelID        string       `json:"channel_id"`
	GuildID          string       `json:"guild_id,omitempty"`
	Author           User         `json:"author"`
	Content          string       `json:"content"`
	Type             int          `json:"type"`
	WebhookID        string       `json:"webhook_id,omitempty"`
	Mentions         []User       `json:"mentions"`
	MessageReference *Reference   `json:"message_reference,omitempty"`
	Referenced       *Message     `json:"referenced_message,omitempty"`
	Attachments      []Attachment `json:"attachments"`
	Nonce            string       `json:"nonce,omitempty"`
	Timestamp        string       `json:"timestamp"`
}

// User is a Discord user.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

// Reference is a message_reference.
type Reference struct {
	MessageID       string `json:"message_id,omitempty"`
	ChannelID       string `json:"channel_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
}

// Typing is a POST /channels/{id}/typing the fake saw.
type Typing struct{ ChannelID string }

type bucket struct {
	used  int
	reset time.Time
}

// Bot is one bot's state.
type Bot struct {
	ID, Username, Token string
	srv                 *Server

	mu       sync.Mutex
	sent     []Message
	typings  []Typing
	nonces   map[string]Message
	channels map[string]string // channel id -> DM recipient ("" for a guild channel)
	dms      map[string]string // user id -> DM channel id
	buckets  map[string]*bucket
	limit    int
	window   time.Duration
	limited  int // message posts answered 429
	fail     map[string][]Failure
	requests []string // "METHOD route" in order, capped

	// gateway
	starts     *int
	ack        bool
	denyIntent int
	identifies int
	resumes    int
	sess       *session
	pending    []json.RawMessage // MESSAGE_CREATE data before any session
	conn       *gwConn
	connected  chan struct{} // closed on each READY/RESUMED, then renewed
}

// SetSessionStartsRemaining sets session_start_limit.remaining of GET
// /gateway/bot (by default 1000 minus the identifies).
func (b *Bot) SetSessionStartsRemaining(n int) {
	b.mu.Lock()
	b.starts = &n
	b.mu.Unlock()
}

// AddChannel makes a guild channel the bot can post in and returns its id.
func (b *Bot) AddChannel() string {
	id := b.srv.Snowflake()
	b.mu.Lock()
	b.channels[id] = ""
	b.mu.Unlock()
	return id
}

// DMChannel returns the DM channel with user, making it when needed.
func (b *Bot) DMChannel(user string) string {
	b.mu.Lock()
	ch, ok := b.dms[user]
	b.mu.Unlock()
	if ok {
		return ch
	}
	id := b.srv.Snowflake()
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.dms[user]; ok {
		return ch
	}
	b.dms[user] = id
	b.channels[id] = user
	return id
}

// Recipient returns the user a DM channel is with ("" otherwise).
func (b *Bot) Recipient(channel string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.channels[channel]
}

// Limited is how many message posts were answered 429 by the limit
// SetRateLimit set.
func (b *Bot) Limited() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limited
}

// SetRateLimit limits POST /channels/{id}/messages to limit calls per
// window per channel (0: unlimited, the default).
func (b *Bot) SetRateLimit(limit int, window time.Duration) {
	b.mu.Lock()
	b.limit, b.window = limit, window
	b.mu.Unlock()
}

// FailNext fails the next call of route ("messages", "typing", "dm",
// "me") as f.
func (b *Bot) FailNext(route string, f Failure) {
	b.mu.Lock()
	b.fail[route] = append(b.fail[route], f)
	b.mu.Unlock()
}

// Sent returns the messages the bot posted, in order.
func (b *Bot) Sent() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.sent...)
}

// Typings returns the typing calls, in order.
func (b *Bot) Typings() []Typing {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Typing(nil), b.typings...)
}

// Requests returns "METHOD route" of the REST calls the bot made, in
// order (the last MaxRecorded).
func (b *Bot) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

func capped[T any](s []T, v T) []T {
	s = append(s, v)
	if len(s) > MaxRecorded {
		s = append(s[:0:0], s[len(s)-MaxRecorded:]...)
	}
	return s
}

func (b *Bot) takeFailure(route string) (Failure, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fs := b.fail[route]
	if len(fs) == 0 {
		return Failure{}, false
	}
	b.fail[route] = fs[1:]
	return fs[0], true
}

func (b *Bot) failed(w http.ResponseWriter, r *http.Request, route string) bool {
	f, ok := b.takeFailure(route)
	if !ok {
		return false
	}
	if f.Hang {
		// Read the body, so that the server notices the client leaving.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
		select {
		case <-r.Context().Done():
		case <-b.srv.done:
		}
		return true
	}
	if f.Status == 429 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter+0.999)))
		w.Header().Set("X-RateLimit-Scope", "user")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		_ = json.NewEncoder(w).Encode(map[string]any{"message": f.Message, "retry_after": f.RetryAfter, "global": false})
		return true
	}
	apiError(w, f.Status, f.Code, f.Message)
	return true
}

func (b *Bot) serveREST(w http.ResponseWriter, r *http.Request, api string) {
	parts := strings.Split(strings.Trim(api, "/"), "/")
	b.mu.Lock()
	route := r.Method + " " + api
	b.requests = capped(b.requests, route)
	b.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && api == "/users/@me":
		if b.failed(w, r, "me") {
			return
		}
		writeJSON(w, User{ID: b.ID, Username: b.Username, Bot: true})
	case r.Method == http.MethodGet && api == "/gateway/bot":
		b.mu.Lock()
		remaining := 1000 - b.identifies
		if b.starts != nil {
			remaining = *b.starts
		}
		b.mu.Unlock()
		writeJSON(w, map[string]any{"url": b.srv.GatewayURL, "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": remaining, "reset_after": 86400000, "max_concurrency": 1}})
	case r.Method == http.MethodPost && api == "/users/@me/channels":
		if b.failed(w, r, "dm") {
			return
		}
		var req struct {
			RecipientID string `json:"recipient_id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil || !snowflake(req.RecipientID) {
			apiError(w, 400, 50035, "Invalid Form Body")
			return
		}
		ch := b.DMChannel(req.RecipientID)
		writeJSON(w, map[string]any{"id": ch, "type": 1, "recipients": []User{{ID: req.RecipientID}}})
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "channels" && parts[2] == "typing":
		if b.failed(w, r, "typing") {
			return
		}
		if !b.knows(parts[1]) {
			apiError(w, 404, 10003, "Unknown Channel")
			return
		}
		b.mu.Lock()
		b.typings = capped(b.typings, Typing{ChannelID: parts[1]})
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages":
		b.postMessage(w, r, parts[1])
	default:
		apiError(w, 404, 0, "404: Not Found")
	}
}

func snowflake(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == s
}

func (b *Bot) knows(ch string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.channels[ch]
	return ok
}

func (b *Bot) postMessage(w http.ResponseWriter, r *http.Request, ch string) {
	key := "POST /channels/" + ch + "/messages"
	now := time.Now()
	b.mu.Lock()
	limit, window := b.limit, b.window
	bk := b.buckets[key]
	if bk == nil || now.After(bk.reset) {
		bk = &bucket{reset: now.Add(window)}
		b.buckets[key] = bk
	}
	over := limit > 0 && bk.used >= limit
	if !over {
		bk.used++
	} else {
		b.limited++
	}
	used, reset := bk.used, bk.reset
	b.mu.Unlock()
	if limit > 0 {
		after := max(0, reset.Sub(now).Seconds())
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(max(0, limit-used)))
		w.Header().Set("X-RateLimit-Reset-After", strconv.FormatFloat(after, 'f', 3, 64))
		w.Header().Set("X-RateLimit-Bucket", "messages-"+ch)
		if over {
			w.Header().Set("Retry-After", strconv.Itoa(int(after+0.999)))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			_ = json.NewEncoder(w).Encode(map[string]any{"message": "You are being rate limited.", "retry_after": after, "global": false})
			return
		}
	}
	if b.failed(w, r, "messages") {
		return
	}
	var req struct {
		Content          string     `json:"content"`
		Nonce            any        `json:"nonce"`
		EnforceNonce     bool       `json:"enforce_nonce"`
		MessageReference *Reference `json:"message_reference"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		apiError(w, 400, 50109, "The request body contains invalid JSON.")
		return
	}
	if !b.knows(ch) {
		apiError(w, 404, 10003, "Unknown Channel")
		return
	}
	if req.Content == "" || utf8.RuneCountInString(req.Content) > 2000 {
		apiError(w, 400, 50035, "Invalid Form Body (content: Must be between 1 and 2000 in length.)")
		return
	}
	nonce := ""
	if req.Nonce != nil {
		nonce = fmt.Sprint(req.Nonce)
		if len(nonce) > 25 {
			apiError(w, 400, 50035, "Invalid Form Body (nonce: Must be 25 or fewer in length.)")
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.EnforceNonce && nonce != "" {
		if m, ok := b.nonces[nonce]; ok {
			writeJSON(w, m)
			return
		}
	}
	b.srv.mu.Lock()
	b.srv.next++
	id := strconv.FormatInt(b.srv.next, 10)
	b.srv.mu.Unlock()
	m := Message{ID: id, ChannelID: ch, Author: User{ID: b.ID, Username: b.Username, Bot: true}, Content: req.Content,
		Mentions: []User{}, Attachments: []Attachment{}, MessageReference: req.MessageReference, Nonce: nonce,
		Timestamp: time.Now().UTC().Format(time.RFC3339)}
	if req.EnforceNonce && nonce != "" {
		if len(b.nonces) >= MaxRecorded {
			clear(b.nonces)
		}
		b.nonces[nonce] = m
	}
	b.sent = capped(b.sent, m)
	writeJSON(w, m)
}

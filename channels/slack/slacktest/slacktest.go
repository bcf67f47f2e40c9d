// Package slacktest is a fake Slack for tests and benchmarks: an httptest
// server speaking the parts of the Web API the slack channel uses
// (oauth.v2.access, auth.test, chat.postMessage, assistant.threads.setStatus,
// url_private file downloads), with an OAuth authorize step that simulates
// the person approving, failure injection, an optional per-channel rate
// limit, and a sender of signed Events API requests.
//
// It does not import testing. Everything it records is bounded.
package slacktest

import (
	"bytes"
	"crypto/rand"
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

	"github.com/comm-gateway/comm/channels/slack"
)

// Limits on what the fake keeps.
const (
	MaxRecorded = 1000     // messages and statuses kept per team (the oldest go)
	MaxFiles    = 100      // files per team
	MaxFileSize = 32 << 20 // bytes of one file
	maxBody     = 1 << 20  // a request body read
)

// Default credentials of the fake's app.
const (
	ClientID      = "1111111111.2222222222"
	ClientSecret  = "fakeclientsecret0123456789abcdef"
	SigningSecret = "fakesigningsecret0123456789abcdef"
)

// Server is a fake Slack. Its Web API is at URL+"/api", its authorize page
// is AuthorizeURL (never fetched: use Authorize).
type Server struct {
	URL          string
	APIURL       string
	AuthorizeURL string
	// ClientID, ClientSecret and SigningSecret are the app's credentials
	// oauth.v2.access accepts and Events are signed with.
	ClientID, ClientSecret, SigningSecret string

	srv  *httptest.Server
	done chan struct{}
	stop sync.Once

	mu         sync.Mutex
	now        func() time.Time
	teams      map[string]*Team // by id
	byToken    map[string]*Team
	byAppToken map[string]*Team
	codes      map[string]grant
	seq        int64
	rateLimit  bool
	limited    int                  // chat.postMessage calls answered 429
	lastPost   map[string]time.Time // team/channel -> last post
}

// grant is an issued OAuth code.
type grant struct {
	team        *Team
	redirectURI string
}

// Team is a workspace with the app installed (its bot).
type Team struct {
	ID, Name, BotUserID, BotToken string
	s                             *Server

	// guarded by s.mu
	revoked     bool
	uninstalled bool
	sent        []Message
	statuses    []Status
	fail        map[string][]Failure
	files       map[string]storedFile
	socket      *socketState
}

type storedFile struct {
	name, mimetype string
	data           []byte
}

// Message is a message the bot posted.
type Message struct {
	Channel, Text, ThreadTS, TS string
}

// Status is an assistant.threads.setStatus call.
type Status struct {
	ChannelID, ThreadTS, Status string
}

// Failure is how the next call of a method fails.
type Failure struct {
	// Status is the HTTP status (200 when 0: Slack's ok:false answers).
	Status int
	// Error is the ok:false error code.
	Error string
	// RetryAfter is the Retry-After header, in seconds, when not 0.
	RetryAfter int
	// Hang holds the request until the caller gives up.
	Hang bool
}

// Failures.
var (
	Unavailable     = Failure{Status: http.StatusServiceUnavailable, Error: "service_unavailable"}
	Hang            = Failure{Hang: true}
	ChannelNotFound = Failure{Error: "channel_not_found"}
	NotInChannel    = Failure{Error: "not_in_channel"}
	MsgTooLong      = Failure{Error: "msg_too_long"}
	InvalidAuth     = Failure{Error: "invalid_auth"}
	TokenRevoked    = Failure{Error: "token_revoked"}
)

// RateLimited is a 429 asking to retry after seconds.
func RateLimited(seconds int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Error: "ratelimited", RetryAfter: seconds}
}

// NewServer starts a fake Slack; Close it.
func NewServer() *Server {
	s := &Server{ClientID: ClientID, ClientSecret: ClientSecret, SigningSecret: SigningSecret,
		done: make(chan struct{}), now: time.Now,
		teams: map[string]*Team{}, byToken: map[string]*Team{}, byAppToken: map[string]*Team{}, codes: map[string]grant{}, lastPost: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/apps.connections.open", s.connectionsOpen)
	mux.HandleFunc("POST /api/{method}", s.api)
	mux.HandleFunc("GET /link/{team}", s.link)
	mux.HandleFunc("GET /files/{team}/{id}/{name}", s.serveFile)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + "/api"
	s.AuthorizeURL = s.srv.URL + "/oauth/v2/authorize"
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.stop.Do(func() { close(s.done) })
	s.srv.Close()
}

// SetNow sets the clock the rate limit uses (time.Now by default).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Limited is how many chat.postMessage calls were answered 429 because
// they came sooner than a second after the last post to their channel.
func (s *Server) Limited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limited
}

// SetRateLimit switches Slack's limit of about one chat.postMessage per
// second per channel on or off (off by default): a faster post gets 429
// with Retry-After: 1.
func (s *Server) SetRateLimit(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = on
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + strings.ToUpper(hex.EncodeToString(b))
}

// NewTeam makes a workspace with the app installed and its bot token.
func (s *Server) NewTeam(name string) *Team {
	t := &Team{ID: randomID("T", 5), Name: name, BotUserID: randomID("U", 5),
		BotToken: "xoxb-" + randomID("", 6) + "-" + randomID("", 12), s: s,
		fail: map[string][]Failure{}, files: map[string]storedFile{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teams[t.ID] = t
	s.byToken[t.BotToken] = t
	return t
}

// Authorize is the person at authorizeURL (as the adapter built it)
// approving the install into team: it checks client_id and redirect_uri
// and returns the redirect with a one-time code and the state.
func (s *Server) Authorize(authorizeURL string, team *Team) (string, error) {
	q, redirect, err := s.authorizeParams(authorizeURL)
	if err != nil {
		return "", err
	}
	code := randomID("code", 8)
	s.mu.Lock()
	s.codes[code] = grant{team: team, redirectURI: q.Get("redirect_uri")}
	s.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	return redirect.String(), nil
}

// Deny is the person declining the install: the redirect carries
// error=access_denied and the state.
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
	if q.Get("client_id") != s.ClientID {
		return nil, nil, fmt.Errorf("slacktest: authorize: client_id %q is not the app's", q.Get("client_id"))
	}
	if q.Get("scope") == "" || q.Get("state") == "" {
		return nil, nil, errors.New("slacktest: authorize: scope and state are required")
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		return nil, nil, errors.New("slacktest: authorize: redirect_uri is not an absolute URL")
	}
	return q, redirect, nil
}

// Revoke revokes the team's bot token: calls answer token_revoked.
func (t *Team) Revoke() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.revoked = true
}

// Installed reports whether the app is installed in the team (not
// removed by apps.uninstall).
func (t *Team) Installed() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return !t.uninstalled
}

// Sent returns the messages the bot posted, oldest first.
func (t *Team) Sent() []Message {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return append([]Message(nil), t.sent...)
}

// Statuses returns the assistant thread statuses set, oldest first.
func (t *Team) Statuses() []Status {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return append([]Status(nil), t.statuses...)
}

// FailNext makes the next call of method ("chat.postMessage") with this
// team's token fail as f.
func (t *Team) FailNext(method string, f Failure) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if len(t.fail[method]) < 100 {
		t.fail[method] = append(t.fail[method], f)
	}
}

// File is a file shared in the team, as events carry it.
type File struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// AddFile stores a file served at its url_private to the team's bot
// token. Beyond MaxFiles the oldest is forgotten; data beyond MaxFileSize
// is cut.
func (t *Team) AddFile(name, mimetype string, data []byte) File {
	if len(data) > MaxFileSize {
		data = data[:MaxFileSize]
	}
	id := randomID("F", 5)
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if len(t.files) >= MaxFiles {
		for k := range t.files {
			delete(t.files, k)
			break
		}
	}
	t.files[id] = storedFile{name: name, mimetype: mimetype, data: bytes.Clone(data)}
	u := t.s.URL + "/files/" + t.ID + "/" + id + "/" + url.PathEscape(name)
	return File{ID: id, Name: name, Mimetype: mimetype, Size: int64(len(data)), URLPrivate: u, URLPrivateDownload: u + "?download=1"}
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.byToken[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	var f storedFile
	ok := false
	if t != nil && !t.revoked && t.ID == r.PathValue("team") {
		f, ok = t.files[r.PathValue("id")]
	}
	s.mu.Unlock()
	if !ok {
		// Slack answers an unauthenticated file request with its login page.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.mimetype)
	_, _ = w.Write(f.data)
}

// answer writes a Web API answer.
func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code string) {
	answer(w, http.StatusOK, map[string]any{"ok": false, "error": code})
}

// params reads a request's arguments: a form or a JSON object.
func params(r *http.Request) (map[string]string, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		return nil, errors.New("body")
	}
	out := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				out[k] = v
			case float64:
				out[k] = strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		return out, nil
	}
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	for k := range q {
		out[k] = q.Get(k)
	}
	return out, nil
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	p, err := params(r)
	if err != nil {
		fail(w, "invalid_form_data")
		return
	}
	if method == "oauth.v2.access" {
		s.oauthAccess(w, r, p)
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = p["token"]
	}
	s.mu.Lock()
	t := s.byToken[token]
	switch {
	case token == "":
		s.mu.Unlock()
		fail(w, "not_authed")
		return
	case t == nil:
		s.mu.Unlock()
		fail(w, "invalid_auth")
		return
	case t.revoked:
		s.mu.Unlock()
		fail(w, "token_revoked")
		return
	}
	var f *Failure
	if q := t.fail[method]; len(q) > 0 {
		f = &q[0]
		t.fail[method] = q[1:]
	}
	s.mu.Unlock()
	if f != nil {
		s.failWith(w, r, *f)
		return
	}
	switch method {
	case "apps.uninstall":
		if p["client_id"] != s.ClientID || p["client_secret"] != s.ClientSecret {
			fail(w, "invalid_client_id")
			return
		}
		s.mu.Lock()
		t.revoked, t.uninstalled = true, true
		s.mu.Unlock()
		answer(w, http.StatusOK, map[string]any{"ok": true})
	case "auth.test":
		answer(w, http.StatusOK, map[string]any{"ok": true, "url": "https://" + strings.ToLower(t.Name) + ".slack.com/",
			"team": t.Name, "user": "comm", "team_id": t.ID, "user_id": t.BotUserID, "bot_id": "B" + t.BotUserID[1:]})
	case "chat.postMessage":
		s.postMessage(w, t, p)
	case "assistant.threads.setStatus":
		if p["channel_id"] == "" || p["thread_ts"] == "" {
			fail(w, "invalid_arguments")
			return
		}
		s.mu.Lock()
		t.statuses = keep(append(t.statuses, Status{ChannelID: p["channel_id"], ThreadTS: p["thread_ts"], Status: p["status"]}))
		s.mu.Unlock()
		answer(w, http.StatusOK, map[string]any{"ok": true})
	default:
		fail(w, "unknown_method")
	}
}

// keep bounds a record to its last MaxRecorded entries.
func keep[T any](s []T) []T {
	if len(s) > MaxRecorded {
		return append(s[:0:0], s[len(s)-MaxRecorded:]...)
	}
	return s
}

func (s *Server) failWith(w http.ResponseWriter, r *http.Request, f Failure) {
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	answer(w, status, map[string]any{"ok": false, "error": f.Error})
}

func (s *Server) postMessage(w http.ResponseWriter, t *Team, p map[string]string) {
	ch, text := p["channel"], p["text"]
	switch {
	case ch == "":
		fail(w, "channel_not_found")
		return
	case text == "":
		fail(w, "no_text")
		return
	case len([]rune(text)) > 40000:
		fail(w, "msg_too_long")
		return
	}
	s.mu.Lock()
	now := s.now()
	key := t.ID + "/" + ch
	if last, ok := s.lastPost[key]; s.rateLimit && ok && now.Sub(last) < time.Second {
		s.limited++
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	if len(s.lastPost) > 10000 {
		clear(s.lastPost)
	}
	s.lastPost[key] = now
	s.seq++
	ts := fmt.Sprintf("%d.%06d", 1700000000+s.seq/1000000, s.seq%1000000)
	if strings.HasPrefix(ch, "U") {
		ch = "D" + ch[1:] // the app's DM with the user
	}
	t.sent = keep(append(t.sent, Message{Channel: ch, Text: text, ThreadTS: p["thread_ts"], TS: ts}))
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]any{"ok": true, "channel": ch, "ts": ts,
		"message": map[string]any{"type": "message", "text": text, "ts": ts, "user": t.BotUserID}})
}

func (s *Server) oauthAccess(w http.ResponseWriter, r *http.Request, p map[string]string) {
	id, secret := p["client_id"], p["client_secret"]
	if u, pw, ok := r.BasicAuth(); ok {
		id, secret = u, pw
	}
	if id != s.ClientID {
		fail(w, "invalid_client_id")
		return
	}
	if secret != s.ClientSecret {
		fail(w, "bad_client_secret")
		return
	}
	s.mu.Lock()
	g, ok := s.codes[p["code"]]
	delete(s.codes, p["code"])
	s.mu.Unlock()
	switch {
	case !ok:
		fail(w, "invalid_code")
		return
	case g.redirectURI != p["redirect_uri"]:
		fail(w, "bad_redirect_uri")
		return
	}
	t := g.team
	answer(w, http.StatusOK, map[string]any{"ok": true, "access_token": t.BotToken, "token_type": "bot",
		"scope": "chat:write,im:history", "bot_user_id": t.BotUserID, "app_id": "A0FAKEAPP",
		"team": map[string]any{"id": t.ID, "name": t.Name}, "enterprise": nil, "is_enterprise_install": false,
		"authed_user": map[string]any{"id": "U0INSTALLER"}})
}

// Event is a message event a person sends.
type Event struct {
	// Type is "message" (the default) or "app_mention".
	Type string
	// Subtype, BotID: set to send what comm drops (bot_message,
	// message_changed).
	Subtype, BotID string
	Channel        string
	// ChannelType is "im" (the default), "channel", "group" or "mpim".
	ChannelType string
	// Text is what the person typed; EventCallback escapes it as Slack
	// does.
	User, Text string
	// TS is the message ts; ThreadTS the parent's in a thread.
	TS, ThreadTS string
	Files        []File
}

// EventCallback is the event_callback body delivering ev in team.
// eventID names the delivery ("Ev…"; a retry repeats it).
func EventCallback(teamID, eventID string, ev Event) []byte {
	if ev.Type == "" {
		ev.Type = "message"
	}
	if ev.ChannelType == "" && ev.Type == "message" {
		ev.ChannelType = "im"
	}
	e := map[string]any{"type": ev.Type, "channel": ev.Channel, "user": ev.User, "text": Escape(ev.Text), "ts": ev.TS, "event_ts": ev.TS}
	if ev.Type == "message" {
		e["channel_type"] = ev.ChannelType
	}
	for k, v := range map[string]string{"subtype": ev.Subtype, "bot_id": ev.BotID, "thread_ts": ev.ThreadTS} {
		if v != "" {
			e[k] = v
		}
	}
	if len(ev.Files) > 0 {
		e["files"] = ev.Files
	}
	return Envelope(teamID, eventID, e)
}

// Escape escapes &, < and > in a message text, as Slack does in events.
func Escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Envelope is an event_callback body around any inner event.
func Envelope(teamID, eventID string, event any) []byte {
	b, _ := json.Marshal(map[string]any{"token": "deprecated-verification-token", "team_id": teamID, "api_app_id": "A0FAKEAPP",
		"event": event, "type": "event_callback", "event_id": eventID, "event_time": 1700000000,
		"authorizations": []map[string]any{{"team_id": teamID, "is_bot": true}}})
	return b
}

// URLVerification is the url_verification body with challenge.
func URLVerification(challenge string) []byte {
	b, _ := json.Marshal(map[string]string{"token": "deprecated-verification-token", "challenge": challenge, "type": "url_verification"})
	return b
}

// SignedRequest is Slack's POST of body to target, signed with secret at
// now (X-Slack-Request-Timestamp and X-Slack-Signature). retry > 0 adds
// X-Slack-Retry-Num and X-Slack-Retry-Reason.
func SignedRequest(target, secret string, now time.Time, body []byte, retry int) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	r.Header.Set(slack.TimestampHeader, ts)
	r.Header.Set(slack.SignatureHeader, slack.Sign(secret, ts, body))
	if retry > 0 {
		r.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		r.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	return r
}

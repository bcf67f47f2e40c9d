// Package telnyxtest is a fake Telnyx API v2 for the messaging calls comm
// makes, and a webhook sender that signs events the way Telnyx does.
//
// The API (Server.APIURL, ".../v2") checks the Bearer key of every call
// (401 with Telnyx's error 10009), and serves GET
// /v2/messaging_phone_numbers/{number}, GET /v2/messaging_profiles, GET and
// PATCH /v2/messaging_profiles/{id} (webhook_url, webhook_api_version),
// POST /v2/messages (from one of the account's numbers) and POST
// /v2/messages/number_pool (from the profile's first number). A send is
// refused like Telnyx refuses it: a "to" not in E.164 (40310), a "from"
// not of the account (40305), no text (10004), more than 10 segments
// (40302); queued failures (FailNext) answer 429 with Retry-After and
// x-ratelimit-reset, 5xx, 401, or hold the request until the client gives
// up. HoldNext records the next send at once (Sent shows it, its reports
// can be delivered) but holds its answer until released: a report that
// beats the send's answer. Media files (AddMedia) are served under Server.URL + "/media/", with
// injectable failures (FailMedia).
//
// Each Account has its own Ed25519 key pair: PublicKey is what the portal
// shows, and its webhook requests carry telnyx-signature-ed25519 (base64
// Ed25519 over "<telnyx-timestamp>|<body>") and telnyx-timestamp. Records
// are capped (MaxRecorded). Safe for concurrent use.
package telnyxtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxRecorded is how many sent messages an account keeps (the most
// recent).
const MaxRecorded = 1000

// maxBody bounds a request body the fake reads.
const maxBody = 1 << 20

// Server is a fake Telnyx API hosting any number of accounts.
type Server struct {
	// URL is the server's root (media live under URL + "/media/").
	URL string
	// APIURL is the API's base URL (telnyx.Options.APIURL).
	APIURL string
	// WebhookClient delivers webhooks (Account.Deliver).
	WebhookClient *http.Client
	// Now is the clock of webhook timestamps; time.Now when nil.
	Now func() time.Time

	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	accounts map[string]*Account  // by API key
	profiles map[string]*profile  // by id
	numbers  map[string]*number   // by E.164
	media    map[string]*mediaObj // by id
	seq      int
}

type profile struct {
	acct              *Account
	id, name          string
	webhookURL        *string
	webhookAPIVersion string
}

type number struct {
	acct      *Account
	profileID string
}

type mediaObj struct {
	name, ctype string
	data        []byte
	fail        []int // statuses of the next GETs
	gets        int
}

// NewServer starts a fake Telnyx API. Close it when done.
func NewServer() *Server {
	s := &Server{accounts: map[string]*Account{}, profiles: map[string]*profile{}, numbers: map[string]*number{},
		media: map[string]*mediaObj{}, done: make(chan struct{}), WebhookClient: &http.Client{Timeout: 30 * time.Second}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL, s.APIURL = s.srv.URL, s.srv.URL+"/v2"
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// uuid returns a random version 4 UUID.
func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Account is one fake Telnyx account: its key, its signing key, a
// messaging profile and a number on it.
type Account struct {
	s *Server
	// APIKey is the account's API key (Bearer).
	APIKey string
	// PublicKey is the account's Ed25519 public key, base64, as the
	// portal shows it; Key signs its webhooks.
	PublicKey string
	Key       ed25519.PrivateKey
	// ProfileID is the account's messaging profile; Number is a number
	// assigned to it.
	ProfileID string
	Number    string

	mu       sync.Mutex
	sent     []Sent
	total    int64
	sentWake chan struct{}
	fail     []Failure
	hold     []chan struct{}
	calls    map[string]int
}

// NewAccount creates an account with a fresh key pair, a messaging
// profile and a number on it.
func (s *Server) NewAccount() *Account {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	return s.newAccount(pub, priv)
}

// NewAccountWithKey is NewAccount with the given signing key (the test
// vector's fixed seed).
func (s *Server) NewAccountWithKey(key ed25519.PrivateKey) *Account {
	return s.newAccount(key.Public().(ed25519.PublicKey), key)
}

func (s *Server) newAccount(pub ed25519.PublicKey, priv ed25519.PrivateKey) *Account {
	k := make([]byte, 24)
	_, _ = rand.Read(k)
	a := &Account{s: s, APIKey: "KEY" + strings.ToUpper(hex.EncodeToString(k)), PublicKey: base64.StdEncoding.EncodeToString(pub),
		Key: priv, calls: map[string]int{}}
	s.mu.Lock()
	s.accounts[a.APIKey] = a
	s.mu.Unlock()
	a.ProfileID = a.AddProfile("comm profile")
	a.Number = a.AddNumber(a.ProfileID)
	return a
}

// AddProfile creates another messaging profile of the account and returns
// its id.
func (a *Account) AddProfile(name string) string {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id := uuid()
	s.profiles[id] = &profile{acct: a, id: id, name: name, webhookAPIVersion: "2"}
	return id
}

// AddNumber assigns a new number to the profile (none when profileID is
// empty) and returns it.
func (a *Account) AddNumber(profileID string) string {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	n := fmt.Sprintf("+1555%07d", s.seq)
	s.numbers[n] = &number{acct: a, profileID: profileID}
	return n
}

// Revoke deletes the API key: every call answers 401.
func (a *Account) Revoke() {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.accounts, a.APIKey)
}

// Profile is a messaging profile as the fake holds it.
type Profile struct {
	ID, Name          string
	WebhookURL        string // "" when none
	WebhookAPIVersion string
}

// Profile returns the messaging profile id.
func (s *Server) Profile(id string) (Profile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.profiles[id]
	if !ok {
		return Profile{}, false
	}
	return p.public(), true
}

// SetWebhook sets the profile's webhook as the portal would.
func (s *Server) SetWebhook(id, url, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.profiles[id]; ok {
		p.webhookURL, p.webhookAPIVersion = &url, version
		if url == "" {
			p.webhookURL = nil
		}
	}
}

func (p *profile) public() Profile {
	out := Profile{ID: p.id, Name: p.name, WebhookAPIVersion: p.webhookAPIVersion}
	if p.webhookURL != nil {
		out.WebhookURL = *p.webhookURL
	}
	return out
}

// Webhook returns the account profile's webhook_url ("" when none).
func (a *Account) Webhook() string {
	p, _ := a.s.Profile(a.ProfileID)
	return p.WebhookURL
}

// Sent is a message the account sent.
type Sent struct {
	ID                 string
	Path               string // "/v2/messages" or "/v2/messages/number_pool"
	From, To, Text     string
	MessagingProfileID string
	WebhookURL         string
	Parts              int
}

// Sent returns the messages the account sent, oldest first.
func (a *Account) Sent() []Sent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Sent(nil), a.sent...)
}

// SentTotal is how many messages the account sent, ever.
func (a *Account) SentTotal() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// WaitSent waits until the account has sent at least n messages in all, or
// ctx ends.
func (a *Account) WaitSent(ctx context.Context, n int64) error {
	for {
		a.mu.Lock()
		if a.total >= n {
			a.mu.Unlock()
			return nil
		}
		if a.sentWake == nil {
			a.sentWake = make(chan struct{})
		}
		ch := a.sentWake
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Calls returns how many requests named op the account made: "send",
// "number", "profile", "patch".
func (a *Account) Calls(op string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

// Failure is how the next send fails.
type Failure struct {
	Status int
	// Code, Title and Detail are Telnyx's error.
	Code, Title, Detail string
	// RetryAfter, when not 0, is sent as Retry-After and
	// x-ratelimit-reset (seconds).
	RetryAfter int
	// Hang holds the request until the client gives up.
	Hang bool
}

// Failures of a send.
var (
	ServerError  = Failure{Status: http.StatusServiceUnavailable, Code: "10007", Title: "Unexpected error", Detail: "An unexpected error occured."}
	Hang         = Failure{Hang: true}
	InvalidTo    = Failure{Status: http.StatusBadRequest, Code: "40310", Title: "Invalid 'to' address", Detail: "The 'to' address should be a single valid number."}
	OptedOut     = Failure{Status: http.StatusBadRequest, Code: "40300", Title: "Blocked due to STOP message", Detail: "Messages cannot be sent to this number due to an existing block rule."}
	Unauthorized = Failure{Status: http.StatusUnauthorized, Code: "10009", Title: "Authentication failed", Detail: "Could not understand the provided credentials."}
)

// TooManyRequests is a 429 asking to wait after seconds.
func TooManyRequests(after int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Code: "10011", Title: "Too many requests",
		Detail: "You have exceeded the maximum number of allowed requests.", RetryAfter: after}
}

// FailNext makes the next send answer f; queued failures are used in
// order.
func (a *Account) FailNext(f Failure) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.fail) < MaxRecorded {
		a.fail = append(a.fail, f)
	}
}

// HoldNext makes the next send that Telnyx accepts wait with its answer
// (the message already recorded, as Telnyx has it) until release is called
// (or the client gives up). Holds are used in order.
func (a *Account) HoldNext() (release func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	a.hold = append(a.hold, ch)
	a.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// AddMedia stores a file and returns its URL (as an inbound MMS names
// it).
func (s *Server) AddMedia(name, contentType string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := uuid()
	s.media[id] = &mediaObj{name: name, ctype: contentType, data: bytes.Clone(data)}
	return s.URL + "/media/" + id + "/" + name
}

// FailMedia makes the next GETs of the media at url answer the statuses
// given, in order; HangMedia holds the request until the client gives up.
func (s *Server) FailMedia(url string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mediaAt(url); m != nil {
		m.fail = append(m.fail, statuses...)
	}
}

// MediaGets returns how many times the media at url was fetched.
func (s *Server) MediaGets(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mediaAt(url); m != nil {
		return m.gets
	}
	return 0
}

// HangMedia is a FailMedia status: no answer until the client gives up.
const HangMedia = -1

// mediaAt finds the media of url. s.mu is held.
func (s *Server) mediaAt(url string) *mediaObj {
	rest, ok := strings.CutPrefix(url, s.URL+"/media/")
	if !ok {
		return nil
	}
	id, _, _ := strings.Cut(rest, "/")
	return s.media[id]
}

// apiErr is one of Telnyx's errors.
type apiErr struct {
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, title, detail string) {
	writeJSON(w, status, map[string]any{"errors": []apiErr{{Code: code, Title: title, Detail: detail}}})
}

var e164RE = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/media/"); ok {
		s.serveMedia(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok {
		writeErr(w, http.StatusNotFound, "10005", "Resource not found", "The requested resource or URL could not be found.")
		return
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	a := s.accounts[key]
	s.mu.Unlock()
	if !ok || a == nil {
		writeErr(w, http.StatusUnauthorized, "10009", "Authentication failed", "Could not understand the provided credentials.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "10015", "Bad Request", "The request body could not be read.")
		return
	}
	switch {
	case r.Method == http.MethodPost && (rest == "messages" || rest == "messages/number_pool"):
		a.send(w, r, rest == "messages/number_pool", body)
	case r.Method == http.MethodGet && strings.HasPrefix(rest, "messaging_phone_numbers/"):
		a.count("number")
		s.getNumber(w, a, strings.TrimPrefix(rest, "messaging_phone_numbers/"))
	case r.Method == http.MethodGet && rest == "messaging_profiles":
		a.count("profile")
		s.listProfiles(w, a)
	case strings.HasPrefix(rest, "messaging_profiles/") && (r.Method == http.MethodGet || r.Method == http.MethodPatch):
		id := strings.TrimPrefix(rest, "messaging_profiles/")
		if r.Method == http.MethodPatch {
			a.count("patch")
			s.patchProfile(w, a, id, body)
			return
		}
		a.count("profile")
		s.getProfile(w, a, id)
	default:
		writeErr(w, http.StatusNotFound, "10005", "Resource not found", "The requested resource or URL could not be found.")
	}
}

func (a *Account) count(op string) {
	a.mu.Lock()
	a.calls[op]++
	a.mu.Unlock()
}

func (s *Server) getNumber(w http.ResponseWriter, a *Account, num string) {
	s.mu.Lock()
	n, ok := s.numbers[num]
	s.mu.Unlock()
	if !ok || n.acct != a {
		writeErr(w, http.StatusNotFound, "10005", "Resource not found", "The requested resource or URL could not be found.")
		return
	}
	var pid any
	if n.profileID != "" {
		pid = n.profileID
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{
		"record_type": "messaging_phone_number", "id": strings.TrimPrefix(num, "+"), "phone_number": num,
		"messaging_profile_id": pid, "country_code": "US", "type": "longcode",
	}})
}

func profileJSON(p *profile) map[string]any {
	var hook any
	if p.webhookURL != nil {
		hook = *p.webhookURL
	}
	return map[string]any{"record_type": "messaging_profile", "id": p.id, "name": p.name, "enabled": true,
		"webhook_url": hook, "webhook_failover_url": nil, "webhook_api_version": p.webhookAPIVersion}
}

func (s *Server) listProfiles(w http.ResponseWriter, a *Account) {
	s.mu.Lock()
	var out []map[string]any
	for _, p := range s.profiles {
		if p.acct == a {
			out = append(out, profileJSON(p))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "meta": map[string]any{"page_number": 1, "total_pages": 1, "total_results": len(out)}})
}

func (s *Server) getProfile(w http.ResponseWriter, a *Account, id string) {
	s.mu.Lock()
	p, ok := s.profiles[id]
	var out map[string]any
	if ok {
		out = profileJSON(p)
	}
	s.mu.Unlock()
	if !ok || p.acct != a {
		writeErr(w, http.StatusNotFound, "10005", "Resource not found", "The requested resource or URL could not be found.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (s *Server) patchProfile(w http.ResponseWriter, a *Account, id string, body []byte) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		writeErr(w, http.StatusBadRequest, "10015", "Bad Request", "The request body is not a JSON object.")
		return
	}
	var hook *string
	if raw, ok := in["webhook_url"]; ok && string(raw) != "null" {
		var u string
		if err := json.Unmarshal(raw, &u); err != nil {
			writeErr(w, http.StatusUnprocessableEntity, "10003", "Invalid URL", "webhook_url must be a string.")
			return
		}
		if u != "" {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || len(u) > 2000 {
				writeErr(w, http.StatusUnprocessableEntity, "10003", "Invalid URL", "The URL provided was invalid, malformed, or too long.")
				return
			}
			hook = &u
		}
	}
	var version string
	if raw, ok := in["webhook_api_version"]; ok {
		if err := json.Unmarshal(raw, &version); err != nil || (version != "1" && version != "2" && version != "2010-04-01") {
			writeErr(w, http.StatusUnprocessableEntity, "10015", "Bad Request", "webhook_api_version must be \"1\", \"2\" or \"2010-04-01\".")
			return
		}
	}
	s.mu.Lock()
	p, ok := s.profiles[id]
	if ok && p.acct == a {
		if _, set := in["webhook_url"]; set {
			p.webhookURL = hook
		}
		if version != "" {
			p.webhookAPIVersion = version
		}
	}
	var out map[string]any
	if ok {
		out = profileJSON(p)
	}
	s.mu.Unlock()
	if !ok || p.acct != a {
		writeErr(w, http.StatusNotFound, "10005", "Resource not found", "The requested resource or URL could not be found.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// segments counts the segments of text as Telnyx does (GSM-7 when every
// character is printable ASCII or a line break, else UCS-2).
func segments(text string) (n int, encoding string) {
	septets, gsm := 0, true
	for _, r := range text {
		switch {
		case strings.ContainsRune("~^|\\{}[]", r):
			septets += 2
		case r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7E && r != '`'):
			septets++
		default:
			gsm = false
		}
	}
	if gsm {
		if septets <= 160 {
			return 1, "GSM-7"
		}
		return (septets + 152) / 153, "GSM-7"
	}
	units := 0
	for _, r := range text {
		units++
		if r >= 0x10000 {
			units++
		}
	}
	if units <= 70 {
		return 1, "UCS-2"
	}
	return (units + 66) / 67, "UCS-2"
}

func (a *Account) send(w http.ResponseWriter, r *http.Request, pool bool, body []byte) {
	a.mu.Lock()
	a.calls["send"]++
	var f *Failure
	if len(a.fail) > 0 {
		f = &a.fail[0]
		a.fail = a.fail[1:]
	}
	a.mu.Unlock()
	if f != nil {
		if f.Hang {
			select {
			case <-r.Context().Done():
			case <-a.s.done:
			}
			return
		}
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
			w.Header().Set("X-Ratelimit-Reset", strconv.Itoa(f.RetryAfter))
		}
		writeErr(w, f.Status, f.Code, f.Title, f.Detail)
		return
	}
	var in struct {
		From               string `json:"from"`
		To                 string `json:"to"`
		Text               string `json:"text"`
		MessagingProfileID string `json:"messaging_profile_id"`
		WebhookURL         string `json:"webhook_url"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeErr(w, http.StatusBadRequest, "10015", "Bad Request", "The request body is not valid JSON.")
		return
	}
	s := a.s
	s.mu.Lock()
	from, profileID := in.From, in.MessagingProfileID
	fromOK := false
	if pool {
		if p, ok := s.profiles[profileID]; ok && p.acct == a {
			for num, n := range s.numbers {
				if n.acct == a && n.profileID == profileID && (from == "" || num < from) {
					from = num
				}
			}
			fromOK = from != ""
		}
	} else if n, ok := s.numbers[from]; ok && n.acct == a && n.profileID != "" {
		fromOK, profileID = true, n.profileID
	}
	s.mu.Unlock()
	parts, enc := segments(in.Text)
	switch {
	case pool && profileID == "":
		writeErr(w, http.StatusBadRequest, "10004", "Missing required parameter", "The 'messaging_profile_id' parameter is required.")
	case pool && !fromOK:
		writeErr(w, http.StatusBadRequest, "40305", "Invalid 'from' address", "The messaging profile has no number to send from.")
	case !pool && in.From == "":
		writeErr(w, http.StatusBadRequest, "10004", "Missing required parameter", "The 'from' parameter is required.")
	case !fromOK:
		writeErr(w, http.StatusBadRequest, "40305", "Invalid 'from' address", "The 'from' address should be a number of your account on a messaging profile.")
	case !e164RE.MatchString(in.To):
		writeErr(w, http.StatusBadRequest, "40310", "Invalid 'to' address", "The 'to' address should be a single valid number.")
	case in.Text == "":
		writeErr(w, http.StatusBadRequest, "10004", "Missing required parameter", "The 'text' parameter is required.")
	case parts > 10:
		writeErr(w, http.StatusBadRequest, "40302", "Message too large", fmt.Sprintf("The SMS message would be divided into %d parts. The maximum is 10.", parts))
	default:
		sm := Sent{ID: uuid(), Path: r.URL.Path, From: from, To: in.To, Text: in.Text, MessagingProfileID: profileID, WebhookURL: in.WebhookURL, Parts: parts}
		a.mu.Lock()
		if len(a.sent) >= MaxRecorded {
			a.sent = append(a.sent[:0], a.sent[len(a.sent)-MaxRecorded+1:]...)
		}
		a.sent = append(a.sent, sm)
		a.total++
		if a.sentWake != nil {
			close(a.sentWake)
			a.sentWake = nil
		}
		var hold chan struct{}
		if len(a.hold) > 0 {
			hold, a.hold = a.hold[0], a.hold[1:]
		}
		a.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			case <-a.s.done:
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{
			"record_type": "message", "direction": "outbound", "id": sm.ID, "type": "SMS",
			"messaging_profile_id": profileID, "from": map[string]any{"phone_number": from, "carrier": "Telnyx", "line_type": "VoIP"},
			"to":   []map[string]any{{"phone_number": in.To, "status": "queued", "carrier": "T-MOBILE USA, INC.", "line_type": "Wireless"}},
			"text": in.Text, "media": []any{}, "encoding": enc, "parts": parts, "errors": []any{},
			"webhook_url": in.WebhookURL, "received_at": s.now().UTC().Format(time.RFC3339Nano),
		}})
	}
}

func (s *Server) serveMedia(w http.ResponseWriter, r *http.Request, rest string) {
	id, _, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	m, ok := s.media[id]
	status := 0
	var data []byte
	var ctype string
	if ok {
		m.gets++
		if len(m.fail) > 0 {
			status, m.fail = m.fail[0], m.fail[1:]
		}
		data, ctype = m.data, m.ctype
	}
	s.mu.Unlock()
	switch {
	case !ok:
		http.Error(w, "NoSuchKey", http.StatusNotFound)
	case status == HangMedia:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case status != 0:
		http.Error(w, http.StatusText(status), status)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}
}

// mediaEntry is a media entry of an inbound MMS for url (a file of the
// fake: its type, size and hash are known; another URL: type only).
func (s *Server) mediaEntry(url string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := map[string]any{"url": url, "content_type": nil, "size": nil, "hash_sha256": nil}
	if m := s.mediaAt(url); m != nil {
		sum := sha256.Sum256(m.data)
		e["content_type"], e["size"], e["hash_sha256"] = m.ctype, len(m.data), hex.EncodeToString(sum[:])
	}
	return e
}

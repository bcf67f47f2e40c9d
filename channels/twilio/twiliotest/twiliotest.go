// Package twiliotest is a fake Twilio: an httptest server speaking the
// REST API comm's Twilio adapter uses (api.twilio.com and
// messaging.twilio.com on one host) for many accounts at once, and a
// webhook sender that signs the way Twilio does.
//
// REST surface, with HTTP Basic auth (the AccountSid and Auth Token, or an
// API key SID and secret of the account; else 401 with error 20003):
//
//	GET  /2010-04-01/Accounts/{AC}.json
//	GET  /2010-04-01/Accounts/{AC}/IncomingPhoneNumbers.json?PhoneNumber=+1...
//	GET  /2010-04-01/Accounts/{AC}/IncomingPhoneNumbers/{PN}.json
//	POST /2010-04-01/Accounts/{AC}/IncomingPhoneNumbers/{PN}.json   SmsUrl, SmsMethod
//	POST /2010-04-01/Accounts/{AC}/Messages.json                     To, From | MessagingServiceSid, Body | ContentSid, StatusCallback ...
//	GET  /2010-04-01/Accounts/{AC}/Messages/{SM}/Media/{ME}          307 to the file's storage URL (no auth there)
//	GET  /v1/Services/{MG}, POST /v1/Services/{MG}                   InboundRequestUrl, StatusCallback ...
//	POST /v2/Indicators/Typing.json                                  messageId, channel=whatsapp
//
// Errors are Twilio's JSON ({"code","message","more_info","status"}) with
// its codes: 20003, 20404, 20429 (with Retry-After), 21211, 21602,
// 21606, 21610, 21617, 63016 ... FailNext injects them.
//
// Webhooks: Deliver posts form-encoded parameters with X-Twilio-Signature,
// HMAC-SHA1 (keyed with the Auth Token) over the URL exactly as it was
// configured followed by the sorted parameters; DeliverJSON posts a JSON
// body with ?bodySHA256=<hex> added to the URL, the signature over the URL
// only. Rewrite sends the requests elsewhere than the signed URL (a proxy
// in front of the receiver). Status posts a status callback to the
// StatusCallback a message was sent with; CallbackFirst makes the next
// message's callbacks arrive before Messages.json answers. Safe for
// concurrent use.
package twiliotest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Caps of what an account remembers.
const (
	MaxRecorded = 10000
	maxBody     = 1 << 20
	// MaxBody is Twilio's limit on a message body, in characters.
	MaxBody = 1600
)

// SandboxNumber is Twilio's WhatsApp sandbox number: every account may
// send from it.
const SandboxNumber = "+14155238886"

// Server is a fake Twilio hosting any number of accounts.
type Server struct {
	// URL is the base URL of both APIs (twilio.Options APIURL and
	// MessagingURL).
	URL string
	// WebhookClient posts webhooks.
	WebhookClient *http.Client
	// Rewrite, when set, gives the address a webhook for URL u is posted
	// to (the signature still covers u, as Twilio signs the URL it was
	// given and a proxy forwards the request): a test's gateway listens
	// on 127.0.0.1 while its public URL names another host.
	Rewrite func(u string) string

	srv  *httptest.Server
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	accounts map[string]*Account
	keys     map[string]*Account // API key SID -> account
	files    map[string]file     // storage token -> file
	inbound  map[string]inboundRecord
}

type file struct {
	account     string
	contentType string
	data        []byte
}

type inboundRecord struct {
	account, from string
}

// NewServer starts a fake Twilio. Close it when done.
func NewServer() *Server {
	s := &Server{accounts: map[string]*Account{}, keys: map[string]*Account{}, files: map[string]file{},
		inbound: map[string]inboundRecord{}, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.WebhookClient = &http.Client{Timeout: 30 * time.Second}
	return s
}

// ServeHTTP serves the fake API (to mount it on a listener of one's own;
// set URL to that listener's base URL then, as media URLs are built from
// it).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r) }

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.once.Do(func() { close(s.done) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func hexID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewAccount creates an account with an Auth Token and an API key.
func (s *Server) NewAccount() *Account {
	a := &Account{s: s, SID: hexID("AC"), AuthToken: hexID("")[0:32],
		KeySID: hexID("SK"), KeySecret: hexID("")[0:32],
		numbers: map[string]*Number{}, services: map[string]*Service{}, fail: map[string][]Failure{},
		messages: map[string]*Message{}}
	s.mu.Lock()
	s.accounts[a.SID] = a
	s.keys[a.KeySID] = a
	s.mu.Unlock()
	return a
}

// Account is one fake account: its credentials, numbers, services, and
// what it was asked to do.
type Account struct {
	s         *Server
	SID       string
	AuthToken string
	KeySID    string
	KeySecret string

	mu        sync.Mutex
	revoked   bool
	numbers   map[string]*Number // by sid
	services  map[string]*Service
	sent      []Message
	sentTotal int64
	sentWake  chan struct{}
	messages  map[string]*Message // by sid
	typings   []Typing
	fail      map[string][]Failure
	calls     map[string]int
	// early are status callbacks the next created message gets before
	// Messages.json answers.
	early []string
	// EarlyAnswers are the HTTP statuses the early callbacks got.
	earlyAnswers []int
}

// CallbackFirst makes the next message created post these status
// callbacks ("sent", "delivered" ...) to its StatusCallback before
// Messages.json answers, as Twilio may: the receiver sees the report on a
// message whose send has not returned yet.
func (a *Account) CallbackFirst(statuses ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.early = append([]string(nil), statuses...)
}

// EarlyAnswers returns the HTTP statuses the receiver answered the
// CallbackFirst callbacks with (0: the request failed).
func (a *Account) EarlyAnswers() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.earlyAnswers...)
}

// Number is an IncomingPhoneNumber.
type Number struct {
	SID         string
	PhoneNumber string
	SMSURL      string
	SMSMethod   string
}

// Service is a Messaging Service.
type Service struct {
	SID               string
	InboundRequestURL string
	StatusCallback    string
}

// Message is a message the account was asked to send.
type Message struct {
	SID                 string
	From                string
	To                  string
	MessagingServiceSID string
	Body                string
	ContentSID          string
	ContentVariables    string
	StatusCallback      string
	MediaURL            []string
}

// Typing is a typing indicator the account was asked to show.
type Typing struct {
	MessageID string
	Channel   string
	// To is the sender of the inbound message MessageID names (the
	// person who sees the indicator); empty for a sid the fake did not
	// deliver.
	To string
}

// Failure is an error answer the fake gives instead of the next call.
type Failure struct {
	Status     int
	Code       int
	Message    string
	RetryAfter int  // seconds, in Retry-After
	Hang       bool // hold the request until the client gives up
}

// Failures Twilio answers.
var (
	RateLimited   = Failure{Status: 429, Code: 20429, Message: "Too Many Requests", RetryAfter: 7}
	Unavailable   = Failure{Status: 503, Code: 20500, Message: "Service Unavailable"}
	Hang          = Failure{Hang: true}
	InvalidTo     = Failure{Status: 400, Code: 21211, Message: "The 'To' number is not a valid phone number."}
	OptedOut      = Failure{Status: 400, Code: 21610, Message: "Attempt to send to unsubscribed recipient"}
	Region        = Failure{Status: 400, Code: 21408, Message: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number"}
	OutsideWindow = Failure{Status: 400, Code: 63016, Message: "Failed to send freeform message because you are outside the allowed window. If you are using WhatsApp, please use a Message Template."}
	AuthFailed    = Failure{Status: 401, Code: 20003, Message: "Authenticate"}
)

// Operations FailNext takes.
const (
	OpAccount = "account"
	OpMessage = "message"
	OpTyping  = "typing"
	OpMedia   = "media"
	OpNumber  = "number"
	OpService = "service"
)

// FailNext makes the next call of op answer f; queued failures are used
// in order.
func (a *Account) FailNext(op string, f Failure) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[op] = append(a.fail[op], f)
}

// Revoke makes the account's credentials fail (20003) from now on.
func (a *Account) Revoke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revoked = true
}

// AddNumber gives the account a phone number (E.164).
func (a *Account) AddNumber(phone string) Number {
	n := &Number{SID: hexID("PN"), PhoneNumber: phone}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.numbers[n.SID] = n
	return *n
}

// AddService gives the account a Messaging Service.
func (a *Account) AddService() Service {
	sv := &Service{SID: hexID("MG")}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.services[sv.SID] = sv
	return *sv
}

// Number returns the account's number phone as it is now (SMSURL ...).
func (a *Account) Number(phone string) (Number, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.numbers {
		if n.PhoneNumber == phone {
			return *n, true
		}
	}
	return Number{}, false
}

// Service returns a Messaging Service of the account as it is now.
func (a *Account) Service(sid string) (Service, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sv, ok := a.services[sid]
	if !ok {
		return Service{}, false
	}
	return *sv, true
}

// Sent returns the messages the account sent, oldest first.
func (a *Account) Sent() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Message(nil), a.sent...)
}

// SentTotal is how many messages the account has sent, ever.
func (a *Account) SentTotal() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sentTotal
}

// WaitSent waits until the account has sent at least n messages in all,
// or ctx ends.
func (a *Account) WaitSent(ctx context.Context, n int64) error {
	for {
		a.mu.Lock()
		if a.sentTotal >= n {
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

// Typings returns the typing indicators the account was asked to show.
func (a *Account) Typings() []Typing {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Typing(nil), a.typings...)
}

// Calls returns how many times op was called.
func (a *Account) Calls(op string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

// AddMedia stores a file as media of an inbound message and returns its
// MediaUrl (the REST URL that needs the account's credentials).
func (a *Account) AddMedia(messageSID, contentType string, data []byte) string {
	me := hexID("ME")
	a.s.mu.Lock()
	a.s.files[me] = file{account: a.SID, contentType: contentType, data: append([]byte(nil), data...)}
	a.s.mu.Unlock()
	return fmt.Sprintf("%s/2010-04-01/Accounts/%s/Messages/%s/Media/%s", a.s.URL, a.SID, messageSID, me)
}

// Sign is X-Twilio-Signature for a request to u with params: base64
// HMAC-SHA1, keyed with authToken, of u followed by the parameters sorted
// by name, each as name+value.
func Sign(authToken, u string, params url.Values) string {
	var b strings.Builder
	b.WriteString(u)
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range params[k] {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Incoming describes a message a person sends to one of the account's
// numbers.
type Incoming struct {
	// From is the person's number (E.164); To the account's number (or
	// SandboxNumber) it is sent to.
	From, To string
	Body     string
	// WhatsApp makes From and To "whatsapp:" addresses and adds WaId and
	// ProfileName.
	WhatsApp    bool
	ProfileName string
	// Media are files attached (MMS, WhatsApp media): content type ->
	// bytes, delivered in order of MediaTypes.
	MediaTypes []string
	Media      [][]byte
	// RepliedTo is the sid of the message this one answers (WhatsApp
	// OriginalRepliedMessageSid).
	RepliedTo string
	// SID is the message's sid; a new one when empty.
	SID string
	// MessagingServiceSID is set when the number belongs to a service.
	MessagingServiceSID string
}

// Params builds the webhook parameters Twilio posts for m (registering
// its sid, so that a typing indicator on it reaches From).
func (a *Account) Params(m Incoming) url.Values {
	sid := m.SID
	if sid == "" {
		prefix := "SM"
		if len(m.Media) > 0 {
			prefix = "MM"
		}
		sid = hexID(prefix)
	}
	from, to := m.From, m.To
	if m.WhatsApp {
		from, to = "whatsapp:"+from, "whatsapp:"+to
	}
	p := url.Values{
		"MessageSid": {sid}, "SmsMessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {a.SID},
		"From": {from}, "To": {to}, "Body": {m.Body}, "NumMedia": {strconv.Itoa(len(m.Media))},
		"NumSegments": {"1"}, "SmsStatus": {"received"}, "ApiVersion": {"2010-04-01"},
	}
	if m.MessagingServiceSID != "" {
		p.Set("MessagingServiceSid", m.MessagingServiceSID)
	}
	if m.WhatsApp {
		p.Set("WaId", strings.TrimPrefix(m.From, "+"))
		name := m.ProfileName
		if name == "" {
			name = "Test Person"
		}
		p.Set("ProfileName", name)
		p.Set("MessageType", "text")
		if m.RepliedTo != "" {
			p.Set("OriginalRepliedMessageSid", m.RepliedTo)
			p.Set("OriginalRepliedMessageSender", to)
		}
	} else {
		p.Set("FromCountry", "US")
		p.Set("ToCountry", "US")
	}
	for i, data := range m.Media {
		ct := "application/octet-stream"
		if i < len(m.MediaTypes) {
			ct = m.MediaTypes[i]
		}
		p.Set(fmt.Sprintf("MediaUrl%d", i), a.AddMedia(sid, ct, data))
		p.Set(fmt.Sprintf("MediaContentType%d", i), ct)
	}
	a.s.mu.Lock()
	if len(a.s.inbound) < MaxRecorded {
		a.s.inbound[sid] = inboundRecord{account: a.SID, from: m.From}
	}
	a.s.mu.Unlock()
	return p
}

// Request builds the signed form POST Twilio makes to webhook u with
// params (to the address Rewrite gives, when set).
func (a *Account) Request(ctx context.Context, u string, params url.Values) (*http.Request, error) {
	body := params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.s.target(u), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "TwilioProxy/1.1")
	req.Header.Set("X-Twilio-Signature", Sign(a.AuthToken, u, params))
	req.Header.Set("I-Twilio-Idempotency-Token", hexID(""))
	return req, nil
}

// JSONRequest builds a signed JSON-bodied POST to webhook u: u gets
// bodySHA256=<hex SHA-256 of body>, and the signature covers that URL.
func (a *Account) JSONRequest(ctx context.Context, u string, body []byte) (*http.Request, error) {
	sum := sha256.Sum256(body)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	signed := u + sep + "bodySHA256=" + hex.EncodeToString(sum[:])
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.s.target(signed), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Twilio-Signature", Sign(a.AuthToken, signed, nil))
	return req, nil
}

func (s *Server) target(u string) string {
	if s.Rewrite != nil {
		return s.Rewrite(u)
	}
	return u
}

// Deliver posts params to webhook u, signed, and returns the answer.
func (a *Account) Deliver(ctx context.Context, u string, params url.Values) (int, []byte, error) {
	req, err := a.Request(ctx, u, params)
	if err != nil {
		return 0, nil, err
	}
	return a.s.do(req)
}

// DeliverJSON posts a JSON body to webhook u, signed with bodySHA256.
func (a *Account) DeliverJSON(ctx context.Context, u string, body []byte) (int, []byte, error) {
	req, err := a.JSONRequest(ctx, u, body)
	if err != nil {
		return 0, nil, err
	}
	return a.s.do(req)
}

func (s *Server) do(req *http.Request) (int, []byte, error) {
	resp, err := s.WebhookClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, b, err
}

// webhookOf is where a message to number to is posted: the number's
// SmsUrl, else the inbound URL of the service given.
func (a *Account) webhookOf(to, service string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if service != "" {
		if sv, ok := a.services[service]; ok && sv.InboundRequestURL != "" {
			return sv.InboundRequestURL
		}
	}
	for _, n := range a.numbers {
		if n.PhoneNumber == to {
			return n.SMSURL
		}
	}
	return ""
}

// Send has a person send m: the webhook goes to the URL configured on
// m.To's number (or m.MessagingServiceSID's service). It returns the
// parameters posted and the answer.
func (a *Account) Send(ctx context.Context, m Incoming) (url.Values, int, []byte, error) {
	u := a.webhookOf(m.To, m.MessagingServiceSID)
	if u == "" {
		return nil, 0, nil, fmt.Errorf("twiliotest: no webhook configured for %s", m.To)
	}
	p := a.Params(m)
	status, body, err := a.Deliver(ctx, u, p)
	return p, status, body, err
}

// StatusParams are the parameters of a status callback for message sid.
func (a *Account) StatusParams(sid, status string, errorCode int) url.Values {
	a.mu.Lock()
	m := a.messages[sid]
	a.mu.Unlock()
	p := url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {a.SID}, "MessageStatus": {status},
		"SmsStatus": {status}, "ApiVersion": {"2010-04-01"}}
	if m != nil {
		p.Set("To", m.To)
		if m.From != "" {
			p.Set("From", m.From)
		}
		if m.MessagingServiceSID != "" {
			p.Set("MessagingServiceSid", m.MessagingServiceSID)
		}
	}
	if errorCode != 0 {
		p.Set("ErrorCode", strconv.Itoa(errorCode))
	}
	if status == "delivered" || status == "undelivered" {
		p.Set("RawDlrDoneDate", time.Now().UTC().Format("0601021504"))
	}
	return p
}

// Status posts a status callback for message sid to the StatusCallback
// it was sent with (errorCode on failed and undelivered).
func (a *Account) Status(ctx context.Context, sid, status string, errorCode int) (int, []byte, error) {
	a.mu.Lock()
	m := a.messages[sid]
	a.mu.Unlock()
	if m == nil || m.StatusCallback == "" {
		return 0, nil, fmt.Errorf("twiliotest: message %s has no status callback", sid)
	}
	return a.Deliver(ctx, m.StatusCallback, a.StatusParams(sid, status, errorCode))
}

// --- the REST API ---

var (
	accountPath = regexp.MustCompile(`^/2010-04-01/Accounts/(AC[0-9a-f]{32})(\.json|/.*)$`)
	e164        = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, f Failure) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	writeJSON(w, f.Status, map[string]any{"code": f.Code, "message": f.Message,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", f.Code), "status": f.Status})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if strings.HasPrefix(r.URL.Path, "/storage/") {
		s.storage(w, r)
		return
	}
	a := s.authenticate(r)
	if a == nil {
		writeError(w, AuthFailed)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, Failure{Status: 400, Code: 20001, Message: "malformed form: " + err.Error()})
		return
	}
	switch {
	case r.URL.Path == "/v2/Indicators/Typing.json" && r.Method == http.MethodPost:
		a.typing(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/Services/"):
		a.service(w, r, strings.TrimPrefix(r.URL.Path, "/v1/Services/"))
	default:
		m := accountPath.FindStringSubmatch(r.URL.Path)
		if m == nil {
			writeError(w, Failure{Status: 404, Code: 20404, Message: "The requested resource " + r.URL.Path + " was not found"})
			return
		}
		if m[1] != a.SID {
			writeError(w, AuthFailed)
			return
		}
		a.account(w, r, m[2])
	}
}

// authenticate returns the account of r's Basic credentials, or nil.
func (s *Server) authenticate(r *http.Request) *Account {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return nil
	}
	s.mu.Lock()
	a := s.accounts[user]
	key := false
	if a == nil {
		a, key = s.keys[user], true
	}
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	want := a.AuthToken
	if key {
		want = a.KeySecret
	}
	if a.revoked || !hmac.Equal([]byte(pass), []byte(want)) {
		return nil
	}
	return a
}

// failure takes the next injected failure of op, counting the call.
func (a *Account) failure(op string) (Failure, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls == nil {
		a.calls = map[string]int{}
	}
	a.calls[op]++
	q := a.fail[op]
	if len(q) == 0 {
		return Failure{}, false
	}
	a.fail[op] = q[1:]
	return q[0], true
}

// injected answers an injected failure of op; false when there is none.
func (a *Account) injected(w http.ResponseWriter, r *http.Request, op string) bool {
	f, ok := a.failure(op)
	if !ok {
		return false
	}
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-a.s.done:
		}
		return true
	}
	writeError(w, f)
	return true
}

func (a *Account) json() map[string]any {
	return map[string]any{"sid": a.SID, "status": "active", "type": "Full", "friendly_name": "twiliotest " + a.SID[:8],
		"auth_token": "[redacted]"}
}

func numberJSON(n *Number) map[string]any {
	return map[string]any{"sid": n.SID, "phone_number": n.PhoneNumber, "sms_url": n.SMSURL, "sms_method": n.SMSMethod,
		"capabilities": map[string]bool{"sms": true, "mms": true}}
}

func (a *Account) account(w http.ResponseWriter, r *http.Request, rest string) {
	switch {
	case rest == ".json" && r.Method == http.MethodGet:
		if a.injected(w, r, OpAccount) {
			return
		}
		writeJSON(w, 200, a.json())
	case rest == "/IncomingPhoneNumbers.json" && r.Method == http.MethodGet:
		if a.injected(w, r, OpNumber) {
			return
		}
		want := r.URL.Query().Get("PhoneNumber")
		a.mu.Lock()
		list := []map[string]any{}
		for _, n := range a.numbers {
			if want == "" || n.PhoneNumber == want {
				list = append(list, numberJSON(n))
			}
		}
		a.mu.Unlock()
		writeJSON(w, 200, map[string]any{"incoming_phone_numbers": list, "page": 0, "page_size": 50})
	case strings.HasPrefix(rest, "/IncomingPhoneNumbers/") && strings.HasSuffix(rest, ".json"):
		sid := strings.TrimSuffix(strings.TrimPrefix(rest, "/IncomingPhoneNumbers/"), ".json")
		if a.injected(w, r, OpNumber) {
			return
		}
		a.mu.Lock()
		n, ok := a.numbers[sid]
		if ok && r.Method == http.MethodPost {
			if v, set := r.PostForm["SmsUrl"]; set {
				n.SMSURL = v[0]
			}
			if v := r.PostForm.Get("SmsMethod"); v != "" {
				n.SMSMethod = v
			}
		}
		var out map[string]any
		if ok {
			out = numberJSON(n)
		}
		a.mu.Unlock()
		if !ok {
			writeError(w, Failure{Status: 404, Code: 20404, Message: "The requested resource was not found"})
			return
		}
		writeJSON(w, 200, out)
	case rest == "/Messages.json" && r.Method == http.MethodPost:
		a.create(w, r)
	case strings.HasPrefix(rest, "/Messages/") && strings.Contains(rest, "/Media/") && r.Method == http.MethodGet:
		if a.injected(w, r, OpMedia) {
			return
		}
		me := rest[strings.LastIndex(rest, "/")+1:]
		a.s.mu.Lock()
		f, ok := a.s.files[me]
		a.s.mu.Unlock()
		if !ok || f.account != a.SID {
			writeError(w, Failure{Status: 404, Code: 20404, Message: "The requested resource was not found"})
			return
		}
		// Twilio redirects to short-lived storage.
		http.Redirect(w, r, a.s.URL+"/storage/"+me, http.StatusTemporaryRedirect)
	default:
		writeError(w, Failure{Status: 404, Code: 20404, Message: "The requested resource " + r.URL.Path + " was not found"})
	}
}

func (s *Server) storage(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		// Storage URLs are presigned; Twilio's credentials must not
		// follow the redirect.
		http.Error(w, "credentials sent to storage", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	f, ok := s.files[strings.TrimPrefix(r.URL.Path, "/storage/")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

func (a *Account) create(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	to, from, svc := f.Get("To"), f.Get("From"), f.Get("MessagingServiceSid")
	wa := strings.HasPrefix(to, "whatsapp:")
	if !e164.MatchString(strings.TrimPrefix(to, "whatsapp:")) {
		writeError(w, Failure{Status: 400, Code: 21211, Message: fmt.Sprintf("The 'To' number %s is not a valid phone number.", to)})
		return
	}
	a.mu.Lock()
	ok := false
	if svc != "" {
		_, ok = a.services[svc]
	} else {
		if wa != strings.HasPrefix(from, "whatsapp:") {
			a.mu.Unlock()
			writeError(w, Failure{Status: 400, Code: 63007, Message: "Twilio could not find a Channel with the specified From address"})
			return
		}
		num := strings.TrimPrefix(from, "whatsapp:")
		ok = wa && num == SandboxNumber
		for _, n := range a.numbers {
			ok = ok || n.PhoneNumber == num
		}
	}
	a.mu.Unlock()
	if !ok {
		writeError(w, Failure{Status: 400, Code: 21606, Message: fmt.Sprintf("The From phone number %s is not a valid, message-capable Twilio phone number for this account.", from+svc)})
		return
	}
	body, content := f.Get("Body"), f.Get("ContentSid")
	switch {
	case body == "" && content == "" && len(f["MediaUrl"]) == 0:
		writeError(w, Failure{Status: 400, Code: 21602, Message: "Message body is required."})
		return
	case len([]rune(body)) > MaxBody:
		writeError(w, Failure{Status: 400, Code: 21617, Message: "The concatenated message body exceeds the 1600 character limit."})
		return
	case content != "" && !wa:
		writeError(w, Failure{Status: 400, Code: 21619, Message: "ContentSid is supported on WhatsApp (and RCS) senders only in this fake"})
		return
	}
	if a.injected(w, r, OpMessage) {
		return
	}
	prefix := "SM"
	if len(f["MediaUrl"]) > 0 {
		prefix = "MM"
	}
	m := Message{SID: hexID(prefix), From: from, To: to, MessagingServiceSID: svc, Body: body, ContentSID: content,
		ContentVariables: f.Get("ContentVariables"), StatusCallback: f.Get("StatusCallback"), MediaURL: f["MediaUrl"]}
	a.mu.Lock()
	if len(a.sent) >= MaxRecorded {
		a.sent = append(a.sent[:0], a.sent[len(a.sent)-MaxRecorded+1:]...)
	}
	a.sent = append(a.sent, m)
	if len(a.messages) < MaxRecorded {
		a.messages[m.SID] = &m
	}
	a.sentTotal++
	if a.sentWake != nil {
		close(a.sentWake)
		a.sentWake = nil
	}
	early := a.early
	a.early = nil
	a.mu.Unlock()
	for _, st := range early {
		code := 0
		if m.StatusCallback != "" {
			code, _, _ = a.Deliver(r.Context(), m.StatusCallback, a.StatusParams(m.SID, st, 0))
		}
		a.mu.Lock()
		a.earlyAnswers = append(a.earlyAnswers, code)
		a.mu.Unlock()
	}
	now := time.Now().UTC().Format(time.RFC1123Z)
	writeJSON(w, http.StatusCreated, map[string]any{"sid": m.SID, "account_sid": a.SID, "from": from, "to": to,
		"messaging_service_sid": nilIfEmpty(svc), "body": body, "status": "queued", "num_segments": "1", "num_media": "0",
		"direction": "outbound-api", "api_version": "2010-04-01", "date_created": now, "date_updated": now,
		"error_code": nil, "error_message": nil, "uri": "/2010-04-01/Accounts/" + a.SID + "/Messages/" + m.SID + ".json"})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (a *Account) service(w http.ResponseWriter, r *http.Request, sid string) {
	if a.injected(w, r, OpService) {
		return
	}
	a.mu.Lock()
	sv, ok := a.services[sid]
	if ok && r.Method == http.MethodPost {
		if v, set := r.PostForm["InboundRequestUrl"]; set {
			sv.InboundRequestURL = v[0]
		}
		if v, set := r.PostForm["StatusCallback"]; set {
			sv.StatusCallback = v[0]
		}
	}
	var out map[string]any
	if ok {
		out = map[string]any{"sid": sv.SID, "account_sid": a.SID, "inbound_request_url": sv.InboundRequestURL,
			"inbound_method": "POST", "status_callback": sv.StatusCallback, "use_inbound_webhook_on_number": false}
	}
	a.mu.Unlock()
	if !ok {
		writeError(w, Failure{Status: 404, Code: 20404, Message: "The requested resource /Services/" + sid + " was not found"})
		return
	}
	writeJSON(w, 200, out)
}

func (a *Account) typing(w http.ResponseWriter, r *http.Request) {
	id, ch := r.PostForm.Get("messageId"), r.PostForm.Get("channel")
	if ch != "whatsapp" {
		writeError(w, Failure{Status: 400, Code: 20001, Message: "channel must be whatsapp"})
		return
	}
	a.s.mu.Lock()
	rec, ok := a.s.inbound[id]
	a.s.mu.Unlock()
	if !ok || rec.account != a.SID {
		writeError(w, Failure{Status: 404, Code: 20404, Message: "message " + id + " not found"})
		return
	}
	if a.injected(w, r, OpTyping) {
		return
	}
	a.mu.Lock()
	if len(a.typings) < MaxRecorded {
		a.typings = append(a.typings, Typing{MessageID: id, Channel: ch, To: rec.from})
	}
	a.mu.Unlock()
	writeJSON(w, 200, map[string]any{"success": true})
}

// Package wacloudtest is a fake WhatsApp Cloud API for tests and
// benchmarks: an httptest Graph API that takes POST /{phone_number_id}/messages
// (texts, templates, read receipts with the typing indicator) with each
// number's Bearer token, serves media (GET /{media-id} and the file, with
// the token), enforces the 24-hour window when told to, fails with Meta's
// error codes when told to, and records what it saw; and webhook payload
// builders signed with X-Hub-Signature-256 (webhook.go).
//
// It does not import testing. Everything it records is bounded.
package wacloudtest

import (
	"bytes"
	"context"
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
	"unicode/utf16"
)

// Limits on what the fake keeps.
const (
	MaxRecorded = 10000    // messages and typings kept per number
	MaxMedia    = 100      // media files
	MaxFileSize = 32 << 20 // bytes of one file
	maxBody     = 1 << 20  // a request body read
)

// Version is the Graph API version the fake serves.
const Version = "v23.0"

// Default credentials of the fake's app.
const (
	AppSecret   = "fakeappsecret0123456789abcdef012"
	VerifyToken = "fake-verify-token"
)

// Server is a fake Graph API for WhatsApp. Its base URL with the version
// is GraphURL.
type Server struct {
	URL, GraphURL string
	// AppSecret signs webhooks; VerifyToken is the callback's.
	AppSecret, VerifyToken string

	srv  *httptest.Server
	done chan struct{}
	stop sync.Once

	mu      sync.Mutex
	numbers map[string]*Number // by phone_number_id
	media   map[string]file
	order   []string // media ids, oldest first
	seq     int64
	calls   map[string]int
	// fileFails is how many of the next file downloads answer 500.
	fileFails int
	sentN     int64
	sentCh    chan struct{}
}

type file struct {
	number      *Number
	contentType string
	data        []byte
}

// Number is one of the operator's numbers at the fake.
type Number struct {
	// PhoneNumberID, DisplayNumber and AccessToken are what the operator
	// configures.
	PhoneNumberID, DisplayNumber, AccessToken string
	s                                         *Server

	// guarded by s.mu
	sent    []Sent
	typings []Typing
	fail    []Failure
	closed  map[string]bool // persons outside the 24-hour window
}

// Sent is a message the fake accepted.
type Sent struct {
	// To is the phone number ("to") or Recipient the BSUID
	// ("recipient") it went to.
	To, Recipient string
	// Type is "text" or "template".
	Type string
	// Text is a text's body; ContextID the message it quotes.
	Text, ContextID string
	// PreviewURL is text.preview_url.
	PreviewURL bool
	// Template is a template's name, language and body parameters.
	Template *Template
	// WAMID is the id the fake gave it.
	WAMID string
}

// Template is a template message as the fake took it.
type Template struct {
	Name, Language string
	Params         []string
}

// Typing is a read receipt with the typing indicator (or without, when
// Indicator is empty).
type Typing struct {
	MessageID, Indicator string
}

// Failure is how the next messages call of a number fails.
type Failure struct {
	Status  int // HTTP status; 400 when 0
	Code    int
	Subcode int
	Type    string
	Message string
	Details string
	// RetryAfter, when not 0, is sent as Retry-After (seconds).
	RetryAfter int
	// Hang holds the request until the caller gives up.
	Hang bool
}

// Failures Meta answers.
var (
	Unavailable  = Failure{Status: 500, Code: 131000, Message: "Something went wrong", Details: "Message failed to send because of an unknown error."}
	Hang         = Failure{Hang: true}
	Reengagement = Failure{Code: 131047, Subcode: 2494010, Message: "Re-engagement message",
		Details: "Message failed to send because more than 24 hours have passed since the customer last replied to this number."}
	InvalidParameter = Failure{Code: 100, Message: "(#100) Invalid parameter", Details: "Parameter value is not valid"}
	TokenExpired     = Failure{Code: 190, Subcode: 463, Message: "Error validating access token: Session has expired."}
)

// RateLimited is one of Meta's WhatsApp rate limits (130429 throughput,
// 131056 pair rate, 131057 maintenance), with Retry-After seconds when
// not 0.
func RateLimited(code, retryAfter int) Failure {
	return Failure{Code: code, Message: "(#" + strconv.Itoa(code) + ") Rate limit hit", RetryAfter: retryAfter,
		Details: "Cloud API message throughput has been reached."}
}

// NewServer starts a fake; Close it.
func NewServer() *Server {
	s := &Server{AppSecret: AppSecret, VerifyToken: VerifyToken, done: make(chan struct{}),
		numbers: map[string]*Number{}, media: map[string]file{}, calls: map[string]int{}, sentCh: make(chan struct{})}
	mux := http.NewServeMux()
	p := "/" + Version
	mux.HandleFunc("POST "+p+"/{id}/messages", s.messages)
	mux.HandleFunc("GET "+p+"/{id}", s.mediaInfo)
	mux.HandleFunc("GET /media/{id}", s.mediaFile)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.GraphURL = s.srv.URL + p
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.stop.Do(func() { close(s.done) })
	s.srv.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AddNumber makes one of the operator's numbers: display is its E.164
// number ("+15550001111"); its phone_number_id and token are made up.
func (s *Server) AddNumber(display string) *Number {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	n := &Number{PhoneNumberID: strconv.FormatInt(100000000000000+s.seq, 10), DisplayNumber: display,
		AccessToken: "EAAG" + randomHex(24), s: s, closed: map[string]bool{}}
	s.numbers[n.PhoneNumberID] = n
	return n
}

// JSON is the number as an element of COMM_WHATSAPP_HOSTED_NUMBERS.
func (n *Number) JSON() map[string]string {
	return map[string]string{"phone_number_id": n.PhoneNumberID, "display_number": n.DisplayNumber, "access_token": n.AccessToken}
}

// FailNext makes the next messages call of the number fail as f.
func (n *Number) FailNext(f Failure) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	if len(n.fail) < 100 {
		n.fail = append(n.fail, f)
	}
}

// CloseWindow puts person (a wa_id or BSUID) outside the 24-hour window:
// texts to them fail with 131047; templates go.
func (n *Number) CloseWindow(person string) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.closed[person] = true
}

// Sent returns what the number sent, oldest first.
func (n *Number) Sent() []Sent {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	return append([]Sent(nil), n.sent...)
}

// Typings returns the read receipts (with typing indicators) the number
// sent, oldest first.
func (n *Number) Typings() []Typing {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	return append([]Typing(nil), n.typings...)
}

// SentTotal is how many messages every number sent.
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

// Calls is how many requests of kind ("POST messages", "GET media",
// "GET file") the fake took.
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

// AddMedia keeps a file a person sent to the number and returns its
// media id (for a webhook's image.id ...). Beyond MaxMedia the oldest is
// forgotten.
func (n *Number) AddMedia(contentType string, data []byte) string {
	if len(data) > MaxFileSize {
		data = data[:MaxFileSize]
	}
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := strconv.FormatInt(900000000000000+s.seq, 10)
	if len(s.order) >= MaxMedia {
		delete(s.media, s.order[0])
		s.order = s.order[1:]
	}
	s.media[id] = file{number: n, contentType: contentType, data: bytes.Clone(data)}
	s.order = append(s.order, id)
	return id
}

// FailFiles makes the next n file downloads answer HTTP 500.
func (s *Server) FailFiles(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileFails = n
}

// graphErr writes a Graph API error.
func graphErr(w http.ResponseWriter, f Failure) {
	status := f.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	if f.Type == "" {
		f.Type = "OAuthException"
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	e := map[string]any{"message": f.Message, "type": f.Type, "code": f.Code, "fbtrace_id": "A" + randomHex(8)}
	if f.Subcode != 0 {
		e["error_subcode"] = f.Subcode
	}
	if f.Details != "" {
		e["error_data"] = map[string]string{"messaging_product": "whatsapp", "details": f.Details}
	}
	answer(w, status, map[string]any{"error": e})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// numberOf resolves the request's Bearer token to a number; it writes
// the error when it fails.
func (s *Server) numberOf(w http.ResponseWriter, r *http.Request) (*Number, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		for _, n := range s.numbers {
			if n.AccessToken == tok {
				return n, true
			}
		}
	}
	graphErr(w, Failure{Status: http.StatusUnauthorized, Code: 190, Message: "Invalid OAuth access token - Cannot parse access token"})
	return nil, false
}

// sendBody is a messages request.
type sendBody struct {
	MessagingProduct string `json:"messaging_product"`
	RecipientType    string `json:"recipient_type"`
	To               string `json:"to"`
	Recipient        string `json:"recipient"`
	Type             string `json:"type"`
	Status           string `json:"status"`
	MessageID        string `json:"message_id"`
	TypingIndicator  *struct {
		Type string `json:"type"`
	} `json:"typing_indicator"`
	Text *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text"`
	Context *struct {
		MessageID string `json:"message_id"`
	} `json:"context"`
	Template *struct {
		Name     string `json:"name"`
		Language struct {
			Code string `json:"code"`
		} `json:"language"`
		Components []struct {
			Type       string `json:"type"`
			Parameters []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"parameters"`
		} `json:"components"`
	} `json:"template"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	s.count("POST messages")
	n, ok := s.numberOf(w, r)
	if !ok {
		return
	}
	if r.PathValue("id") != n.PhoneNumberID {
		graphErr(w, Failure{Code: 100, Subcode: 33, Message: "Unsupported post request. Object with ID '" + r.PathValue("id") + "' does not exist, cannot be loaded due to missing permissions, or does not support this operation."})
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var b sendBody
	if err != nil || len(raw) > maxBody || json.Unmarshal(raw, &b) != nil {
		graphErr(w, Failure{Code: 100, Message: "(#100) Invalid JSON"})
		return
	}
	s.mu.Lock()
	var f *Failure
	if len(n.fail) > 0 {
		f = &n.fail[0]
		n.fail = n.fail[1:]
	}
	who := b.To
	if who == "" {
		who = b.Recipient
	}
	closed := n.closed[who]
	s.mu.Unlock()
	if f != nil {
		if f.Hang {
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			return
		}
		graphErr(w, *f)
		return
	}
	if b.MessagingProduct != "whatsapp" {
		graphErr(w, Failure{Code: 100, Message: "(#100) The parameter messaging_product is required."})
		return
	}
	if b.Status != "" {
		s.read(w, n, b)
		return
	}
	if msg := check(b, closed); msg != nil {
		graphErr(w, *msg)
		return
	}
	sent := Sent{To: b.To, Recipient: b.Recipient, Type: b.Type}
	if b.Text != nil {
		sent.Text, sent.PreviewURL = b.Text.Body, b.Text.PreviewURL
	}
	if b.Context != nil {
		sent.ContextID = b.Context.MessageID
	}
	if t := b.Template; t != nil {
		sent.Template = &Template{Name: t.Name, Language: t.Language.Code}
		for _, c := range t.Components {
			if c.Type == "body" {
				for _, p := range c.Parameters {
					sent.Template.Params = append(sent.Template.Params, p.Text)
				}
			}
		}
	}
	s.mu.Lock()
	s.seq++
	sent.WAMID = "wamid." + strings.ToUpper(randomHex(12)) + strconv.FormatInt(s.seq, 10)
	n.sent = keep(append(n.sent, sent))
	s.sentN++
	close(s.sentCh)
	s.sentCh = make(chan struct{})
	s.mu.Unlock()
	contact := map[string]string{"input": who}
	if b.To != "" {
		contact["wa_id"] = b.To
	} else {
		contact["user_id"] = b.Recipient
	}
	answer(w, http.StatusOK, map[string]any{"messaging_product": "whatsapp", "contacts": []any{contact},
		"messages": []map[string]string{{"id": sent.WAMID}}})
}

// check finds what Meta would refuse in a message body.
func check(b sendBody, closed bool) *Failure {
	bad := func(msg string) *Failure { return &Failure{Code: 100, Message: "(#100) " + msg} }
	switch {
	case b.RecipientType != "" && b.RecipientType != "individual":
		return bad("Invalid parameter recipient_type")
	case b.To == "" && b.Recipient == "":
		return bad("The parameter to is required.")
	case b.Type == "text" && (b.Text == nil || b.Text.Body == ""):
		return bad("The parameter text['body'] is required.")
	case b.Type == "text" && len(utf16.Encode([]rune(b.Text.Body))) > 4096:
		return bad("Param text['body'] must be at most 4096 characters long.")
	case b.Type == "text" && closed:
		f := Reengagement
		return &f
	case b.Type == "template" && (b.Template == nil || b.Template.Name == "" || b.Template.Language.Code == ""):
		return bad("The parameter template['name'] and template['language'] are required.")
	case b.Type != "text" && b.Type != "template":
		return bad(fmt.Sprintf("The fake takes text and template messages, not %q", b.Type))
	}
	return nil
}

// read takes a read receipt, with or without the typing indicator.
func (s *Server) read(w http.ResponseWriter, n *Number, b sendBody) {
	if b.Status != "read" || !strings.HasPrefix(b.MessageID, "wamid.") {
		graphErr(w, Failure{Code: 100, Message: "(#100) Invalid parameter: status read with the message_id of an inbound message"})
		return
	}
	t := Typing{MessageID: b.MessageID}
	if b.TypingIndicator != nil {
		if b.TypingIndicator.Type != "text" {
			graphErr(w, Failure{Code: 100, Message: "(#100) Invalid parameter: typing_indicator.type"})
			return
		}
		t.Indicator = b.TypingIndicator.Type
	}
	s.mu.Lock()
	n.typings = keep(append(n.typings, t))
	s.mu.Unlock()
	answer(w, http.StatusOK, map[string]bool{"success": true})
}

// mediaInfo is GET /{media-id}: the file's URL, with the number's token.
func (s *Server) mediaInfo(w http.ResponseWriter, r *http.Request) {
	s.count("GET media")
	n, ok := s.numberOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	f, found := s.media[id]
	s.mu.Unlock()
	if !found || f.number != n {
		graphErr(w, Failure{Code: 100, Subcode: 33, Message: "Unsupported get request. Object with ID '" + id + "' does not exist"})
		return
	}
	answer(w, http.StatusOK, map[string]any{"messaging_product": "whatsapp", "url": s.URL + "/media/" + id + "?ext=1&hash=" + randomHex(4),
		"mime_type": f.contentType, "file_size": len(f.data), "id": id, "sha256": randomHex(32)})
}

// mediaFile serves the file, with the number's token.
func (s *Server) mediaFile(w http.ResponseWriter, r *http.Request) {
	s.count("GET file")
	n, ok := s.numberOf(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	f, found := s.media[r.PathValue("id")]
	fail := s.fileFails > 0
	if fail {
		s.fileFails--
	}
	s.mu.Unlock()
	switch {
	case fail:
		http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
		return
	case !found || f.number != n:
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

// keep bounds a record to its last MaxRecorded entries.
func keep[T any](s []T) []T {
	if len(s) > MaxRecorded {
		return append(s[:0:0], s[len(s)-MaxRecorded:]...)
	}
	return s
}

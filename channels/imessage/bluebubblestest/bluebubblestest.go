// Package bluebubblestest is a fake BlueBubbles server: an httptest
// server speaking the part of the REST API comm's iMessage channel uses,
// for one Mac (one Apple ID, one address), and a webhook sender that posts
// events the way BlueBubbles does (unsigned JSON {"type","data"}).
//
// Every /api/v1 call needs the server password as ?password= (or ?guid=,
// ?token=); else 401 as BlueBubbles answers. Answers are BlueBubbles'
// envelope {"status","message","data"} (errors add
// {"error":{"type","message"}}).
//
//	GET    /api/v1/ping                          "pong"
//	GET    /api/v1/server/info                   private_api, helper_connected (SetPrivateAPI)
//	GET    /api/v1/webhook                       the registrations
//	POST   /api/v1/webhook                       {url, events} (validated as BlueBubbles does; an existing url is answered as it is)
//	DELETE /api/v1/webhook/{id}
//	POST   /api/v1/message/text                  {chatGuid, tempGuid, message, method, selectedMessageGuid, partIndex}
//	POST   /api/v1/message/query                 {after, sort, limit, offset, with}
//	POST   /api/v1/chat/{guid}/typing            (Private API only)
//	DELETE /api/v1/chat/{guid}/typing            (Private API only)
//	GET    /api/v1/attachment/{guid}/download
//
// SetDown makes the relay unavailable (503, or the connection closed);
// SetTahoe makes it behave as a Mac on macOS 26; FailNext fails the next
// send. Incoming makes a person's message (kept
// for message/query); Push and PushAll post events to webhook URLs;
// Delivered and Read update a sent message and push updated-message to
// the registered webhooks. Safe for concurrent use.
package bluebubblestest

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
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxRecorded caps what the fake remembers of each kind.
const MaxRecorded = 10000

// Events the fake accepts in a webhook registration (BlueBubbles' list,
// abridged).
var Events = []string{"*", "new-message", "updated-message", "message-send-error", "typing-indicator",
	"chat-read-status-changed", "group-name-change", "participant-added", "participant-removed", "participant-left"}

// Handle is a person's handle.
type Handle struct {
	Address string `json:"address"`
	Service string `json:"service"`
}

// Chat is a chat, as a message lists it.
type Chat struct {
	GUID string `json:"guid"`
}

// Attachment is an attachment, as a message lists it.
type Attachment struct {
	GUID         string `json:"guid"`
	MimeType     string `json:"mimeType"`
	TransferName string `json:"transferName"`
	TotalBytes   int64  `json:"totalBytes"`
}

// Message is a BlueBubbles message, as its serializer writes it (the
// fields comm reads, and a few more).
type Message struct {
	GUID                  string       `json:"guid"`
	TempGUID              string       `json:"tempGuid,omitempty"`
	Text                  string       `json:"text"`
	Handle                *Handle      `json:"handle"`
	Chats                 []Chat       `json:"chats,omitempty"`
	Attachments           []Attachment `json:"attachments"`
	Subject               *string      `json:"subject"`
	Error                 int          `json:"error"`
	DateCreated           int64        `json:"dateCreated"`
	DateDelivered         *int64       `json:"dateDelivered"`
	DateRead              *int64       `json:"dateRead"`
	IsFromMe              bool         `json:"isFromMe"`
	ItemType              int          `json:"itemType"`
	AssociatedMessageGUID *string      `json:"associatedMessageGuid"`
	AssociatedMessageType *string      `json:"associatedMessageType"`
	ThreadOriginatorGUID  *string      `json:"threadOriginatorGuid"`
}

// Webhook is a registration.
type Webhook struct {
	ID     int64    `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// Sent is a message the relay was asked to send.
type Sent struct {
	ChatGUID            string
	TempGUID            string
	Text                string
	Method              string
	SelectedMessageGUID string
	// GUID is the sent message's guid (the provider id).
	GUID string
}

// Down is how the relay is unavailable.
type Down int

// Ways of being down.
const (
	Up Down = iota
	// Unavailable answers 503 (a tunnel whose Mac is off).
	Unavailable
	// Closed closes the connection without an answer.
	Closed
)

// Failure is how the next send fails.
type Failure int

// Failures FailNext injects.
const (
	// RateLimited answers 429 with Retry-After: 60.
	RateLimited Failure = iota + 1
	// ServerError answers 500 as BlueBubbles does when Messages fails.
	ServerError
	// Hang holds the request until the caller gives up.
	Hang
	// BadRequest answers 400 with a validation message.
	BadRequest
	// WrongPassword answers 401.
	WrongPassword
)

type file struct {
	att  Attachment
	data []byte
}

// Server is a fake BlueBubbles server.
type Server struct {
	// URL is the server's base URL.
	URL string
	// Password is the server password it accepts.
	Password string
	// Address is the Apple ID's address the Mac sends from.
	Address string
	// HookClient posts webhooks.
	HookClient *http.Client
	// Rewrite, when set, gives the address a webhook for URL u is posted
	// to (a test's gateway listens on 127.0.0.1 while its public URL
	// names another host).
	Rewrite func(u string) string

	srv  *httptest.Server
	done chan struct{}
	once sync.Once

	mu         sync.Mutex
	privateAPI bool
	tahoe      bool
	down       Down
	fail       []Failure
	webhooks   []Webhook
	nextHook   int64
	sent       []Sent
	typings    []string
	stops      []string
	messages   []*Message
	files      map[string]file
	calls      map[string]int
	lastDate   int64
}

// NewServer starts a fake relay for address with password, its Private
// API off. Close it when done.
func NewServer(password, address string) *Server {
	s := &Server{Password: password, Address: address, files: map[string]file{}, calls: map[string]int{}, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.HookClient = &http.Client{Timeout: 30 * time.Second}
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.once.Do(func() { close(s.done) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetPrivateAPI turns the Private API (and its helper) on or off.
func (s *Server) SetPrivateAPI(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.privateAPI = on
}

// SetTahoe makes the fake behave as a Mac on macOS 26: a person's chats
// are "any;-;<address>" (Incoming's default), a private-api send to
// "iMessage;-;<address>" finds no chat (404 "Chat does not exist!"), and
// an AppleScript send to an "any;-;" chat fails (500, error -1700), as
// BlueBubbles 1.9.9 does there.
func (s *Server) SetTahoe(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tahoe = on
}

// SetDown makes the relay unavailable (or Up again).
func (s *Server) SetDown(d Down) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = d
}

// FailNext makes the next send without a failure queued fail as f; 0
// lets that send through (to fail a later one).
func (s *Server) FailNext(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, f)
}

// Webhooks returns the registrations.
func (s *Server) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.webhooks)
}

// Sent returns the messages sent, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Typings returns the chat guids typing was shown in, in order.
func (s *Server) Typings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.typings)
}

// TypingStops returns the chat guids typing was taken down in, in order.
func (s *Server) TypingStops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stops)
}

// Calls returns how many authorized calls were made to path (with its
// method: "POST /api/v1/message/text").
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

// AddAttachment stores a file and returns the attachment to put on an
// Incoming message.
func (s *Server) AddAttachment(name, mimeType string, data []byte) Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := Attachment{GUID: "at_" + randomHex(8), MimeType: mimeType, TransferName: name, TotalBytes: int64(len(data))}
	s.files[a.GUID] = file{att: a, data: bytes.Clone(data)}
	return a
}

// Incoming is a message a person sends to the relay.
type Incoming struct {
	// From is the person's handle (+15551234567, someone@icloud.com).
	From string
	Text string
	// GUID is the message's guid; a fresh one when empty.
	GUID string
	// ChatGUID is the chat; "iMessage;-;<From>" when empty.
	ChatGUID string
	// ThreadOriginatorGUID is the message answered inline, if any.
	ThreadOriginatorGUID string
	// Tapback, with TapbackOf, makes the message a reaction
	// ("love", "like", "-love" ...).
	Tapback, TapbackOf string
	Attachments        []Attachment
}

// Incoming records a person's message (message/query returns it) and
// returns it, to Push.
func (s *Server) Incoming(in Incoming) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{GUID: in.GUID, Text: in.Text, Handle: &Handle{Address: in.From, Service: "iMessage"},
		Attachments: in.Attachments, DateCreated: s.now()}
	if m.GUID == "" {
		m.GUID = newGUID()
	}
	chat := in.ChatGUID
	if chat == "" {
		chat = "iMessage;-;" + in.From
		if s.tahoe {
			chat = "any;-;" + in.From
		}
	}
	m.Chats = []Chat{{GUID: chat}}
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	if in.ThreadOriginatorGUID != "" {
		m.ThreadOriginatorGUID = &in.ThreadOriginatorGUID
	}
	if in.Tapback != "" {
		m.AssociatedMessageType, m.AssociatedMessageGUID = &in.Tapback, &in.TapbackOf
	}
	s.record(m)
	return *m
}

// Delivered marks the sent message guid delivered and pushes
// updated-message to the registered webhooks.
func (s *Server) Delivered(ctx context.Context, guid string) error {
	return s.update(ctx, guid, false)
}

// Read marks the sent message guid delivered and read and pushes
// updated-message to the registered webhooks.
func (s *Server) Read(ctx context.Context, guid string) error {
	return s.update(ctx, guid, true)
}

func (s *Server) update(ctx context.Context, guid string, read bool) error {
	s.mu.Lock()
	var m *Message
	for _, x := range s.messages {
		if x.GUID == guid {
			m = x
		}
	}
	if m == nil {
		s.mu.Unlock()
		return fmt.Errorf("bluebubblestest: no message %s", guid)
	}
	now := s.now()
	if m.DateDelivered == nil {
		m.DateDelivered = &now
	}
	if read {
		m.DateRead = &now
	}
	cp := *m
	s.mu.Unlock()
	return s.PushAll(ctx, "updated-message", cp)
}

// Event is the webhook body of an event.
func Event(typ string, m Message) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": m})
	return b
}

// Push posts an event to url as BlueBubbles does (no signature).
func (s *Server) Push(ctx context.Context, u, typ string, m Message) error {
	target := u
	if s.Rewrite != nil {
		target = s.Rewrite(u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(Event(typ, m)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HookClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bluebubblestest: %s answered HTTP %d: %s", u, resp.StatusCode, b)
	}
	return nil
}

// PushAll posts an event to every webhook registered for it, as
// BlueBubbles' webhook service does; it returns the first failure.
func (s *Server) PushAll(ctx context.Context, typ string, m Message) error {
	var first error
	for _, w := range s.Webhooks() {
		if !slices.Contains(w.Events, "*") && !slices.Contains(w.Events, typ) {
			continue
		}
		if err := s.Push(ctx, w.URL, typ, m); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// now is a message date (ms), increasing.
func (s *Server) now() int64 {
	t := time.Now().UnixMilli()
	if t <= s.lastDate {
		t = s.lastDate + 1
	}
	s.lastDate = t
	return t
}

func (s *Server) record(m *Message) {
	if len(s.messages) >= MaxRecorded {
		s.messages = s.messages[1:]
	}
	s.messages = append(s.messages, m)
}

func newGUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	h := strings.ToUpper(hex.EncodeToString(b))
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// reply writes BlueBubbles' envelope.
func reply(w http.ResponseWriter, status int, message string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	env := map[string]any{"status": status, "message": message}
	if data != nil {
		env["data"] = data
	}
	json.NewEncoder(w).Encode(env)
}

// fail writes an error envelope.
func fail(w http.ResponseWriter, status int, typ, message, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"status": status, "message": message,
		"error": map[string]string{"type": typ, "message": detail}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	switch down {
	case Unavailable:
		http.Error(w, "503 Service Unavailable: the origin is offline", http.StatusServiceUnavailable)
		return
	case Closed:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if !strings.HasPrefix(r.URL.Path, "/api/v1/") {
		fail(w, 404, "Database Error", "The requested resource was not found", "Route not found")
		return
	}
	q := r.URL.Query()
	token := q.Get("guid")
	if token == "" {
		token = q.Get("password")
	}
	if token == "" {
		token = q.Get("token")
	}
	if token == "" {
		fail(w, 401, "Authentication Error", "You are not authorized to access this resource", "Missing server password!")
		return
	}
	if strings.TrimSpace(token) != strings.TrimSpace(s.Password) {
		fail(w, 401, "Authentication Error", "You are not authorized to access this resource", "You are not authorized to access this resource")
		return
	}
	route := strings.TrimPrefix(r.URL.Path, "/api/v1/")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		fail(w, 400, "Validation Error", "Bad request", err.Error())
		return
	}
	s.count(r.Method, r.URL.Path)
	switch {
	case r.Method == http.MethodGet && route == "ping":
		reply(w, 200, "Ping received!", "pong")
	case r.Method == http.MethodGet && route == "server/info":
		s.mu.Lock()
		on := s.privateAPI
		s.mu.Unlock()
		reply(w, 200, "Success", map[string]any{"computer_id": "fake", "os_version": "15.1", "server_version": "1.9.9",
			"private_api": on, "helper_connected": on, "proxy_service": "cloudflare", "detected_imessage": s.Address})
	case r.Method == http.MethodGet && route == "webhook":
		reply(w, 200, "Successfully fetched webhooks!", s.Webhooks())
	case r.Method == http.MethodPost && route == "webhook":
		s.createWebhook(w, body)
	case r.Method == http.MethodDelete && strings.HasPrefix(route, "webhook/"):
		s.deleteWebhook(w, strings.TrimPrefix(route, "webhook/"))
	case r.Method == http.MethodPost && route == "message/text":
		s.sendText(w, r, body)
	case r.Method == http.MethodPost && route == "message/query":
		s.query(w, body)
	case (r.Method == http.MethodPost || r.Method == http.MethodDelete) && strings.HasPrefix(route, "chat/") && strings.HasSuffix(route, "/typing"):
		s.typing(w, strings.TrimSuffix(strings.TrimPrefix(route, "chat/"), "/typing"), r.Method == http.MethodDelete)
	case r.Method == http.MethodGet && strings.HasPrefix(route, "attachment/") && strings.HasSuffix(route, "/download"):
		s.download(w, strings.TrimSuffix(strings.TrimPrefix(route, "attachment/"), "/download"))
	default:
		fail(w, 404, "Database Error", "The requested resource was not found", "Route not found")
	}
}

func (s *Server) count(method, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method+" "+path]++
}

func (s *Server) createWebhook(w http.ResponseWriter, body []byte) {
	var in struct {
		URL    *string `json:"url"`
		Events []any   `json:"events"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.URL == nil || in.Events == nil {
		fail(w, 400, "Validation Error", "You've made a bad request! Please check your request params & body", "url and events are required")
		return
	}
	switch {
	case *in.URL == "":
		fail(w, 400, "Validation Error", "Bad request", "Webhook URL is required!")
		return
	case !strings.HasPrefix(*in.URL, "http"):
		fail(w, 400, "Validation Error", "Bad request", "Webhook URL must include an HTTP scheme!")
		return
	}
	var events []string
	for _, e := range in.Events {
		v, ok := e.(string)
		if !ok {
			fail(w, 400, "Validation Error", "Bad request", "Webhook events must be strings!")
			return
		}
		if !slices.Contains(Events, v) {
			fail(w, 400, "Validation Error", "Bad request", fmt.Sprintf("Invalid webhook event: %s! Webhook must be one of: %s", v, strings.Join(Events, ",")))
			return
		}
		events = append(events, v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.webhooks {
		if h.URL == *in.URL {
			reply(w, 200, "Successfully created webhook!", h)
			return
		}
	}
	s.nextHook++
	h := Webhook{ID: s.nextHook, URL: *in.URL, Events: events}
	s.webhooks = append(s.webhooks, h)
	reply(w, 200, "Successfully created webhook!", h)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.webhooks {
		if fmt.Sprint(h.ID) == id {
			s.webhooks = slices.Delete(s.webhooks, i, i+1)
			reply(w, 200, "Successfully deleted webhook!", nil)
			return
		}
	}
	fail(w, 404, "Database Error", "The requested resource was not found", "Webhook does not exist!")
}

func (s *Server) nextFailure() Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fail) == 0 {
		return 0
	}
	f := s.fail[0]
	s.fail = s.fail[1:]
	return f
}

func (s *Server) sendText(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		ChatGUID            *string `json:"chatGuid"`
		TempGUID            string  `json:"tempGuid"`
		Message             *string `json:"message"`
		Method              string  `json:"method"`
		SelectedMessageGUID string  `json:"selectedMessageGuid"`
		PartIndex           *int    `json:"partIndex"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.ChatGUID == nil || in.Message == nil {
		fail(w, 400, "Validation Error", "You've made a bad request! Please check your request params & body", "chatGuid is required; message must be present")
		return
	}
	switch s.nextFailure() {
	case RateLimited:
		w.Header().Set("Retry-After", "60")
		fail(w, 429, "Server Error", "Too many requests", "Rate limit exceeded")
		return
	case ServerError:
		fail(w, 500, "iMessage Error", "Message Send Error", "Failed to send message! See attached message error code.")
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	case BadRequest:
		fail(w, 400, "Validation Error", "Bad request", "Invalid chat GUID: "+*in.ChatGUID)
		return
	case WrongPassword:
		fail(w, 401, "Authentication Error", "You are not authorized to access this resource", "You are not authorized to access this resource")
		return
	}
	method := in.Method
	if method == "" {
		method = "apple-script"
	}
	if method != "apple-script" && method != "private-api" {
		fail(w, 400, "Validation Error", "Bad request", "The method must be one of apple-script, private-api")
		return
	}
	if in.SelectedMessageGUID != "" {
		method = "private-api"
	}
	switch {
	case method == "apple-script" && in.TempGUID == "":
		fail(w, 400, "Validation Error", "Bad request", "A 'tempGuid' is required when sending via AppleScript")
		return
	case method == "apple-script" && *in.Message == "":
		fail(w, 400, "Validation Error", "Bad request", "A 'message' is required when sending via AppleScript")
		return
	}
	s.mu.Lock()
	on, tahoe := s.privateAPI, s.tahoe
	s.mu.Unlock()
	switch {
	case tahoe && method == "private-api" && strings.HasPrefix(*in.ChatGUID, "iMessage;-;"):
		fail(w, 404, "Database Error", "The requested resource was not found", "Chat does not exist!")
		return
	case tahoe && method == "apple-script" && strings.HasPrefix(*in.ChatGUID, "any;"):
		fail(w, 500, "iMessage Error", "Message Send Error", `execution error: Can't make "any" into type constant. (-1700)`)
		return
	}
	if method == "private-api" && !on {
		fail(w, 500, "iMessage Error", "Please make sure you have completed the setup for the Private API, and your helper is connected!", "iMessage Private API Helper is not connected!")
		return
	}
	handle := ""
	if _, h, ok := strings.Cut(*in.ChatGUID, ";-;"); ok {
		handle = h
	}
	s.mu.Lock()
	m := &Message{GUID: newGUID(), Text: *in.Message, Chats: []Chat{{GUID: *in.ChatGUID}}, Attachments: []Attachment{},
		DateCreated: s.now(), IsFromMe: true, Handle: &Handle{Address: handle, Service: "iMessage"}}
	if in.SelectedMessageGUID != "" {
		m.ThreadOriginatorGUID = &in.SelectedMessageGUID
	}
	s.record(m)
	if len(s.sent) < MaxRecorded {
		s.sent = append(s.sent, Sent{ChatGUID: *in.ChatGUID, TempGUID: in.TempGUID, Text: *in.Message, Method: method,
			SelectedMessageGUID: in.SelectedMessageGUID, GUID: m.GUID})
	}
	out := *m
	out.TempGUID = in.TempGUID
	s.mu.Unlock()
	reply(w, 200, "Message sent!", out)
}

func (s *Server) query(w http.ResponseWriter, body []byte) {
	var in struct {
		After  *float64 `json:"after"`
		Sort   string   `json:"sort"`
		Limit  *int     `json:"limit"`
		Offset int      `json:"offset"`
		With   []string `json:"with"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		fail(w, 400, "Validation Error", "Bad request", err.Error())
		return
	}
	limit := 100
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > 1000 || in.Offset < 0 || (in.Sort != "" && in.Sort != "ASC" && in.Sort != "DESC") {
		fail(w, 400, "Validation Error", "Bad request", "limit must be 1 to 1000; sort ASC or DESC")
		return
	}
	chats := slices.Contains(in.With, "chat") || slices.Contains(in.With, "chats")
	atts := slices.Contains(in.With, "attachment") || slices.Contains(in.With, "attachments")
	s.mu.Lock()
	var list []Message
	for _, m := range s.messages {
		if in.After != nil && float64(m.DateCreated) < *in.After {
			continue
		}
		cp := *m
		if !chats {
			cp.Chats = nil
		}
		if !atts {
			cp.Attachments = []Attachment{}
		}
		list = append(list, cp)
	}
	s.mu.Unlock()
	sort.SliceStable(list, func(i, j int) bool {
		if in.Sort == "ASC" {
			return list[i].DateCreated < list[j].DateCreated
		}
		return list[i].DateCreated > list[j].DateCreated
	})
	total := len(list)
	list = list[min(in.Offset, len(list)):]
	list = list[:min(limit, len(list))]
	if list == nil {
		list = []Message{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": 200, "message": "Successfully fetched messages!", "data": list,
		"metadata": map[string]int{"offset": in.Offset, "limit": limit, "total": total, "count": len(list)}})
}

func (s *Server) typing(w http.ResponseWriter, chat string, stop bool) {
	chat, err := url.PathUnescape(chat)
	if err != nil {
		fail(w, 400, "Validation Error", "Bad request", "bad chat guid")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.privateAPI {
		fail(w, 500, "iMessage Error", "Please make sure you have completed the setup for the Private API, and your helper is connected!", "iMessage Private API Helper is not connected!")
		return
	}
	if stop {
		if len(s.stops) < MaxRecorded {
			s.stops = append(s.stops, chat)
		}
		reply(w, 200, "Successfully stopped typing!", nil)
		return
	}
	if len(s.typings) < MaxRecorded {
		s.typings = append(s.typings, chat)
	}
	reply(w, 200, "Successfully started typing!", nil)
}

func (s *Server) download(w http.ResponseWriter, guid string) {
	guid, _ = url.PathUnescape(guid)
	s.mu.Lock()
	f, ok := s.files[guid]
	s.mu.Unlock()
	if !ok {
		fail(w, 404, "Database Error", "The requested resource was not found", "Attachment does not exist!")
		return
	}
	w.Header().Set("Content-Type", f.att.MimeType)
	w.Write(f.data)
}

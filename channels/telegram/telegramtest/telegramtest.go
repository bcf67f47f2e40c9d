// Package telegramtest is a fake Telegram Bot API: an httptest server that
// speaks the Bot API's HTTP protocol for the methods comm uses (getMe,
// setWebhook, deleteWebhook, getWebhookInfo, getUpdates, sendMessage,
// sendChatAction, getFile, and file downloads), for many bots at once, each
// with its own token and state. It records what bots send, queues updates
// for getUpdates, pushes updates to a registered webhook with the secret
// header as Telegram does, and injects failures.
//
// Like Telegram: every call checks the token (401 Unauthorized); getUpdates
// holds the request until an update arrives or its timeout passes, answers
// 409 while a webhook is set, and a second concurrent getUpdates terminates
// the held one with 409; an update is dropped once a getUpdates names a
// higher offset; message ids count per chat. Records are capped
// (MaxRecorded, MaxPending). Safe for concurrent use.
package telegramtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Caps of what a bot remembers.
const (
	// MaxRecorded is how many sent messages and chat actions a bot keeps
	// (the most recent).
	MaxRecorded = 1000
	// MaxPending is how many unconfirmed updates a bot keeps (the oldest
	// are dropped, as Telegram drops them after a day).
	MaxPending = 1000
	// MaxFileSize is the largest file getFile serves (Telegram's 20 MB).
	MaxFileSize = 20 << 20
	// maxBody bounds a request body the fake reads.
	maxBody = 1 << 20
	// maxPollTimeout caps getUpdates' timeout, as Telegram does.
	maxPollTimeout = 50
)

// Server is a fake Bot API hosting any number of bots.
type Server struct {
	// URL is the API's base URL (telegram.Options.APIURL).
	URL string

	srv *httptest.Server
	// WebhookClient pushes updates to webhooks. It trusts any TLS
	// certificate (webhook URLs must be https, and test servers are
	// self-signed).
	WebhookClient *http.Client

	done      chan struct{} // closed by Close: held requests end
	closeOnce sync.Once

	mu     sync.Mutex
	bots   map[string]*Bot
	nextID int64
}

// NewServer starts a fake Bot API. Close it when done.
func NewServer() *Server {
	s := &Server{bots: map[string]*Bot{}, nextID: 7000000000, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.WebhookClient = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a test fake
	}
	return s
}

// Close stops the server, ending held requests.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// NewBot creates a bot with a fresh token. username is the bot's @name
// without the @ ("comm_test_bot").
func (s *Server) NewBot(username string) *Bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	secret := make([]byte, 18)
	_, _ = rand.Read(secret)
	b := &Bot{
		s: s, ID: s.nextID, Username: username,
		Token:   fmt.Sprintf("%d:AA%s", s.nextID, hex.EncodeToString(secret)),
		nextMsg: map[string]int64{}, fail: map[string][]Failure{}, files: map[string]storedFile{},
		calls: map[string]int{}, wake: make(chan struct{}), nextUpdate: 100000,
	}
	s.bots[b.Token] = b
	return b
}

// bot returns the bot of token, or nil.
func (s *Server) bot(token string) *Bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bots[token]
}

// Bot is one fake bot: its token, and what it was asked to do.
type Bot struct {
	s        *Server
	ID       int64
	Username string
	Token    string

	mu         sync.Mutex
	revoked    bool
	webhook    Webhook
	pending    []Update
	nextUpdate int64
	nextMsg    map[string]int64 // per chat
	sent       []Sent
	actions    []Action
	fail       map[string][]Failure // per method; "download" for files
	files      map[string]storedFile
	calls      map[string]int
	polls      int64         // getUpdates generation: a newer one ends the held one
	held       int           // getUpdates requests waiting for updates
	wake       chan struct{} // closed (and replaced) when a held getUpdates should look again
	sentTotal  int64         // sendMessage calls accepted, ever
	sentWake   chan struct{} // closed (and replaced) on every accepted sendMessage
}

type storedFile struct {
	path string
	data []byte
}

// record appends v to a list keeping the last MaxRecorded entries.
func record[T any](list []T, v T) []T {
	if len(list) >= MaxRecorded {
		list = append(list[:0], list[len(list)-MaxRecorded+1:]...)
	}
	return append(list, v)
}

// wakeLocked wakes a held getUpdates. b.mu is held.
func (b *Bot) wakeLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// SentTotal is how many messages the bot has sent, ever (Sent keeps only
// the last MaxRecorded).
func (b *Bot) SentTotal() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sentTotal
}

// WaitSent waits until the bot has sent at least n messages in all
// (SentTotal), or ctx ends.
func (b *Bot) WaitSent(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.sentTotal >= n {
			b.mu.Unlock()
			return nil
		}
		if b.sentWake == nil {
			b.sentWake = make(chan struct{})
		}
		ch := b.sentWake
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Sent returns the messages the bot sent, oldest first.
func (b *Bot) Sent() []Sent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Sent(nil), b.sent...)
}

// Actions returns the chat actions (typing ...) the bot sent, oldest first.
func (b *Bot) Actions() []Action {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Action(nil), b.actions...)
}

// Calls returns how many times method was called (answered or failed).
func (b *Bot) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

// Webhook returns the bot's webhook registration (URL empty: none).
func (b *Bot) Webhook() Webhook {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.webhook
	w.AllowedUpdates = append([]string(nil), w.AllowedUpdates...)
	return w
}

// SetWebhook registers a webhook as setWebhook would (a test that skips
// provisioning).
func (b *Bot) SetWebhook(w Webhook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.webhook = w
	b.wakeLocked()
}

// Held returns how many getUpdates requests wait for an update (a
// session is running and idle).
func (b *Bot) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Pending returns how many updates wait for getUpdates.
func (b *Bot) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// FailNext makes the next call of method ("sendMessage", "getFile",
// "download" for a file download ...) answer f instead; queued failures
// are used in order.
func (b *Bot) FailNext(method string, f Failure) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.fail[method]) < MaxRecorded {
		b.fail[method] = append(b.fail[method], f)
	}
}

// Revoke makes the token invalid, as regenerating it in @BotFather does:
// every call answers 401 Unauthorized.
func (b *Bot) Revoke() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.revoked = true
	b.wakeLocked()
}

// AddFile stores a file the bot can download; the result goes into a
// message's media (set FileName, MimeType, Width ... as needed).
func (b *Bot) AddFile(path string, data []byte) Media {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := fmt.Sprintf("file-%d-%d", b.ID, len(b.files)+1)
	b.files[id] = storedFile{path: path, data: bytes.Clone(data)}
	return Media{FileID: id, FileUniqueID: "u" + id, FileSize: int64(len(data))}
}

// TextMessage is a private-chat text message from user id from: an update
// to Queue, Deliver or Incoming (ids are assigned there).
func TextMessage(from int64, text string) Update {
	return Update{Message: &Message{
		From: &User{ID: from, FirstName: "User" + itoa(from), Username: "user" + itoa(from)},
		Chat: Chat{ID: from, Type: "private", FirstName: "User" + itoa(from)},
		Text: text,
	}}
}

// prepare assigns the update's and its message's ids where they are 0.
func (b *Bot) prepare(u Update) Update {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u.UpdateID == 0 {
		b.nextUpdate++
		u.UpdateID = b.nextUpdate
	} else if u.UpdateID > b.nextUpdate {
		b.nextUpdate = u.UpdateID
	}
	for _, m := range []*Message{u.Message, u.EditedMessage, u.ChannelPost} {
		if m == nil {
			continue
		}
		chat := itoa(m.Chat.ID)
		if m.MessageID == 0 {
			b.nextMsg[chat]++
			m.MessageID = b.nextMsg[chat]
		} else if m.MessageID > b.nextMsg[chat] {
			b.nextMsg[chat] = m.MessageID
		}
		if m.Date == 0 {
			m.Date = time.Now().Unix()
		}
	}
	return u
}

// Queue adds an update for getUpdates and returns it with its ids.
func (b *Bot) Queue(u Update) Update {
	u = b.prepare(u)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) >= MaxPending {
		b.pending = append(b.pending[:0], b.pending[len(b.pending)-MaxPending+1:]...)
	}
	b.pending = append(b.pending, u)
	b.wakeLocked()
	return u
}

// WebhookRequest is the request Telegram would POST to the bot's webhook
// for u (with the secret header), built but not sent; u gets its ids.
func (b *Bot) WebhookRequest(ctx context.Context, u Update) (*http.Request, Update, error) {
	u = b.prepare(u)
	w := b.Webhook()
	if w.URL == "" {
		return nil, u, errors.New("telegramtest: the bot has no webhook")
	}
	body, err := json.Marshal(u)
	if err != nil {
		return nil, u, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return nil, u, err
	}
	r.Header.Set("Content-Type", "application/json")
	if w.SecretToken != "" {
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", w.SecretToken)
	}
	return r, u, nil
}

// Deliver POSTs u to the bot's webhook, as Telegram does, and returns the
// webhook's status code.
func (b *Bot) Deliver(ctx context.Context, u Update) (int, error) {
	r, _, err := b.WebhookRequest(ctx, u)
	if err != nil {
		return 0, err
	}
	resp, err := b.s.WebhookClient.Do(r)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Incoming is a person writing to the bot: u goes to the webhook when one
// is set (an error unless it answers 2xx), else into the getUpdates queue.
func (b *Bot) Incoming(ctx context.Context, u Update) (Update, error) {
	if b.Webhook().URL == "" {
		return b.Queue(u), nil
	}
	r, u, err := b.WebhookRequest(ctx, u)
	if err != nil {
		return u, err
	}
	resp, err := b.s.WebhookClient.Do(r)
	if err != nil {
		return u, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return u, fmt.Errorf("telegramtest: the webhook answered %d", resp.StatusCode)
	}
	return u, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// serve routes /bot<token>/<method> and /file/bot<token>/<path>.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		token, path, _ := strings.Cut(rest, "/")
		b := s.bot(token)
		if b == nil {
			http.Error(w, "Not Found", http.StatusNotFound)
			return
		}
		b.download(w, r, path)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		fail(w, Failure{Code: 404, Description: "Not Found"})
		return
	}
	b := s.bot(token)
	if b == nil {
		fail(w, Unauthorized)
		return
	}
	b.call(w, r, method)
}

// reply writes {"ok":true,"result":result}.
func reply(w http.ResponseWriter, result any, description string) {
	w.Header().Set("Content-Type", "application/json")
	v := map[string]any{"ok": true, "result": result}
	if description != "" {
		v["description"] = description
	}
	_ = json.NewEncoder(w).Encode(v)
}

// fail writes {"ok":false,...} with the status of f.Code.
func fail(w http.ResponseWriter, f Failure) {
	v := map[string]any{"ok": false, "error_code": f.Code, "description": f.Description}
	if f.RetryAfter > 0 {
		v["parameters"] = map[string]int{"retry_after": f.RetryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Code)
	_ = json.NewEncoder(w).Encode(v)
}

func badRequest(w http.ResponseWriter, desc string) {
	fail(w, Failure{Code: 400, Description: "Bad Request: " + desc})
}

// takeFailure counts a call and pops its injected failure. It reports
// false when the call must not go on (the token is revoked, or a failure
// was answered).
func (b *Bot) takeFailure(w http.ResponseWriter, r *http.Request, method string) bool {
	b.mu.Lock()
	b.calls[method]++
	revoked := b.revoked
	var f *Failure
	if q := b.fail[method]; len(q) > 0 {
		f = &q[0]
		b.fail[method] = q[1:]
	}
	b.mu.Unlock()
	switch {
	case revoked:
		fail(w, Unauthorized)
		return false
	case f == nil:
		return true
	case f.Hang:
		select {
		case <-r.Context().Done():
		case <-b.s.done:
		}
		return false
	}
	fail(w, *f)
	return false
}

// ServeHTTP serves the Bot API, so that a program can mount the fake on a
// listener of its own (fakebot does); the Server's own httptest listener
// serves it too.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r) }

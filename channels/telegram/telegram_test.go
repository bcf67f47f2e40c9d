package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
)

// tenv is a fake Bot API with one bot, and the options pointing at it.
type tenv struct {
	srv  *telegramtest.Server
	bot  *telegramtest.Bot
	opts telegram.Options
	logs *lockedWriter
}

func newEnv(t *testing.T) *tenv {
	t.Helper()
	srv := telegramtest.NewServer()
	t.Cleanup(srv.Close)
	logs := &lockedWriter{w: &bytes.Buffer{}}
	return &tenv{srv: srv, bot: srv.NewBot("comm_test_bot"), logs: logs, opts: telegram.Options{
		APIURL: srv.URL, PollTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}}
}

// lockedWriter serialises log writes (the race detector is on).
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func config(t *testing.T, v map[string]any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// adapter builds a connection of the env's bot.
func (e *tenv) adapter(t *testing.T, cfg map[string]any, webhookURL string) channels.Adapter {
	t.Helper()
	if _, ok := cfg["bot_token"]; !ok {
		cfg["bot_token"] = e.bot.Token
	}
	a, err := telegram.New(t.Context(), e.opts, channels.Connection{ID: "conn_1", Config: config(t, cfg), WebhookURL: webhookURL})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = a.(channels.Closer).Close() })
	return a
}

// webhook is a webhook-mode adapter whose secret the bot's webhook carries.
func (e *tenv) webhook(t *testing.T) *telegram.WebhookAdapter {
	t.Helper()
	e.bot.SetWebhook(telegramtest.Webhook{URL: hookURL, SecretToken: "s3cret_value-1"})
	return e.adapter(t, map[string]any{"secret_token": "s3cret_value-1"}, hookURL).(*telegram.WebhookAdapter)
}

// parse delivers u through the fake's webhook request.
func (e *tenv) parse(t *testing.T, a *telegram.WebhookAdapter, u telegramtest.Update) ([]channels.Inbound, error) {
	t.Helper()
	r, _, err := e.bot.WebhookRequest(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = http.NoBody
	return a.ParseWebhook(r, body)
}

func (e *tenv) parseOne(t *testing.T, a *telegram.WebhookAdapter, u telegramtest.Update) channels.Inbound {
	t.Helper()
	ins, err := e.parse(t, a, u)
	if err != nil {
		t.Fatalf("ParseWebhook: %v", err)
	}
	if len(ins) != 1 {
		t.Fatalf("ParseWebhook gave %d messages, want 1", len(ins))
	}
	return ins[0]
}

func TestModes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, mode, url string
		want            string // "webhook", "polling", or the ConfigError field
	}{
		{"no public URL polls", "", "", "polling"},
		{"https URL takes webhooks", "", hookURL, "webhook"},
		{"http URL polls", "", "http://127.0.0.1:8080/hooks/telegram/c", "polling"},
		{"polling asked for", "polling", hookURL, "polling"},
		{"webhook without https", "webhook", "http://127.0.0.1:8080/hooks/telegram/c", "mode"},
		{"webhook without URL", "webhook", "", "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := map[string]any{"bot_token": e.bot.Token}
			if tt.mode != "" {
				cfg["mode"] = tt.mode
			}
			a, err := telegram.New(t.Context(), e.opts, channels.Connection{Config: config(t, cfg), WebhookURL: tt.url})
			var ce *channels.ConfigError
			switch {
			case errors.As(err, &ce):
				if ce.Field != tt.want {
					t.Errorf("ConfigError on %q (%v), want %s", ce.Field, err, tt.want)
				}
				if !strings.Contains(err.Error(), "telegram") {
					t.Errorf("error %q does not name telegram", err)
				}
			case err != nil:
				t.Fatalf("New: %v", err)
			default:
				_, poller := a.(channels.Poller)
				_, receiver := a.(channels.WebhookReceiver)
				got := "webhook"
				if poller {
					got = "polling"
				}
				if got != tt.want || poller == receiver {
					t.Errorf("adapter %T (poller %t, receiver %t), want %s", a, poller, receiver, tt.want)
				}
			}
		})
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for cfg, field := range map[string]string{
		`{}`:                             "bot_token",
		`{"bot_token":"nope"}`:           "bot_token",
		`{"bot_token":7}`:                "bot_token",
		`{"bot_token":"1:a","mode":"x"}`: "mode",
		`{"bot_token":"1:a","secret_token":"a b"}`: "secret_token",
		`{"bot_token":"1:a","colour":"red"}`:       "colour",
		`[1]`:                                      "config",
	} {
		_, err := telegram.New(t.Context(), telegram.Options{}, channels.Connection{Config: json.RawMessage(cfg)})
		var ce *channels.ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("New(%s) = %v, want a ConfigError on %q", cfg, err, field)
		}
	}
}

func TestProvisionWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.adapter(t, map[string]any{}, hookURL)
	res, err := a.(channels.Provisioner).Provision(t.Context())
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if res.Address != "@comm_test_bot" {
		t.Errorf("Address = %q, want @comm_test_bot", res.Address)
	}
	var cfg telegram.Config
	if err := json.Unmarshal(res.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != "webhook" || cfg.BotID != e.bot.ID || cfg.BotUsername != "comm_test_bot" || cfg.BotToken != e.bot.Token {
		t.Errorf("provisioned config %+v", cfg)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{32}$`).MatchString(cfg.SecretToken) {
		t.Errorf("secret_token %q is not 32 characters of A-Za-z0-9_-", cfg.SecretToken)
	}
	w := e.bot.Webhook()
	if w.URL != hookURL || w.SecretToken != cfg.SecretToken || strings.Join(w.AllowedUpdates, ",") != "message" {
		t.Errorf("the bot's webhook is %+v, want %s with the stored secret and allowed_updates [message]", w, hookURL)
	}

	// A second Provision (the connection made again) makes a new secret.
	res2, err := a.(channels.Provisioner).Provision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var cfg2 telegram.Config
	_ = json.Unmarshal(res2.Config, &cfg2)
	if cfg2.SecretToken == cfg.SecretToken {
		t.Error("two Provisions made the same secret")
	}
}

func TestProvisionPollingDeletesTheWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.bot.SetWebhook(telegramtest.Webhook{URL: "https://old.example/hook"})
	a := e.adapter(t, map[string]any{}, "")
	res, err := a.(channels.Provisioner).Provision(t.Context())
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if w := e.bot.Webhook(); w.URL != "" {
		t.Errorf("the webhook %q is still set; getUpdates would answer 409", w.URL)
	}
	var cfg telegram.Config
	_ = json.Unmarshal(res.Config, &cfg)
	if cfg.Mode != "polling" || cfg.SecretToken != "" {
		t.Errorf("provisioned config %+v", cfg)
	}
}

func TestProvisionFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	bad := e.adapter(t, map[string]any{"bot_token": "12345:revoked-token"}, hookURL)
	_, err := bad.(channels.Provisioner).Provision(t.Context())
	var ce *channels.ConfigError
	if !errors.As(err, &ce) || ce.Field != "bot_token" || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("Provision with an unknown token: %v, want a ConfigError on bot_token saying it was rejected", err)
	}

	// Telegram unreachable: transient, and the token is not in the error.
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	opts := e.opts
	opts.APIURL = down.URL
	a, err := telegram.New(t.Context(), opts, channels.Connection{Config: config(t, map[string]any{"bot_token": e.bot.Token}), WebhookURL: hookURL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.(channels.Provisioner).Provision(t.Context())
	if !errors.Is(err, channels.ErrTransient) {
		t.Errorf("Provision with Telegram down: %v, want transient", err)
	}
	noToken(t, e.bot.Token, err)
}

// noToken fails when err's message holds the token or its secret half.
func noToken(t *testing.T, token string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	_, secret, _ := strings.Cut(token, ":")
	if msg := err.Error(); strings.Contains(msg, token) || strings.Contains(msg, secret) {
		t.Errorf("error %q holds the bot token", msg)
	}
}

func TestTokenNeverInErrorsOrLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	out := channels.Outbound{To: "4242", Text: "hello"}
	for _, f := range []telegramtest.Failure{telegramtest.Unauthorized, telegramtest.BadGateway, telegramtest.TooManyRequests(3), telegramtest.Blocked} {
		e.bot.FailNext("sendMessage", f)
		_, err := a.Send(t.Context(), out)
		if err == nil {
			t.Fatalf("Send with %+v succeeded", f)
		}
		noToken(t, e.bot.Token, err)
	}
	// A timeout: *url.Error names the URL, which holds the token.
	e.bot.FailNext("sendMessage", telegramtest.Hang)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, err := a.Send(ctx, out)
	cancel()
	if !errors.Is(err, channels.ErrTransient) {
		t.Errorf("Send timing out: %v, want transient", err)
	}
	noToken(t, e.bot.Token, err)
	// A failed download.
	e.bot.FailNext("download", telegramtest.BadGateway)
	f := e.bot.AddFile("photos/file_1.jpg", []byte("jpeg"))
	u := telegramtest.TextMessage(4242, "")
	u.Message.Photo = []telegramtest.Media{f}
	_, err = e.parse(t, a, u)
	if !errors.Is(err, channels.ErrTransient) {
		t.Errorf("ParseWebhook with a failed download: %v, want transient (Telegram delivers again)", err)
	}
	noToken(t, e.bot.Token, err)
	_, secret, _ := strings.Cut(e.bot.Token, ":")
	if strings.Contains(e.logs.String(), secret) {
		t.Errorf("the log holds the token:\n%s", e.logs)
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	out := channels.Outbound{To: "4242", Text: "hello"}
	tests := []struct {
		f     telegramtest.Failure
		class error
		says  string
		after time.Duration
	}{
		{telegramtest.Blocked, channels.ErrPermanent, "the recipient blocked the bot", 0},
		{telegramtest.TooManyRequests(11), channels.ErrTransient, "rate limited", 11 * time.Second},
		{telegramtest.BadGateway, channels.ErrTransient, "502 Bad Gateway", 0},
		{telegramtest.Unauthorized, channels.ErrRevoked, "token was rejected", 0},
		{telegramtest.ChatNotFound, channels.ErrPermanent, "400 Bad Request: chat not found", 0},
		{telegramtest.Failure{Code: 403, Description: "Forbidden: bot was kicked from the group chat"}, channels.ErrPermanent, "kicked", 0},
	}
	for _, tt := range tests {
		e.bot.FailNext("sendMessage", tt.f)
		_, err := a.Send(t.Context(), out)
		if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.says) || !strings.HasPrefix(err.Error(), "telegram: ") {
			t.Errorf("Send failing with %+v: %v, want %v saying %q", tt.f, err, tt.class, tt.says)
		}
		if got := channels.RetryAfter(err); got != tt.after {
			t.Errorf("Send failing with %+v: RetryAfter %s, want %s", tt.f, got, tt.after)
		}
	}
	for _, to := range []string{"", "not a chat", "12ab"} {
		_, err := a.Send(t.Context(), channels.Outbound{To: to, Text: "x"})
		if !errors.Is(err, channels.ErrPermanent) {
			t.Errorf("Send to %q: %v, want permanent", to, err)
		}
	}
	if _, err := a.Send(t.Context(), channels.Outbound{To: "4242", Text: " \n"}); !errors.Is(err, channels.ErrPermanent) {
		t.Errorf("Send of a blank text: %v, want permanent", err)
	}
	if n := len(e.bot.Sent()); n != 0 {
		t.Errorf("failed sends delivered %d messages", n)
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	wave := "👋" // two UTF-16 units
	tests := []struct {
		name string
		text string
		max  int
		want []int // UTF-16 lengths of the parts
	}{
		{"short", "hello", 4096, []int{5}},
		{"exact", strings.Repeat("a", 4096), 4096, []int{4096}},
		{"one over", strings.Repeat("a", 4097), 4096, []int{4096, 1}},
		{"surrogate pair at the edge", strings.Repeat("a", 4095) + wave, 4096, []int{4095, 2}},
		{"emoji only", strings.Repeat(wave, 2049), 4096, []int{4096, 2}},
		{"accents", strings.Repeat("é", 5000), 4096, []int{4096, 904}},
		{"words", strings.Repeat("word ", 1000), 4096, []int{4095, 905}},
		{"lines", strings.Repeat("line of text\n", 400), 4096, []int{4095, 1105}},
	}
	for _, tt := range tests {
		parts := telegram.Split(tt.text, tt.max)
		var got []int
		for _, p := range parts {
			got = append(got, telegram.UTF16Len(p))
			if !utf8.ValidString(p) {
				t.Errorf("%s: a part is not valid UTF-8 (split inside a character)", tt.name)
			}
		}
		if strings.Join(parts, "") != tt.text {
			t.Errorf("%s: the parts joined differ from the text", tt.name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: part lengths %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSendLongTextAndReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	text := strings.Repeat("Emoji 👋 and words. ", 600) // 12000 units
	res, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "4242", To: "4242", Text: text, InReplyTo: "4242:17"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := e.bot.Sent()
	if len(sent) != 3 {
		t.Fatalf("the bot sent %d messages, want 3", len(sent))
	}
	var joined string
	for i, s := range sent {
		joined += s.Text
		if n := telegram.UTF16Len(s.Text); n > telegram.MaxText {
			t.Errorf("part %d has %d UTF-16 units", i, n)
		}
		wantReply := int64(0)
		if i == 0 {
			wantReply = 17
		}
		if s.ReplyTo != wantReply || (i == 0 && !s.AllowWithoutReply) {
			t.Errorf("part %d: reply to %d (allow without reply %t), want %d", i, s.ReplyTo, s.AllowWithoutReply, wantReply)
		}
	}
	if joined != text {
		t.Error("the parts joined differ from the text")
	}
	if want := "4242:" + strconv.FormatInt(sent[0].MessageID, 10); res.ProviderID != want {
		t.Errorf("ProviderID = %q, want the first part's %q", res.ProviderID, want)
	}

	// A reply reference of another chat is not sent.
	if _, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "4242", Text: "hi", InReplyTo: "999:5"}); err != nil {
		t.Fatal(err)
	}
	if s := e.bot.Sent(); s[len(s)-1].ReplyTo != 0 {
		t.Errorf("a reference to another chat's message became reply_to %d", s[len(s)-1].ReplyTo)
	}
}

func TestTyping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	if err := a.Typing(t.Context(), channels.Typing{ThreadKey: "-100123", To: "4242", InReplyTo: "-100123:5"}); err != nil {
		t.Fatal(err)
	}
	got := e.bot.Actions()
	if len(got) != 1 || got[0] != (telegramtest.Action{ChatID: "-100123", Action: "typing"}) {
		t.Errorf("actions %+v, want typing in -100123", got)
	}
}

func TestSecretHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	r, _, err := e.bot.WebhookRequest(t.Context(), telegramtest.TextMessage(4242, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	for name, value := range map[string]string{"missing": "", "wrong": "s3cret_value-2", "prefix": "s3cret_value-", "longer": "s3cret_value-12"} {
		q := r.Clone(t.Context())
		q.Header.Del(telegram.SecretHeader)
		if value != "" {
			q.Header.Set(telegram.SecretHeader, value)
		}
		ins, err := a.ParseWebhook(q, body)
		if !errors.Is(err, channels.ErrSignature) || len(ins) != 0 {
			t.Errorf("%s secret: %d messages, error %v; want channels.ErrSignature", name, len(ins), err)
		}
	}
	if ins, err := a.ParseWebhook(r, body); err != nil || len(ins) != 1 {
		t.Errorf("right secret: %d messages, error %v", len(ins), err)
	}

	// A connection with no stored secret accepts nothing.
	bare := e.adapter(t, map[string]any{}, hookURL).(*telegram.WebhookAdapter)
	q := r.Clone(t.Context())
	q.Header.Set(telegram.SecretHeader, "")
	if _, err := bare.ParseWebhook(q, body); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("no stored secret, empty header: %v, want channels.ErrSignature", err)
	}
}

func TestInboundFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	u := telegramtest.Update{Message: &telegramtest.Message{
		MessageID: 77,
		From:      &telegramtest.User{ID: 4242, FirstName: "Ann", LastName: "Lee", Username: "ann"},
		Chat:      telegramtest.Chat{ID: -100500, Type: "supergroup", Title: "Support"},
		Text:      "I agree",
		ReplyToMessage: &telegramtest.Message{MessageID: 70, Chat: telegramtest.Chat{ID: -100500, Type: "supergroup"},
			From: &telegramtest.User{ID: e.bot.ID, IsBot: true, FirstName: "bot"}, Text: "Shall we?"},
	}}
	in := e.parseOne(t, a, u)
	if in.ProviderID != "-100500:77" || in.ThreadKey != "-100500" || in.Sender != "4242" || in.Text != "I agree" {
		t.Errorf("inbound %+v", in)
	}
	if len(in.References) != 1 || in.References[0] != "-100500:70" {
		t.Errorf("References = %v, want [-100500:70]", in.References)
	}
	var d struct {
		Chat struct{ Type, Title string }
		From struct {
			Username  string
			FirstName string `json:"first_name"`
			LastName  string `json:"last_name"`
		}
	}
	if err := json.Unmarshal(in.Details, &d); err != nil {
		t.Fatal(err)
	}
	if d.Chat.Type != "supergroup" || d.Chat.Title != "Support" || d.From.Username != "ann" || d.From.FirstName != "Ann" || d.From.LastName != "Lee" {
		t.Errorf("details %s", in.Details)
	}
}

func TestInboundKeepsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	edited := telegramtest.TextMessage(4242, "edited text")
	edited.EditedMessage, edited.Message = edited.Message, nil
	joined := telegramtest.Update{Message: &telegramtest.Message{
		From: &telegramtest.User{ID: 4242, FirstName: "Ann"}, Chat: telegramtest.Chat{ID: -5, Type: "group", Title: "G"},
		NewChatMembers: []telegramtest.User{{ID: 99, FirstName: "New"}},
	}}
	post := telegramtest.Update{ChannelPost: &telegramtest.Message{Chat: telegramtest.Chat{ID: -1001, Type: "channel"}, Text: "news"}}
	for name, u := range map[string]telegramtest.Update{"edited": edited, "service": joined, "channel post": post} {
		ins, err := e.parse(t, a, u)
		if err != nil || len(ins) != 0 {
			t.Errorf("%s update: %d messages, error %v; want none and no error", name, len(ins), err)
		}
	}
	for _, body := range []string{"", "{", "[]", `{}`, `null`, `{"update_id":"x"}`, strings.Repeat("[", 1<<20+1)} {
		r := httptest.NewRequest(http.MethodPost, hookURL, nil)
		r.Header.Set(telegram.SecretHeader, "s3cret_value-1")
		if ins, err := a.ParseWebhook(r, []byte(body)); err == nil || errors.Is(err, channels.ErrSignature) || len(ins) != 0 {
			t.Errorf("body %.20q: %d messages, error %v; want a parse error", body, len(ins), err)
		}
	}
}

func TestInboundMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)

	small := e.bot.AddFile("photos/file_1.jpg", []byte("small"))
	small.Width, small.Height = 90, 90
	large := e.bot.AddFile("photos/file_2.jpg", []byte("the large photo"))
	large.Width, large.Height = 1280, 960
	mid := e.bot.AddFile("photos/file_3.jpg", []byte("mid"))
	mid.Width, mid.Height = 320, 240
	photo := telegramtest.TextMessage(4242, "")
	photo.Message.Caption = "Look at this"
	photo.Message.Photo = []telegramtest.Media{small, large, mid}
	in := e.parseOne(t, a, photo)
	if in.Text != "Look at this" || len(in.Attachments) != 1 {
		t.Fatalf("photo: text %q, %d attachments; want the caption and one", in.Text, len(in.Attachments))
	}
	if at := in.Attachments[0]; string(at.Data) != "the large photo" || at.ContentType != "image/jpeg" || at.Filename == "" {
		t.Errorf("photo attachment %q %q %q, want the largest size as image/jpeg", at.Filename, at.ContentType, at.Data)
	}

	doc := e.bot.AddFile("documents/file_4.pdf", []byte("%PDF-1.7"))
	doc.FileName, doc.MimeType = "invoice.pdf", "application/pdf"
	du := telegramtest.TextMessage(4242, "")
	du.Message.Document = &doc
	in = e.parseOne(t, a, du)
	if len(in.Attachments) != 1 || in.Attachments[0].Filename != "invoice.pdf" || in.Attachments[0].ContentType != "application/pdf" || string(in.Attachments[0].Data) != "%PDF-1.7" {
		t.Errorf("document: %+v", in.Attachments)
	}
	if in.Text != "" {
		t.Errorf("document without caption: Text %q", in.Text)
	}

	voice := e.bot.AddFile("voice/file_5.oga", []byte("OggS"))
	vu := telegramtest.TextMessage(4242, "")
	vu.Message.Voice = &voice
	in = e.parseOne(t, a, vu)
	if len(in.Attachments) != 1 || in.Attachments[0].ContentType != "audio/ogg" {
		t.Errorf("voice: %+v", in.Attachments)
	}

	sticker := e.bot.AddFile("stickers/file_6.webp", []byte("RIFF"))
	su := telegramtest.TextMessage(4242, "")
	su.Message.Sticker = &sticker
	if in = e.parseOne(t, a, su); len(in.Attachments) != 1 || in.Attachments[0].ContentType != "image/webp" {
		t.Errorf("sticker: %+v", in.Attachments)
	}
}

func TestInboundMediaTooBigIsLeftOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.MaxAttachment = 10
	a := e.webhook(t)
	big := e.bot.AddFile("videos/file_1.mp4", []byte("more than ten bytes"))
	u := telegramtest.TextMessage(4242, "")
	u.Message.Caption = "a video"
	u.Message.Video = &big
	in := e.parseOne(t, a, u)
	if len(in.Attachments) != 0 || !strings.Contains(string(in.Details), "skipped_attachments") {
		t.Errorf("a file over the limit: %d attachments, details %s; want it left out and noted", len(in.Attachments), in.Details)
	}
	if n := e.bot.Calls("getFile"); n != 0 {
		t.Errorf("getFile was called %d times for a file whose size was known to be too big", n)
	}
	// Size unknown beforehand: the download is cut at the limit.
	big.FileSize = 0
	if in = e.parseOne(t, a, u); len(in.Attachments) != 0 {
		t.Errorf("a file over the limit (size unknown): %d attachments", len(in.Attachments))
	}
}

func TestDeprovisionWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	e.bot.SetWebhook(telegramtest.Webhook{URL: "https://elsewhere.example/hook"})
	if err := a.Deprovision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.bot.Webhook().URL != "https://elsewhere.example/hook" {
		t.Error("Deprovision removed a webhook that is not this connection's")
	}
	e.bot.SetWebhook(telegramtest.Webhook{URL: hookURL})
	if err := a.Deprovision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e.bot.Webhook().URL != "" {
		t.Error("Deprovision left the connection's webhook")
	}
	e.bot.Revoke()
	if err := a.Deprovision(t.Context()); err != nil {
		t.Errorf("Deprovision with a revoked token: %v, want nil (nothing to undo)", err)
	}
}

// poll runs Poll in the background; emitted messages arrive on the channel.
func poll(t *testing.T, a channels.Poller, emit func(channels.Inbound) error) (context.CancelFunc, chan error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- a.Poll(ctx, func(ins ...channels.Inbound) error {
			for _, in := range ins {
				if err := emit(in); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	t.Cleanup(cancel)
	return cancel, done
}

func TestPollSessionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.adapter(t, map[string]any{}, "").(*telegram.PollingAdapter)
	nop := func(channels.Inbound) error { return nil }
	nopEmit := func(...channels.Inbound) error { return nil }

	// A webhook is set: 409, transient, saying why.
	e.bot.SetWebhook(telegramtest.Webhook{URL: hookURL})
	err := a.Poll(t.Context(), nopEmit)
	if !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "webhook") {
		t.Errorf("Poll with a webhook set: %v, want a transient 409 naming the webhook", err)
	}
	noToken(t, e.bot.Token, err)
	e.bot.SetWebhook(telegramtest.Webhook{})

	// Another client polls the same bot: the held poll ends with 409.
	_, done := poll(t, a, nop)
	waitHeld(t, e.bot)
	other := e.adapter(t, map[string]any{}, "").(*telegram.PollingAdapter)
	cancelOther, otherDone := poll(t, other, nop)
	err = <-done
	if !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "terminated by other getUpdates") {
		t.Errorf("Poll superseded by another client: %v, want a transient 409", err)
	}
	cancelOther()
	if err := <-otherDone; err != nil {
		t.Errorf("Poll after its context ended: %v, want nil", err)
	}
	waitHeldN(t, e.bot, 0)

	// One session per adapter.
	cancel, done := poll(t, a, nop)
	waitHeld(t, e.bot)
	if err := a.Poll(t.Context(), nopEmit); !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second Poll of one adapter: %v, want transient", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Poll after its context ended: %v", err)
	}

	// The token is revoked: the session stops for good.
	e.bot.Revoke()
	if err := a.Poll(t.Context(), nopEmit); !errors.Is(err, channels.ErrRevoked) {
		t.Errorf("Poll with a revoked token: %v, want channels.ErrRevoked", err)
	}
}

// waitHeld waits until one getUpdates is held by the fake.
func waitHeld(t *testing.T, b *telegramtest.Bot) { waitHeldN(t, b, 1) }

// waitHeldN waits until n getUpdates are held by the fake.
func waitHeldN(t *testing.T, b *telegramtest.Bot, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.Held() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d getUpdates are held, want %d", b.Held(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCalls waits until the bot had n calls of method (a held getUpdates).
func waitCalls(t *testing.T, b *telegramtest.Bot, method string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.Calls(method) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not called %d times", method, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPollSkipsServiceMessagesAndDownloadsMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.adapter(t, map[string]any{}, "").(*telegram.PollingAdapter)
	got := make(chan channels.Inbound, 10)
	cancel, done := poll(t, a, func(in channels.Inbound) error { got <- in; return nil })

	e.bot.Queue(telegramtest.Update{Message: &telegramtest.Message{
		From: &telegramtest.User{ID: 4242, FirstName: "Ann"}, Chat: telegramtest.Chat{ID: -5, Type: "group", Title: "G"},
		NewChatMembers: []telegramtest.User{{ID: 99, FirstName: "New"}},
	}})
	f := e.bot.AddFile("documents/file_9.txt", []byte("notes"))
	u := telegramtest.TextMessage(4242, "")
	u.Message.Caption = "my notes"
	u.Message.Document = &f
	e.bot.Queue(u)

	in := <-got
	if in.Text != "my notes" || len(in.Attachments) != 1 || string(in.Attachments[0].Data) != "notes" {
		t.Errorf("polled %+v", in)
	}
	// The session's next getUpdates confirms both updates.
	waitHeld(t, e.bot)
	if n := e.bot.Pending(); n != 0 {
		t.Errorf("%d updates are still pending after the session moved past them", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Poll: %v", err)
	}
	select {
	case in := <-got:
		t.Errorf("the session emitted %q twice", in.Text)
	default:
	}
}

func TestCloseEndsCallsInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.webhook(t)
	e.bot.FailNext("sendMessage", telegramtest.Hang)
	done := make(chan error, 1)
	go func() {
		_, err := a.Send(context.Background(), channels.Outbound{To: "4242", Text: "held"})
		done <- err
	}()
	waitCalls(t, e.bot, "sendMessage", 1)
	_ = a.Close()
	if err := <-done; !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Send ended by Close: %v, want transient saying the adapter was closed", err)
	}
}

// TestWebhookPush drives the fake's push helper against an https ingress
// that hands requests to ParseWebhook, as the gateway does.
func TestWebhookPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	got := make(chan channels.Inbound, 1)
	var a *telegram.WebhookAdapter
	ingress := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, telegram.MaxUpdate+1))
		ins, err := a.ParseWebhook(r, body)
		switch {
		case errors.Is(err, channels.ErrSignature):
			http.Error(w, "forbidden", http.StatusForbidden)
		case err != nil:
			http.Error(w, "retry", http.StatusServiceUnavailable)
		default:
			for _, in := range ins {
				got <- in
			}
		}
	}))
	t.Cleanup(ingress.Close)
	url := ingress.URL + "/hooks/telegram/conn_1"
	pa := e.adapter(t, map[string]any{}, url)
	res, err := pa.(channels.Provisioner).Provision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a = e.adapter(t, map[string]any{"bot_token": e.bot.Token, "secret_token": secretOf(t, res.Config)}, url).(*telegram.WebhookAdapter)
	u, err := e.bot.Incoming(t.Context(), telegramtest.TextMessage(4242, "pushed"))
	if err != nil {
		t.Fatalf("Incoming: %v", err)
	}
	if in := <-got; in.Text != "pushed" || in.ProviderID != "4242:"+strconv.FormatInt(u.Message.MessageID, 10) {
		t.Errorf("pushed %+v", in)
	}
	// With the wrong secret the ingress refuses, and Incoming says so.
	e.bot.SetWebhook(telegramtest.Webhook{URL: url, SecretToken: "wrong"})
	if _, err := e.bot.Incoming(t.Context(), telegramtest.TextMessage(4242, "refused")); err == nil {
		t.Error("Incoming with a wrong secret succeeded")
	}
}

func secretOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var cfg telegram.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.SecretToken
}

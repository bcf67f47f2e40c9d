// Package telegram is the Telegram channel: a bot, reached through the Bot
// API (https://core.telegram.org/bots/api) with a small hand-rolled client
// over net/http.
//
// A connection is a bot token from @BotFather. Inbound messages arrive in
// one of two modes, chosen when the connection is made:
//
//   - webhook: Telegram POSTs each Update to the connection's public
//     ingress (Connection.WebhookURL, https only) with the secret Provision
//     registered in the X-Telegram-Bot-Api-Secret-Token header. The adapter
//     is a *WebhookAdapter, a channels.WebhookReceiver.
//   - polling: the gateway runs a long-lived getUpdates session. The adapter
//     is a *PollingAdapter, a channels.Poller. This works without a public
//     URL (a laptop).
//
// The mode is "webhook" when the gateway has an https WebhookURL and the
// configuration does not say otherwise, else "polling".
//
// What comm keeps: "message" updates (private chats, groups, supergroups)
// with text, or with a photo, document, audio, voice note, video, video
// note, animation or sticker (the caption is the text). Edited messages,
// channel posts and service messages (members joining, pins ...) are not
// requested and, when they arrive anyway, produce nothing.
//
// Ids: Inbound.ProviderID and SendResult.ProviderID are
// "<chat_id>:<message_id>" (Telegram message ids are unique per chat only);
// ThreadKey is the chat id, so a chat is a conversation; Sender is the
// author's user id in decimal. A text longer than Telegram's 4096
// characters (UTF-16 code units) goes out as several messages; the
// provider id of the send is that of the first.
package telegram

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// DefaultAPIURL is the Bot API's address.
const DefaultAPIURL = "https://api.telegram.org"

// DefaultPollTimeout is the getUpdates long-poll timeout.
const DefaultPollTimeout = 30 * time.Second

// DefaultMaxAttachment is the largest file an inbound message's attachment
// may have; it is also the most the Bot API lets a bot download (getFile).
const DefaultMaxAttachment = 20 << 20

// MaxUpdate bounds the webhook body accepted (an Update is a few KB).
const MaxUpdate = 1 << 20

// maxResponse bounds a Bot API answer read (getUpdates returns at most 100
// updates).
const maxResponse = 8 << 20

// Modes of a connection.
const (
	ModeWebhook = "webhook"
	ModePolling = "polling"
)

// Options configure the Telegram channel of a gateway (operator settings,
// not per connection).
type Options struct {
	// APIURL is the Bot API's base URL; DefaultAPIURL when empty (the
	// operator setting COMM_TELEGRAM_API_URL; tests point it at
	// telegramtest).
	APIURL string
	// HTTPClient makes the calls; a client of its own when nil. Its
	// Timeout, if any, must exceed PollTimeout.
	HTTPClient *http.Client
	// PollTimeout is the getUpdates long-poll timeout; DefaultPollTimeout
	// when 0. Telegram caps it at 50 s.
	PollTimeout time.Duration
	// CallTimeout bounds every other call (and each file download) whose
	// context has no earlier deadline; 60 s when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound file downloaded, in bytes;
	// DefaultMaxAttachment when 0. Larger files are left out of the
	// message and listed in its details.
	MaxAttachment int64
	// Logger receives what the adapter leaves out or gives up (never the
	// token); slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// The Bot API does not redirect; a redirect would carry the
			// token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = DefaultPollTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = DefaultMaxAttachment
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Descriptor returns the Telegram channel's descriptor.
func Descriptor(opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	return channels.Descriptor{
		Channel: "telegram",
		Tier:    channels.Free,
		Summary: "A Telegram bot: the token @BotFather gave you.",
		Fields:  form,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			return New(ctx, opts, conn)
		},
	}
}

// form is what a caller sets of a Config.
var form = []channels.Field{
	{Name: "bot_token", Label: "Bot token", Secret: true, Required: true, Kind: channels.KindString,
		Help:    "The token @BotFather gave when you made the bot (/newbot, or /token for an existing one).",
		Example: "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"},
	{Name: "mode", Label: "Mode", Kind: channels.KindString,
		Help:    "webhook or polling; by default webhook when the gateway has a public https URL, else polling.",
		Example: ModePolling},
}

// Config is a Telegram connection's configuration.
type Config struct {
	// BotToken is the token @BotFather gave ("123456:ABC-DEF..."). Required.
	BotToken string `json:"bot_token"`
	// Mode is "webhook" or "polling"; see the package doc for the default.
	Mode string `json:"mode,omitempty"`
	// SecretToken is the webhook secret Provision registered with
	// setWebhook; set by Provision, never by the caller (Provision makes a
	// new one).
	SecretToken string `json:"secret_token,omitempty"`
	// BotID and BotUsername are the bot's, as getMe told Provision.
	BotID       int64  `json:"bot_id,omitempty"`
	BotUsername string `json:"bot_username,omitempty"`
}

var (
	tokenRE  = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{1,128}$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

// ParseConfig decodes and checks a connection's configuration. Errors are
// *channels.ConfigError values naming the field.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, "telegram", channels.FieldNames(form), `{"bot_token":"123456:ABC..."}`); err != nil {
		return Config{}, err
	}
	switch {
	case cfg.BotToken == "":
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "the telegram bot token is required (from @BotFather, like 123456:ABC-DEF...)"}
	case !tokenRE.MatchString(cfg.BotToken):
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "not a telegram bot token: want <bot id>:<secret> as @BotFather gives it, like 123456:ABC-DEF..."}
	case cfg.Mode != "" && cfg.Mode != ModeWebhook && cfg.Mode != ModePolling:
		return Config{}, &channels.ConfigError{Field: "mode", Msg: fmt.Sprintf("unknown telegram mode %q: want %q or %q", cfg.Mode, ModeWebhook, ModePolling)}
	case cfg.SecretToken != "" && !secretRE.MatchString(cfg.SecretToken):
		return Config{}, &channels.ConfigError{Field: "secret_token", Msg: "a telegram webhook secret is 1-256 characters of A-Z, a-z, 0-9, _ and -"}
	case cfg.BotUsername != "" && !usernameRE.MatchString(cfg.BotUsername):
		return Config{}, &channels.ConfigError{Field: "bot_username", Msg: "not a telegram username"}
	}
	return cfg, nil
}

var usernameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// New builds the adapter of a connection: a *WebhookAdapter or a
// *PollingAdapter by the connection's mode. It checks the configuration and
// does no network I/O.
func New(_ context.Context, opts Options, conn channels.Connection) (channels.Adapter, error) {
	opts = opts.withDefaults()
	cfg, err := ParseConfig(conn.Config)
	if err != nil {
		return nil, err
	}
	httpsHook := false
	if u, err := url.Parse(conn.WebhookURL); err == nil && u.Scheme == "https" && u.Host != "" {
		httpsHook = true
	}
	mode := cfg.Mode
	if mode == "" {
		mode = ModePolling
		if httpsHook {
			mode = ModeWebhook
		}
	}
	if mode == ModeWebhook && !httpsHook {
		return nil, &channels.ConfigError{Field: "mode", Msg: "telegram webhook mode needs the gateway's public https URL (Telegram delivers webhooks over https only); " +
			"configure the public URL or use mode \"polling\""}
	}
	cfg.Mode = mode
	b := newBot(opts, conn, cfg)
	if mode == ModeWebhook {
		return &WebhookAdapter{bot: b}, nil
	}
	return &PollingAdapter{bot: b}, nil
}

// WebhookAdapter is a connection whose updates Telegram POSTs to the
// gateway.
type WebhookAdapter struct {
	*bot
}

// PollingAdapter is a connection whose updates the gateway fetches with a
// long-lived getUpdates session.
type PollingAdapter struct {
	*bot
	// session admits one running Poll per adapter.
	once    sync.Once
	session chan struct{}

	mu     sync.Mutex
	offset int64 // the next update_id to fetch; 0 before the first
}

var (
	_ channels.Sender          = (*WebhookAdapter)(nil)
	_ channels.Typer           = (*WebhookAdapter)(nil)
	_ channels.TypingRefresher = (*WebhookAdapter)(nil)
	_ channels.Provisioner     = (*WebhookAdapter)(nil)
	_ channels.Deprovisioner   = (*WebhookAdapter)(nil)
	_ channels.WebhookReceiver = (*WebhookAdapter)(nil)
	_ channels.Closer          = (*WebhookAdapter)(nil)

	_ channels.Sender          = (*PollingAdapter)(nil)
	_ channels.Typer           = (*PollingAdapter)(nil)
	_ channels.TypingRefresher = (*PollingAdapter)(nil)
	_ channels.Provisioner     = (*PollingAdapter)(nil)
	_ channels.Deprovisioner   = (*PollingAdapter)(nil)
	_ channels.Poller          = (*PollingAdapter)(nil)
	_ channels.Closer          = (*PollingAdapter)(nil)
)

// Mode returns "webhook" or "polling".
func (a *WebhookAdapter) Mode() string { return ModeWebhook }

// Mode returns "webhook" or "polling".
func (a *PollingAdapter) Mode() string { return ModePolling }

// allowedUpdates are the update kinds comm asks Telegram for.
var allowedUpdates = []string{"message"}

// Provision checks the token (getMe), makes a new webhook secret and
// registers the webhook (setWebhook).
func (a *WebhookAdapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	me, err := a.getMe(ctx)
	if err != nil {
		return channels.Provisioned{}, err
	}
	secret := newSecret()
	err = a.call(ctx, "set webhook", "setWebhook", map[string]any{
		"url":                  a.conn.WebhookURL,
		"secret_token":         secret,
		"allowed_updates":      allowedUpdates,
		"drop_pending_updates": false,
	}, nil)
	if err != nil {
		return channels.Provisioned{}, err
	}
	return a.provisioned(me, secret)
}

// Provision checks the token (getMe) and removes any webhook, so that
// getUpdates works.
func (a *PollingAdapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	me, err := a.getMe(ctx)
	if err != nil {
		return channels.Provisioned{}, err
	}
	if err := a.deleteWebhook(ctx); err != nil {
		return channels.Provisioned{}, err
	}
	return a.provisioned(me, "")
}

// Deprovision removes the webhook, when it is still this connection's.
func (a *WebhookAdapter) Deprovision(ctx context.Context) error {
	var info struct {
		URL string `json:"url"`
	}
	err := a.call(ctx, "get webhook info", "getWebhookInfo", struct{}{}, &info)
	if errors.Is(err, channels.ErrRevoked) {
		// The token is dead: Telegram delivers nothing to anyone.
		a.opts.Logger.Info("telegram: deprovision: the bot token was already rejected; nothing to undo", "connection", a.conn.ID)
		return nil
	}
	if err != nil {
		return err
	}
	if info.URL != "" && info.URL != a.conn.WebhookURL {
		a.opts.Logger.Info("telegram: deprovision: the bot's webhook points elsewhere now; left as it is", "connection", a.conn.ID)
		return nil
	}
	if err := a.deleteWebhook(ctx); err != nil && !errors.Is(err, channels.ErrRevoked) {
		return err
	}
	return nil
}

// Deprovision does nothing at Telegram: a polling connection set nothing
// up there (the gateway ends the session).
func (a *PollingAdapter) Deprovision(context.Context) error { return nil }

// me is the bot as getMe describes it.
type me struct {
	ID       int64  `json:"id"`
	IsBot    bool   `json:"is_bot"`
	Username string `json:"username"`
}

func (b *bot) getMe(ctx context.Context) (me, error) {
	var m me
	err := b.call(ctx, "check token", "getMe", struct{}{}, &m)
	if errors.Is(err, channels.ErrRevoked) {
		return me{}, &channels.ConfigError{Field: "bot_token",
			Msg: "Telegram " + strings.TrimPrefix(err.Error(), "telegram: check token: the ")}
	}
	if err != nil {
		return me{}, err
	}
	if m.ID == 0 || !usernameRE.MatchString(m.Username) {
		return me{}, channels.Transient(0, "telegram: check token: getMe answered without the bot's id and username")
	}
	return m, nil
}

func (b *bot) deleteWebhook(ctx context.Context) error {
	return b.call(ctx, "delete webhook", "deleteWebhook", map[string]any{"drop_pending_updates": false}, nil)
}

// provisioned is the configuration to store after Provision.
func (b *bot) provisioned(m me, secret string) (channels.Provisioned, error) {
	cfg := b.cfg
	cfg.SecretToken = secret
	cfg.BotID = m.ID
	cfg.BotUsername = m.Username
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("telegram: provision: %w", err)
	}
	return channels.Provisioned{Config: raw, Address: "@" + m.Username}, nil
}

// secretAlphabet is what Telegram allows in a webhook secret.
const secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// newSecret returns 32 random characters of secretAlphabet (64 symbols: 6
// bits each, so a byte's low 6 bits pick one without bias).
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = secretAlphabet[b[i]&63]
	}
	return string(b)
}

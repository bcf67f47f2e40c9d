// Package discord is the Discord channel: a bot, reached through Discord's
// REST API (v10) and its Gateway websocket, both hand-rolled (net/http and
// gorilla/websocket).
//
// A connection is made one of two ways:
//
//   - bring your own bot: config {"bot_token":"..."}, a bot token from the
//     developer portal. Provision checks it (GET /users/@me).
//   - the operator's app: config {} while the operator has configured its
//     Discord application (Options.ClientID, ClientSecret, BotToken). The
//     adapter is then a channels.Installer: the person installs the app
//     into a guild (OAuth2 code grant, scope "bot"), Install records the
//     guild, and the connection sends with the operator's bot token and
//     receives that guild's messages.
//
// Inbound messages come from the Gateway (there is no webhook for
// messages): the adapter is a channels.Poller whose session identifies,
// heartbeats, resumes and acknowledges (advances the sequence number it
// resumes from) only what emit committed. What comm keeps (MESSAGE_CREATE):
//
//   - every direct message to the bot (no guild_id);
//   - in guild channels (and threads, which are channels), only messages
//     that mention the bot or reply to one of its messages;
//   - never messages of bots (the bot's own included) or webhooks.
//
// Ids: Inbound.ProviderID and SendResult.ProviderID are message ids
// (snowflakes, unique across Discord); ThreadKey is the channel id; Sender
// is the author's user id; a reply's References are the message it
// answers. Outbound messages go to the ThreadKey channel when it is not the
// recipient itself, else To: a user id (a DM channel is opened) or
// "channel:<id>". Texts over 2000 characters go out as several messages;
// the provider id of the send is the first's.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Defaults.
const (
	DefaultAPIURL       = "https://discord.com/api/v10"
	DefaultAuthorizeURL = "https://discord.com/oauth2/authorize"
	// DefaultIdentifyBudget is how many IDENTIFYs per bot token per 24 h
	// this process allows itself (Discord resets a token past 1000).
	DefaultIdentifyBudget = 100
	// DefaultMaxAttachment is the largest inbound file downloaded.
	DefaultMaxAttachment = 25 << 20
	// MaxContent is Discord's message content limit, in characters.
	MaxContent = 2000
)

// Intents the gateway session asks for: GUILD_MESSAGES, DIRECT_MESSAGES,
// MESSAGE_CONTENT (privileged: switch it on in the developer portal).
const Intents = 1<<9 | 1<<12 | 1<<15

// Permissions the install asks for: VIEW_CHANNEL, SEND_MESSAGES,
// READ_MESSAGE_HISTORY, SEND_MESSAGES_IN_THREADS.
const Permissions = 1<<10 | 1<<11 | 1<<16 | 1<<38

// maxResponse bounds a REST answer read.
const maxResponse = 4 << 20

// Options configure the Discord channel of a gateway (operator settings).
type Options struct {
	// APIURL is the REST base URL; DefaultAPIURL when empty.
	APIURL string
	// GatewayURL overrides the websocket URL GET /gateway/bot gives.
	GatewayURL string
	// ClientID, ClientSecret and BotToken are the operator's Discord
	// application (COMM_DISCORD_CLIENT_ID/SECRET/BOT_TOKEN); all three
	// are needed for connections that install it.
	ClientID, ClientSecret, BotToken string
	// AuthorizeURL is the OAuth2 authorize page; DefaultAuthorizeURL
	// when empty.
	AuthorizeURL string
	// HTTPClient makes REST calls and downloads; one of its own when nil.
	HTTPClient *http.Client
	// Logger receives what the adapter leaves out (never a token).
	Logger *slog.Logger
	// IdentifyBudget is the IDENTIFYs per bot token per 24 h comm
	// allows itself; DefaultIdentifyBudget when 0.
	IdentifyBudget int
	// State keeps, per bot token, the gateway session (so the replica
	// that takes a session over resumes it, missing nothing) and the
	// identifies spent today, across processes; the gateway gives its
	// database's. When nil they live in this process's memory.
	State channels.State
	// CallTimeout bounds REST calls whose context has no deadline; 30 s
	// when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound file, in bytes;
	// DefaultMaxAttachment when 0. Larger files are left out.
	MaxAttachment int64
	// ReidentifyDelay is the wait before identifying again after an
	// invalid session (Discord: 1-5 s); a random 1-5 s when 0.
	ReidentifyDelay time.Duration
	// Jitter picks the first heartbeat's fraction of the interval
	// (Discord: random in [0,1)); random when nil.
	Jitter func() float64
}

// processState is the State of adapters given none.
var processState = &channels.MemState{}

func (o Options) withDefaults() Options {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.AuthorizeURL == "" {
		o.AuthorizeURL = DefaultAuthorizeURL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IdentifyBudget <= 0 {
		o.IdentifyBudget = DefaultIdentifyBudget
	}
	if o.State == nil {
		o.State = processState
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = DefaultMaxAttachment
	}
	return o
}

// operatorApp reports whether the operator's app is configured.
func (o Options) operatorApp() bool {
	return o.ClientID != "" && o.ClientSecret != "" && o.BotToken != ""
}

// Descriptor returns the Discord channel's descriptor.
func Descriptor(opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	d := channels.Descriptor{
		Channel: "discord",
		Tier:    channels.Free,
		Summary: "A Discord bot of your own: its token from the developer portal.",
		Fields:  form,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			a, err := New(ctx, opts, conn)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return a, nil
		},
	}
	if opts.operatorApp() {
		d.Session = appSession{opts: opts}
		d.OAuth = true
		d.Summary = "A Discord server: install the gateway's bot, or give your own bot's token."
	}
	return d
}

// form is what a caller sets of a Config (bring your own bot).
var form = []channels.Field{
	{Name: "bot_token", Label: "Bot token", Secret: true, Required: true, Kind: channels.KindString,
		Help:    "Your application's bot token, from the Discord developer portal's Bot page (Reset Token), without \"Bot \"; enable the Message Content intent there too.",
		Example: "MTA5ODc2NTQzMjEwOTg3NjU0.GaBcDe.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab"},
}

// appSession is the operator's bot's one gateway session (a
// channels.AppSession): it serves every guild the operator's app was
// installed in, each guild's messages routed by its id to the connection
// that installed it. DMs to the operator's bot name no guild and are left
// out: no tenant can be chosen for them.
type appSession struct{ opts Options }

// Run runs the operator's bot's gateway session.
func (s appSession) Run(ctx context.Context, emit func(key string, ins ...channels.Inbound) error) error {
	closed, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &Adapter{opts: s.opts, conn: channels.Connection{ID: "discord-app-session"}, token: s.opts.BotToken,
		closed: closed, close: cancel, appEmit: emit}
	a.rest = newREST(s.opts, a.token, closed)
	a.gw = &gatewayState{}
	return a.Poll(ctx, func(...channels.Inbound) error { return nil })
}

// AppOperator is Config.App of a connection through the operator's app.
const AppOperator = "operator"

// Config is a Discord connection's configuration.
type Config struct {
	// BotToken is the connection's own bot token (bring your own bot).
	BotToken string `json:"bot_token,omitempty"`
	// App is "operator" for a connection through the operator's app
	// (set by Install).
	App string `json:"app,omitempty"`
	// GuildID and GuildName are the guild the operator's app was
	// installed into (set by Install).
	GuildID   string `json:"guild_id,omitempty"`
	GuildName string `json:"guild_name,omitempty"`
	// BotID and BotUsername are the bot's, as Provision found them.
	BotID       string `json:"bot_id,omitempty"`
	BotUsername string `json:"bot_username,omitempty"`
}

// ParseConfig decodes and checks a connection's configuration.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, "discord", channels.FieldNames(form), `{"bot_token":"..."} or {}`); err != nil {
		return Config{}, err
	}
	switch {
	case cfg.BotToken != "" && !tokenOK(cfg.BotToken):
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "not a discord bot token (copy it from the developer portal, Bot page, without \"Bot \")"}
	case cfg.BotToken != "" && (cfg.App != "" || cfg.GuildID != ""):
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "a discord connection has its own bot_token or uses the operator's app, not both"}
	case cfg.App != "" && cfg.App != AppOperator:
		return Config{}, &channels.ConfigError{Field: "app", Msg: "discord: app must be \"operator\""}
	case cfg.App == AppOperator && !snowflake(cfg.GuildID):
		return Config{}, &channels.ConfigError{Field: "guild_id", Msg: "discord: the guild id is missing or not a snowflake"}
	case cfg.App == "" && cfg.GuildID != "":
		return Config{}, &channels.ConfigError{Field: "guild_id", Msg: "discord: guild_id is set by the install of the operator's app"}
	case cfg.BotID != "" && !snowflake(cfg.BotID):
		return Config{}, &channels.ConfigError{Field: "bot_id", Msg: "discord: not a snowflake"}
	}
	return cfg, nil
}

// tokenOK accepts what a bot token looks like: three dot-separated
// base64url parts, no spaces.
func tokenOK(t string) bool {
	if len(t) > 200 || strings.Count(t, ".") != 2 {
		return false
	}
	for _, p := range strings.Split(t, ".") {
		if p == "" {
			return false
		}
		for _, c := range p {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}

func snowflake(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0 && strconv.FormatUint(n, 10) == s
}

// Adapter is a Discord connection.
type Adapter struct {
	opts  Options
	conn  channels.Connection
	cfg   Config
	token string // the bot token used: the connection's or the operator's

	closed context.Context
	close  context.CancelFunc

	rest *rest
	gw   *gatewayState

	// appEmit, on the operator's app session, stores a message for the
	// connection of its guild (channels.AppSession).
	appEmit func(key string, ins ...channels.Inbound) error
}

var (
	_ channels.Sender          = (*Adapter)(nil)
	_ channels.Typer           = (*Adapter)(nil)
	_ channels.TypingRefresher = (*Adapter)(nil)
	_ channels.Provisioner     = (*Adapter)(nil)
	_ channels.Installer       = (*Adapter)(nil)
	_ channels.Poller          = (*Adapter)(nil)
	_ channels.Closer          = (*Adapter)(nil)
)

// New builds a connection's adapter; it checks the configuration and does
// no network I/O.
func New(_ context.Context, opts Options, conn channels.Connection) (*Adapter, error) {
	opts = opts.withDefaults()
	cfg, err := ParseConfig(conn.Config)
	if err != nil {
		return nil, err
	}
	token := cfg.BotToken
	if token == "" {
		if !opts.operatorApp() {
			return nil, &channels.ConfigError{Field: "bot_token", Msg: "the discord bot token is required: this gateway has no Discord app of its own to install"}
		}
		token = opts.BotToken
	}
	closed, cancel := context.WithCancel(context.Background())
	a := &Adapter{opts: opts, conn: conn, cfg: cfg, token: token, closed: closed, close: cancel}
	a.rest = newREST(opts, token, closed)
	a.gw = &gatewayState{}
	return a, nil
}

// Close ends the calls and the session in flight.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// NeedsInstall reports whether the connection waits for the install of
// the operator's app (config {}).
func (a *Adapter) NeedsInstall() bool {
	return a.cfg.BotToken == "" && a.cfg.App == ""
}

// AuthorizeURL is the install page of the operator's app.
func (a *Adapter) AuthorizeURL(state, redirectURL string) string {
	q := url.Values{}
	q.Set("client_id", a.opts.ClientID)
	q.Set("scope", "bot")
	q.Set("permissions", strconv.FormatInt(Permissions, 10))
	q.Set("response_type", "code")
	q.Set("redirect_uri", redirectURL)
	q.Set("state", state)
	return a.opts.AuthorizeURL + "?" + q.Encode()
}

// Install exchanges the code (POST /oauth2/token) and records the guild
// the app was installed into.
func (a *Adapter) Install(ctx context.Context, code, redirectURL string) (channels.Provisioned, error) {
	if code == "" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "discord: the install returned no code"}
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURL}}
	var res struct {
		Guild *struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"guild"`
	}
	status, err := a.rest.oauthToken(ctx, a.opts.ClientID, a.opts.ClientSecret, form, &res)
	if err != nil {
		if status == http.StatusBadRequest {
			return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "discord refused the install code: " + err.Error()}
		}
		return channels.Provisioned{}, err
	}
	if res.Guild == nil || !snowflake(res.Guild.ID) {
		return channels.Provisioned{}, channels.Permanent("discord: install: the token answer names no guild (was the bot scope granted?)")
	}
	cfg := Config{App: AppOperator, GuildID: res.Guild.ID, GuildName: res.Guild.Name}
	raw, _ := json.Marshal(cfg)
	return channels.Provisioned{Config: raw, Address: res.Guild.Name, RouteKey: res.Guild.ID}, nil
}

// Provision checks the bot token (GET /users/@me) and records the bot.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	me, err := a.rest.me(ctx)
	if errors.Is(err, channels.ErrRevoked) {
		field := "bot_token"
		return channels.Provisioned{}, &channels.ConfigError{Field: field, Msg: "Discord rejected the bot token (401); copy the current token from the developer portal"}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	cfg := a.cfg
	cfg.BotID, cfg.BotUsername = me.ID, me.Username
	raw, _ := json.Marshal(cfg)
	p := channels.Provisioned{Config: raw, Address: me.Username}
	if cfg.App == AppOperator {
		p.Address = cfg.GuildName
		if p.Address == "" {
			p.Address = cfg.GuildID
		}
		p.RouteKey = cfg.GuildID
	}
	return p, nil
}

// TypingEvery is how often the gateway shows typing again: Discord's
// indicator lasts about 10 s.
func (a *Adapter) TypingEvery() time.Duration { return 8 * time.Second }

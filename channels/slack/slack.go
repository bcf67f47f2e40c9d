// Package slack is the Slack channel: a Slack app's bot user, reached
// through the Web API (https://docs.slack.dev/reference/methods) with a
// small hand-rolled client over net/http, and the Events API for inbound.
//
// A connection is made one of two ways:
//
//   - The operator's app (Options.ClientID, ClientSecret, SigningSecret:
//     COMM_SLACK_CLIENT_ID/SECRET/SIGNING_SECRET). The connection is made
//     with an empty configuration ({}); the adapter is then a
//     channels.Installer: the person installs the app into a workspace
//     with OAuth v2 and Install exchanges the code (oauth.v2.access) for
//     {"bot_token","team_id","bot_user_id","app":"operator"}. Slack sends
//     every workspace's events to the app's one Request URL,
//     /hooks/slack, which Descriptor.App verifies with the app's signing
//     secret and routes by team id (Provisioned.RouteKey is the team id).
//   - Bring your own app: {"bot_token":"xoxb-…","signing_secret":"…"}.
//     Provision checks the token with auth.test and records the team and
//     bot user. The app's Request URL is the connection's own ingress
//     (/hooks/slack/<connection id>), verified with the connection's
//     signing secret; its url_verification is answered by Respond. Such a
//     connection registers no RouteKey.
//   - Bring your own app over Socket Mode: {"bot_token":"xoxb-…",
//     "app_token":"xapp-…"}. The adapter is a *SocketAdapter, a
//     channels.Poller holding a Socket Mode websocket; no public URL and
//     no signing secret are needed.
//
// Deprovision uninstalls the operator's app from the workspace
// (apps.uninstall); it does nothing for a bring-your-own app.
//
// Inbound: Events API event_callback requests. comm keeps "message"
// events in direct messages (channel_type "im" or "mpim"), thread replies
// anywhere ("message" with thread_ts), and "app_mention" events. Messages
// of bots (bot_id, subtype bot_message), of the connection's own bot user,
// edits, deletions and other subtypes are dropped. An app_mention and the
// "message" event of the same message share their provider id, so the
// second is a duplicate.
//
// Ids: Inbound.ProviderID and SendResult.ProviderID are "<channel>:<ts>"
// (a ts is unique per channel). ThreadKey is the channel for a top-level
// message in a direct message, and "<channel>:<thread_ts>" for a message
// in a thread, or a top-level app_mention in a channel (the answer goes
// into the mention's thread). A thread reply lists its parent
// "<channel>:<thread_ts>" in References, so it joins the parent's
// conversation when that is stored. Sender is the Slack user id.
//
// tokens_revoked (for this bot) and app_uninstalled events make
// ParseWebhook return a *channels.Error of class channels.ErrRevoked: the
// gateway marks the connection revoked.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Defaults.
const (
	DefaultAPIURL       = "https://slack.com/api"
	DefaultAuthorizeURL = "https://slack.com/oauth/v2/authorize"
	// DefaultMaxAttachment is the largest inbound file downloaded.
	DefaultMaxAttachment = 20 << 20
	// MaxEvent bounds the webhook body accepted.
	MaxEvent = 1 << 20
	// maxResponse bounds a Web API answer read.
	maxResponse = 4 << 20
)

// DefaultScopes are the bot scopes the operator's app asks for.
var DefaultScopes = []string{"app_mentions:read", "chat:write", "im:history", "im:read", "im:write",
	"channels:history", "groups:history", "mpim:history", "users:read", "files:read"}

// AppOperator is Config.App of a connection made by installing the
// operator's app.
const AppOperator = "operator"

// Options configure the Slack channel of a gateway (operator settings).
type Options struct {
	// APIURL is the Web API's base URL; DefaultAPIURL when empty.
	APIURL string
	// AuthorizeURL is where people approve an install of the operator's
	// app; DefaultAuthorizeURL when empty.
	AuthorizeURL string
	// ClientID, ClientSecret and SigningSecret are the operator's app
	// (COMM_SLACK_CLIENT_ID, _SECRET, _SIGNING_SECRET). When ClientID and
	// SigningSecret are set, connections can install it and
	// Descriptor.App takes /hooks/slack.
	ClientID, ClientSecret, SigningSecret string
	// Scopes are the bot scopes asked for at install; DefaultScopes when
	// empty.
	Scopes []string
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds each call whose context has no deadline; 30 s
	// when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound file downloaded;
	// DefaultMaxAttachment when 0. Larger files are left out.
	MaxAttachment int64
	// Logger receives what the adapter leaves out; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock request timestamps are checked against; time.Now
	// when nil.
	Now func() time.Time
	// PostInterval spaces the posts to one channel (Slack allows about
	// one chat.postMessage per second per channel); DefaultPostInterval
	// when 0, none when negative.
	PostInterval time.Duration
}

// DefaultPostInterval is Slack's pace for chat.postMessage in a channel.
const DefaultPostInterval = time.Second

func (o Options) withDefaults() Options {
	if o.PostInterval == 0 {
		o.PostInterval = DefaultPostInterval
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.AuthorizeURL == "" {
		o.AuthorizeURL = DefaultAuthorizeURL
	}
	if len(o.Scopes) == 0 {
		o.Scopes = DefaultScopes
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = DefaultMaxAttachment
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// operatorApp reports whether the operator's app is configured.
func (o Options) operatorApp() bool { return o.ClientID != "" && o.SigningSecret != "" }

// Descriptor returns the Slack channel's descriptor. App is set when the
// operator's app is configured.
func Descriptor(opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	d := channels.Descriptor{
		Channel: "slack",
		Tier:    channels.Free,
		Summary: "A Slack app in a workspace: your own app's bot token, with its signing secret or an app-level token (Socket Mode).",
		Fields:  form,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			return New(ctx, opts, conn)
		},
	}
	if opts.operatorApp() {
		d.App = &App{opts: opts}
		d.OAuth = true
		d.Summary = "A Slack workspace: install the gateway's Slack app, or give your own app's bot token with its signing secret or an app-level token."
	}
	return d
}

// form is what a caller sets of a Config (bring your own app).
var form = []channels.Field{
	{Name: "bot_token", Label: "Bot token", Secret: true, Required: true, Kind: channels.KindString,
		Help:    "Your app's Bot User OAuth Token (xoxb-...), under OAuth & Permissions once the app is installed in the workspace.",
		Example: "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"},
	{Name: "signing_secret", Label: "Signing secret", Secret: true, Kind: channels.KindString,
		Help:    "Basic Information > App Credentials > Signing Secret; it verifies the events sent to the connection's webhook_url (not needed with an app-level token).",
		Example: "8f742231b10e8888abcd99yyyzzz85a5"},
	{Name: "app_token", Label: "App-level token", Secret: true, Kind: channels.KindString,
		Help:    "Basic Information > App-Level Tokens (xapp-..., scope connections:write): events then come over Socket Mode, with no public URL.",
		Example: "xapp-1-A0123456789-1234567890123-abcdef0123456789"},
}

// Config is a Slack connection's configuration.
type Config struct {
	// BotToken is the bot's token ("xoxb-…").
	BotToken string `json:"bot_token,omitempty"`
	// SigningSecret is the bring-your-own app's signing secret.
	SigningSecret string `json:"signing_secret,omitempty"`
	// App is "operator" for a connection made by installing the
	// operator's app; set by Install.
	App string `json:"app,omitempty"`
	// TeamID and BotUserID are the workspace and bot user, as Install or
	// Provision found them.
	TeamID    string `json:"team_id,omitempty"`
	BotUserID string `json:"bot_user_id,omitempty"`
	// AppToken is the bring-your-own app's app-level token ("xapp-…",
	// scope connections:write): with it, events come over Socket Mode
	// (the adapter is a *SocketAdapter, a channels.Poller) and no
	// signing secret is needed.
	AppToken string `json:"app_token,omitempty"`
}

var (
	tokenRE  = regexp.MustCompile(`^xoxb-[A-Za-z0-9-]{1,250}$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9]{8,128}$`)
	idRE     = regexp.MustCompile(`^[A-Z0-9]{1,32}$`)
	appTokRE = regexp.MustCompile(`^xapp-[A-Za-z0-9-]{1,250}$`)
)

// ParseConfig decodes and checks a connection's configuration; operator
// says whether the operator's app is configured. Errors are
// *channels.ConfigError values naming the field.
func ParseConfig(raw json.RawMessage, operator bool) (Config, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, "slack", channels.FieldNames(form),
		`{} to install the gateway's Slack app, or {"bot_token":"xoxb-…","signing_secret":"…"}`); err != nil {
		return Config{}, err
	}
	empty := cfg == Config{}
	switch {
	case empty && !operator:
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "a slack bot token (xoxb-…) and the app's signing_secret are required: this gateway has no Slack app of its own to install"}
	case empty:
		return cfg, nil
	case cfg.App != "" && cfg.App != AppOperator:
		return Config{}, &channels.ConfigError{Field: "app", Msg: "unknown slack app; it is set by the install"}
	case cfg.App == AppOperator && !operator:
		return Config{}, &channels.ConfigError{Field: "app", Msg: "the slack connection was installed with the gateway's Slack app, which is no longer configured"}
	case cfg.BotToken == "":
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "the slack bot token (xoxb-…) is required"}
	case !tokenRE.MatchString(cfg.BotToken):
		return Config{}, &channels.ConfigError{Field: "bot_token", Msg: "not a slack bot token: want xoxb-…, the Bot User OAuth Token of the app's install"}
	case cfg.App == AppOperator && cfg.SigningSecret != "":
		return Config{}, &channels.ConfigError{Field: "signing_secret", Msg: "a slack connection of the gateway's app uses the app's signing secret"}
	case cfg.App == AppOperator && cfg.TeamID == "":
		return Config{}, &channels.ConfigError{Field: "team_id", Msg: "a slack connection of the gateway's app needs its team id (set by the install)"}
	case cfg.AppToken != "" && cfg.App == AppOperator:
		return Config{}, &channels.ConfigError{Field: "app_token", Msg: "a slack connection of the gateway's app gets its events at the app's Request URL, not over Socket Mode"}
	case cfg.AppToken != "" && !appTokRE.MatchString(cfg.AppToken):
		return Config{}, &channels.ConfigError{Field: "app_token", Msg: "not a slack app-level token: want xapp-…, from Basic Information > App-Level Tokens (scope connections:write)"}
	case cfg.App == "" && cfg.SigningSecret == "" && cfg.AppToken == "":
		return Config{}, &channels.ConfigError{Field: "signing_secret", Msg: "the slack app's signing secret is required (Basic Information > App Credentials)"}
	case cfg.SigningSecret != "" && !secretRE.MatchString(cfg.SigningSecret):
		return Config{}, &channels.ConfigError{Field: "signing_secret", Msg: "not a slack signing secret (letters and digits, as Basic Information > App Credentials shows it)"}
	case cfg.TeamID != "" && !idRE.MatchString(cfg.TeamID):
		return Config{}, &channels.ConfigError{Field: "team_id", Msg: "not a slack team id"}
	case cfg.BotUserID != "" && !idRE.MatchString(cfg.BotUserID):
		return Config{}, &channels.ConfigError{Field: "bot_user_id", Msg: "not a slack user id"}
	}
	return cfg, nil
}

// New builds the adapter of a connection. It checks the configuration and
// does no network I/O.
func New(_ context.Context, opts Options, conn channels.Connection) (channels.Adapter, error) {
	opts = opts.withDefaults()
	cfg, err := ParseConfig(conn.Config, opts.operatorApp())
	if err != nil {
		return nil, err
	}
	closed, cancel := context.WithCancel(context.Background())
	a := &Adapter{opts: opts, conn: conn, cfg: cfg, closed: closed, close: cancel}
	if cfg.AppToken != "" {
		return &SocketAdapter{a: a}, nil
	}
	return a, nil
}

// Adapter is one Slack connection.
type Adapter struct {
	opts Options
	conn channels.Connection
	cfg  Config

	closed context.Context
	close  context.CancelFunc
}

var (
	_ channels.Sender          = (*Adapter)(nil)
	_ channels.Typer           = (*Adapter)(nil)
	_ channels.Provisioner     = (*Adapter)(nil)
	_ channels.Installer       = (*Adapter)(nil)
	_ channels.Deprovisioner   = (*Adapter)(nil)
	_ channels.Responder       = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
	_ channels.Closer          = (*Adapter)(nil)
)

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// NeedsInstall reports whether the connection waits for an install of
// the operator's app (its configuration was empty).
func (a *Adapter) NeedsInstall() bool { return a.cfg.BotToken == "" }

// AuthorizeURL is the operator app's OAuth v2 authorize URL.
func (a *Adapter) AuthorizeURL(state, redirectURL string) string {
	q := url.Values{}
	q.Set("client_id", a.opts.ClientID)
	q.Set("scope", strings.Join(a.opts.Scopes, ","))
	q.Set("state", state)
	q.Set("redirect_uri", redirectURL)
	sep := "?"
	if strings.Contains(a.opts.AuthorizeURL, "?") {
		sep = "&"
	}
	return a.opts.AuthorizeURL + sep + q.Encode()
}

// oauthAccess is oauth.v2.access's answer.
type oauthAccess struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	BotUserID   string `json:"bot_user_id"`
	Team        struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"team"`
}

// Install exchanges the code (oauth.v2.access) for the bot token of the
// workspace that installed the operator's app.
func (a *Adapter) Install(ctx context.Context, code, redirectURL string) (channels.Provisioned, error) {
	if !a.opts.operatorApp() {
		return channels.Provisioned{}, channels.Permanent("slack: install: this gateway has no Slack app configured")
	}
	if code == "" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "slack: the install was not approved (no code)"}
	}
	form := url.Values{"code": {code}, "client_id": {a.opts.ClientID}, "client_secret": {a.opts.ClientSecret}, "redirect_uri": {redirectURL}}
	var r oauthAccess
	err := a.call(ctx, "install", "oauth.v2.access", "", form, &r)
	var pe *apiError
	if errors.As(err, &pe) && pe.code != "ratelimited" && pe.code != "internal_error" && pe.code != "fatal_error" && pe.code != "service_unavailable" && pe.code != "request_timeout" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "slack refused the install code: " + pe.code}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	if !tokenRE.MatchString(r.AccessToken) || !idRE.MatchString(r.Team.ID) || (r.BotUserID != "" && !idRE.MatchString(r.BotUserID)) {
		return channels.Provisioned{}, channels.Permanent("slack: install: oauth.v2.access gave no bot token and team (is the app asking for bot scopes?)")
	}
	cfg := Config{BotToken: r.AccessToken, App: AppOperator, TeamID: r.Team.ID, BotUserID: r.BotUserID}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("slack: install: %w", err)
	}
	return channels.Provisioned{Config: raw, Address: r.Team.Name, RouteKey: r.Team.ID}, nil
}

// authTest is auth.test's answer.
type authTest struct {
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	UserID string `json:"user_id"`
}

// Provision checks the bot token (auth.test) and records the team and bot
// user. A connection of the operator's app registers its team id as
// RouteKey.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	if a.NeedsInstall() {
		return channels.Provisioned{}, &channels.ConfigError{Field: "bot_token", Msg: "slack: the connection waits for the install of the gateway's Slack app"}
	}
	var r authTest
	err := a.call(ctx, "check token", "auth.test", a.cfg.BotToken, url.Values{}, &r)
	if errors.Is(err, channels.ErrRevoked) {
		return channels.Provisioned{}, &channels.ConfigError{Field: "bot_token", Msg: "Slack " + strings.TrimPrefix(err.Error(), "slack: check token: ")}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	if !idRE.MatchString(r.TeamID) || !idRE.MatchString(r.UserID) {
		return channels.Provisioned{}, channels.Transient(0, "slack: check token: auth.test answered without the team and user")
	}
	if a.cfg.TeamID != "" && a.cfg.TeamID != r.TeamID {
		return channels.Provisioned{}, &channels.ConfigError{Field: "bot_token", Msg: "slack: the bot token belongs to another workspace than the install"}
	}
	cfg := a.cfg
	cfg.TeamID, cfg.BotUserID = r.TeamID, r.UserID
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("slack: provision: %w", err)
	}
	p := channels.Provisioned{Config: raw, Address: r.Team}
	if p.Address == "" {
		p.Address = r.TeamID
	}
	if cfg.App == AppOperator {
		p.RouteKey = r.TeamID
	}
	return p, nil
}

// Deprovision uninstalls the operator's app from the connection's
// workspace (apps.uninstall), so that Slack stops sending its events; a
// token Slack already rejects means it is gone. A bring-your-own app is
// the caller's: nothing is undone there.
func (a *Adapter) Deprovision(ctx context.Context) error {
	if a.cfg.App != AppOperator || a.cfg.BotToken == "" {
		return nil
	}
	form := url.Values{"client_id": {a.opts.ClientID}, "client_secret": {a.opts.ClientSecret}}
	err := a.call(ctx, "uninstall", "apps.uninstall", a.cfg.BotToken, form, nil)
	if errors.Is(err, channels.ErrRevoked) {
		return nil
	}
	return err
}

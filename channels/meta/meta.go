// Package meta is the Facebook Messenger ("facebook") and Instagram
// ("instagram") channels: a Facebook Page, or the Instagram professional
// account linked to one, reached through the Messenger Platform of the
// Graph API (https://developers.facebook.com/docs/messenger-platform) with
// a small hand-rolled client over net/http, and Meta's webhooks for
// inbound. Instagram uses the Messenger API for Instagram: the linked
// Page's token sends, webhooks come with "object":"instagram".
//
// A connection is made one of two ways:
//
//   - The operator's Meta app (Options.AppID, AppSecret, VerifyToken:
//     COMM_META_APP_ID/APP_SECRET/VERIFY_TOKEN). The connection is made
//     with {} or {"page_id":"…"} (Instagram: {"ig_id":"…"} or the Page's
//     id); the adapter is then a channels.Installer: the person logs in
//     with Facebook Login for Business granting the messaging
//     permissions, and Install exchanges the code for a user token, lists
//     the person's Pages (GET /me/accounts, with each Page's token and
//     linked instagram_business_account), and binds the connection to the
//     chosen one (the first when none was named), keeping its Page token
//     ({"app":"operator","page_id","ig_id","page_access_token"}). The
//     gateway seals it at rest. Provision then subscribes the app to the
//     Page (POST /{page}/subscribed_apps). Meta sends every Page's events
//     to the app's one callback URL per object: /hooks/facebook for
//     "page", /hooks/instagram for "instagram". Descriptor.App verifies
//     them with the app secret (X-Hub-Signature-256) and routes them by
//     entry[].id (Provisioned.RouteKey is the Page id, or the Instagram
//     account id), and answers the GET verification with hub.challenge.
//   - Bring your own app: {"page_id","page_access_token","app_secret"}
//     (optional "verify_token"; Instagram optional "ig_id"). Provision
//     checks the token against the Page (GET /{page}) and subscribes the
//     app to it. Webhooks come to the connection's own ingress
//     (/hooks/<channel>/<connection id>), verified with its app secret;
//     its GET verification is answered by Respond with the connection's
//     verify token (config.verify_token, or the connection id when
//     absent). Such a connection registers no RouteKey.
//
// Serving Pages of people who have no role on the operator's app needs
// Meta App Review (Advanced Access for pages_messaging, and
// instagram_manage_messages for Instagram): with Standard Access an app
// only messages people with a role on it.
//
// Inbound: entry[].messaging[] events of the connection's Page (or
// Instagram account). A message becomes an Inbound: ProviderID is its mid,
// Sender (and the conversation) the page-scoped (PSID) or Instagram-scoped
// (IGSID) id, attachments are downloaded (bounded), reply_to.mid is a
// reference. Postbacks become messages with the button title as text.
// Echoes of the Page's own sends are ignored. Deliveries and reads become
// channels.Receipt items: one per delivered mid; Instagram reads name the
// mid; a Messenger read carries only a watermark (every message before it
// was read), which is mapped to the mids this process sent to that person
// (kept in a bounded memory; reads of messages another process sent, or
// sent before a restart, are not reported).
//
// Outbound: the Send API (POST /{page}/messages) with messaging_type
// RESPONSE; Messenger texts over 2000 characters and Instagram texts over
// 1000 go out as several messages. Outside the 24-hour window Meta
// refuses (code 10 subcode 2018278, or 551): a permanent failure naming
// the window. Rate limits (codes 4, 17, 32, 613, 130429, sent with HTTP
// 400) are transient, with the delay Meta estimates when it says; an
// expired or revoked token (190) revokes the connection.
package meta

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Defaults.
const (
	// DefaultAPIURL is the Graph API with its version.
	DefaultAPIURL = "https://graph.facebook.com/v23.0"
	// DefaultDialogURL is Facebook Login's OAuth dialog.
	DefaultDialogURL = "https://www.facebook.com/v23.0/dialog/oauth"
	// DefaultMaxAttachment is the largest inbound attachment downloaded
	// (Meta's own limit for videos and files is 25 MB).
	DefaultMaxAttachment = 25 << 20
	// MaxEvent bounds a webhook body accepted.
	MaxEvent = 4 << 20
	// maxResponse bounds a Graph API answer read.
	maxResponse = 4 << 20
)

// Channels.
const (
	Facebook  = "facebook"
	Instagram = "instagram"
)

// DefaultScopes are the permissions the operator's app asks for at login
// (Facebook Login for Business, when no configuration id is set).
var DefaultScopes = []string{"pages_show_list", "pages_messaging", "pages_manage_metadata",
	"business_management", "instagram_basic", "instagram_manage_messages"}

// SubscribedFields are the Page webhook fields the app is subscribed to.
var SubscribedFields = []string{"messages", "messaging_postbacks", "message_deliveries", "message_reads", "message_echoes"}

// AppOperator is Config.App of a connection made with the operator's app.
const AppOperator = "operator"

// Options configure the Meta channels of a gateway (operator settings).
type Options struct {
	// APIURL is the Graph API's base URL with its version;
	// DefaultAPIURL when empty.
	APIURL string
	// DialogURL is Facebook Login's OAuth dialog; DefaultDialogURL when
	// empty.
	DialogURL string
	// AppID, AppSecret and VerifyToken are the operator's Meta app
	// (COMM_META_APP_ID, _APP_SECRET, _VERIFY_TOKEN). When all are set,
	// connections can be made by logging in with it and Descriptor.App
	// takes /hooks/facebook and /hooks/instagram.
	AppID, AppSecret, VerifyToken string
	// LoginConfigID is a Facebook Login for Business configuration id
	// (config_id); when set it replaces Scopes in the dialog.
	LoginConfigID string
	// Scopes are the permissions asked for at login; DefaultScopes when
	// empty.
	Scopes []string
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds each call whose context has no deadline; 30 s
	// when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound attachment downloaded;
	// DefaultMaxAttachment when 0. Larger ones are left out.
	MaxAttachment int64
	// Logger receives what the adapter leaves out; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock (receipt watermarks); time.Now when nil.
	Now func() time.Time
	// stats counts what the app-level webhook dropped.
	stats *Stats
	// verified holds the app-level requests in flight that Route verified
	// and parsed, for the ParseWebhook calls of the connections it routes
	// to (one parse per request, not one per Page).
	verified *verifiedSet
}

// Stats count what the channels dropped; safe for concurrent use.
type Stats struct {
	// UnknownObject counts app-level requests of another object
	// ("user", "permissions", a Page request at /hooks/instagram).
	UnknownObject atomic.Int64
	// UnmatchedReads counts Messenger read watermarks that matched no
	// message this process sent.
	UnmatchedReads atomic.Int64
}

func (o Options) withDefaults() Options {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	if o.DialogURL == "" {
		o.DialogURL = DefaultDialogURL
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
	if o.stats == nil {
		o.stats = &Stats{}
	}
	if o.verified == nil {
		o.verified = &verifiedSet{m: map[*http.Request]verifiedBody{}}
	}
	return o
}

// operatorApp reports whether the operator's app is configured.
func (o Options) operatorApp() bool { return o.AppID != "" && o.AppSecret != "" && o.VerifyToken != "" }

// FacebookDescriptor returns the Messenger channel's descriptor; App is
// set when the operator's app is configured.
func FacebookDescriptor(opts Options) channels.Descriptor { return descriptor(Facebook, opts) }

// InstagramDescriptor returns the Instagram channel's descriptor; App is
// set when the operator's app is configured.
func InstagramDescriptor(opts Options) channels.Descriptor { return descriptor(Instagram, opts) }

func descriptor(channel string, opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	d := channels.Descriptor{
		Channel: channel,
		Tier:    channels.Free,
		Summary: "A Facebook Page in Messenger: your own Meta app's Page access token and app secret.",
		Fields:  facebookForm,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			return newAdapter(channel, opts, conn)
		},
	}
	if channel == Instagram {
		d.Summary = "An Instagram professional account, through the Facebook Page it is linked to: your own Meta app's Page access token and app secret."
		d.Fields = instagramForm
	}
	if opts.operatorApp() {
		d.App = &App{channel: channel, opts: opts}
		d.OAuth = true
		d.Summary = "A Facebook Page in Messenger: log in with Facebook to choose the Page, or give your own Meta app's Page access token and app secret."
		if channel == Instagram {
			d.Summary = "An Instagram professional account linked to a Facebook Page: log in with Facebook to choose it, or give your own Meta app's Page access token and app secret."
		}
	}
	return d
}

// facebookForm and instagramForm are what a caller sets of a Config: the
// bring-your-own-app keys; page_id (and ig_id) also choose among the
// person's Pages in an install.
var (
	facebookForm = []channels.Field{
		{Name: "page_id", Label: "Page ID", Required: true, Kind: channels.KindString,
			Help:    "The Facebook Page's id (digits): the Page's About > Page transparency, or the id GET /me/accounts lists.",
			Example: "104635792348771"},
		{Name: "page_access_token", Label: "Page access token", Secret: true, Required: true, Kind: channels.KindString,
			Help:    "A Page access token of your Meta app with pages_messaging (Graph API Explorer, or GET /me/accounts with a user token); a long-lived one does not expire.",
			Example: "EAAGm0PX4ZCpsBAKZCZCZBmZCZAqZC8ZBZAz"},
		{Name: "app_secret", Label: "App secret", Secret: true, Required: true, Kind: channels.KindString,
			Help:    "Your Meta app's secret (App settings > Basic); it verifies the webhooks sent to the connection's webhook_url.",
			Example: "5f9d0c2b8e7a4b1c9d3e6f0a1b2c3d4e"},
		{Name: "verify_token", Label: "Verify token", Secret: true, Kind: channels.KindString,
			Help:    "Any string you also enter as the Verify Token in your app's Webhooks settings; the connection id when empty.",
			Example: "my-verify-token"},
		{Name: "human_agent", Label: "Human agent tag", Kind: channels.KindBool,
			Help:    "Retry a message Meta refuses outside the 24-hour window with the HUMAN_AGENT tag (7 days); the app needs Meta's Human Agent permission.",
			Example: "false"},
	}
	instagramForm = slices.Insert(slices.Clone(facebookForm), 1, channels.Field{
		Name: "ig_id", Label: "Instagram account ID", Kind: channels.KindString,
		Help:    "The Instagram professional account's id (digits), the Page's instagram_business_account; found from the Page when empty.",
		Example: "17841405822304914"})
)

// Config is a Messenger or Instagram connection's configuration.
type Config struct {
	// PageID is the Facebook Page (for Instagram: the Page the account is
	// linked to). Optional before an install: it chooses among the
	// person's Pages.
	PageID string `json:"page_id,omitempty"`
	// IGID is the Instagram professional account (instagram only).
	IGID string `json:"ig_id,omitempty"`
	// PageAccessToken is the Page's token.
	PageAccessToken string `json:"page_access_token,omitempty"`
	// AppSecret is the bring-your-own app's secret (verifies webhooks).
	AppSecret string `json:"app_secret,omitempty"`
	// VerifyToken is the bring-your-own app's webhook verify token;
	// the connection id when empty.
	VerifyToken string `json:"verify_token,omitempty"`
	// HumanAgent lets a message refused outside the 24-hour window go
	// out again with the HUMAN_AGENT tag (up to 7 days after the person's
	// last message); the app needs Meta's Human Agent permission.
	HumanAgent bool `json:"human_agent,omitempty"`
	// App is "operator" for a connection made with the operator's app;
	// set by Install.
	App string `json:"app,omitempty"`
	// Name is the Page's name or the Instagram username, as found.
	Name string `json:"name,omitempty"`
}

var (
	idRE     = regexp.MustCompile(`^[0-9]{1,32}$`)
	tokenRE  = regexp.MustCompile(`^[A-Za-z0-9._|%-]{16,1000}$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9]{16,128}$`)
	verifyRE = regexp.MustCompile(`^[\x21-\x7e]{1,256}$`)
)

// ParseConfig decodes and checks a connection's configuration for
// channel; operator says whether the operator's app is configured.
// Errors are *channels.ConfigError values naming the field.
func ParseConfig(channel string, raw json.RawMessage, operator bool) (Config, error) {
	cfg, err := parseConfig(channel, raw, operator)
	if ce, ok := err.(*channels.ConfigError); ok && !strings.Contains(ce.Msg, channel) {
		ce.Msg = channel + ": " + ce.Msg
	}
	return cfg, err
}

func parseConfig(channel string, raw json.RawMessage, operator bool) (Config, error) {
	var cfg Config
	known := channels.FieldNames(facebookForm)
	example := `{} to log in with the gateway's Meta app, or {"page_id":"…","page_access_token":"…","app_secret":"…"}`
	if channel == Instagram {
		known = channels.FieldNames(instagramForm)
	}
	if err := channels.DecodeConfig(raw, &cfg, channel, known, example); err != nil {
		return Config{}, err
	}
	install := cfg.PageAccessToken == "" && cfg.AppSecret == "" && cfg.VerifyToken == "" && cfg.App == "" && cfg.Name == ""
	// (human_agent may come with an install; Install keeps it.)
	switch {
	case cfg.PageID != "" && !idRE.MatchString(cfg.PageID):
		return Config{}, &channels.ConfigError{Field: "page_id", Msg: "not a Facebook Page id (digits)"}
	case cfg.IGID != "" && channel != Instagram:
		return Config{}, &channels.ConfigError{Field: "ig_id", Msg: "unknown field of a facebook connection; connect an instagram connection for the Instagram account"}
	case cfg.IGID != "" && !idRE.MatchString(cfg.IGID):
		return Config{}, &channels.ConfigError{Field: "ig_id", Msg: "not an Instagram professional account id (digits)"}
	case install && !operator:
		return Config{}, &channels.ConfigError{Field: "page_access_token", Msg: channel + ": page_id, page_access_token and app_secret are required: this gateway has no Meta app of its own to log in with"}
	case install:
		return cfg, nil
	case cfg.App != "" && cfg.App != AppOperator:
		return Config{}, &channels.ConfigError{Field: "app", Msg: "unknown " + channel + " app; it is set by the install"}
	case cfg.App == AppOperator && !operator:
		return Config{}, &channels.ConfigError{Field: "app", Msg: "the " + channel + " connection was made with the gateway's Meta app, which is no longer configured"}
	case cfg.PageID == "":
		return Config{}, &channels.ConfigError{Field: "page_id", Msg: "the " + channel + " connection's Facebook Page id is required"}
	case cfg.PageAccessToken == "":
		return Config{}, &channels.ConfigError{Field: "page_access_token", Msg: "the Page access token is required (" + channel + ")"}
	case !tokenRE.MatchString(cfg.PageAccessToken):
		return Config{}, &channels.ConfigError{Field: "page_access_token", Msg: "not a Page access token (" + channel + ")"}
	case cfg.App == AppOperator && (cfg.AppSecret != "" || cfg.VerifyToken != ""):
		return Config{}, &channels.ConfigError{Field: "app_secret", Msg: "a " + channel + " connection of the gateway's app uses the app's secret"}
	case cfg.App == AppOperator && channel == Instagram && cfg.IGID == "":
		return Config{}, &channels.ConfigError{Field: "ig_id", Msg: "an instagram connection of the gateway's app needs its account id (set by the install)"}
	case cfg.App == "" && cfg.AppSecret == "":
		return Config{}, &channels.ConfigError{Field: "app_secret", Msg: "the Meta app's secret is required (App settings > Basic); it verifies the webhooks (" + channel + ")"}
	case cfg.AppSecret != "" && !secretRE.MatchString(cfg.AppSecret):
		return Config{}, &channels.ConfigError{Field: "app_secret", Msg: "not a Meta app secret (letters and digits, as App settings > Basic shows it) (" + channel + ")"}
	case cfg.VerifyToken != "" && !verifyRE.MatchString(cfg.VerifyToken):
		return Config{}, &channels.ConfigError{Field: "verify_token", Msg: "the verify token must be 1 to 256 printable characters without spaces (" + channel + ")"}
	case len(cfg.Name) > 256:
		return Config{}, &channels.ConfigError{Field: "name", Msg: "too long (" + channel + ")"}
	}
	return cfg, nil
}

// Adapter is one Messenger or Instagram connection.
type Adapter struct {
	channel string
	opts    Options
	conn    channels.Connection
	cfg     Config
	sent    *sentLog

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

// New builds the adapter of a connection of channel ("facebook" or
// "instagram"). It checks the configuration and does no network I/O.
func New(channel string, opts Options, conn channels.Connection) (*Adapter, error) {
	if channel != Facebook && channel != Instagram {
		return nil, fmt.Errorf("meta: unknown channel %q", channel)
	}
	return newAdapter(channel, opts.withDefaults(), conn)
}

func newAdapter(channel string, opts Options, conn channels.Connection) (*Adapter, error) {
	cfg, err := ParseConfig(channel, conn.Config, opts.operatorApp())
	if err != nil {
		return nil, err
	}
	closed, cancel := context.WithCancel(context.Background())
	return &Adapter{channel: channel, opts: opts, conn: conn, cfg: cfg, sent: newSentLog(), closed: closed, close: cancel}, nil
}

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// routeID is the id entries for this connection carry: the Page, or the
// Instagram account.
func (a *Adapter) routeID() string {
	if a.channel == Instagram {
		return a.cfg.IGID
	}
	return a.cfg.PageID
}

// object is the webhook object of the channel.
func object(channel string) string {
	if channel == Instagram {
		return "instagram"
	}
	return "page"
}

// NeedsInstall reports whether the connection waits for a login with the
// operator's app (it has no Page token).
func (a *Adapter) NeedsInstall() bool { return a.cfg.PageAccessToken == "" }

// AuthorizeURL is the operator app's Facebook Login dialog.
func (a *Adapter) AuthorizeURL(state, redirectURL string) string {
	q := url.Values{}
	q.Set("client_id", a.opts.AppID)
	q.Set("redirect_uri", redirectURL)
	q.Set("state", state)
	q.Set("response_type", "code")
	if a.opts.LoginConfigID != "" {
		q.Set("config_id", a.opts.LoginConfigID)
	} else {
		q.Set("scope", strings.Join(a.opts.Scopes, ","))
	}
	sep := "?"
	if strings.Contains(a.opts.DialogURL, "?") {
		sep = "&"
	}
	return a.opts.DialogURL + sep + q.Encode()
}

// secret is what the connection's webhooks are signed with.
func (a *Adapter) secret() string {
	if a.cfg.App == AppOperator || a.cfg.AppSecret == "" {
		return a.opts.AppSecret
	}
	return a.cfg.AppSecret
}

// verifyToken is what the connection's GET verification must carry.
func (a *Adapter) verifyToken() string {
	switch {
	case a.cfg.App == AppOperator || a.NeedsInstall():
		return a.opts.VerifyToken
	case a.cfg.VerifyToken != "":
		return a.cfg.VerifyToken
	}
	return a.conn.ID
}

// proof is the appsecret_proof of token: hex HMAC-SHA256 with the app
// secret, which Meta checks when the app requires it.
func proof(secret, token string) string {
	if secret == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

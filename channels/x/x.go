// Package x is the X (Twitter) direct-message channel, "x": classic,
// unencrypted X DMs of a person's account, reached through the X API v2
// with a small hand-rolled client over net/http. It is a paid channel.
//
// Connecting: the operator's X app (Options.ClientID and ClientSecret:
// COMM_X_CLIENT_ID, COMM_X_CLIENT_SECRET) is installed on the person's
// account with OAuth 2.0 authorization code and PKCE (scopes
// DefaultScopes). A connection is made with an empty configuration ({});
// the adapter is then a channels.Installer. The PKCE verifier is derived
// from the client secret and the connection id (PKCEVerifier), because
// the callback carries no state to the adapter. Install exchanges the code
// at POST /2/oauth2/token and reads the account (GET /2/users/me): the
// configuration becomes {"access_token","refresh_token","expires_at",
// "user_id","username"}, the address "@username", the routing key the
// user id.
//
// Inbound comes one of two ways:
//
//   - Webhooks (when the gateway has a public URL and the operator gave
//     the app's bearer token, COMM_X_BEARER_TOKEN): Provision registers
//     the app-level webhook <base>/hooks/x (POST /2/webhooks, which X
//     checks with a CRC; an existing registration is reused, an invalid
//     one revalidated) and subscribes the user to dm.received through
//     the X Activity API (POST /2/activity/subscriptions, with the
//     user's token). Descriptor.App answers CRCs, verifies
//     x-twitter-webhooks-signature (or -signature-oauth2) and routes by
//     the subscribed user id.
//   - Polling otherwise: the adapter's Poll reads GET /2/dm_events every
//     Options.PollInterval, newest first, down to the newest event it
//     emitted before (the cursor kept in the connection's configuration),
//     so nothing is emitted twice across restarts.
//
// Either way Poll (one per connection across replicas, under the
// gateway's lease) refreshes the access token before it expires
// (Options.RefreshMargin), saving the rotated tokens in the connection's
// sealed configuration (channels.Credentials). A refresh X refuses
// revokes the connection. A send answered 401 loads the stored
// credentials (another replica may have refreshed) and tries once more.
//
// Ids: Inbound.ProviderID and SendResult.ProviderID are DM event ids.
// ThreadKey is the dm_conversation_id ("<smaller id>-<larger id>" for a
// one-to-one conversation); Sender is the sender's user id. A message is
// sent to a numeric user id (POST /2/dm_conversations/with/{id}/messages)
// or, in a group conversation, to the conversation.
//
// End-to-end encrypted X Chat conversations are out of reach: reading or
// writing them needs X's Chat XDK (a Rust core; its Go binding is cgo and
// not available to this build). chat.* events are logged and dropped,
// and a send to an X Chat conversation fails permanently with
// ErrXChat's reason.
package x

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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

	"golang.org/x/oauth2"

	"github.com/comm-gateway/comm/channels"
)

// Defaults.
const (
	DefaultAPIURL       = "https://api.x.com"
	DefaultAuthorizeURL = "https://x.com/i/oauth2/authorize"
	// DefaultRefreshMargin is how long before expiry the access token is
	// refreshed (X's access tokens last two hours).
	DefaultRefreshMargin = 10 * time.Minute
	// DefaultPollInterval is how often GET /2/dm_events is read in
	// polling mode. X bills each DM event read: keep it unhurried.
	DefaultPollInterval = time.Minute
	// MaxEvent bounds the webhook body accepted.
	MaxEvent = 1 << 20
	// maxResponse bounds an API answer read.
	maxResponse = 2 << 20
)

// DefaultScopes are the OAuth 2.0 scopes asked for at install.
var DefaultScopes = []string{"dm.read", "dm.write", "users.read", "offline.access", "tweet.read"}

// Options configure the X channel of a gateway (operator settings).
type Options struct {
	// APIURL is the X API's base URL; DefaultAPIURL when empty.
	APIURL string
	// AuthorizeURL is where people approve the install of the operator's
	// app; DefaultAuthorizeURL when empty.
	AuthorizeURL string
	// ClientID and ClientSecret are the operator's X app's OAuth 2.0
	// client (COMM_X_CLIENT_ID, COMM_X_CLIENT_SECRET). Without both the
	// channel is not available (connecting answers 501). X signs webhooks
	// with the client secret in x-twitter-webhooks-signature-oauth2.
	ClientID, ClientSecret string
	// ConsumerSecret is the app's OAuth 1.0 consumer secret (API secret
	// key, COMM_X_CONSUMER_SECRET): it answers CRCs and verifies the
	// legacy x-twitter-webhooks-signature. When empty, the client secret
	// answers CRCs.
	ConsumerSecret string
	// BearerToken is the app-only bearer token (COMM_X_BEARER_TOKEN) the
	// webhook registration (/2/webhooks) needs. Without it, or without a
	// public URL, connections poll.
	BearerToken string
	// InsecureWebhooks takes the webhook mode with a base URL X would
	// refuse (http, or with a port): for a fake X in tests. Without it,
	// such a gateway polls.
	InsecureWebhooks bool
	// Scopes are asked for at install; DefaultScopes when empty.
	Scopes []string
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds each call whose context has no deadline; 30 s
	// when 0.
	CallTimeout time.Duration
	// RefreshMargin: refresh this long before the access token expires;
	// DefaultRefreshMargin when 0.
	RefreshMargin time.Duration
	// PollInterval spaces the dm_events reads in polling mode;
	// DefaultPollInterval when 0.
	PollInterval time.Duration
	// PollPage is how many events one dm_events page asks for (1 to 100);
	// 20 when 0.
	PollPage int
	// Logger receives what the adapter leaves out; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
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
	if o.RefreshMargin <= 0 {
		o.RefreshMargin = DefaultRefreshMargin
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollPage <= 0 || o.PollPage > 100 {
		o.PollPage = 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// configured reports whether the operator's app is configured.
func (o Options) configured() bool { return o.ClientID != "" && o.ClientSecret != "" }

// crcSecret is the secret CRC answers are made with.
func (o Options) crcSecret() string {
	if o.ConsumerSecret != "" {
		return o.ConsumerSecret
	}
	return o.ClientSecret
}

// Descriptor returns the X channel's descriptor: paid; New and App are
// nil while the operator's app is not configured.
func Descriptor(opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	d := channels.Descriptor{Channel: "x", Tier: channels.Paid, OAuth: true,
		Summary:  "X (Twitter) direct messages of an account: the person approves the gateway's X app; nothing to fill in.",
		Settings: "COMM_X_CLIENT_ID and COMM_X_CLIENT_SECRET"}
	if opts.configured() {
		d.New = func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			return New(ctx, opts, conn)
		}
		d.App = &App{opts: opts}
	}
	return d
}

// Config is an X connection's configuration. The caller sends {}; the
// install fills it in.
type Config struct {
	// AccessToken and RefreshToken are the user's OAuth 2.0 tokens;
	// ExpiresAt is when the access token expires (zero: unknown).
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	// UserID and Username are the account, as /2/users/me showed it.
	UserID   string `json:"user_id,omitempty"`
	Username string `json:"username,omitempty"`
	// WebhookID and SubscriptionID are the app's webhook and the user's
	// dm.received subscription, in webhook mode.
	WebhookID      string `json:"webhook_id,omitempty"`
	SubscriptionID string `json:"subscription_id,omitempty"`
	// Cursor is the newest DM event id polled (polling mode).
	Cursor string `json:"cursor,omitempty"`
	// Since: polling skips events older than this (the install's time),
	// so that an account's history is not taken for new messages.
	Since time.Time `json:"since,omitzero"`
}

var (
	idRE    = regexp.MustCompile(`^[0-9]{1,20}$`)
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=:-]{1,1000}$`)
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9_]{1,50}$`)
)

// ParseConfig decodes and checks a connection's configuration. Errors are
// *channels.ConfigError values naming the field.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, "x", "none: the install fills the configuration in",
		`{} (the person then approves the gateway's X app at the connection's authorize_url)`); err != nil {
		return Config{}, err
	}
	switch {
	case cfg.AccessToken == "" && (cfg.RefreshToken != "" || cfg.UserID != ""):
		return Config{}, &channels.ConfigError{Field: "access_token", Msg: "x: the access token is missing (it is set by the install)"}
	case cfg.AccessToken != "" && !tokenRE.MatchString(cfg.AccessToken):
		return Config{}, &channels.ConfigError{Field: "access_token", Msg: "x: not an OAuth 2.0 access token"}
	case cfg.RefreshToken != "" && !tokenRE.MatchString(cfg.RefreshToken):
		return Config{}, &channels.ConfigError{Field: "refresh_token", Msg: "x: not an OAuth 2.0 refresh token"}
	case cfg.UserID != "" && !idRE.MatchString(cfg.UserID):
		return Config{}, &channels.ConfigError{Field: "user_id", Msg: "x: not an X user id (digits)"}
	case cfg.Username != "" && !nameRE.MatchString(cfg.Username):
		return Config{}, &channels.ConfigError{Field: "username", Msg: "x: not an X username"}
	case cfg.WebhookID != "" && !idRE.MatchString(cfg.WebhookID):
		return Config{}, &channels.ConfigError{Field: "webhook_id", Msg: "x: not an X webhook id"}
	case cfg.SubscriptionID != "" && !idRE.MatchString(cfg.SubscriptionID):
		return Config{}, &channels.ConfigError{Field: "subscription_id", Msg: "x: not an X subscription id"}
	case cfg.Cursor != "" && !idRE.MatchString(cfg.Cursor):
		return Config{}, &channels.ConfigError{Field: "cursor", Msg: "x: not an X DM event id"}
	}
	return cfg, nil
}

// New builds the adapter of a connection. It checks the configuration and
// does no network I/O.
func New(_ context.Context, opts Options, conn channels.Connection) (channels.Adapter, error) {
	opts = opts.withDefaults()
	if !opts.configured() {
		return nil, &channels.ConfigError{Field: "channel", Msg: "x: this gateway has no X app configured (COMM_X_CLIENT_ID, COMM_X_CLIENT_SECRET)"}
	}
	cfg, err := ParseConfig(conn.Config)
	if err != nil {
		return nil, err
	}
	closed, cancel := context.WithCancel(context.Background())
	return &Adapter{opts: opts, conn: conn, cfg: cfg, closed: closed, close: cancel}, nil
}

// Adapter is one X connection.
type Adapter struct {
	opts Options
	conn channels.Connection

	mu  sync.Mutex
	cfg Config // tokens and cursor change under mu

	closed context.Context
	close  context.CancelFunc
}

var (
	_ channels.Sender          = (*Adapter)(nil)
	_ channels.Addresser       = (*Adapter)(nil)
	_ channels.Installer       = (*Adapter)(nil)
	_ channels.Provisioner     = (*Adapter)(nil)
	_ channels.Deprovisioner   = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
	_ channels.Poller          = (*Adapter)(nil)
	_ channels.Closer          = (*Adapter)(nil)
)

// config returns the current configuration.
func (a *Adapter) config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// webhookMode reports whether inbound comes by webhook: the gateway has a
// public URL X accepts (https, no port) and the operator gave the bearer
// token that registers it. Otherwise the connection polls.
func (a *Adapter) webhookMode() bool {
	if a.conn.WebhookURL == "" || a.opts.BearerToken == "" {
		return false
	}
	return a.opts.InsecureWebhooks || WebhookURLAccepted(a.conn.WebhookURL)
}

// WebhookURLAccepted reports whether X would register a webhook at u: an
// https URL without a port.
func WebhookURLAccepted(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Scheme == "https" && p.Port() == "" && p.Host != ""
}

// appURL is the app-level webhook (<base>/hooks/x), from the connection's
// own ingress URL.
func (a *Adapter) appURL() string {
	return strings.TrimSuffix(a.conn.WebhookURL, "/"+a.conn.ID)
}

// NeedsInstall reports whether the connection waits for the install of
// the operator's app (its configuration carries no token).
func (a *Adapter) NeedsInstall() bool { return a.config().AccessToken == "" }

// PKCEVerifier is the PKCE code verifier of connection id's install:
// base64url(HMAC-SHA256(client secret, "pkce:"+id)), 43 characters. It is
// secret (the client secret keys it) and the same in every process, so
// Install finds it without state.
func PKCEVerifier(clientSecret, id string) string {
	m := hmac.New(sha256.New, []byte(clientSecret))
	m.Write([]byte("pkce:" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// AuthorizeURL is the operator app's OAuth 2.0 authorize URL, with the
// connection's PKCE challenge (S256).
func (a *Adapter) AuthorizeURL(state, redirectURL string) string {
	q := url.Values{}
	q.Set("response_type", "code")
	q.Set("client_id", a.opts.ClientID)
	q.Set("redirect_uri", redirectURL)
	q.Set("scope", strings.Join(a.opts.Scopes, " "))
	q.Set("state", state)
	q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(PKCEVerifier(a.opts.ClientSecret, a.conn.ID)))
	q.Set("code_challenge_method", "S256")
	sep := "?"
	if strings.Contains(a.opts.AuthorizeURL, "?") {
		sep = "&"
	}
	return a.opts.AuthorizeURL + sep + q.Encode()
}

// Install exchanges the code for the user's tokens and reads the account.
// A code X refuses is a *channels.ConfigError on "code".
func (a *Adapter) Install(ctx context.Context, code, redirectURL string) (channels.Provisioned, error) {
	if code == "" || len(code) > 4096 {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "x: the install was not approved (no code)"}
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURL},
		"code_verifier": {PKCEVerifier(a.opts.ClientSecret, a.conn.ID)}, "client_id": {a.opts.ClientID}}
	tok, err := a.token(ctx, "install", form)
	var te *tokenError
	if errors.As(err, &te) && te.status < 500 && te.status != http.StatusTooManyRequests && errors.Is(err, channels.ErrRevoked) {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "x: X refused the install code: " + te.reason()}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	cfg := Config{Since: a.opts.Now().UTC().Truncate(time.Second)}
	tok.apply(&cfg, a.opts.Now())
	me, err := a.me(ctx, cfg.AccessToken)
	if err != nil {
		return channels.Provisioned{}, err
	}
	cfg.UserID, cfg.Username = me.ID, me.Username
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("x: install: %w", err)
	}
	return channels.Provisioned{Config: raw, Address: "@" + me.Username, RouteKey: me.ID}, nil
}

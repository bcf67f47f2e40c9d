// Package twilio is SMS and WhatsApp through the customer's own Twilio
// account: the channels "sms" and "whatsapp", provider "twilio", reached
// through Twilio's REST API (https://www.twilio.com/docs/messaging) with a
// small hand-rolled client over net/http (twilio-go hard-codes its hosts).
//
// A connection is an account (AccountSid with its Auth Token, or an API key
// SID and secret with the Auth Token that signs webhooks) and a sender:
// one of the account's numbers ("+15551234567"; on WhatsApp
// "whatsapp:+15551234567") or a Messaging Service ("MG..."). Provision
// checks the credentials (GET Accounts/{sid}.json) and that the sender is
// the account's, then points the number's SMS webhook
// (IncomingPhoneNumbers SmsUrl) or the service's inbound and status
// callback URLs at the connection's ingress (Connection.WebhookURL), unless
// the configuration says "configure_webhooks": false (the customer pastes
// the URL). Every message sent asks for status callbacks at the same URL.
//
// Inbound: Twilio POSTs form-encoded webhooks signed with
// X-Twilio-Signature: base64 HMAC-SHA1, keyed with the Auth Token, over
// the URL Twilio was given followed by every POST parameter, sorted by
// name, as name+value. The URL is the connection's WebhookURL (built from
// the gateway's public base URL, never from the request's Host, so a
// proxy in front changes nothing) plus the request's query. JSON-bodied
// webhooks carry bodySHA256=<hex SHA-256 of the body> in the query; the
// signature then covers the URL only and the digest the body. A message
// (MessageSid, From, Body, NumMedia, MediaUrlN) becomes an Inbound: Sender
// is the E.164 number (WhatsApp's without "whatsapp:"), ThreadKey the
// same, so each counterpart is a conversation; WaId, ProfileName and the
// like are in Details; OriginalRepliedMessageSid (a WhatsApp reply) is in
// References. Media are downloaded with the account's credentials into
// attachments, at most MaxAttachment bytes each; a file that is too big or
// whose download fails is left out and listed in Details
// ("media_failed"), and the message is stored with its text: Twilio does
// not retry messaging webhooks by default, so failing the request would
// lose the message. A status callback (MessageStatus) becomes an Inbound
// carrying a channels.Receipt. Every request is answered with empty TwiML
// (<Response/>, text/xml; channels.Acknowledger).
//
// Outbound: POST Accounts/{sid}/Messages.json with From (or
// MessagingServiceSid), To, Body and StatusCallback; a text over 1600
// characters goes out as several messages. Twilio takes no idempotency
// key on Messages.json (I-Twilio-Idempotency-Token is a header Twilio
// sends on its webhooks, not one it reads), so a send retried after a lost
// answer can deliver twice. On WhatsApp connections a template
// (Outbound.Template) goes out as ContentSid and ContentVariables, and
// typing is POST messaging.twilio.com/v2/Indicators/Typing.json with the
// inbound message's sid (it also marks that message read).
//
// Errors: Twilio's error codes decide the class. 20429, HTTP 429 and 5xx
// are transient (Retry-After honoured); 20003 (authentication) is
// channels.Revoked; 21211 (invalid To), 21610 (the recipient opted out),
// 21408 (region not enabled), 63016 (WhatsApp outside the 24-hour window:
// the reason says a template is needed) and other 4xx are permanent.
package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Default base URLs.
const (
	DefaultAPIURL       = "https://api.twilio.com"
	DefaultMessagingURL = "https://messaging.twilio.com"
)

// DefaultMaxAttachment is the largest media file downloaded into an
// inbound message (WhatsApp media go up to 16 MB; MMS up to 5 MB).
const DefaultMaxAttachment = 16 << 20

// MaxWebhook bounds the webhook body accepted (a message webhook is a few
// KB; the gateway's body limit applies first).
const MaxWebhook = 256 << 10

// MaxMedia is the most media files Twilio attaches to one message.
const MaxMedia = 10

// maxResponse bounds a REST answer read.
const maxResponse = 1 << 20

// Channels of the provider.
const (
	SMS      = "sms"
	WhatsApp = "whatsapp"
)

// Options configure the Twilio provider of a gateway (operator settings,
// not per connection).
type Options struct {
	// APIURL is the REST API's base URL (api.twilio.com; the operator
	// setting COMM_TWILIO_API_URL; tests point it at twiliotest).
	APIURL string
	// MessagingURL is the base URL of messaging.twilio.com (Messaging
	// Services, typing indicators); COMM_TWILIO_MESSAGING_URL.
	MessagingURL string
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds every call (and each media download) whose
	// context has no earlier deadline; 30 s when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound media file downloaded, in
	// bytes; DefaultMaxAttachment when 0.
	MaxAttachment int64
	// Logger receives what the adapter leaves out (never a credential);
	// slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	if o.MessagingURL == "" {
		o.MessagingURL = DefaultMessagingURL
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	o.MessagingURL = strings.TrimRight(o.MessagingURL, "/")
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// The REST API does not redirect; media downloads follow
			// their redirects themselves, without the credentials.
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
	return o
}

// Descriptors returns the provider's descriptors: "sms" and "whatsapp",
// provider "twilio", both free.
func Descriptors(opts Options) []channels.Descriptor {
	return []channels.Descriptor{Descriptor(SMS, opts), Descriptor(WhatsApp, opts)}
}

// Descriptor returns the descriptor of channel (SMS or WhatsApp).
func Descriptor(channel string, opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	summary, fields := "SMS from a number of your own Twilio account: its Account SID, Auth Token and the number.", smsForm
	if channel == WhatsApp {
		summary, fields = "WhatsApp from a sender of your own Twilio account: its Account SID, Auth Token and the WhatsApp number.", whatsAppForm
	}
	return channels.Descriptor{
		Channel:  channel,
		Provider: "twilio",
		Tier:     channels.Free,
		Summary:  summary,
		Fields:   fields,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			return New(ctx, channel, opts, conn)
		},
	}
}

// smsForm and whatsAppForm are what a caller sets of a Config.
var (
	smsForm      = form("+15551234567", "One of the account's numbers in E.164 (+15551234567), or a Messaging Service SID (MG...).")
	whatsAppForm = form("whatsapp:+15551234567", "The account's WhatsApp sender (whatsapp:+15551234567, or the bare number), or a Messaging Service SID (MG...).")
)

func form(from, fromHelp string) []channels.Field {
	return []channels.Field{
		{Name: "account_sid", Label: "Account SID", Required: true, Kind: channels.KindString,
			Help:    "AC followed by 32 hex digits, under Account Info on the Twilio console's home page.",
			Example: "AC0123456789abcdef0123456789abcdef"},
		{Name: "auth_token", Label: "Auth Token", Secret: true, Required: true, Kind: channels.KindString,
			Help:    "Under Account Info beside the Account SID; Twilio signs its webhooks with it, so it is needed with an API key too.",
			Example: "0123456789abcdef0123456789abcdef"},
		{Name: "from", Label: "From", Required: true, Kind: channels.KindPhone, Help: fromHelp, Example: from},
		{Name: "api_key_sid", Label: "API key SID", Kind: channels.KindString,
			Help:    "An API key (SK followed by 32 hex digits, Account > API keys & tokens) to call Twilio with instead of the Auth Token; give its secret too.",
			Example: "SK0123456789abcdef0123456789abcdef"},
		{Name: "api_key_secret", Label: "API key secret", Secret: true, Kind: channels.KindString,
			Help:    "The API key's secret, shown once when the key was made.",
			Example: "0123456789abcdef0123456789abcdef"},
		{Name: "configure_webhooks", Label: "Configure webhooks", Kind: channels.KindBool,
			Help:    "Point the number's (or service's) webhooks at the connection (default true); false leaves them to you: paste the connection's webhook_url.",
			Example: "true"},
		{Name: "webhook_signing_key", Label: "Webhook signing key", Secret: true, Kind: channels.KindString,
			Help:    "Only when the account's webhook settings sign with a shared key (HMAC-SHA256) instead of the Auth Token: that key's secret.",
			Example: "0123456789abcdef0123456789abcdef"},
	}
}

// Config is a Twilio connection's configuration.
type Config struct {
	// AccountSID is the account ("AC" + 32 hex digits). Required.
	AccountSID string `json:"account_sid"`
	// AuthToken authenticates the REST calls (unless an API key is
	// given) and verifies webhook signatures (always: Twilio signs with
	// it). Required.
	AuthToken string `json:"auth_token,omitempty"`
	// APIKeySID and APIKeySecret authenticate the REST calls in place of
	// the Auth Token ("SK" + 32 hex digits and its secret).
	APIKeySID    string `json:"api_key_sid,omitempty"`
	APIKeySecret string `json:"api_key_secret,omitempty"`
	// From is the sender: a number of the account in E.164
	// ("+15551234567"; on WhatsApp "whatsapp:+15551234567" or the bare
	// number), or a Messaging Service sid ("MG" + 32 hex digits).
	// Required.
	From string `json:"from"`
	// ConfigureWebhooks says whether Provision points the number's or
	// service's webhooks at the connection (default true). When false the
	// customer pastes the connection's webhook_url into the console.
	ConfigureWebhooks *bool `json:"configure_webhooks,omitempty"`
	// WebhookSigningKey is the secret of the shared key the account's
	// webhook settings sign with instead of the Auth Token (requests then
	// carry X-Twilio-Webhooks-Signature-Settings: algorithm=HMAC_SHA256).
	WebhookSigningKey string `json:"webhook_signing_key,omitempty"`
	// NumberSID is the IncomingPhoneNumber ("PN...") Provision
	// configured; set by Provision.
	NumberSID string `json:"number_sid,omitempty"`
}

var (
	accountRE = regexp.MustCompile(`^AC[0-9a-fA-F]{32}$`)
	keyRE     = regexp.MustCompile(`^SK[0-9a-fA-F]{32}$`)
	serviceRE = regexp.MustCompile(`^MG[0-9a-fA-F]{32}$`)
	numberSID = regexp.MustCompile(`^PN[0-9a-fA-F]{32}$`)
	e164RE    = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	tokenRE   = regexp.MustCompile(`^[A-Za-z0-9]{16,128}$`)
	// messageRE is a message sid: two capital letters ("SM" for SMS,
	// "MM" for MMS and media; Twilio may add kinds) and 32 hex digits.
	messageRE = regexp.MustCompile(`^[A-Z]{2}[0-9a-fA-F]{32}$`)
	contentRE = regexp.MustCompile(`^HX[0-9a-fA-F]{32}$`)
)

const (
	example = `{"account_sid":"AC...","auth_token":"...","from":"+15551234567"}`
)

// ParseConfig decodes and checks a connection's configuration for channel.
// Errors are *channels.ConfigError values naming the field.
func ParseConfig(channel string, raw json.RawMessage) (Config, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, channel+" (twilio)", channels.FieldNames(smsForm), example); err != nil {
		return Config{}, err
	}
	bad := func(field, format string, args ...any) (Config, error) {
		return Config{}, &channels.ConfigError{Field: field, Msg: "twilio: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case cfg.AccountSID == "":
		return bad("account_sid", "the Account SID is required (AC followed by 32 hex digits, from the Twilio console)")
	case !accountRE.MatchString(cfg.AccountSID):
		return bad("account_sid", "not an Account SID: want AC followed by 32 hex digits")
	case cfg.AuthToken == "":
		if cfg.APIKeySID != "" {
			return bad("auth_token", "the Auth Token is required with an API key too: Twilio signs its webhooks with the account's Auth Token, and an API key cannot verify them")
		}
		return bad("auth_token", "the Auth Token is required (or an API key with api_key_sid and api_key_secret, plus the Auth Token that signs webhooks)")
	case !tokenRE.MatchString(cfg.AuthToken):
		return bad("auth_token", "not a Twilio Auth Token (letters and digits, like the 32 hex digits the console shows)")
	case (cfg.APIKeySID == "") != (cfg.APIKeySecret == ""):
		if cfg.APIKeySID == "" {
			return bad("api_key_sid", "api_key_secret needs its api_key_sid (SK followed by 32 hex digits)")
		}
		return bad("api_key_secret", "api_key_sid needs its api_key_secret")
	case cfg.APIKeySID != "" && !keyRE.MatchString(cfg.APIKeySID):
		return bad("api_key_sid", "not an API key SID: want SK followed by 32 hex digits")
	case cfg.APIKeySecret != "" && !tokenRE.MatchString(cfg.APIKeySecret):
		return bad("api_key_secret", "not a Twilio API key secret (letters and digits)")
	case cfg.NumberSID != "" && !numberSID.MatchString(cfg.NumberSID):
		return bad("number_sid", "not an IncomingPhoneNumber SID")
	}
	from, err := normalizeFrom(channel, cfg.From)
	if err != nil {
		return Config{}, err
	}
	cfg.From = from
	return cfg, nil
}

// normalizeFrom checks the sender: a Messaging Service sid, or an E.164
// number (on WhatsApp with or without the "whatsapp:" prefix; kept
// without it).
func normalizeFrom(channel, from string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", &channels.ConfigError{Field: "from", Msg: "twilio: " + fmt.Sprintf(format, args...)}
	}
	if from == "" {
		return bad("the sender is required: one of the account's numbers in E.164 (+15551234567%s) or a Messaging Service SID (MG...)", map[bool]string{true: ", on WhatsApp whatsapp:+15551234567"}[channel == WhatsApp])
	}
	if serviceRE.MatchString(from) {
		return from, nil
	}
	number, prefixed := strings.CutPrefix(from, "whatsapp:")
	if prefixed && channel != WhatsApp {
		return bad("%q is a WhatsApp sender; connect it with channel \"whatsapp\"", from)
	}
	if !e164RE.MatchString(number) {
		return bad("%q is neither an E.164 number (+15551234567) nor a Messaging Service SID (MG...)", from)
	}
	return number, nil
}

// configureWebhooks is cfg.ConfigureWebhooks with its default.
func (c Config) configureWebhooks() bool {
	return c.ConfigureWebhooks == nil || *c.ConfigureWebhooks
}

// service reports whether the sender is a Messaging Service.
func (c Config) service() bool { return serviceRE.MatchString(c.From) }

// Adapter is a Twilio connection: an SMS one, and the common part of a
// WhatsApp one (WhatsAppAdapter).
type Adapter struct {
	channel string
	opts    Options
	conn    channels.Connection
	cfg     Config

	// closed ends with Close; calls in flight end with it.
	closed context.Context
	close  context.CancelFunc
}

// WhatsAppAdapter is a WhatsApp connection: an Adapter that also shows
// typing and sends templates.
type WhatsAppAdapter struct {
	*Adapter
}

var (
	_ channels.Sender          = (*Adapter)(nil)
	_ channels.Provisioner     = (*Adapter)(nil)
	_ channels.Deprovisioner   = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
	_ channels.Acknowledger    = (*Adapter)(nil)
	_ channels.Closer          = (*Adapter)(nil)

	_ channels.Typer          = (*WhatsAppAdapter)(nil)
	_ channels.TemplateSender = (*WhatsAppAdapter)(nil)
)

// New builds the adapter of a connection of channel: an *Adapter for SMS,
// a *WhatsAppAdapter for WhatsApp. It checks the configuration and does
// no network I/O.
func New(_ context.Context, channel string, opts Options, conn channels.Connection) (channels.Adapter, error) {
	a, err := newAdapter(channel, opts, conn)
	if err != nil {
		return nil, err
	}
	if channel == WhatsApp {
		return &WhatsAppAdapter{Adapter: a}, nil
	}
	return a, nil
}

func newAdapter(channel string, opts Options, conn channels.Connection) (*Adapter, error) {
	if channel != SMS && channel != WhatsApp {
		return nil, fmt.Errorf("twilio: no channel %q (want %q or %q)", channel, SMS, WhatsApp)
	}
	opts = opts.withDefaults()
	cfg, err := ParseConfig(channel, conn.Config)
	if err != nil {
		return nil, err
	}
	closed, cancel := context.WithCancel(context.Background())
	return &Adapter{channel: channel, opts: opts, conn: conn, cfg: cfg, closed: closed, close: cancel}, nil
}

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// Channel is "sms" or "whatsapp".
func (a *Adapter) Channel() string { return a.channel }

// address is a number as Twilio takes it on this channel
// ("whatsapp:+1..." on WhatsApp).
func (a *Adapter) address(number string) string {
	if a.channel == WhatsApp {
		return "whatsapp:" + number
	}
	return number
}

// CheckTemplate checks a template's Content SID and variables.
func (a *WhatsAppAdapter) CheckTemplate(t channels.Template) error {
	if !contentRE.MatchString(t.ContentSID) {
		return &channels.ConfigError{Field: "template.content_sid", Msg: "not a Twilio Content SID: want HX followed by 32 hex digits"}
	}
	if len(t.Variables) > 100 {
		return &channels.ConfigError{Field: "template.variables", Msg: "at most 100 variables"}
	}
	for k, v := range t.Variables {
		if k == "" || len(k) > 64 || len(v) > 1600 {
			return &channels.ConfigError{Field: "template.variables", Msg: "variable names are 1-64 bytes and values at most 1600 bytes"}
		}
	}
	return nil
}

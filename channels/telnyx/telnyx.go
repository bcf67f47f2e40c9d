// Package telnyx is the SMS channel through the customer's own Telnyx
// account (channel "sms", provider "telnyx"), reached through Telnyx's API
// v2 (https://developers.telnyx.com) with a small hand-rolled client over
// net/http (no Telnyx Go SDK is served by the module proxy).
//
// A connection is made with
//
//	POST /v1/connections {"channel":"sms","provider":"telnyx","config":{
//	  "api_key":"KEY...", "public_key":"<base64 Ed25519 key>",
//	  "from":"+15551234567"}}
//
// (or "messaging_profile_id" instead of, or beside, "from"). Provision
// checks the key (the number's messaging settings, then the messaging
// profile) and points the profile's webhook_url at the connection's
// ingress (Connection.WebhookURL), with webhook API version 2, unless the
// configuration says "configure_webhooks": false: then the customer pastes
// the connection's webhook_url into the profile. Deprovision clears the
// profile's webhook_url when it still points at the connection.
//
// Inbound: Telnyx POSTs JSON events signed with Ed25519: the
// telnyx-signature-ed25519 header is the base64 signature of
// "<telnyx-timestamp>|<raw body>" under the account's public key (Portal ->
// Keys & Credentials -> Public Key). A request whose signature does not
// verify, or whose timestamp is more than Options.Tolerance (5 minutes) in
// the past or the future, is channels.ErrSignature. message.received is a
// message: Sender and ThreadKey are the sender's E.164 number (a
// conversation per counterpart), ProviderID Telnyx's message id (a retry of
// the event carries the same one, so it is stored once), MMS media are
// downloaded into attachments (bounded in number and size). message.sent
// and message.finalized are channels.Receipt items for the outbound
// message they name (delivered, or failed with Telnyx's error code and
// detail). Other events are acknowledged and dropped.
//
// Outbound: POST /v2/messages with "from" (or POST
// /v2/messages/number_pool with the messaging profile when the connection
// has no "from"). Telnyx itself splits a text into segments and sends up
// to 10 of them as one concatenated SMS (1530 GSM-7 characters, 670 UCS-2
// characters); a longer text is rejected (40302) unless the profile chunks
// long messages. The adapter therefore cuts a longer text into parts that
// each fit in 10 segments and sends them in order; the provider id is the
// first part's. There is no typing indicator and no threading in SMS.
package telnyx

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// DefaultAPIURL is Telnyx's API v2.
const DefaultAPIURL = "https://api.telnyx.com/v2"

// DefaultTolerance is how far a webhook's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Defaults of the media bounds.
const (
	// DefaultMaxAttachment is the largest MMS media file downloaded.
	DefaultMaxAttachment = 10 << 20
	// DefaultMaxMedia is the most media files of one message downloaded.
	DefaultMaxMedia = 10
	// DefaultMaxMediaTotal bounds the media of one message together.
	DefaultMaxMediaTotal = 25 << 20
)

// MaxEvent bounds the webhook body accepted (an event is a few KB; media
// come as URLs).
const MaxEvent = 1 << 20

// maxResponse bounds an API answer read.
const maxResponse = 1 << 20

// Options configure the Telnyx provider of a gateway (operator settings,
// not per connection).
type Options struct {
	// APIURL is the API's base URL including /v2; DefaultAPIURL when
	// empty (the operator setting COMM_TELNYX_API_URL; tests point it at
	// telnyxtest).
	APIURL string
	// HTTPClient makes the API calls; a client of its own (no redirects)
	// when nil.
	HTTPClient *http.Client
	// MediaClient downloads MMS media (Telnyx gives short-lived signed
	// URLs, fetched without the API key); a client of its own when nil.
	MediaClient *http.Client
	// CallTimeout bounds each call (and each download) whose context has
	// no earlier deadline; 30 s when 0.
	CallTimeout time.Duration
	// Tolerance is how far a webhook's telnyx-timestamp may be from now;
	// DefaultTolerance when 0.
	Tolerance time.Duration
	// MaxAttachment, MaxMedia and MaxMediaTotal bound the MMS media
	// downloaded per message; the defaults when 0. Media over a bound are
	// left out and listed in the message's details.
	MaxAttachment int64
	MaxMedia      int
	MaxMediaTotal int64
	// LastAttemptMedia bounds the media downloads of Telnyx's last
	// delivery attempt of a message (LastAttempt), so that its text is
	// stored before Telnyx, which waits about 2 s, hangs up; 1.5 s when 0.
	LastAttemptMedia time.Duration
	// Now is the clock webhook timestamps are checked against; time.Now
	// when nil.
	Now func() time.Time
	// Logger receives what the adapter leaves out (never the key);
	// slog.Default() when nil.
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
			// The API does not redirect; a redirect would carry the key
			// elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.MediaClient == nil {
		o.MediaClient = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(_ *http.Request, via []*http.Request) error {
				if len(via) >= 3 {
					return errors.New("too many redirects")
				}
				return nil
			},
		}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = DefaultMaxAttachment
	}
	if o.MaxMedia <= 0 {
		o.MaxMedia = DefaultMaxMedia
	}
	if o.MaxMediaTotal <= 0 {
		o.MaxMediaTotal = DefaultMaxMediaTotal
	}
	if o.LastAttemptMedia <= 0 {
		o.LastAttemptMedia = 1500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Channel and Provider name the descriptor's row.
const (
	Channel  = "sms"
	Provider = "telnyx"
)

// Descriptor returns the descriptor of SMS through Telnyx.
func Descriptor(opts Options) channels.Descriptor {
	opts = opts.withDefaults()
	return channels.Descriptor{
		Channel:  Channel,
		Provider: Provider,
		Tier:     channels.Free,
		Summary:  "SMS from a number of your own Telnyx account: an API key, the account's public key and the number.",
		Fields:   form,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			a, err := New(ctx, opts, conn)
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	}
}

// Config is a Telnyx connection's configuration.
type Config struct {
	// APIKey is a Telnyx API v2 key ("KEY..."). Required.
	APIKey string `json:"api_key"`
	// PublicKey is the account's Ed25519 public key, base64, as the
	// portal shows it (Keys & Credentials -> Public Key): it verifies
	// webhooks. Required.
	PublicKey string `json:"public_key"`
	// From is the connection's number, E.164 ("+15551234567"). One of
	// From and MessagingProfileID is required.
	From string `json:"from,omitempty"`
	// MessagingProfileID is the messaging profile whose webhook comm
	// sets; Provision fills it in from From's messaging settings. Without
	// From, messages go out from the profile's number pool.
	MessagingProfileID string `json:"messaging_profile_id,omitempty"`
	// ConfigureWebhooks, when false, leaves the profile's webhook_url to
	// the customer (who pastes the connection's webhook_url); true when
	// absent.
	ConfigureWebhooks *bool `json:"configure_webhooks,omitempty"`
	// WebhookSet records that Provision set the profile's webhook_url;
	// set by Provision, never by the caller.
	WebhookSet bool `json:"webhook_set,omitempty"`
}

// form is what a caller sets of a Config.
var form = []channels.Field{
	{Name: "api_key", Label: "API key", Secret: true, Required: true, Kind: channels.KindString,
		Help:    "A Telnyx API v2 key (KEY...), from Portal > Keys & Credentials > API Keys.",
		Example: "KEY0123456789ABCDEF0123456789ABCDEF_abcdefghijklmnop"},
	{Name: "public_key", Label: "Public key", Required: true, Kind: channels.KindString,
		Help:    "The account's Ed25519 public key, base64, from Portal > Keys & Credentials > Public Key; it verifies Telnyx's webhooks.",
		Example: "Xk5nOUmpyB9QSbS3XpK0HsBzmNugaPakrbQs600UuXU="},
	{Name: "from", Label: "From", Kind: channels.KindPhone,
		Help:    "The number to send from, in E.164; it must be on a messaging profile (give it or a messaging profile ID).",
		Example: "+15551234567"},
	{Name: "messaging_profile_id", Label: "Messaging profile ID", Kind: channels.KindString,
		Help:    "The messaging profile whose webhook the gateway sets (found from the number when empty); without a number, messages go out from its number pool.",
		Example: "40017f7e-a4c1-4e5c-9b3a-6d2f1c0e8b7a"},
	{Name: "configure_webhooks", Label: "Configure webhooks", Kind: channels.KindBool,
		Help:    "Set the profile's webhook URL to the connection (default true); false leaves it to you: paste the connection's webhook_url, API version 2.",
		Example: "true"},
}

// configure reports whether comm sets the profile's webhook.
func (c Config) configure() bool { return c.ConfigureWebhooks == nil || *c.ConfigureWebhooks }

var (
	keyRE     = regexp.MustCompile(`^[A-Za-z0-9_\-.]{8,256}$`)
	e164RE    = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	profileRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

const configExample = `{"api_key":"KEY...","public_key":"<base64>","from":"+15551234567"}`

// ParseConfig decodes and checks a connection's configuration. Errors are
// *channels.ConfigError values naming the field.
func ParseConfig(raw json.RawMessage) (Config, ed25519.PublicKey, error) {
	var cfg Config
	if err := channels.DecodeConfig(raw, &cfg, "sms (telnyx)", channels.FieldNames(form), configExample); err != nil {
		return Config{}, nil, err
	}
	bad := func(field, format string, args ...any) (Config, ed25519.PublicKey, error) {
		return Config{}, nil, &channels.ConfigError{Field: field, Msg: "telnyx: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case cfg.APIKey == "":
		return bad("api_key", "the Telnyx API key is required (Portal -> Keys & Credentials -> API Keys)")
	case !keyRE.MatchString(cfg.APIKey):
		return bad("api_key", "not a Telnyx API key: want the key as the portal shows it (KEY...), without spaces")
	case cfg.PublicKey == "":
		return bad("public_key", "the account's public key is required to verify Telnyx's webhooks (Portal -> Keys & Credentials -> Public Key)")
	case cfg.From == "" && cfg.MessagingProfileID == "":
		return bad("from", "give the number to send from (from, E.164 like +15551234567) or a messaging_profile_id")
	case cfg.From != "" && !e164RE.MatchString(cfg.From):
		return bad("from", "%q is not a phone number in E.164 form (like +15551234567)", cfg.From)
	case cfg.MessagingProfileID != "" && !profileRE.MatchString(cfg.MessagingProfileID):
		return bad("messaging_profile_id", "not a Telnyx messaging profile id (a UUID)")
	}
	pub, err := base64.StdEncoding.DecodeString(cfg.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return bad("public_key", "not a Telnyx public key: want the base64 of a 32-byte Ed25519 key, as the portal shows it")
	}
	return cfg, ed25519.PublicKey(pub), nil
}

// New builds the adapter of a connection. It checks the configuration and
// does no network I/O.
func New(_ context.Context, opts Options, conn channels.Connection) (*Adapter, error) {
	opts = opts.withDefaults()
	cfg, pub, err := ParseConfig(conn.Config)
	if err != nil {
		return nil, err
	}
	closed, cancel := context.WithCancel(context.Background())
	return &Adapter{opts: opts, conn: conn, cfg: cfg, pub: pub, closed: closed, close: cancel}, nil
}

// Adapter is a Telnyx connection.
type Adapter struct {
	opts Options
	conn channels.Connection
	cfg  Config
	pub  ed25519.PublicKey

	// closed ends with Close; every call made after, or in flight, ends.
	closed context.Context
	close  context.CancelFunc
}

var (
	_ channels.Sender          = (*Adapter)(nil)
	_ channels.Provisioner     = (*Adapter)(nil)
	_ channels.Deprovisioner   = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
	_ channels.Closer          = (*Adapter)(nil)
)

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// Provision checks the key and the sender, and sets the messaging
// profile's webhook_url to the connection's ingress unless the
// configuration says not to.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	cfg := a.cfg
	if cfg.From != "" {
		num, err := a.number(ctx, cfg.From)
		if err != nil {
			return channels.Provisioned{}, err
		}
		switch {
		case num.MessagingProfileID == "":
			return channels.Provisioned{}, &channels.ConfigError{Field: "from", Msg: fmt.Sprintf(
				"telnyx: %s is not assigned to a messaging profile; assign it to one in the Telnyx portal (Numbers -> Messaging Profile)", cfg.From)}
		case cfg.MessagingProfileID != "" && cfg.MessagingProfileID != num.MessagingProfileID:
			return channels.Provisioned{}, &channels.ConfigError{Field: "messaging_profile_id", Msg: fmt.Sprintf(
				"telnyx: %s belongs to the messaging profile %s, not %s", cfg.From, num.MessagingProfileID, cfg.MessagingProfileID)}
		}
		cfg.MessagingProfileID = num.MessagingProfileID
	}
	prof, err := a.profile(ctx, cfg.MessagingProfileID)
	if err != nil {
		return channels.Provisioned{}, err
	}
	if cfg.configure() {
		if a.conn.WebhookURL == "" {
			return channels.Provisioned{}, &channels.ConfigError{Field: "configure_webhooks", Msg: "telnyx: this gateway has no public URL for Telnyx to deliver messages to; " +
				"configure its public base URL, or set configure_webhooks to false and point the messaging profile's webhook at a URL that reaches it"}
		}
		if err := a.setWebhook(ctx, cfg.MessagingProfileID, &a.conn.WebhookURL); err != nil {
			return channels.Provisioned{}, err
		}
		cfg.WebhookSet = true
	} else if prof.WebhookAPIVersion == "1" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "configure_webhooks", Msg: "telnyx: the messaging profile sends API v1 webhooks, which carry no Ed25519 signature; " +
			"set its webhook API version to 2, or let comm configure the webhook"}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, fmt.Errorf("telnyx: provision: %w", err)
	}
	return channels.Provisioned{Config: raw, Address: cfg.From}, nil
}

// Deprovision clears the messaging profile's webhook_url when Provision
// set it and it still points at this connection.
func (a *Adapter) Deprovision(ctx context.Context) error {
	if !a.cfg.WebhookSet || a.cfg.MessagingProfileID == "" {
		return nil
	}
	prof, err := a.getProfile(ctx, a.cfg.MessagingProfileID)
	var ae *apiError
	if errors.As(err, &ae) && (ae.status == http.StatusNotFound || errors.Is(err, channels.ErrRevoked)) {
		a.opts.Logger.Info("telnyx: deprovision: the messaging profile or the key is gone; nothing to undo", "connection", a.conn.ID)
		return nil
	}
	if err != nil {
		return err
	}
	if prof.WebhookURL == "" {
		return nil // cleared already
	}
	if prof.WebhookURL != a.conn.WebhookURL {
		a.opts.Logger.Info("telnyx: deprovision: the profile's webhook points elsewhere now; left as it is", "connection", a.conn.ID)
		return nil
	}
	return a.setWebhook(ctx, a.cfg.MessagingProfileID, nil)
}

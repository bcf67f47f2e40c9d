// Package wacloud is WhatsApp on the operator's own numbers: the channel
// "whatsapp", provider "hosted" (paid), reached through the WhatsApp Cloud
// API of Meta's Graph API
// (https://developers.facebook.com/documentation/business-messaging/whatsapp/)
// with the small Graph client channels/meta shares.
//
// The operator configures the numbers (Options.Numbers:
// COMM_WHATSAPP_HOSTED_NUMBERS, each a phone_number_id, its display number
// and a system-user access token) and the Meta app that receives their
// webhooks (COMM_META_APP_SECRET, COMM_META_VERIFY_TOKEN). The numbers
// are lines shared among projects (channels.SharedApp): the gateway gives
// each connection a line (channels.Connection.Line, the phone_number_id)
// and a join code; people send "join <code>" (the link
// https://wa.me/<digits>?text=join%20<code>) to be bound to it.
//
// Inbound: Meta POSTs every number's events to the app's callback URL,
// /hooks/whatsapp, signed with X-Hub-Signature-256 (the app secret);
// Descriptor.App verifies it and answers the GET verification
// (hub.challenge, with the verify token), and SharedApp.Receive returns
// the messages and status receipts, each with the line it came to
// (value.metadata.phone_number_id). A message's Sender and ThreadKey are
// the person's business-scoped user id (BSUID, "US.13491208655302741918")
// where Meta sends one, else the wa_id (the phone number's digits); wa_id,
// profile name and user id are in Details. Media (image, audio, video,
// document, sticker) are fetched with the line's token (GET /{media-id}
// gives a short-lived URL, downloaded with the token too) into
// attachments, at most MaxAttachment bytes each (larger ones are left out
// and listed in Details); a failed download fails the request, so Meta
// delivers it again. A quoted reply's context.id is a reference, so it
// joins the conversation of the message quoted. Reactions are not stored;
// message types comm cannot show are stored noted in Details. statuses[]
// become channels.Receipt items (sent, delivered, read, failed with
// Meta's error code and title). Meta's retries carry the same wamid, which
// is the provider id, so nothing is stored twice.
//
// Outbound: POST /{phone_number_id}/messages (Bearer token) with a text
// (over 4096 characters: several messages), quoting the message answered
// (context.message_id); a phone number is addressed with "to", a BSUID
// with "recipient" (Meta's business-scoped user id guide; to wins when
// both are given, so only one is). Outside the 24 hours after the
// person's last message Meta refuses free text (131047): the failure says
// that a template is needed, which goes out as a Cloud API template
// (channels.Template Name, Language and Variables "1", "2" ... as body
// parameters). Typing marks the message answered read and shows the
// typing indicator (status read with typing_indicator, up to 25 s).
//
// Errors: 130429 (throughput), 131056 (pair rate), 131057 (maintenance),
// 429 and 5xx are transient, with Retry-After when Meta gives it; 190 and
// other token or permission errors are permanent and say that the
// operator's token for the number must be renewed (it is no credential
// of the project's); every other refusal is permanent, naming Meta's code
// and message.
package wacloud

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

// Names of the channel.
const (
	Channel  = "whatsapp"
	Provider = "hosted"
)

// Defaults.
const (
	// DefaultGraphURL is the Graph API with its version.
	DefaultGraphURL = "https://graph.facebook.com/v23.0"
	// DefaultMaxAttachment is the largest inbound media file downloaded
	// (WhatsApp's own limits: images 5 MB, audio and video 16 MB,
	// documents 100 MB).
	DefaultMaxAttachment = 25 << 20
	// MaxEvent bounds a webhook body accepted.
	MaxEvent = 4 << 20
	// MaxText is the longest text of one message (Cloud API: 4096
	// characters; counted here in UTF-16 code units, the stricter
	// reading).
	MaxText = 4096
	// maxResponse bounds a Graph API answer read (not media).
	maxResponse = 1 << 20
)

// Number is one of the operator's WhatsApp Cloud API numbers: an element
// of COMM_WHATSAPP_HOSTED_NUMBERS.
type Number struct {
	// PhoneNumberID is the Cloud API's id of the number (digits); it is
	// the line's id.
	PhoneNumberID string `json:"phone_number_id"`
	// DisplayNumber is the number people write to, in E.164
	// ("+15550001111"; spaces, dashes and parentheses are taken out).
	DisplayNumber string `json:"display_number"`
	// AccessToken is a system-user token with whatsapp_business_messaging
	// on the number's WhatsApp Business Account.
	AccessToken string `json:"access_token"`
}

// Options configure hosted WhatsApp (operator settings).
type Options struct {
	// GraphURL is the Graph API's base URL with its version
	// (COMM_META_GRAPH_URL); DefaultGraphURL when empty.
	GraphURL string
	// AppSecret verifies webhook signatures (COMM_META_APP_SECRET);
	// VerifyToken answers the callback URL's verification
	// (COMM_META_VERIFY_TOKEN).
	AppSecret, VerifyToken string
	// Numbers are the operator's numbers; without any the channel cannot
	// be connected (501).
	Numbers []Number
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds each call whose context has no deadline; 30 s
	// when 0.
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound media file downloaded;
	// DefaultMaxAttachment when 0.
	MaxAttachment int64
	// Logger receives what is left out (never a token); slog.Default()
	// when nil.
	Logger *slog.Logger
}

var (
	idRE     = regexp.MustCompile(`^[0-9]{1,32}$`)
	e164RE   = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	tokenRE  = regexp.MustCompile(`^[A-Za-z0-9._|%-]{16,1000}$`)
	phoneSep = strings.NewReplacer(" ", "", "-", "", "(", "", ")", "", ".", "")
)

// ParseNumbers decodes COMM_WHATSAPP_HOSTED_NUMBERS: a JSON array of
// {"phone_number_id","display_number","access_token"}. The error names
// the element (from 1) and its field.
func ParseNumbers(raw string) ([]Number, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var ns []Number
	if err := dec.Decode(&ns); err != nil {
		return nil, fmt.Errorf(`want a JSON array of {"phone_number_id","display_number","access_token"}: %v`, err)
	}
	if dec.More() {
		return nil, errors.New("data after the JSON array")
	}
	for i := range ns {
		n, err := ns[i].check()
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i+1, err)
		}
		ns[i] = n
	}
	if err := unique(ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// check returns n with its display number in E.164, or what is wrong.
func (n Number) check() (Number, error) {
	switch {
	case !idRE.MatchString(n.PhoneNumberID):
		return n, fmt.Errorf("phone_number_id %q is not a Cloud API phone number id (digits)", n.PhoneNumberID)
	case n.AccessToken == "":
		return n, fmt.Errorf("access_token of %s is required", n.PhoneNumberID)
	case !tokenRE.MatchString(n.AccessToken):
		return n, fmt.Errorf("access_token of %s is not a Graph API access token", n.PhoneNumberID)
	}
	d := phoneSep.Replace(n.DisplayNumber)
	if !strings.HasPrefix(d, "+") {
		d = "+" + d
	}
	if !e164RE.MatchString(d) {
		return n, fmt.Errorf("display_number %q of %s is not a phone number in E.164 form (+15550001111)", n.DisplayNumber, n.PhoneNumberID)
	}
	n.DisplayNumber = d
	return n, nil
}

func unique(ns []Number) error {
	seen := map[string]bool{}
	for i, n := range ns {
		if seen[n.PhoneNumberID] {
			return fmt.Errorf("element %d: phone_number_id %s is listed twice", i+1, n.PhoneNumberID)
		}
		seen[n.PhoneNumberID] = true
	}
	return nil
}

// Check reports what is wrong with the options: a number, or numbers
// without the app secret and verify token their webhooks need.
func (o Options) Check() error {
	for i, n := range o.Numbers {
		if _, err := n.check(); err != nil {
			return fmt.Errorf("whatsapp (hosted): number %d: %w", i+1, err)
		}
	}
	if err := unique(o.Numbers); err != nil {
		return fmt.Errorf("whatsapp (hosted): %w", err)
	}
	if len(o.Numbers) > 0 && (o.AppSecret == "" || o.VerifyToken == "") {
		return errors.New("whatsapp (hosted): numbers need the Meta app's secret and verify token (COMM_META_APP_SECRET, COMM_META_VERIFY_TOKEN), which verify their webhooks")
	}
	if o.GraphURL != "" {
		if u, err := url.Parse(o.GraphURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("whatsapp (hosted): the Graph API URL %q is not an http(s) URL", o.GraphURL)
		}
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.GraphURL == "" {
		o.GraphURL = DefaultGraphURL
	}
	o.GraphURL = strings.TrimRight(o.GraphURL, "/")
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
	numbers := make([]Number, 0, len(o.Numbers))
	for _, n := range o.Numbers {
		if n, err := n.check(); err == nil {
			numbers = append(numbers, n)
		}
	}
	o.Numbers = numbers
	return o
}

// Descriptor returns hosted WhatsApp's descriptor. Without numbers, or
// with options Check refuses (logged), New is nil: connecting answers
// 501.
func Descriptor(opts Options) channels.Descriptor {
	d := channels.Descriptor{Channel: Channel, Provider: Provider, Tier: channels.Paid,
		Summary:  "WhatsApp on the operator's numbers: nothing to bring; people join the connection by sending its join code.",
		Fields:   form,
		Settings: "COMM_WHATSAPP_HOSTED_NUMBERS, with COMM_META_APP_SECRET and COMM_META_VERIFY_TOKEN"}
	if err := opts.Check(); err != nil {
		if opts.Logger != nil {
			opts.Logger.Error("whatsapp (hosted) is not available", "err", err)
		} else {
			slog.Error("whatsapp (hosted) is not available", "err", err)
		}
		return d
	}
	if len(opts.Numbers) == 0 {
		return d
	}
	opts = opts.withDefaults()
	app := &App{opts: opts, lines: map[string]*line{}}
	for _, n := range opts.Numbers {
		app.lines[n.PhoneNumberID] = &line{opts: opts, num: n}
	}
	d.New = func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
		return app.adapter(conn)
	}
	d.App = app
	d.Shared = app
	return d
}

// Config is a hosted WhatsApp connection's configuration. Both fields are
// the gateway's (it places the connection on a line); the adapter only
// checks that nothing else is given.
type Config struct {
	// Dedicated asks for a number of the connection's own (no join
	// step), where the operator has one to spare.
	Dedicated bool `json:"dedicated,omitempty"`
	// Line names the number (its phone_number_id or display number).
	Line string `json:"line,omitempty"`
}

// form is what a caller sets of a Config: the line keys the gateway
// reads.
var form = channels.LineFields("+15550001111")

// ParseConfig decodes and checks a connection's configuration. Errors are
// *channels.ConfigError values naming the field.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	err := channels.DecodeConfig(raw, &cfg, "whatsapp (hosted)", channels.FieldNames(form), `{}, {"dedicated":true} or {"line":"+15550001111"}`)
	return cfg, err
}

// line is one number: its settings and the calls made from it.
type line struct {
	opts Options
	num  Number
}

// Adapter is one hosted WhatsApp connection: the number of its line.
type Adapter struct {
	line *line
	conn channels.Connection
	cfg  Config

	closed context.Context
	close  context.CancelFunc
}

var (
	_ channels.Sender         = (*Adapter)(nil)
	_ channels.Typer          = (*Adapter)(nil)
	_ channels.TemplateSender = (*Adapter)(nil)
	_ channels.Addresser      = (*Adapter)(nil)
	_ channels.Provisioner    = (*Adapter)(nil)
	_ channels.Closer         = (*Adapter)(nil)
)

// errUnknownLine is a connection on a number the operator no longer
// configures.
var errUnknownLine = errors.New("whatsapp (hosted): the connection's number is not among the operator's numbers (COMM_WHATSAPP_HOSTED_NUMBERS)")

func (p *App) adapter(conn channels.Connection) (*Adapter, error) {
	cfg, err := ParseConfig(conn.Config)
	if err != nil {
		return nil, err
	}
	l, ok := p.lines[conn.Line]
	if !ok {
		if conn.Line == "" {
			return nil, errors.New("whatsapp (hosted): the connection has no line (the gateway assigns one of the operator's numbers)")
		}
		return nil, fmt.Errorf("%w: %q", errUnknownLine, conn.Line)
	}
	closed, cancel := context.WithCancel(context.Background())
	return &Adapter{line: l, conn: conn, cfg: cfg, closed: closed, close: cancel}, nil
}

// Provision gives the connection its number's address; nothing is set up
// at Meta (the number is the operator's).
func (a *Adapter) Provision(context.Context) (channels.Provisioned, error) {
	return channels.Provisioned{Address: a.line.num.DisplayNumber}, nil
}

// Close ends the calls in flight and makes later ones fail transiently.
func (a *Adapter) Close() error {
	a.close()
	return nil
}

// Number is the connection's number.
func (a *Adapter) Number() Number { return a.line.num }

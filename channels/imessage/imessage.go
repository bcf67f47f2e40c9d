// Package imessage is the iMessage channel ("imessage", paid): the
// operator runs BlueBubbles servers (https://bluebubbles.app) on Macs
// signed in to an Apple ID, and comm speaks to their REST API
// (/api/v1/..., the server password as ?password=) with a small
// hand-rolled client over net/http. Each relay's address (the phone number
// or email it sends from) is one of the operator's lines, shared among
// projects (channels.SharedApp): a person writes "join <code>" to the
// relay's address once, and their messages go to that project's
// connection from then on.
//
// The operator lists the relays (COMM_IMESSAGE_RELAYS: a JSON array of
// {"url","password","address"}). A connection is made with {} (no
// configuration): the gateway gives it a line (Connection.Line, a relay's
// address), and Provision checks the relay (GET /api/v1/ping and
// /api/v1/server/info with the password; the latter says whether the
// Private API helper is on).
//
// Inbound comes one of two ways:
//
//   - Webhook (the gateway has a public URL): Provision registers comm's
//     app-level URL on the relay (POST /api/v1/webhook, events
//     new-message and updated-message), once per relay: it first lists
//     the relay's webhooks, so restarts and replicas add no duplicates,
//     and deletes comm's own registrations of that relay with an older
//     secret. BlueBubbles signs nothing, so the URL carries the relay's id
//     and a secret (/hooks/imessage?relay=<id>&secret=<hex>), an HMAC of
//     the relay's password and address that every replica computes alike;
//     Descriptor.App checks it in constant time. BlueBubbles posts each
//     event once and never retries.
//   - Following the relay (Options.Follow, for a gateway the relays cannot
//     reach): Descriptor.Session polls each relay's messages
//     (POST /api/v1/message/query, sorted by date, after a cursor kept in
//     Options.State) every Options.PollInterval. Receipts are not seen
//     this way (message/query selects by creation date only). In webhook
//     mode the same session reads the relays every CatchUpInterval (30 s),
//     so that a message the webhook did not deliver (BlueBubbles posts
//     each event once; the gateway was down or unreachable) is stored late
//     instead of lost; what the webhook stored is not stored again (the
//     guid is the provider id).
//
// A new-message from someone else becomes an Inbound: ProviderID is the
// Apple message guid, Sender the handle's address (phone numbers in
// E.164, emails lower-cased), ThreadKey the sender's address for a
// person's own chat (so that comm's sends to them share the
// conversation) and the chat guid for a group ("iMessage;+;chat…"),
// threadOriginatorGuid a reference, the
// attachments downloaded (GET /api/v1/attachment/{guid}/download, at most
// Options.MaxAttachment bytes each; one that cannot be fetched is left
// out and named in the details rather than losing the message, as the
// relay does not redeliver). Tapbacks (associatedMessageType) are
// ignored and counted. Our own messages (isFromMe) are skipped; an
// updated-message of our own with dateDelivered or dateRead is a delivered
// or read Receipt.
//
// Outbound: POST /api/v1/message/text with the chat guid (a group's; for a
// person the chat the relay last named for them, else
// "iMessage;-;<to>", and "any;-;<to>" when a macOS 26 relay finds no such
// chat), tempGuid the comm message id, and method
// "private-api" when the relay's Private API helper is connected (then a
// reply carries selectedMessageGuid), else "apple-script". Texts over
// MaxText characters go out as several messages. Typing
// (POST /api/v1/chat/{guid}/typing) needs the Private API; without it
// Typing does nothing. A relay that is down, answers 5xx or times out is a
// transient failure (the outbox retries), a 4xx a permanent one naming the
// relay's message.
//
// Apple may restrict an Apple ID used for automated messaging; the relays,
// their Apple IDs and their Macs are the operator's responsibility.
package imessage

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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Channel is the channel's name.
const Channel = "imessage"

// Defaults.
const (
	// DefaultMaxAttachment is the largest inbound attachment downloaded.
	DefaultMaxAttachment = 25 << 20
	// DefaultPollInterval is how often a followed relay is asked for new
	// messages.
	DefaultPollInterval = 2 * time.Second
	// DefaultCatchUpInterval is how often the relays are read in webhook
	// mode, for messages their webhook did not deliver.
	DefaultCatchUpInterval = 30 * time.Second
	// DefaultTypingHold is how long a typing indicator is kept up
	// (messaging.TypingLease).
	DefaultTypingHold = 10 * time.Second
	// MaxEvent bounds a webhook body accepted.
	MaxEvent = 4 << 20
	// maxResponse bounds a relay's JSON answer read.
	maxResponse = 8 << 20
	// infoTTL is how long a relay's server/info (Private API on or off)
	// is believed.
	infoTTL = 5 * time.Minute
)

// Relay is one of the operator's BlueBubbles servers.
type Relay struct {
	// URL is the server's base URL (https://mac.example.com, a tunnel).
	URL string `json:"url"`
	// Password is the server password.
	Password string `json:"password"`
	// Address is the phone number or email the relay's Apple ID sends
	// from; people write to it.
	Address string `json:"address"`
}

// Options configure the iMessage channel of a gateway (operator
// settings).
type Options struct {
	// Relays are the operator's BlueBubbles servers; none: the channel is
	// not available (connecting answers 501).
	Relays []Relay
	// Follow makes the gateway poll the relays (Descriptor.Session)
	// instead of registering a webhook on them: for a gateway the relays
	// cannot reach.
	Follow bool
	// State keeps the followed relays' cursors, shared by the replicas;
	// this process's memory when nil.
	State channels.State
	// HTTPClient makes the calls; a client of its own when nil.
	HTTPClient *http.Client
	// CallTimeout bounds each call whose context has no deadline; 30 s
	// when 0 (a send through AppleScript waits for Messages to confirm).
	CallTimeout time.Duration
	// MaxAttachment is the largest inbound attachment downloaded;
	// DefaultMaxAttachment when 0. Larger ones are left out.
	MaxAttachment int64
	// PollInterval is how often a followed relay is asked;
	// DefaultPollInterval when 0.
	PollInterval time.Duration
	// CatchUpInterval is how often the relays are asked in webhook mode,
	// for what their webhook did not deliver (BlueBubbles posts each event
	// once: a message that came while the gateway was down or unreachable
	// is read from the cursor instead of lost); DefaultCatchUpInterval
	// when 0.
	CatchUpInterval time.Duration
	// TypingHold is how long a typing indicator stays up before the
	// channel takes it down (DELETE /api/v1/chat/{guid}/typing; iMessage
	// keeps it until then): DefaultTypingHold, comm's typing lease, when
	// 0.
	TypingHold time.Duration
	// Logger receives what the channel leaves out; slog.Default() when
	// nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	relays []*relay
	stats  *Stats
}

// Stats count what the channel dropped; safe for concurrent use.
type Stats struct {
	// Tapbacks counts reactions ignored.
	Tapbacks atomic.Int64
	// LeftOut counts attachments left out (too big, unavailable).
	LeftOut atomic.Int64
}

func (o Options) withDefaults() Options {
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
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.CatchUpInterval <= 0 {
		o.CatchUpInterval = DefaultCatchUpInterval
	}
	if o.TypingHold <= 0 {
		o.TypingHold = DefaultTypingHold
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.State == nil {
		o.State = &channels.MemState{}
	}
	if o.stats == nil {
		o.stats = &Stats{}
	}
	return o
}

// relay is a Relay with what the channel learns of it, shared by every
// adapter on it.
type relay struct {
	Relay
	base   string // URL without a trailing slash
	id     string // names the relay in the webhook URL
	secret string // the webhook URL's secret

	mu     sync.Mutex
	info   serverInfo
	infoAt time.Time
	sent   *sentMemo
	chats  *chatMemo
	typing map[string]*time.Timer // chat guid -> when its indicator is taken down

	regMu   sync.Mutex // one registration at a time
	hookURL string     // the webhook URL this process registered
}

// serverInfo is the part of GET /api/v1/server/info the channel reads.
type serverInfo struct {
	PrivateAPI      bool   `json:"private_api"`
	HelperConnected bool   `json:"helper_connected"`
	ServerVersion   string `json:"server_version"`
	OSVersion       string `json:"os_version"`
}

// privateAPI reports whether the Private API can be used.
func (i serverInfo) privateAPI() bool { return i.PrivateAPI && i.HelperConnected }

// Descriptor returns the channel's descriptor. Without relays New is nil
// (connecting answers 501).
func Descriptor(opts Options) channels.Descriptor {
	d := channels.Descriptor{Channel: Channel, Tier: channels.Paid,
		Summary:  "iMessage through the operator's relays (Macs running BlueBubbles): nothing to bring; people join the connection by sending its join code.",
		Fields:   form,
		Settings: "COMM_IMESSAGE_RELAYS"}
	ch, err := newChannel(opts)
	if err != nil {
		opts.withDefaults().Logger.Error("imessage: the channel is off", "err", err)
		return d
	}
	if len(ch.opts.relays) == 0 {
		return d
	}
	d.New = ch.newAdapter
	d.App = &App{ch: ch}
	d.Shared = &Shared{ch: ch}
	// Following the relays, or, in webhook mode, catching up with what
	// the webhook did not deliver (stored once by guid either way).
	d.Session = &Session{ch: ch}
	return d
}

// channel is the configured channel, shared by its descriptor's parts.
type channel struct {
	opts Options
}

func newChannel(opts Options) (*channel, error) {
	opts = opts.withDefaults()
	relays, err := checkRelays(opts.Relays)
	if err != nil {
		return nil, err
	}
	opts.Relays = relays
	for _, r := range relays {
		opts.relays = append(opts.relays, newRelay(r))
	}
	return &channel{opts: opts}, nil
}

func newRelay(r Relay) *relay {
	sum := sha256.Sum256([]byte("comm/imessage/relay\x00" + r.Address))
	m := hmac.New(sha256.New, []byte(r.Password))
	m.Write([]byte("comm/imessage/webhook\x00" + r.Address))
	return &relay{Relay: r, base: strings.TrimRight(r.URL, "/"), id: hex.EncodeToString(sum[:6]),
		secret: hex.EncodeToString(m.Sum(nil)), sent: newSentMemo(), chats: newChatMemo()}
}

// byLine returns the relay whose address is line; the first one when line
// is empty (a connection given no line: unit harnesses).
func (c *channel) byLine(line string) *relay {
	if line == "" {
		return c.opts.relays[0]
	}
	for _, r := range c.opts.relays {
		if r.Address == line {
			return r
		}
	}
	return nil
}

// byID returns the relay a webhook URL names.
func (c *channel) byID(id string) *relay {
	for _, r := range c.opts.relays {
		if r.id == id {
			return r
		}
	}
	return nil
}

// ParseRelays decodes COMM_IMESSAGE_RELAYS: a JSON array of
// {"url","password","address"}. Errors name the element and field.
func ParseRelays(raw string) ([]Relay, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf(`not a JSON array of {"url","password","address"}: %v`, err)
	}
	var out []Relay
	for i, el := range list {
		var r Relay
		dec := json.NewDecoder(strings.NewReader(string(el)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf(`element %d: not an object {"url","password","address"}: %v`, i, err)
		}
		out = append(out, r)
	}
	return checkRelays(out)
}

// checkRelays validates relays and puts their addresses in canonical
// form. Errors name the element and field.
func checkRelays(in []Relay) ([]Relay, error) {
	seen := map[string]int{}
	var out []Relay
	for i, r := range in {
		u, err := url.Parse(r.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return nil, fmt.Errorf("element %d: url %q is not an http(s) URL of a BlueBubbles server (https://host[:port])", i, r.URL)
		case r.Password == "" || len(r.Password) > 1024:
			return nil, fmt.Errorf("element %d (%s): password is required (the BlueBubbles server password)", i, r.URL)
		}
		addr, err := Address(r.Address)
		if err != nil {
			return nil, fmt.Errorf("element %d (%s): address: %v", i, r.URL, err)
		}
		if j, ok := seen[addr]; ok {
			return nil, fmt.Errorf("element %d: address %s is also element %d's; each relay sends from its own address", i, addr, j)
		}
		seen[addr] = i
		r.Address = addr
		out = append(out, r)
	}
	return out, nil
}

var (
	e164RE  = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	emailRE = regexp.MustCompile(`^[^\s@<>",;]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$`)
)

// Address puts an iMessage handle in canonical form: a phone number in
// E.164 (spaces, dashes, dots and parentheses dropped), an email address
// lower-cased.
func Address(to string) (string, error) {
	s := strings.TrimSpace(to)
	if strings.Contains(s, "@") {
		s = strings.ToLower(s)
		if len(s) > 254 || !emailRE.MatchString(s) {
			return "", fmt.Errorf("%q is not an email address", to)
		}
		return s, nil
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '.', '(', ')', '\u00a0':
			return -1
		}
		return r
	}, s)
	if !e164RE.MatchString(s) {
		return "", fmt.Errorf("%q is neither a phone number in E.164 form (+15551234567) nor an email address", to)
	}
	return s, nil
}

// Config is a connection's configuration: nothing of the adapter's own.
// The gateway reads "dedicated" (a relay to the connection alone) and
// "line" (a relay's address) to choose the line; the adapter accepts and
// ignores them.
type Config struct {
	Dedicated json.RawMessage `json:"dedicated,omitempty"`
	Line      json.RawMessage `json:"line,omitempty"`
}

// form is what a caller sets of a Config: the line keys the gateway
// reads.
var form = channels.LineFields("agent@icloud.com")

// Adapter is an iMessage connection on one relay.
type Adapter struct {
	ch    *channel
	relay *relay
	conn  channels.Connection
}

func (c *channel) newAdapter(_ context.Context, conn channels.Connection) (channels.Adapter, error) {
	var cfg Config
	if err := channels.DecodeConfig(conn.Config, &cfg, Channel, channels.FieldNames(form), `{} or {"dedicated":true} or {"line":"agent@icloud.com"}`); err != nil {
		return nil, err
	}
	r := c.byLine(conn.Line)
	if r == nil {
		return nil, &channels.ConfigError{Field: "line", Msg: fmt.Sprintf("imessage: the relay %s is no longer configured on this gateway (COMM_IMESSAGE_RELAYS)", conn.Line)}
	}
	return &Adapter{ch: c, relay: r, conn: conn}, nil
}

// Address is to as conversations key it (see the package function).
func (a *Adapter) Address(to string) (string, error) { return Address(to) }

// Line is the address of the relay the adapter sends through.
func (a *Adapter) Line() string { return a.relay.Address }

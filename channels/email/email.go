// Package email is the email channel: every connection is an inbox on the
// gateway's mail domain (or on a verified custom domain of the project).
// Inbound mail arrives through comm's own SMTP listener (package inbound,
// wired to messaging); outbound mail is composed here (package outbound),
// DKIM-signed when its domain is a verified custom domain, and delivered
// internally when the recipient is another inbox of this gateway, else
// submitted to the operator's SMTP relay.
//
// Threading: an outbound message's Message-ID is its comm id on the
// sending domain (<msg_...@domain>), so a retried send carries the same id
// and the recipient sees one message. Replies carry In-Reply-To and
// References, and a Reply-To plus-address (inbox+conv_...@domain) that
// leads an answer back to its conversation even when a mail client drops
// the threading headers.
package email

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email/outbound"
)

// DefaultMailDomain is the mail domain when the operator sets none: fit
// for one machine (RFC 6761 reserves .localhost), where mail between its
// inboxes is delivered internally.
const DefaultMailDomain = "comm.localhost"

// MaxReferences bounds the References header of an outbound message (the
// oldest ids are dropped first, the first one kept, as RFC 5322 suggests).
const MaxReferences = 20

// Submitter submits a composed message to an SMTP relay; *outbound.Relay
// is one. Its errors wrap channels.ErrTransient or channels.ErrPermanent.
type Submitter interface {
	Send(ctx context.Context, from string, to []string, msg []byte) error
}

// SigningKey is a DKIM key of a sending domain.
type SigningKey struct {
	Domain   string
	Selector string
	Key      crypto.Signer
}

// Gateway is what the channel needs of the rest of comm (messaging
// implements it).
type Gateway interface {
	// SigningKey returns the DKIM key of domain when it is a verified
	// custom domain of the project; an error wrapping ErrNotVerified when it
	// is not.
	SigningKey(ctx context.Context, projectID, domain string) (*SigningKey, error)
	// DeliverLocal hands raw to the inbox rcpt when this gateway hosts
	// it, as if it had arrived over SMTP, and reports whether it did. An
	// address on a domain this gateway receives for but with no inbox is
	// an error wrapping channels.ErrPermanent.
	DeliverLocal(ctx context.Context, from, rcpt string, raw []byte) (bool, error)
	// Claim refuses an inbox address a new connection of the project may
	// not take (a reserved role name, an address released recently by
	// another project), with an error for the caller.
	Claim(ctx context.Context, projectID, address string) error
	// AllowSend refuses mail from the inbox from of conn to to that the
	// sender may not send now (an outside address from a sandbox, a spent
	// hourly budget), with an error for the caller.
	AllowSend(ctx context.Context, conn channels.Connection, from string, signedIn bool, to string) error
}

// ErrNotVerified says a domain is not a verified custom domain of the
// project.
var ErrNotVerified = errors.New("not a verified domain of this project")

// Options configure the email channel.
type Options struct {
	// MailDomain is the domain of the inbox addresses comm hands out;
	// DefaultMailDomain when empty.
	MailDomain string
	// Relay submits mail for outside addresses. Nil: such mail fails with a
	// reason saying that no relay is configured.
	Relay Submitter
	// DKIM, when set, signs mail sent from MailDomain.
	DKIM *SigningKey
	// Logger receives the details of relay failures, which tenants see
	// only without the relay's address; slog.Default() when nil.
	Logger *slog.Logger
}

// Channel is the email channel of one gateway.
type Channel struct {
	opts Options
	gw   atomic.Pointer[Gateway]
}

// New returns the email channel. Bind it to the gateway before the first
// connection.
func New(opts Options) *Channel {
	if opts.MailDomain == "" {
		opts.MailDomain = DefaultMailDomain
	}
	opts.MailDomain = strings.ToLower(opts.MailDomain)
	return &Channel{opts: opts}
}

// Bind sets the gateway the channel provisions connections against (the
// gateway needs the channel registry first, hence the late binding).
func (c *Channel) Bind(g Gateway) { c.gw.Store(&g) }

// MailDomain is the domain of the inbox addresses comm hands out.
func (c *Channel) MailDomain() string { return c.opts.MailDomain }

// Descriptor returns the channel's descriptor.
func (c *Channel) Descriptor() channels.Descriptor {
	return channels.Descriptor{Channel: "email", Tier: channels.Free, New: c.connect, Fields: form,
		Summary: "An email inbox on the gateway's mail domain, or on a verified custom domain of the project."}
}

// form is what a caller sets of a Config.
var form = []channels.Field{
	{Name: "address", Label: "Address", Kind: channels.KindString,
		Help:    "The inbox's local part (support), or a whole address on a verified custom domain of the project; a random one when empty.",
		Example: "support"},
}

func (c *Channel) gateway() Gateway {
	if g := c.gw.Load(); g != nil {
		return *g
	}
	return nil
}

// Config is the configuration of an email connection.
type Config struct {
	// Address is the inbox's local part ("support"), or a whole address on
	// the mail domain or on a verified custom domain of the project
	// ("support@example.com"). Empty: a fresh random local part on the
	// mail domain.
	Address string `json:"address,omitempty"`
}

// localRE is an inbox's local part: at most 32 characters, so that the
// reply-to plus-address (local+conv_<26>) stays within the 64 octets SMTP
// allows a local part.
var localRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._-]{0,30}[a-z0-9])?$`)

// connect provisions an email connection: it settles the inbox address.
func (c *Channel) connect(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
	var cfg Config
	if raw := bytes.TrimSpace(conn.Config); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("email: config: %v (it takes {\"address\": \"local-part\"} or {\"address\": \"name@your-verified-domain\"})", err)
		}
		if dec.More() {
			return nil, errors.New("email: config: trailing data after the object")
		}
	}
	local, domain, hasDomain := strings.Cut(strings.ToLower(strings.TrimSpace(cfg.Address)), "@")
	switch {
	case local == "":
		if hasDomain {
			return nil, fmt.Errorf("email: config.address %q has no local part", cfg.Address)
		}
		local = randomLocal()
	case strings.Contains(local, "+"):
		return nil, fmt.Errorf("email: config.address %q: '+' is reserved for reply addresses (inbox+conversation@domain)", cfg.Address)
	case !localRE.MatchString(local) || strings.Contains(local, ".."):
		return nil, fmt.Errorf("email: config.address %q: the local part takes 1 to 32 of a-z 0-9 . _ - and starts and ends with a letter or digit", cfg.Address)
	}
	a := &Adapter{ch: c, conn: conn, domain: c.opts.MailDomain, dkim: c.opts.DKIM}
	if hasDomain && domain != c.opts.MailDomain {
		g := c.gateway()
		if g == nil {
			return nil, fmt.Errorf("email: config.address %q: custom domains are not available", cfg.Address)
		}
		key, err := g.SigningKey(ctx, conn.ProjectID, domain)
		if err != nil {
			if errors.Is(err, ErrNotVerified) {
				return nil, fmt.Errorf("email: config.address %q: %s is %v; use an address on %s, or add the domain (POST /v1/domains) and verify it first",
					cfg.Address, domain, ErrNotVerified, c.opts.MailDomain)
			}
			return nil, fmt.Errorf("email: config.address %q: %w", cfg.Address, err)
		}
		a.domain, a.dkim = domain, key
	}
	a.address = local + "@" + a.domain
	return a, nil
}

// reservedLocals are the local parts no inbox on the gateway's mail domain
// may take: the role mailboxes of RFC 2142 (network operations and support
// services), the five addresses the CA/Browser
// Forum's Baseline Requirements (3.2.2.4.4) let a certificate authority
// send domain-validation mail to, and the usual system and no-reply
// names, including the ssl* names some authorities accepted in the past.
var reservedLocals = map[string]bool{
	// CA/Browser Forum BR 3.2.2.4.4 (constructed email to domain contact).
	"admin": true, "administrator": true, "webmaster": true, "hostmaster": true, "postmaster": true,
	// RFC 2142, network operations and support services (sections 4, 5);
	// of its business names (section 3) only info, which certificate
	// authorities also used to write to: sales, marketing and support stay
	// free for tenants' own desks.
	"info": true, "abuse": true, "noc": true, "security": true,
	"usenet": true, "news": true, "www": true, "uucp": true, "ftp": true,
	// System, bounce and no-reply names.
	"root": true, "mailer-daemon": true, "nobody": true, "noreply": true, "no-reply": true,
	"do-not-reply": true, "donotreply": true, "bounce": true, "bounces": true,
	// Certificate and operator names (older CA validation lists).
	"ssl-admin": true, "ssladmin": true, "ssladministrator": true, "sslwebmaster": true,
	"sysadmin": true, "it": true, "is": true, "mis": true, "trust": true, "dmarc": true,
}

// ReservedLocal reports whether local (lowercase, without +tag) is a role
// name that no inbox on the gateway's shared mail domain may take.
func ReservedLocal(local string) bool { return reservedLocals[local] }

// ReservedLocals lists the reserved local parts, sorted.
func ReservedLocals() []string {
	out := make([]string, 0, len(reservedLocals))
	for l := range reservedLocals {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// randomLocal is a fresh local part: "inbox-" and 10 random characters
// (50 bits).
func randomLocal() string {
	return "inbox-" + strings.ToLower(rand.Text()[:10])
}

// Adapter is one email inbox.
type Adapter struct {
	ch      *Channel
	conn    channels.Connection
	address string
	domain  string
	dkim    *SigningKey
}

var (
	_ channels.Adapter     = (*Adapter)(nil)
	_ channels.Inbox       = (*Adapter)(nil)
	_ channels.Provisioner = (*Adapter)(nil)
	_ channels.SendGate    = (*Adapter)(nil)
)

// InboxAddress is the inbox's address.
func (a *Adapter) InboxAddress() string { return a.address }

// Provision claims the inbox address for the new connection: the gateway
// refuses reserved role names and addresses another project released
// recently.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	if g := a.ch.gateway(); g != nil {
		if err := g.Claim(ctx, a.conn.ProjectID, a.address); err != nil {
			return channels.Provisioned{}, err
		}
	}
	return channels.Provisioned{Address: a.address}, nil
}

// AllowSend asks the gateway whether the sender may write to r.To now.
func (a *Adapter) AllowSend(ctx context.Context, r channels.SendRequest) error {
	if g := a.ch.gateway(); g != nil {
		return g.AllowSend(ctx, a.conn, a.address, r.SignedIn, r.To)
	}
	return nil
}

// Send composes msg, signs it when its domain has a DKIM key, and delivers
// it: internally to an inbox of this gateway, else through the relay. The
// provider id is the Message-ID (without angle brackets).
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	to, err := mail.ParseAddress(msg.To)
	if err != nil {
		return channels.SendResult{}, fmt.Errorf("email: send: recipient %q is not an email address: %w", msg.To, channels.ErrPermanent)
	}
	m := outbound.Mail{
		From: mail.Address{Address: a.address},
		To:   []mail.Address{{Address: to.Address}},
		Text: msg.Text,
	}
	if msg.Subject != nil {
		m.Subject = *msg.Subject
	}
	if msg.HTML != nil {
		m.HTML = *msg.HTML
	}
	if msg.MessageID != "" {
		m.MessageID = strings.ToLower(msg.MessageID) + "@" + a.domain
	}
	if msg.InReplyTo != "" && outbound.ValidMessageID(msg.InReplyTo) {
		m.InReplyTo = []string{msg.InReplyTo}
	}
	m.References = references(msg.References, msg.InReplyTo)
	if msg.ConversationID != "" {
		local, _, _ := strings.Cut(a.address, "@")
		m.ReplyTo = &mail.Address{Address: local + "+" + strings.ToLower(msg.ConversationID) + "@" + a.domain}
	}
	raw, messageID, err := outbound.Compose(m)
	if err != nil {
		return channels.SendResult{}, fmt.Errorf("%w: %w", err, channels.ErrPermanent)
	}
	key := a.dkim
	if g := a.ch.gateway(); g != nil && a.domain != a.ch.opts.MailDomain {
		// A custom domain signs only while it is verified: ask each time,
		// so a domain deleted or unverified since the inbox was made
		// sends nothing more under its name.
		if key, err = g.SigningKey(ctx, a.conn.ProjectID, a.domain); err != nil {
			if errors.Is(err, ErrNotVerified) {
				return channels.SendResult{}, fmt.Errorf("email: %s is no longer a verified domain of this project; mail from %s is not sent: %w",
					a.domain, a.address, channels.ErrPermanent)
			}
			return channels.SendResult{}, fmt.Errorf("email: signing key of %s: %v: %w", a.domain, err, channels.ErrTransient)
		}
	}
	if key != nil {
		if raw, err = outbound.SignDKIM(raw, key.Domain, key.Selector, key.Key); err != nil {
			return channels.SendResult{}, fmt.Errorf("email: dkim sign for %s: %v: %w", key.Domain, err, channels.ErrTransient)
		}
	}
	res := channels.SendResult{ProviderID: messageID}
	if g := a.ch.gateway(); g != nil {
		done, err := g.DeliverLocal(ctx, a.address, to.Address, raw)
		if err != nil {
			return channels.SendResult{}, fmt.Errorf("email: deliver to %s on this gateway: %w", to.Address, err)
		}
		if done {
			return res, nil
		}
	}
	if a.ch.opts.Relay == nil {
		return channels.SendResult{}, fmt.Errorf("email: %s is outside this gateway and no SMTP relay is configured (set COMM_SMTP_RELAY, e.g. smtp://user:pass@smtp.example.com:587): %w",
			to.Address, channels.ErrPermanent)
	}
	if err := a.ch.opts.Relay.Send(ctx, a.address, []string{to.Address}, raw); err != nil {
		logger := a.ch.opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("email: relay submission failed", "connection", a.conn.ID, "from", a.address, "to", to.Address, "err", err)
		return channels.SendResult{}, &relayError{msg: neutralRelayText(err.Error(), a.ch.opts.Relay), err: err}
	}
	return res, nil
}

// relayError is a relay failure as the tenant sees it (the message's
// error): its text names no relay host, port or address; the operator's
// log has the original. Unwrap keeps its class (transient or permanent).
type relayError struct {
	msg string
	err error
}

func (e *relayError) Error() string { return e.msg }
func (e *relayError) Unwrap() error { return e.err }

// Internal addresses in relay errors: host:port, [v6]:port, IPv4 and
// IPv6 literals.
var (
	hostPortRE = regexp.MustCompile(`\[[0-9A-Fa-f:.]+\](:\d{1,5})?|\b[A-Za-z0-9][A-Za-z0-9.-]*:\d{1,5}\b`)
	ipv4RE     = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)
	ipv6RE     = regexp.MustCompile(`\b[0-9A-Fa-f]{1,4}(:[0-9A-Fa-f]{0,4}){3,7}\b`)
)

// neutralRelayText replaces the relay's host and port, and any other
// network address, in a relay error with a neutral phrase.
func neutralRelayText(msg string, relay Submitter) string {
	if r, ok := relay.(*outbound.Relay); ok && r.Addr != "" {
		msg = strings.ReplaceAll(msg, r.Addr, "the mail relay")
		if host, _, err := net.SplitHostPort(r.Addr); err == nil && host != "" {
			msg = strings.ReplaceAll(msg, host, "the mail relay")
		}
	}
	msg = hostPortRE.ReplaceAllString(msg, "the mail relay")
	msg = ipv4RE.ReplaceAllString(msg, "an internal address")
	return ipv6RE.ReplaceAllString(msg, "an internal address")
}

// references is the References list of an answer: the thread so far,
// ending with the message answered, valid ids only, at most MaxReferences
// (keeping the first).
func references(thread []string, inReplyTo string) []string {
	var out []string
	for _, id := range thread {
		if outbound.ValidMessageID(id) {
			out = append(out, id)
		}
	}
	if inReplyTo != "" && outbound.ValidMessageID(inReplyTo) && (len(out) == 0 || out[len(out)-1] != inReplyTo) {
		out = append(out, inReplyTo)
	}
	if len(out) > MaxReferences {
		out = append(out[:1], out[len(out)-MaxReferences+1:]...)
	}
	return out
}

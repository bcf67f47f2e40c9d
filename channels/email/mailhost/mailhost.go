// Package mailhost is the email channel's side of the gateway: the inboxes
// it hosts (their addresses, held back for a while after deletion), the
// custom domains of projects and their DNS verification, the backend of
// the SMTP listener, delivery between inboxes of the gateway, and the
// budgets of mail to outside addresses.
//
// It implements email.Gateway for the email adapter, and reaches the core
// (package messaging) through its public API: inbound mail is stored with
// messaging.Service.Receive, writes go through the event log like every
// other change. The core knows nothing of it.
package mailhost

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/stream"
)

// Options configure the email side of the gateway.
type Options struct {
	// Domain is the gateway's mail domain (inbox addresses comm hands
	// out); email.DefaultMailDomain when empty.
	Domain string
	// Plan is the operator's side of custom domain plans: the SPF include
	// and the MX host customers publish.
	Plan domain.PlanConfig
	// Resolver answers the DNS lookups of domain verification;
	// net.DefaultResolver when nil.
	Resolver domain.Resolver
	// Box seals the DKIM keys of custom domains; a box with a random key
	// when nil (tests).
	Box *sealed.Box
	// Logger receives warnings; slog.Default() when nil.
	Logger *slog.Logger
	// MaxMessageBytes and MaxAttachmentBytes limit mail delivered inside
	// the gateway, as the SMTP listener limits mail from outside.
	MaxMessageBytes    int64
	MaxAttachmentBytes int64
	// AddressQuarantine is how long a deleted inbox's address on Domain
	// cannot be taken by another project; DefaultAddressQuarantine when 0,
	// none when negative.
	AddressQuarantine time.Duration
	// SandboxOutbound lets sandbox keys send mail from Domain to any
	// outside address (by default they may write only to inboxes of this
	// gateway and to people who wrote to the inbox first).
	SandboxOutbound bool
	// SandboxMailPerHour and SignedInMailPerHour are a project's hourly
	// budgets of mail to outside addresses, by the kind of the sending
	// key; DefaultSandboxMailPerHour and DefaultSignedInMailPerHour when 0.
	SandboxMailPerHour  int
	SignedInMailPerHour int
	// OwnershipGrace is how long a verified domain's ownership record may
	// be missing on its periodic re-checks before the domain is unverified
	// (domain.unverified: no more signing, no new inboxes);
	// DefaultOwnershipGrace when 0.
	OwnershipGrace time.Duration
}

// DefaultOwnershipGrace is the default Options.OwnershipGrace.
const DefaultOwnershipGrace = 72 * time.Hour

// DefaultAddressQuarantine is how long a deleted inbox's address on the
// gateway's mail domain stays out of reach of other projects.
const DefaultAddressQuarantine = 30 * 24 * time.Hour

// Host is the email side of one gateway.
type Host struct {
	svc   *messaging.Service
	log   *stream.Log
	read  *ent.Client
	box   *sealed.Box
	mail  Options
	sends sendBudgets
	keys  sync.Map // domain id -> *email.SigningKey
}

var _ email.Gateway = (*Host)(nil)

// New returns the email side of the gateway served by svc.
func New(svc *messaging.Service, opts Options) *Host {
	if opts.Domain == "" {
		opts.Domain = email.DefaultMailDomain
	}
	if opts.Plan.SPFInclude == "" {
		opts.Plan.SPFInclude = "spf." + opts.Domain
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Plan.MXHost == "" {
		opts.Plan.MXHost = "mx." + opts.Domain
	}
	if opts.AddressQuarantine == 0 {
		opts.AddressQuarantine = DefaultAddressQuarantine
	}
	if opts.SandboxMailPerHour <= 0 {
		opts.SandboxMailPerHour = DefaultSandboxMailPerHour
	}
	if opts.SignedInMailPerHour <= 0 {
		opts.SignedInMailPerHour = DefaultSignedInMailPerHour
	}
	if opts.OwnershipGrace <= 0 {
		opts.OwnershipGrace = DefaultOwnershipGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	box := opts.Box
	if box == nil {
		key := make([]byte, sealed.KeySize)
		rand.Read(key)
		box, _ = sealed.New(key)
	}
	return &Host{svc: svc, log: svc.Log(), read: svc.Ent(), box: box, mail: opts, sends: newSendBudgets(opts)}
}

// MailDomain is the gateway's mail domain.
func (h *Host) MailDomain() string { return h.mail.Domain }

func (h *Host) now() time.Time { return h.svc.Now() }

// write runs fn in a write transaction of the caller's project.
func (h *Host) write(ctx context.Context, fn func(tx *stream.Tx) error) ([]stream.Event, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return h.log.Write(ctx, p.ProjectID, fn)
}

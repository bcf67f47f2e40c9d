// Package gateway wires comm together: the channel registry with every
// provider, the domain (messaging), the features beside it (accounts,
// webhooks, the email side in mailhost) and the HTTP front door, over an open event log. `comm serve`, `comm bench` and the
// test harnesses build the gateway here, so they cannot drift apart.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/slack"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/testchan"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/webhook"
)

// Config is what a gateway is built from. Zero values are the defaults of
// each part.
type Config struct {
	// Logger is every part's logger; slog.Default() when nil.
	Logger *slog.Logger
	// Service configures the domain; its Channels, Logger and Box are
	// filled in here.
	Service messaging.Options
	// Webhook configures the webhook feature (whether private targets
	// are allowed; the webhook worker's client follows it).
	Webhook webhook.Options
	// Email configures the email channel (mail domain, relay, DKIM).
	Email email.Options
	// Mail configures the email side of the gateway; Domain and Box are
	// filled in here.
	Mail mailhost.Options
	// Telegram configures the Telegram channel (its Bot API URL).
	Telegram telegram.Options
	// Slack configures the Slack channel (its Web API URL, the operator's
	// app).
	Slack slack.Options
	// Discord configures the Discord channel (its API URL, the operator's
	// app).
	Discord discord.Options
	// Telnyx configures SMS through Telnyx (its API URL).
	Telnyx telnyx.Options
	// Meta configures the facebook and instagram channels (the Graph API
	// URL, the operator's Meta app).
	Meta meta.Options
	// Twilio configures SMS and WhatsApp through customers' own Twilio
	// accounts (the REST API's URLs).
	Twilio twilio.Options
	// Credit configures the accounts' credit: the prices of the paid
	// channels and the low-balance threshold.
	Credit account.Options
	// X configures the X direct-message channel (the API URL, the
	// operator's X app).
	X x.Options
	// WhatsAppHosted configures WhatsApp on the operator's own Cloud API
	// numbers (channel whatsapp, provider hosted): the numbers, the
	// Graph API URL and the Meta app that signs their webhooks.
	WhatsAppHosted wacloud.Options
	// IMessage configures the iMessage channel (the operator's BlueBubbles
	// relays); its State and Logger are filled in here, and it follows the
	// relays (Follow) when the gateway has no public base URL.
	IMessage imessage.Options
	// Server configures the HTTP front door; Mail and Logger are filled
	// in here.
	Server server.Options
	// Channels are more descriptors, added after the built-in ones (a
	// test's own adapter).
	Channels []channels.Descriptor
	// RateLimitSync is how often, on PostgreSQL, the replicas exchange
	// what their rate limits granted, so that together they grant each
	// limit once (ratelimit.Shared); ratelimit.DefaultSync when 0; when
	// negative, each replica grants every limit on its own. SQLite (one
	// process) shares nothing.
	RateLimitSync time.Duration
	// Replica names this process among the replicas (rate limits); random
	// when empty.
	Replica string
	// Metrics, if not nil, counts the HTTP requests and reads the
	// scrape-time gauges (webhook lag, outbox, websockets) of this
	// gateway. Give the same to the log (stream.Options.Observer) for
	// its commits.
	Metrics *metrics.Metrics
}

// Gateway is a wired gateway.
type Gateway struct {
	Log      *stream.Log
	Channels *channels.Registry
	Svc      *messaging.Service
	Email    *email.Channel
	Mail     *mailhost.Host
	Accounts *account.Service
	Hooks    *webhook.Hooks
	Front    *server.Server

	logger  *slog.Logger
	metrics *metrics.Metrics
	box     *sealed.Box // the checked key (CheckKey); nil when none was given
	workers workerState
	// stopLimits ends the sharing of the rate limits (nil: not shared).
	stopLimits func()
}

// New wires a gateway over log. StartWorkers runs its background
// workers; Close releases what New made; the log and its database stay
// the caller's.
func New(log *stream.Log, cfg Config) (*Gateway, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if box := cfg.Service.Box; box != nil {
		// A replica whose key differs from the others' could not open
		// what they sealed: it refuses to start. (Without a Box the
		// service makes a key of its own, lost at exit: tests.)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := CheckKey(ctx, log, box)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if cfg.Email.Logger == nil {
		cfg.Email.Logger = logger
	}
	ch := email.New(cfg.Email)
	if cfg.Telegram.Logger == nil {
		cfg.Telegram.Logger = logger
	}
	if cfg.Slack.Logger == nil {
		cfg.Slack.Logger = logger
	}
	if cfg.Discord.Logger == nil {
		cfg.Discord.Logger = logger
	}
	if cfg.Discord.State == nil {
		// Gateway sessions and identify budgets, shared by the replicas.
		cfg.Discord.State = messaging.ProviderState(log, "discord")
	}
	if cfg.Telnyx.Logger == nil {
		cfg.Telnyx.Logger = logger
	}
	if cfg.Meta.Logger == nil {
		cfg.Meta.Logger = logger
	}
	if cfg.Twilio.Logger == nil {
		cfg.Twilio.Logger = logger
	}
	if cfg.X.Logger == nil {
		cfg.X.Logger = logger
	}
	if cfg.WhatsAppHosted.Logger == nil {
		cfg.WhatsAppHosted.Logger = logger
	}
	if cfg.IMessage.Logger == nil {
		cfg.IMessage.Logger = logger
	}
	if cfg.IMessage.State == nil {
		// The followed relays' cursors, shared by the replicas.
		cfg.IMessage.State = messaging.ProviderState(log, imessage.Channel)
	}
	if cfg.Service.BaseURL == "" && cfg.Server.BaseURL == "" {
		// No public URL: the relays cannot reach the gateway.
		cfg.IMessage.Follow = true
	}
	reg := registry(ch, cfg)
	for _, d := range cfg.Channels {
		reg.Add(d)
	}
	so := cfg.Service
	so.Channels, so.Logger = reg, logger
	if so.BaseURL == "" {
		// One public address: provider ingress URLs are built from the
		// front door's.
		so.BaseURL = cfg.Server.BaseURL
	}
	svc, err := messaging.New(log, so)
	if err != nil {
		return nil, err
	}
	mo := cfg.Mail
	mo.Domain, mo.Logger = ch.MailDomain(), logger
	if mo.Box == nil {
		mo.Box = svc.Box()
	}
	mail := mailhost.New(svc, mo)
	if cfg.Metrics != nil {
		mail.OnRefusal(cfg.Metrics.Refused)
	}
	ch.Bind(mail)
	if cfg.Credit.Prices != nil {
		if err := cfg.Credit.Prices.Check(reg); err != nil {
			svc.Close()
			return nil, err
		}
	}
	accounts := account.New(svc, cfg.Credit)
	svc.SetBilling(accounts)
	hooks := webhook.New(svc, cfg.Webhook)
	fo := cfg.Server
	fo.Mail, fo.Accounts, fo.Webhooks = mail, accounts, hooks
	if fo.Logger == nil {
		fo.Logger = logger
	}
	if cfg.Metrics != nil && fo.Observer == nil {
		fo.Observer = cfg.Metrics
	}
	g := &Gateway{Log: log, Channels: reg, Svc: svc, Email: ch, Mail: mail, Accounts: accounts, Hooks: hooks,
		logger: logger, box: cfg.Service.Box, metrics: cfg.Metrics}
	fo.Ready = append(g.readyChecks(), fo.Ready...)
	g.Front = server.New(svc, fo)
	if db := log.DB(); db.IsPostgres() && cfg.RateLimitSync >= 0 {
		replica := cfg.Replica
		if replica == "" {
			replica = randomReplica()
		}
		shared := ratelimit.NewShared(ratelimit.NewPostgresLedger(db.W), replica, cfg.RateLimitSync, logger)
		g.Front.ShareLimits(shared)
		mail.ShareLimits(shared)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			shared.Run(ctx)
		}()
		g.stopLimits = func() { cancel(); <-done }
	}
	if cfg.Metrics != nil {
		cfg.Metrics.Watch(log.DB().R, g.Front.Live())
	}
	return g, nil
}

// randomReplica names a replica: random, so that two processes never
// share one.
func randomReplica() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "replica-" + hex.EncodeToString(b)
}

// registry is every channel comm knows, with the adapters built so far,
// configured by cfg.
func registry(mail *email.Channel, cfg Config) *channels.Registry {
	r := channels.NewRegistry(channels.Known()...)
	r.Add(testchan.Descriptor())
	r.Add(mail.Descriptor())
	r.Add(telegram.Descriptor(cfg.Telegram))
	r.Add(slack.Descriptor(cfg.Slack))
	r.Add(discord.Descriptor(cfg.Discord))
	r.Add(telnyx.Descriptor(cfg.Telnyx))
	r.Add(meta.FacebookDescriptor(cfg.Meta))
	r.Add(meta.InstagramDescriptor(cfg.Meta))
	for _, d := range twilio.Descriptors(cfg.Twilio) {
		r.Add(d)
	}
	r.Add(x.Descriptor(cfg.X))
	r.Add(wacloud.Descriptor(cfg.WhatsAppHosted))
	r.Add(imessage.Descriptor(cfg.IMessage))
	return r
}

// Close closes the front door's websockets and releases the domain's
// resources. Stop the HTTP server and the workers first.
func (g *Gateway) Close() error {
	if g.stopLimits != nil {
		g.stopLimits()
	}
	g.Front.Close()
	return g.Svc.Close()
}

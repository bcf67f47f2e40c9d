package main

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/discord/discordtest"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/meta/metatest"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

// providerBenches are the benchmarks of the providers, each against its
// fake on loopback, by their --what name; each runs with the number of
// HTTP clients and the duration of the ingress measurements.
var providerBenches = map[string]func(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error){
	"telegram": benchTelegram,
	"twilio":   benchTwilio,
	"telnyx":   benchTelnyx,
	"meta":     benchMeta,
	"slack":    benchSlack,
	"discord":  benchDiscord,
	// whatsapp-hosted: signed Cloud API webhooks at /hooks/whatsapp ->
	// message.received, routed by line and sender on shared numbers.
	"whatsapp-hosted": benchWhatsAppHosted,
}

// providerBench is a provider's webhook benchmark: ingress with one and
// with many connections (each on a fresh database), then, when reply is
// set, the latency of replies on one connection.
type providerBench[C any] struct {
	cfg     gateway.Config
	counts  [2]int // connections: one, many
	connect func(ctx context.Context, api *bench.API, n int) ([]C, error)
	ingress func(ctx context.Context, base string, conns []C, clients int, d time.Duration) (bench.Result, error)
	name    func(n int) string
	// reply measures reply latency on a connection; nil: none.
	reply     func(ctx context.Context, api *bench.API, base string, c C) (bench.Result, error)
	replyName string
}

func (p providerBench[C]) run(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	var out []bench.Result
	for _, n := range p.counts {
		r, err := onGatewayWith(open, p.cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
			conns, err := p.connect(ctx, bench.NewAPI(base, clients), n)
			if err != nil {
				return bench.Result{}, err
			}
			r, err := p.ingress(ctx, base, conns, clients, d)
			r.Name = p.name(n)
			return r, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if p.reply == nil {
		return out, nil
	}
	r, err := onGatewayWith(open, p.cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		api := bench.NewAPI(base, 4)
		conns, err := p.connect(ctx, api, 1)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := p.reply(ctx, api, base, conns[0])
		r.Name = p.replyName
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

// benchTelegram measures Telegram webhook ingress (updates POSTed to
// /hooks/telegram/{id} -> message.received, 1 and 100 bots) and reply ->
// sendMessage at a fake Bot API. The gateway's base URL is a public https
// one, so connections take the webhook mode; the load generator plays
// Telegram and the TLS-terminating proxy in one.
func benchTelegram(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := telegramtest.NewServer()
	defer fake.Close()
	return providerBench[bench.TelegramConnection]{
		cfg: gateway.Config{Service: messaging.Options{BaseURL: "https://comm.bench.invalid"},
			Telegram: telegram.Options{APIURL: fake.URL}},
		counts: [2]int{1, 100},
		connect: func(ctx context.Context, api *bench.API, n int) ([]bench.TelegramConnection, error) {
			return bench.NewTelegramConnections(ctx, api, fake, n)
		},
		ingress: bench.TelegramIngress,
		name:    func(n int) string { return fmt.Sprintf("POST /hooks/telegram/{id} -> message.received, %d bot(s)", n) },
		reply: func(ctx context.Context, api *bench.API, base string, c bench.TelegramConnection) (bench.Result, error) {
			return bench.TelegramReplyLatency(ctx, api, base, c, 1000)
		},
		replyName: "reply -> fake sendMessage (telegram)",
	}.run(ctx, open, clients, d)
}

// benchTwilio measures Twilio SMS webhook ingress (signed form POSTs to
// /hooks/sms/{id} -> message.received, 1 and 100 accounts) and reply ->
// Messages.json at a fake Twilio. The gateway's public base URL is not the
// address the load generator posts to: signatures cover the public URL,
// as behind a proxy.
func benchTwilio(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := twiliotest.NewServer()
	defer fake.Close()
	return providerBench[bench.TwilioConnection]{
		cfg: gateway.Config{Service: messaging.Options{BaseURL: "https://comm.bench.invalid"},
			Twilio: twilio.Options{APIURL: fake.URL, MessagingURL: fake.URL}},
		counts: [2]int{1, 100},
		connect: func(ctx context.Context, api *bench.API, n int) ([]bench.TwilioConnection, error) {
			return bench.NewTwilioConnections(ctx, api, fake, n)
		},
		ingress: bench.TwilioIngress,
		name: func(n int) string {
			return fmt.Sprintf("POST /hooks/sms/{id} (signed Twilio webhook) -> message.received, %d account(s)", n)
		},
		reply: func(ctx context.Context, api *bench.API, base string, c bench.TwilioConnection) (bench.Result, error) {
			return bench.TwilioReplyLatency(ctx, api, base, c, 1000)
		},
		replyName: "reply -> fake Messages.json (twilio)",
	}.run(ctx, open, clients, d)
}

// benchTelnyx measures SMS through Telnyx: Ed25519-signed message.received
// events POSTed to /hooks/sms/{id} -> message.received (1 and 100
// accounts), and reply -> POST /v2/messages latency.
func benchTelnyx(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := telnyxtest.NewServer()
	defer fake.Close()
	return providerBench[bench.TelnyxConnection]{
		cfg:    gateway.Config{Telnyx: telnyx.Options{APIURL: fake.APIURL}},
		counts: [2]int{1, 100},
		connect: func(ctx context.Context, api *bench.API, n int) ([]bench.TelnyxConnection, error) {
			return bench.NewTelnyxConnections(ctx, api, fake, n)
		},
		ingress: bench.TelnyxIngress,
		name: func(n int) string {
			return fmt.Sprintf("POST /hooks/sms/{id} (Telnyx, Ed25519) -> message.received, %d account(s)", n)
		},
		reply: func(ctx context.Context, api *bench.API, _ string, c bench.TelnyxConnection) (bench.Result, error) {
			return bench.TelnyxSendLatency(ctx, api, c, 1000)
		},
		replyName: "reply -> fake POST /v2/messages (telnyx)",
	}.run(ctx, open, clients, d)
}

// benchMeta measures Messenger webhook ingress (signed batches of 10
// messages POSTed to /hooks/facebook -> message.received, for 1 and 20
// Pages connected through the operator app's login flow) and reply ->
// Send API latency, against the fake Graph API.
func benchMeta(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := metatest.NewServer()
	defer fake.Close()
	return providerBench[bench.MetaConnection]{
		cfg: gateway.Config{Meta: meta.Options{APIURL: fake.APIURL, DialogURL: fake.DialogURL,
			AppID: fake.AppID, AppSecret: fake.AppSecret, VerifyToken: fake.VerifyToken}},
		counts: [2]int{1, 20},
		connect: func(ctx context.Context, api *bench.API, n int) ([]bench.MetaConnection, error) {
			return bench.NewMetaConnections(ctx, api, fake, n)
		},
		ingress: func(ctx context.Context, base string, conns []bench.MetaConnection, clients int, d time.Duration) (bench.Result, error) {
			return bench.MetaIngress(ctx, base, fake.AppSecret, conns, clients, 10, d)
		},
		name: func(n int) string {
			return fmt.Sprintf("POST /hooks/facebook (signed batches) -> message.received, %d Page(s)", n)
		},
		reply: func(ctx context.Context, api *bench.API, base string, c bench.MetaConnection) (bench.Result, error) {
			return bench.MetaReplyLatency(ctx, api, base, fake.AppSecret, c, fake, 300)
		},
		replyName: "reply -> fake Send API (facebook)",
	}.run(ctx, open, clients, d)
}

// benchSlack measures Slack Events API ingress (signed deliveries POSTed
// to /hooks/slack -> message.received, 1 and 100 workspaces that
// installed the operator's app through the OAuth flow), then sends to one
// channel against the fake enforcing Slack's limit of about one message a
// second per channel.
func benchSlack(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := slacktest.NewServer()
	defer fake.Close()
	cfg := gateway.Config{Slack: slack.Options{APIURL: fake.APIURL, AuthorizeURL: fake.AuthorizeURL,
		ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, SigningSecret: fake.SigningSecret}}
	out, err := providerBench[bench.SlackConnection]{
		cfg:    cfg,
		counts: [2]int{1, 100},
		connect: func(ctx context.Context, api *bench.API, n int) ([]bench.SlackConnection, error) {
			return bench.NewSlackConnections(ctx, api, fake, n)
		},
		ingress: func(ctx context.Context, base string, conns []bench.SlackConnection, clients int, d time.Duration) (bench.Result, error) {
			return bench.SlackIngress(ctx, base, fake.SigningSecret, conns, clients, d)
		},
		name: func(n int) string {
			return fmt.Sprintf("POST /hooks/slack (Events API) -> message.received, %d workspace(s)", n)
		},
	}.run(ctx, open, clients, d)
	if err != nil {
		return nil, err
	}
	send, err := onGatewayWith(open, cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		api := bench.NewAPI(base, 4)
		conns, err := bench.NewSlackConnections(ctx, api, fake, 1)
		if err != nil {
			return bench.Result{}, err
		}
		fake.SetRateLimit(true)
		defer fake.SetRateLimit(false)
		r, err := bench.SendUnderLimit(ctx, api, conns[0].Key, conns[0].ConnectionID, "C0BENCH01", 10, fake.Limited)
		r.Name = "Slack sends to one channel, limit 1 per s (fake) -> message.sent"
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return append(out, send), nil
}

// benchDiscord measures Discord gateway dispatch -> message.received
// through one session, then sends to one channel against the fake
// enforcing Discord's per-channel limit (5 messages per 5 s).
func benchDiscord(ctx context.Context, open opener, _ int, _ time.Duration) ([]bench.Result, error) {
	fake := discordtest.NewServer()
	defer fake.Close()
	cfg := gateway.Config{Discord: discord.Options{APIURL: fake.URL, GatewayURL: fake.GatewayURL}}
	dispatch, err := onGatewayWith(open, cfg, func(_ *stream.Log, g *gateway.Gateway, base string) (bench.Result, error) {
		stop := g.StartWorkers(gateway.Workers{Sessions: &delivery.Sessions{ClaimInterval: 100 * time.Millisecond}})
		defer stop()
		r, err := bench.DiscordDispatch(ctx, bench.NewAPI(base, 4), fake, 20000)
		r.Name = "Discord gateway MESSAGE_CREATE -> message.received, one session"
		return r, err
	})
	if err != nil {
		return nil, err
	}
	send, err := onGatewayWith(open, cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		bot := fake.NewBot("bench_sender")
		bot.SetRateLimit(5, 5*time.Second)
		api := bench.NewAPI(base, 4)
		key, conn, err := bench.NewDiscordConnection(ctx, api, bot)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := bench.SendUnderLimit(ctx, api, key, conn, bot.AddChannel(), 20, bot.Limited)
		r.Name = "Discord sends to one channel, limit 5 per 5 s (fake) -> message.sent"
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return []bench.Result{dispatch, send}, nil
}

// benchWhatsAppHosted measures hosted WhatsApp ingress: signed Cloud API
// webhooks (batches of 10 messages) POSTed to /hooks/whatsapp ->
// message.received, for 1 and 20 projects' connections sharing the
// operator's 2 numbers, each joined by 50 people (the routing by line and
// sender is part of what is measured). The projects' keys are signed in
// through the device flow (the channel is paid).
func benchWhatsAppHosted(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := wacloudtest.NewServer()
	defer fake.Close()
	numbers := []*wacloudtest.Number{fake.AddNumber("+15550001111"), fake.AddNumber("+15550002222")}
	var out []bench.Result
	for _, n := range []int{1, 20} {
		r, err := whatsAppHostedIngress(ctx, open, fake, numbers, n, 50, clients, d)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// whatsAppHostedIngress is one ingress measurement of benchWhatsAppHosted:
// n signed-in projects connected on fake's numbers, people joined to each.
func whatsAppHostedIngress(ctx context.Context, open opener, fake *wacloudtest.Server, numbers []*wacloudtest.Number, n, people, clients int, d time.Duration) (bench.Result, error) {
	opts := wacloud.Options{GraphURL: fake.GraphURL, AppSecret: fake.AppSecret, VerifyToken: fake.VerifyToken}
	for _, num := range numbers {
		opts.Numbers = append(opts.Numbers, wacloud.Number{PhoneNumberID: num.PhoneNumberID, DisplayNumber: num.DisplayNumber, AccessToken: num.AccessToken})
	}
	return onGatewayWith(open, gateway.Config{WhatsAppHosted: opts}, func(_ *stream.Log, g *gateway.Gateway, base string) (bench.Result, error) {
		keys := make([]string, n)
		for i := range keys {
			k, err := benchSignedInKey(ctx, g.Accounts, i)
			if err != nil {
				return bench.Result{}, err
			}
			keys[i] = k
		}
		conns, err := bench.NewWhatsAppHostedConnections(ctx, bench.NewAPI(base, clients), fake.AppSecret, keys, numbers, people)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := bench.WhatsAppHostedIngress(ctx, base, fake.AppSecret, conns, clients, 10, d)
		r.Name = fmt.Sprintf("POST /hooks/whatsapp (signed Cloud API batches) -> message.received, %d connection(s) on %d shared numbers", n, len(numbers))
		return r, err
	})
}

// benchSignedInKey signs a bench account in through the device flow (as
// `comm login` does, approved at once) and returns its project's key.
func benchSignedInKey(ctx context.Context, accounts *account.Service, i int) (string, error) {
	start, err := accounts.StartDevice(ctx, account.DeviceStartInput{ClientIP: "127.0.0.1", UserAgent: "comm bench"})
	if err != nil {
		return "", err
	}
	who, err := accounts.SignIn(ctx, account.Identity{Issuer: "bench", Subject: fmt.Sprint("bench-", i)})
	if err != nil {
		return "", err
	}
	if _, err := accounts.ApproveDevice(ctx, who.ID, start.UserCode); err != nil {
		return "", err
	}
	tok, err := accounts.PollDevice(ctx, start.DeviceCode)
	if err != nil {
		return "", err
	}
	if tok.APIKey == "" {
		return "", fmt.Errorf("bench sign-in: the device flow answered %q without a key", tok.Status)
	}
	return tok.APIKey, nil
}

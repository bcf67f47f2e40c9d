package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/discord/discordtest"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
	"github.com/comm-gateway/comm/delivery"
	entconn "github.com/comm-gateway/comm/ent/connection"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// startTelegramReplica is one replica of the gateway with the Telegram
// channel pointed at the fake Bot API and no workers (the test runs the
// session workers itself). Replicas of one database share box: they open
// each other's sealed connection configurations.
func startTelegramReplica(t *testing.T, cfg store.Config, box *sealed.Box, apiURL string) *gateway {
	t.Helper()
	return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config: gw.Config{Service: messaging.Options{Box: box},
			Telegram: telegram.Options{APIURL: apiURL, PollTimeout: time.Second}},
		Workers: &gw.Workers{},
	})}
}

// sessionOwner is the replica holding the connection's session lease.
func sessionOwner(t *testing.T, g *gateway, connID string) string {
	t.Helper()
	c, err := g.Svc.Ent().Connection.Query().Where(entconn.ID(connID)).Only(systemCtx())
	if err != nil {
		t.Fatal(err)
	}
	return c.SessionOwner
}

// receivedTexts are the texts of the project's message.received events,
// in order.
func receivedTexts(t *testing.T, g *gateway, key string) []string {
	t.Helper()
	var out []string
	for _, e := range g.eventsOfType(t, key, stream.MessageReceived) {
		var d struct {
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Message.Text)
	}
	return out
}

// TestTelegramSessionTakeover: a Telegram bot on a gateway without a
// public URL polls getUpdates; exactly one of two replicas runs the
// session (the lease), and when that replica dies without a word, the
// other takes the session over once the lease lapses: a message sent
// while nobody polled arrives, once, and nothing arrives twice.
func TestTelegramSessionTakeover(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		fake := telegramtest.NewServer()
		t.Cleanup(fake.Close)
		bot := fake.NewBot("takeover_bot")
		box := newBox(t)
		a := startTelegramReplica(t, cfg, box, fake.URL)
		b := startTelegramReplica(t, cfg, box, fake.URL)

		p := a.newProject(t)
		resp := a.do(t, http.MethodPost, "/v1/connections", p.Key,
			fmt.Sprintf(`{"channel":"telegram","config":{"bot_token":%q}}`, bot.Token))
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		var conn struct {
			ID      string  `json:"id"`
			Address *string `json:"address"`
			Status  string  `json:"status"`
		}
		if err := json.Unmarshal(resp.Body, &conn); err != nil {
			t.Fatal(err)
		}
		if conn.Address == nil || *conn.Address != "@takeover_bot" || conn.Status != "active" {
			t.Fatalf("connection %s: want address @takeover_bot, active", resp.Body)
		}

		const lease = time.Second
		sa := &delivery.Sessions{Service: a.Svc, Owner: "replica-a", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxA, stopA := context.WithCancel(context.Background())
		doneA := make(chan struct{})
		go func() { sa.Run(ctxA); close(doneA) }()
		t.Cleanup(func() { stopA(); <-doneA })
		waitFor(t, "replica a to own the session", 10*time.Second, func() bool {
			return sessionOwner(t, a, conn.ID) == "replica-a" && bot.Held() == 1
		})

		sb := &delivery.Sessions{Service: b.Svc, Owner: "replica-b", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxB, stopB := context.WithCancel(context.Background())
		doneB := make(chan struct{})
		go func() { sb.Run(ctxB); close(doneB) }()
		t.Cleanup(func() { stopB(); <-doneB })

		bot.Queue(telegramtest.TextMessage(7, "one"))
		waitFor(t, "the first message", 10*time.Second, func() bool { return len(receivedTexts(t, a, p.Key)) == 1 })
		// While a holds the lease, b does not poll: one session only.
		time.Sleep(3 * lease)
		if o := sessionOwner(t, a, conn.ID); o != "replica-a" {
			t.Fatalf("owner while a lives: %q", o)
		}

		// a dies: no release, its lease lapses.
		sa.Abandon()
		stopA()
		<-doneA
		bot.Queue(telegramtest.TextMessage(7, "two"))
		waitFor(t, "replica b to take over and receive the second message", 20*time.Second, func() bool {
			return len(receivedTexts(t, b, p.Key)) == 2
		})
		if o := sessionOwner(t, b, conn.ID); o != "replica-b" {
			t.Errorf("owner after a died: %q, want replica-b", o)
		}
		if got := receivedTexts(t, b, p.Key); got[0] != "one" || got[1] != "two" {
			t.Errorf("received %q, want [one two]", got)
		}
		time.Sleep(2 * lease)
		if got := receivedTexts(t, b, p.Key); len(got) != 2 {
			t.Errorf("received %q after the takeover settled: a message arrived twice", got)
		}

		// Deleting the connection ends the session on the replica that
		// runs it.
		if r := b.do(t, http.MethodDelete, "/v1/connections/"+conn.ID, p.Key, ""); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the session to stop after the delete", 10*time.Second, func() bool { return bot.Held() == 0 })
	})
}

// guildBot is the operator's own bot of a test channel: one session (its
// gateway) serves every guild it was installed in; a connection is a
// guild (config {"guild":...}, its routing key).
type guildBot struct {
	mu      sync.Mutex
	queue   []guildMessage
	running int // sessions running now, over every replica
	most    int // the most that ever ran at once
	wake    chan struct{}
}

type guildMessage struct{ guild, id, text string }

func newGuildBot() *guildBot { return &guildBot{wake: make(chan struct{}, 1)} }

func (b *guildBot) say(guild, id, text string) {
	b.mu.Lock()
	b.queue = append(b.queue, guildMessage{guild, id, text})
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run delivers queued messages, taking each off the queue only once emit
// accepted it (as a gateway resumes from its last acknowledged event).
func (b *guildBot) Run(ctx context.Context, emit func(key string, ins ...channels.Inbound) error) error {
	b.mu.Lock()
	b.running++
	b.most = max(b.most, b.running)
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.running--; b.mu.Unlock() }()
	for {
		b.mu.Lock()
		var m *guildMessage
		if len(b.queue) > 0 {
			m = &b.queue[0]
		}
		b.mu.Unlock()
		if m != nil {
			if err := emit(m.guild, channels.Inbound{ProviderID: m.id, Sender: "u-" + m.guild, Text: m.text}); err != nil {
				return err
			}
			b.mu.Lock()
			b.queue = b.queue[1:]
			b.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.wake:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type guildConn struct{ guild string }

func (g *guildConn) Send(context.Context, channels.Outbound) (channels.SendResult, error) {
	return channels.SendResult{ProviderID: "x"}, nil
}
func (g *guildConn) Provision(context.Context) (channels.Provisioned, error) {
	return channels.Provisioned{RouteKey: g.guild, Address: "guild " + g.guild}, nil
}

func guildChannel(bot *guildBot) channels.Descriptor {
	return channels.Descriptor{Channel: "guildchat", Tier: channels.Free, Session: bot,
		New: func(_ context.Context, c channels.Connection) (channels.Adapter, error) {
			var cfg struct{ Guild string }
			if err := json.Unmarshal(c.Config, &cfg); err != nil || cfg.Guild == "" {
				return nil, &channels.ConfigError{Field: "guild", Msg: "required"}
			}
			return &guildConn{guild: cfg.Guild}, nil
		}}
}

// TestAppSessionTakeover: the operator's app session (one gateway for
// every guild) runs on one replica at a time, routes each guild's
// messages to the project that installed it, and moves to the other
// replica when its owner dies, with nothing lost or doubled.
func TestAppSessionTakeover(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		bot := newGuildBot()
		box := newBox(t)
		start := func() *gateway {
			return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
				Config:  gw.Config{Service: messaging.Options{Box: box}, Channels: []channels.Descriptor{guildChannel(bot)}},
				Workers: &gw.Workers{},
			})}
		}
		a, b := start(), start()
		p1, p2 := a.newProject(t), a.newProject(t)
		for _, c := range []struct {
			key, guild string
		}{{p1.Key, "G1"}, {p2.Key, "G2"}} {
			if r := a.do(t, http.MethodPost, "/v1/connections", c.key, `{"channel":"guildchat","config":{"guild":"`+c.guild+`"}}`); r.Status != http.StatusCreated {
				t.Fatalf("connect %s: %d %s", c.guild, r.Status, r.Body)
			}
		}
		const lease = time.Second
		runA := &delivery.Sessions{Service: a.Svc, Owner: "replica-a", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxA, stopA := context.WithCancel(context.Background())
		doneA := make(chan struct{})
		go func() { runA.Run(ctxA); close(doneA) }()
		t.Cleanup(func() { stopA(); <-doneA })
		bot.say("G1", "m1", "for one")
		bot.say("G2", "m2", "for two")
		waitFor(t, "both guilds' messages", 10*time.Second, func() bool {
			return len(receivedTexts(t, a, p1.Key)) == 1 && len(receivedTexts(t, a, p2.Key)) == 1
		})
		runB := &delivery.Sessions{Service: b.Svc, Owner: "replica-b", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxB, stopB := context.WithCancel(context.Background())
		doneB := make(chan struct{})
		go func() { runB.Run(ctxB); close(doneB) }()
		t.Cleanup(func() { stopB(); <-doneB })
		time.Sleep(3 * lease)
		runA.Abandon()
		stopA()
		<-doneA
		bot.say("G1", "m3", "after the takeover")
		bot.say("G9", "m4", "a guild nobody installed")
		waitFor(t, "the message after the takeover", 20*time.Second, func() bool { return len(receivedTexts(t, b, p1.Key)) == 2 })
		if got := receivedTexts(t, b, p1.Key); got[0] != "for one" || got[1] != "after the takeover" {
			t.Errorf("guild one received %q", got)
		}
		if got := receivedTexts(t, b, p2.Key); len(got) != 1 || got[0] != "for two" {
			t.Errorf("guild two received %q", got)
		}
		bot.mu.Lock()
		most := bot.most
		bot.mu.Unlock()
		if most != 1 {
			t.Errorf("%d app sessions ran at once, want 1", most)
		}
	})
}

// TestDiscordSessionTakeover: a replica running a customer's Discord
// gateway session stops without handing it over; another takes the lease
// over and resumes the session where the database says the first left
// off (no second identify), so what was dispatched while nobody ran it
// arrives, and nothing is stored twice.
func TestDiscordSessionTakeover(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		fake := discordtest.NewServer()
		t.Cleanup(fake.Close)
		bot := fake.NewBot("customer_bot")
		box := newBox(t)
		start := func() *gateway {
			return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
				Config: gw.Config{Service: messaging.Options{Box: box},
					Discord: discord.Options{APIURL: fake.URL, GatewayURL: fake.GatewayURL, ReidentifyDelay: 10 * time.Millisecond}},
				Workers: &gw.Workers{},
			})}
		}
		a, b := start(), start()
		p := a.newProject(t)
		if r := a.do(t, http.MethodPost, "/v1/connections", p.Key, fmt.Sprintf(`{"channel":"discord","config":{"bot_token":%q}}`, bot.Token)); r.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		const lease = time.Second
		runA := &delivery.Sessions{Service: a.Svc, Owner: "replica-a", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxA, stopA := context.WithCancel(context.Background())
		doneA := make(chan struct{})
		go func() { runA.Run(ctxA); close(doneA) }()
		t.Cleanup(func() { stopA(); <-doneA })
		bot.Dispatch(bot.DM("300000000000000001", "before"))
		waitFor(t, "the first message", 10*time.Second, func() bool { return len(receivedTexts(t, a, p.Key)) == 1 })
		runA.Abandon()
		stopA()
		<-doneA
		bot.Dispatch(bot.DM("300000000000000001", "while nobody ran the session"))
		runB := &delivery.Sessions{Service: b.Svc, Owner: "replica-b", Lease: lease, ClaimInterval: 50 * time.Millisecond}
		ctxB, stopB := context.WithCancel(context.Background())
		doneB := make(chan struct{})
		go func() { runB.Run(ctxB); close(doneB) }()
		t.Cleanup(func() { stopB(); <-doneB })
		waitFor(t, "the message dispatched in between", 20*time.Second, func() bool { return len(receivedTexts(t, b, p.Key)) == 2 })
		if got := receivedTexts(t, b, p.Key); got[0] != "before" || got[1] != "while nobody ran the session" {
			t.Errorf("received %q", got)
		}
		if bot.Identifies() != 1 || bot.Resumes() < 1 {
			t.Errorf("identifies = %d, resumes = %d: the new owner should resume, not identify", bot.Identifies(), bot.Resumes())
		}
	})
}

// TestClaimLease: a lease held by another owner answers false and no
// error (on PostgreSQL the refused insert must not poison the batch it ran
// in), its holder renews it, and it passes on once its time runs out.
func TestClaimLease(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, gwOptions{})
		ctx := context.Background()
		claim := func(owner string, lease time.Duration) bool {
			t.Helper()
			held, err := g.Svc.ClaimLease(ctx, "test-lease", owner, lease)
			if err != nil {
				t.Fatalf("%s claims: %v", owner, err)
			}
			return held
		}
		if !claim("a", 500*time.Millisecond) {
			t.Fatal("a could not take a free lease")
		}
		for range 3 {
			if claim("b", time.Minute) {
				t.Fatal("b took a's lease")
			}
		}
		if !claim("a", 500*time.Millisecond) {
			t.Fatal("a could not renew its lease")
		}
		time.Sleep(600 * time.Millisecond)
		if !claim("b", time.Minute) {
			t.Fatal("b could not take the lease once a's time ran out")
		}
		if claim("a", time.Minute) {
			t.Fatal("a took b's lease back")
		}
	})
}

package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/discord/discordtest"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestDiscordInstall: two projects install the operator's Discord app in
// their guilds through HTTP (a denial first); one gateway session of the
// operator's bot (one identify) serves both guilds, each guild's messages
// reaching only the project that installed it; a reply goes out with
// message_reference.
func TestDiscordInstall(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := discordtest.NewServer()
		t.Cleanup(fake.Close)
		op := fake.NewBot("comm_operator")
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, discord: discord.Options{APIURL: fake.URL,
			GatewayURL: fake.GatewayURL, ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, BotToken: op.Token}})
		install := func(key string, guild discordtest.Guild, deny bool) connection {
			t.Helper()
			var c connection
			resp := g.post(t, key, "/v1/connections", `{"channel":"discord"}`)
			if resp.Status != http.StatusCreated {
				t.Fatalf("connect: %d %s", resp.Status, resp.Body)
			}
			decodeJSON(t, resp.Body, &c)
			if c.Status != "pending" || c.AuthorizeURL == nil {
				t.Fatalf("connection %s: want pending with an authorize_url", resp.Body)
			}
			u, _ := url.Parse(*c.AuthorizeURL)
			state := u.Query().Get("state")
			if deny {
				q := url.Values{"state": {state}}
				for k, v := range fake.Deny() {
					q.Set(k, v)
				}
				if r := g.do(t, request{Path: "/oauth/discord/callback?" + q.Encode()}); r.Status != http.StatusBadRequest {
					t.Fatalf("denied: %d %s", r.Status, r.Body)
				}
			}
			q := url.Values{"state": {state}, "code": {fake.Authorize(guild)}, "guild_id": {guild.ID}}
			if r := g.do(t, request{Path: "/oauth/discord/callback?" + q.Encode()}); r.Status != http.StatusOK || !strings.Contains(string(r.Body), guild.Name) {
				t.Fatalf("callback: %d %s", r.Status, r.Body)
			}
			return c
		}
		k1, k2 := g.newSandbox(t, "one").APIKey, g.newSandbox(t, "two").APIKey
		g1 := discordtest.Guild{ID: fake.Snowflake(), Name: "Guild One"}
		g2 := discordtest.Guild{ID: fake.Snowflake(), Name: "Guild Two"}
		install(k1, g1, true)
		install(k2, g2, false)
		var types []string
		for _, e := range g.events(t, k1, "") {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != "connection.authorized,connection.active" {
			t.Fatalf("events %v, want connection.authorized, connection.active", types)
		}

		gatewaytest.WaitFor(t, "the operator's gateway session", 15*time.Second, op.Connected)
		ch1, ch2 := op.AddChannel(), op.AddChannel()
		op.Dispatch(op.Mention(g1.ID, ch1, "2000000000000000001", "hello from one"))
		op.Dispatch(op.Mention(g2.ID, ch2, "2000000000000000002", "hello from two"))
		op.Dispatch(op.Mention(fake.Snowflake(), op.AddChannel(), "2000000000000000003", "a guild nobody installed"))
		gatewaytest.WaitFor(t, "both guilds' messages", 15*time.Second, func() bool {
			return len(g.events(t, k1, "type=message.received")) == 1 && len(g.events(t, k2, "type=message.received")) == 1
		})
		in := receivedOf(t, g.events(t, k1, "type=message.received")[0])
		if in.Text != "hello from one" || in.Sender != "2000000000000000001" {
			t.Fatalf("project one received %+v", in)
		}
		if n := op.Identifies(); n != 1 {
			t.Errorf("%d identifies for two guilds, want one session", n)
		}
		out := g.queue(t, k1, "/v1/messages/"+in.ID+"/reply", `{"text":"Hi there"}`)
		g.waitMessage(t, k1, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := op.Sent()
		if len(sent) != 1 || sent[0].ChannelID != ch1 || sent[0].Content != "Hi there" || sent[0].MessageReference == nil {
			t.Fatalf("sent %+v, want the reply in %s with message_reference", sent, ch1)
		}
	})
}

// TestDiscordBacklog: a customer's own bot comes online to a backlog (the
// gateway dispatches everything held at once). The session stores it in
// batches, in dispatch order, each message once; a reply to a message of
// the same backlog joins that message's conversation; a dropped
// connection resumes with nothing lost or stored twice.
func TestDiscordBacklog(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := discordtest.NewServer()
		t.Cleanup(fake.Close)
		bot := fake.NewBot("customer_bot")
		g := startGateway(t, cfg, setup{outbox: true, sessions: true, discord: discord.Options{APIURL: fake.URL, GatewayURL: fake.GatewayURL}})
		key := g.newSandbox(t, "backlog").APIKey
		const dms = 300
		for i := range dms {
			bot.Dispatch(bot.DM(fmt.Sprintf("30000000000000%04d", i%7), fmt.Sprintf("dm %03d", i)))
		}
		guild, ch1, ch2 := fake.Snowflake(), bot.AddChannel(), bot.AddChannel()
		first := bot.Mention(guild, ch1, "2000000000000000001", "first")
		bot.Dispatch(first)
		reply := bot.Mention(guild, ch2, "2000000000000000002", "a reply to first")
		reply.MessageReference = &discordtest.Reference{MessageID: first.ID, ChannelID: ch1}
		bot.Dispatch(reply)

		resp := g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"discord","config":{"bot_token":%q}}`, bot.Token))
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		received := func() []event { return g.events(t, key, "type=message.received&limit=1000") }
		gatewaytest.WaitFor(t, "the backlog stored", 30*time.Second, func() bool { return len(received()) >= dms+2 })
		bot.Drop()
		bot.Dispatch(bot.DM("300000000000000001", "after the drop"))
		gatewaytest.WaitFor(t, "the message after the drop", 30*time.Second, func() bool { return len(received()) >= dms+3 })

		evs := received()
		if len(evs) != dms+3 {
			t.Fatalf("%d message.received, want %d (each message once)", len(evs), dms+3)
		}
		convOf := map[string]string{}
		for i, e := range evs {
			m := receivedOf(t, e)
			want := fmt.Sprintf("dm %03d", i)
			switch {
			case i == dms:
				want = "first"
			case i == dms+1:
				want = "a reply to first"
			case i == dms+2:
				want = "after the drop"
			}
			if !strings.HasSuffix(m.Text, want) {
				t.Fatalf("message %d is %q, want %q: dispatch order kept", i, m.Text, want)
			}
			convOf[want] = m.ConversationID
		}
		if convOf["a reply to first"] != convOf["first"] {
			t.Errorf("the reply is in conversation %s, the message it answers in %s", convOf["a reply to first"], convOf["first"])
		}
		if n := bot.Identifies(); n != 1 {
			t.Errorf("identifies = %d, want 1 (the drop resumed)", n)
		}
	})
}

package server_test

import (
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

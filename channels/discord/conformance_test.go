package discord_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/discord/discordtest"
)

// person is the Discord user the tests talk to.
const person = "80351110224678912"

// TestConformance runs the suite against a bring-your-own-bot connection:
// one fake Discord, a bot of its own per subtest. The poll subtest drives
// the gateway websocket.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: discord.Descriptor(discord.Options{APIURL: srv.URL, ReidentifyDelay: 10 * time.Millisecond}),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(srv) },
		Idempotent: true,
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`),
			json.RawMessage(`{"bot_token":""}`),
			json.RawMessage(`{"bot_token":"has space.a.b"}`),
			json.RawMessage(`{"bot_token":"no-dots"}`),
			json.RawMessage(`{"bot_token":12}`),
			json.RawMessage(`{"bot_token":"a.b.c","extra":1}`),
			json.RawMessage(`{"app":"operator","guild_id":"1"}`),
			json.RawMessage(`{"bot_token":"a.b.c","guild_id":"1"}`),
			json.RawMessage(`{"bot_token":"a.b.c"} {}`),
		},
	})
}

func newFake(srv *discordtest.Server) *channeltest.Fake {
	bot := srv.NewBot("comm_test_bot")
	var mu sync.Mutex
	ids := map[string]string{} // suite token -> message id
	cfg, _ := json.Marshal(map[string]string{"bot_token": bot.Token})
	return &channeltest.Fake{
		Config:        cfg,
		To:            person,
		BadCredential: json.RawMessage(`{"bot_token":"not.this.token"}`),
		RetryAfter:    7 * time.Second,
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, m := range bot.Sent() {
				out = append(out, channels.Outbound{To: bot.Recipient(m.ChannelID), ThreadKey: m.ChannelID, Text: m.Content})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, ty := range bot.Typings() {
				out = append(out, channels.Typing{To: bot.Recipient(ty.ChannelID), ThreadKey: ty.ChannelID})
			}
			return out
		},
		Queue: func(t *testing.T, m channels.Inbound) {
			dm := bot.DM(m.Sender, m.Text)
			mu.Lock()
			if id, ok := ids[m.ProviderID]; ok {
				dm.ID = id
			} else {
				ids[m.ProviderID] = dm.ID
			}
			mu.Unlock()
			bot.Dispatch(dm)
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var f discordtest.Failure
			switch kind {
			case channeltest.RateLimited:
				f = discordtest.TooManyRequests(7)
			case channeltest.Unavailable:
				f = discordtest.BadGateway
			case channeltest.Timeout:
				f = discordtest.Hang
			case channeltest.Rejected:
				f = discordtest.UnknownChannel
			case channeltest.Unauthorized:
				f = discordtest.Unauthorized
			default:
				return "", ""
			}
			bot.FailNext("messages", f)
			return person, f.Message
		},
	}
}

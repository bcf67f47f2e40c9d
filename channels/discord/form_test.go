package discord_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/discord"
)

// TestForm checks the connect form against the configuration, with and
// without the operator's app (whose install is the OAuth).
func TestForm(t *testing.T) {
	t.Parallel()
	conn := channels.Connection{ID: "conn_form"}
	t.Run("own bot", func(t *testing.T) {
		d := discord.Descriptor(discord.Options{})
		if d.OAuth {
			t.Error("OAuth without the operator's app")
		}
		channeltest.Form(t, d, discord.Config{}, conn)
	})
	t.Run("operator app", func(t *testing.T) {
		d := discord.Descriptor(discord.Options{ClientID: "1", ClientSecret: "secret", BotToken: "a.b.c"})
		if !d.OAuth {
			t.Error("no OAuth with the operator's app")
		}
		channeltest.Form(t, d, discord.Config{}, conn)
	})
}

package slack_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/slack"
)

// TestForm checks the connect form against the configuration, with and
// without the operator's app (whose install is the OAuth).
func TestForm(t *testing.T) {
	t.Parallel()
	conn := channels.Connection{ID: "conn_form"}
	t.Run("own app", func(t *testing.T) {
		d := slack.Descriptor(slack.Options{})
		if d.OAuth {
			t.Error("OAuth without the operator's app")
		}
		channeltest.Form(t, d, slack.Config{}, conn)
	})
	t.Run("operator app", func(t *testing.T) {
		d := slack.Descriptor(slack.Options{ClientID: "1.2", ClientSecret: "secret", SigningSecret: "abcdef0123456789"})
		if !d.OAuth {
			t.Error("no OAuth with the operator's app")
		}
		channeltest.Form(t, d, slack.Config{}, conn)
	})
}

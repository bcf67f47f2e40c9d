package telegram_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/telegram"
)

// TestForm checks the connect form against the configuration.
func TestForm(t *testing.T) {
	t.Parallel()
	channeltest.Form(t, telegram.Descriptor(telegram.Options{}), telegram.Config{}, channels.Connection{ID: "conn_form"})
}

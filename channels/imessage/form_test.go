package imessage_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/imessage"
)

// TestForm checks the connect form against the configuration, on a
// gateway with a relay and on one without (New is nil: the operator's
// settings are named).
func TestForm(t *testing.T) {
	t.Parallel()
	relay := imessage.Relay{URL: "http://127.0.0.1:1", Password: "secret", Address: "agent@icloud.com"}
	d := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{relay}})
	channeltest.Form(t, d, imessage.Config{}, channels.Connection{ID: "conn_form", Line: relay.Address})
	channeltest.Form(t, imessage.Descriptor(imessage.Options{}), imessage.Config{}, channels.Connection{})
}

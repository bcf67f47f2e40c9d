package twilio_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/twilio"
)

// TestForm checks the SMS and WhatsApp connect forms against the
// configuration.
func TestForm(t *testing.T) {
	t.Parallel()
	for _, d := range twilio.Descriptors(twilio.Options{}) {
		channeltest.Form(t, d, twilio.Config{}, channels.Connection{ID: "conn_form"})
	}
}

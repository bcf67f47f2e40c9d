package telnyx_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/telnyx"
)

// TestForm checks the connect form against the configuration.
func TestForm(t *testing.T) {
	t.Parallel()
	channeltest.Form(t, telnyx.Descriptor(telnyx.Options{}), telnyx.Config{}, channels.Connection{ID: "conn_form"})
}

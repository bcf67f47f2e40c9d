package x_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/x"
)

// TestForm checks the connect form (none: the install fills the
// configuration in) with the operator's app and without it (New is nil:
// the operator's settings are named).
func TestForm(t *testing.T) {
	t.Parallel()
	channeltest.Form(t, x.Descriptor(x.Options{ClientID: "id", ClientSecret: "secret"}), x.Config{}, channels.Connection{ID: "conn_form"})
	channeltest.Form(t, x.Descriptor(x.Options{}), x.Config{}, channels.Connection{})
}

package email

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
)

// TestForm checks the connect form against the configuration.
func TestForm(t *testing.T) {
	t.Parallel()
	channeltest.Form(t, New(Options{}).Descriptor(), Config{}, channels.Connection{ID: "conn_form", ProjectID: "proj_form"})
}

package testchan_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/testchan"
)

// TestForm checks the descriptor's form: no fields, the channel takes no
// configuration.
func TestForm(t *testing.T) {
	t.Parallel()
	channeltest.Form(t, testchan.Descriptor(), struct{}{}, channels.Connection{ID: "conn_form"})
}

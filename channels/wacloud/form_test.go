package wacloud_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/wacloud"
)

// TestForm checks the connect form against the configuration, on a
// gateway with a number and on one without (New is nil: the operator's
// settings are named).
func TestForm(t *testing.T) {
	t.Parallel()
	num := wacloud.Number{PhoneNumberID: "106540352242922", DisplayNumber: "+15550001111", AccessToken: "EAAGm0PX4ZCpsBAKZCZCZBmZCZAqZC8ZBZAz"}
	d := wacloud.Descriptor(wacloud.Options{AppSecret: "0123456789abcdef", VerifyToken: "v", Numbers: []wacloud.Number{num}})
	channeltest.Form(t, d, wacloud.Config{}, channels.Connection{ID: "conn_form", Line: num.PhoneNumberID})
	channeltest.Form(t, wacloud.Descriptor(wacloud.Options{}), wacloud.Config{}, channels.Connection{})
}

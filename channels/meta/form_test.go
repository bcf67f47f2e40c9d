package meta_test

import (
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/meta"
)

// TestForm checks both channels' connect forms against the configuration,
// with and without the operator's app (whose login is the OAuth).
func TestForm(t *testing.T) {
	t.Parallel()
	conn := channels.Connection{ID: "conn_form"}
	operator := meta.Options{AppID: "1", AppSecret: "0123456789abcdef0123456789abcdef", VerifyToken: "v"}
	for _, opts := range []meta.Options{{}, operator} {
		for _, d := range []channels.Descriptor{meta.FacebookDescriptor(opts), meta.InstagramDescriptor(opts)} {
			if d.OAuth != (opts.AppID != "") {
				t.Errorf("%s: OAuth = %v with options %+v", d.Channel, d.OAuth, opts)
			}
			channeltest.Form(t, d, meta.Config{}, conn)
		}
	}
}

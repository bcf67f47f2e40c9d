package client_test

import (
	"context"
	"testing"

	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestChannels lists the gateway's channels with a sandbox key: the test
// channel is available and takes no config, Telegram's form asks for the
// bot token, and the paid X channel is not available, saying why.
func TestChannels(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		p := newProject(t, g, "")
		cs, err := p.Channels(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range cs {
			seen[c.Channel] = true
			switch c.Channel {
			case "test":
				if !c.Available || c.Reason != nil || len(c.Fields) != 0 || c.Summary == "" {
					t.Errorf("test channel: %+v", c)
				}
			case "telegram":
				if len(c.Fields) == 0 || c.Fields[0].Name != "bot_token" || !c.Fields[0].Secret || !c.Fields[0].Required {
					t.Errorf("telegram's form: %+v", c.Fields)
				}
			case "x":
				if c.Available || c.Tier != "paid" || c.Reason == nil || *c.Reason == "" {
					t.Errorf("x with a sandbox key: %+v", c)
				}
			}
		}
		for _, ch := range []string{"test", "telegram", "x", "email"} {
			if !seen[ch] {
				t.Errorf("%s is not listed: %+v", ch, cs)
			}
		}
	})
}

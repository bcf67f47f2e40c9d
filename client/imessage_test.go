package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
	"github.com/comm-gateway/comm/client"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestConnectIMessage: with a relay configured, a signed-in client's
// ConnectIMessage answers the relay's address, a join code and the sms:
// join link; a dedicated relay has no code, and a second one finds none
// free.
func TestConnectIMessage(t *testing.T) {
	t.Parallel()
	relay := bluebubblestest.NewServer("pw-client-test", "+15550001111")
	t.Cleanup(relay.Close)
	relays := []imessage.Relay{{URL: relay.URL, Password: "pw-client-test", Address: "+15550001111"}}
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{Config: gw.Config{IMessage: imessage.Options{Relays: relays}}})
	ctx := context.Background()
	p := newProject(t, g, "")
	signed, err := client.New(client.WithAPIKey(signedInKey(t, g, p.Sandbox.ProjectID)), client.WithBaseURL(g.URL))
	if err != nil {
		t.Fatal(err)
	}
	c, err := signed.ConnectIMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Channel != "imessage" || c.Address == nil || *c.Address != "+15550001111" || c.JoinCode == nil ||
		c.JoinLink == nil || *c.JoinLink != "sms:+15550001111?&body=join%20"+*c.JoinCode {
		t.Fatalf("ConnectIMessage = %+v", c)
	}
	if _, err := signed.ConnectIMessage(ctx, client.IMessageDedicated()); !errors.Is(err, client.ErrConflict) {
		t.Errorf("a dedicated relay while it is shared: %v, want ErrConflict", err)
	}
	c2, err := signed.ConnectIMessage(ctx, client.IMessageLine("+15550001111"))
	if err != nil || c2.JoinCode == nil || *c2.JoinCode == *c.JoinCode {
		t.Errorf("a second connection on the named line: %+v %v", c2, err)
	}
}

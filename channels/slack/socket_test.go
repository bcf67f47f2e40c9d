package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
)

// TestSocketReconnect checks that Poll acknowledges what it emitted,
// reconnects when Slack sends "disconnect", and stops on app_uninstalled.
func TestSocketReconnect(t *testing.T) {
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	team := srv.NewTeam("acme")
	cfg, _ := json.Marshal(map[string]string{"bot_token": team.BotToken, "app_token": team.EnableSocketMode(), "team_id": team.ID})
	a, err := slack.Descriptor(slack.Options{APIURL: srv.APIURL}).New(t.Context(), channels.Connection{ID: "conn_1", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p := a.(channels.Poller)
	t.Cleanup(func() { _ = a.(channels.Closer).Close() })

	got := make(chan channels.Inbound, 10)
	done := make(chan error, 1)
	go func() {
		done <- p.Poll(t.Context(), func(ins ...channels.Inbound) error {
			for _, in := range ins {
				got <- in
			}
			return nil
		})
	}()
	team.QueueSocket(slacktest.EventCallback(team.ID, "Ev1", slacktest.Event{Channel: "D1", User: "U1", Text: "one", TS: "1700000000.000100"}))
	if in := <-got; in.Text != "one" || in.ProviderID != "D1:1700000000.000100" {
		t.Errorf("first: %+v", in)
	}
	// The acknowledgement follows the emit; a disconnect before it would
	// have Slack deliver "one" again (as it does), which is not what this
	// test is about.
	ackCtx, ackCancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer ackCancel()
	if !team.WaitPending(0, ackCtx.Done()) {
		t.Fatalf("the first envelope was not acknowledged")
	}
	team.Disconnect()
	team.QueueSocket(slacktest.EventCallback(team.ID, "Ev2", slacktest.Event{Channel: "D1", User: "U1", Text: "two", TS: "1700000000.000200"}))
	if in := <-got; in.Text != "two" {
		t.Errorf("second: %+v", in)
	}
	team.QueueSocket(slacktest.Envelope(team.ID, "Ev3", map[string]any{"type": "app_uninstalled"}))
	if err := <-done; !errors.Is(err, channels.ErrRevoked) {
		t.Errorf("Poll after app_uninstalled = %v, want ErrRevoked", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if !team.WaitPending(0, ctx.Done()) {
		t.Errorf("%d envelopes were not acknowledged", team.Pending())
	}
	if n := team.SocketOpens(); n < 2 {
		t.Errorf("apps.connections.open called %d times; a disconnect must reconnect", n)
	}
	select {
	case in := <-got:
		t.Errorf("an extra message %+v", in)
	default:
	}
}

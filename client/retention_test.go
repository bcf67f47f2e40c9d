package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestCursorExpired: a cursor older than the earliest kept event (the
// gateway's retention deleted the events after it) is an *Error of code
// cursor_expired with EarliestSeq, from Events and from Listen, by
// polling and over the websocket; Listen (which reads message.received
// events, the type deleted here) stops on it rather than retrying or
// skipping.
func TestCursorExpired(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	ctx := context.Background()
	p := newProject(t, g, "")
	for range 6 {
		if _, err := g.Log.Append(ctx, p.Sandbox.ProjectID, stream.MessageReceived, map[string]int{}); err != nil {
			t.Fatal(err)
		}
	}
	r := &stream.Retention{Log: g.Log, Keep: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	if n, err := r.Pass(ctx); err != nil || n != 5 {
		t.Fatalf("retention pass: %d, %v", n, err)
	}
	want := func(what string, err error) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, client.ErrCursorExpired) || !errors.As(err, &e) || e.Status != 410 || e.EarliestSeq != 6 {
			t.Errorf("%s: %v (%#v), want cursor_expired (410) with EarliestSeq 6", what, err, e)
		}
	}
	_, err := p.Events(ctx, 2, 10, "")
	want("Events", err)
	if evs, err := p.Events(ctx, 5, 10, ""); err != nil || len(evs) != 1 {
		t.Errorf("Events from EarliestSeq-1: %v, %v", evs, err)
	}
	for name, opts := range map[string][]client.ListenOption{
		"polling":   {client.WithStartSeq(1), client.WithoutCursorStore(), client.WithPollInterval(20 * time.Millisecond)},
		"websocket": {client.WithStartSeq(1), client.WithoutCursorStore(), client.WithWebsocket()},
	} {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := p.Listen(lctx, func(context.Context, *client.InboundMessage) error { return nil }, opts...)
		cancel()
		want("Listen, "+name, err)
	}
}

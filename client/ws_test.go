package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestListenWebsocket: WithWebsocket follows the GraphQL subscription;
// when the socket drops (the proxy in front cuts it, then refuses new
// sockets for a while) Listen polls, reopens the socket later, and no
// message is lost or handled twice.
func TestListenWebsocket(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	px := newProxy(t, g.URL)
	p := newProject(t, g, px.URL)
	conn := p.connectTest(t)
	// Messages arrive straight at the gateway, not through the proxy that
	// cuts connections (a POST is never retried).
	direct := newProjectClient(t, g.URL, p.Sandbox.APIKey)
	total := 0
	send := func(n int) {
		for i := range n {
			direct.inject(t, conn.ID, fmt.Sprintf("s%d", i%3), fmt.Sprintf("m%d", total))
			total++
		}
	}
	send(10) // a backlog the subscription replays

	var handled ids
	var mu sync.Mutex
	var socketErrs []error
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		handled.add(m.ID)
		return nil
	}, client.WithWebsocket(), client.WithWebsocketRetry(100*time.Millisecond), client.WithPollInterval(50*time.Millisecond),
		client.WithoutCursorStore(), client.WithoutTyping(), client.WithConcurrency(4),
		client.WithErrorHandler(func(e *client.Event, err error) {
			mu.Lock()
			socketErrs = append(socketErrs, err)
			mu.Unlock()
		}))
	eventually(t, "the backlog over the socket", func() bool { return handled.len() == total })
	send(5)
	eventually(t, "live messages over the socket", func() bool { return handled.len() == total })
	if n := px.Count("GET /v1/events"); n != 0 || px.Count("UPGRADE /graphql") != 1 {
		t.Errorf("%d polls and %d upgrades with the socket up, want 0 and 1", n, px.Count("UPGRADE /graphql"))
	}

	// The socket drops and cannot be reopened: Listen polls.
	px.refuse.Store(true)
	px.Cut()
	send(10)
	eventually(t, "messages by polling while the socket is down", func() bool { return handled.len() == total })
	if px.Count("GET /v1/events") == 0 {
		t.Error("no polls while the socket was down")
	}

	// Sockets are allowed again: Listen goes back to the socket.
	upgrades := px.Count("UPGRADE /graphql")
	px.refuse.Store(false)
	eventually(t, "the socket reopened", func() bool { return px.Count("UPGRADE /graphql") > upgrades })
	time.Sleep(100 * time.Millisecond) // the subscription starts
	polls := px.Count("GET /v1/events")
	send(5)
	eventually(t, "messages over the reopened socket", func() bool { return handled.len() == total })
	if n := px.Count("GET /v1/events"); n != polls {
		t.Errorf("%d polls with the socket back up", n-polls)
	}

	// Drops in the middle of a stream of messages.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 4 {
			time.Sleep(60 * time.Millisecond)
			px.Cut()
		}
	}()
	send(20)
	<-done
	eventually(t, "everything after the drops", func() bool { return handled.len() == total })
	time.Sleep(200 * time.Millisecond) // a late duplicate would show now
	l.stop(t)
	if r := handled.repeats(); len(r) > 0 {
		t.Errorf("handled more than once: %v", r)
	}
	if handled.len() != total {
		t.Errorf("handled %d of %d", handled.len(), total)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(socketErrs) == 0 {
		t.Error("the dropped socket was not reported")
	}
}

package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestBindings: Bindings and Unbind reach the gateway's routes. A test
// connection is on no shared line: nobody has joined it, and unbinding
// anyone is not found. (Joins on a shared line are tested in the server
// package, with a fake shared channel.)
func TestBindings(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		ctx := context.Background()
		p := newProject(t, g, "")
		conn := p.connectTest(t)
		if conn.Line != nil || conn.JoinCode != nil || conn.JoinLink != nil {
			t.Errorf("a test connection shows a line: %+v", conn)
		}
		bs, err := p.Bindings(ctx, conn.ID, "", 0)
		if err != nil || len(bs) != 0 {
			t.Fatalf("Bindings = %v, %v; want none", bs, err)
		}
		if err := p.Unbind(ctx, conn.ID, "+15550001111"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("Unbind = %v, want ErrNotFound", err)
		}
		if _, err := p.Bindings(ctx, "conn_nope", "", 0); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("Bindings of an unknown connection = %v, want ErrNotFound", err)
		}
	})
}

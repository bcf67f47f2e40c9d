package main

import (
	"context"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
)

// TestBenchWhatsAppHostedSmoke runs the whatsapp-hosted benchmark's
// measurement briefly, small (2 projects, 3 people each, one client, on
// SQLite), so that it stays working; it measures nothing.
func TestBenchWhatsAppHostedSmoke(t *testing.T) {
	ctx := context.Background()
	open := func() (*stream.Log, func(), error) {
		db, err := store.Open(ctx, store.Config{DataDir: t.TempDir()})
		if err != nil {
			return nil, nil, err
		}
		l, err := stream.Open(db, stream.Options{})
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return l, func() { l.Close(); db.Close() }, nil
	}
	fake := wacloudtest.NewServer()
	defer fake.Close()
	numbers := []*wacloudtest.Number{fake.AddNumber("+15550001111"), fake.AddNumber("+15550002222")}
	r, err := whatsAppHostedIngress(ctx, open, fake, numbers, 2, 3, 1, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 {
		t.Fatalf("no messages went in: %+v", r)
	}
	if got := fake.SentTotal(); got < 6 {
		t.Errorf("the fake sent %d answers, want a join confirmation for each of the 6 people", got)
	}
}

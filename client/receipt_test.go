package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestInjectReceipt: a test connection plays its provider's reports on a
// sent message: the message's Delivery moves forward, a failure appends
// message.failed with the code, and a message of no send answers
// ErrNotFound.
func TestInjectReceipt(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		ctx := context.Background()
		p := newProject(t, g, "")
		conn := p.connectTest(t)
		m, err := p.Send(ctx, client.SendRequest{ConnectionID: conn.ID, To: "bob", Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		// Until it is sent, a report waits (or, sent already, applies).
		got, pending, err := p.InjectReceipt(ctx, conn.ID, client.ReceiptRequest{MessageID: m.ID, State: client.DeliveryDelivered})
		if err != nil || (got == nil) == (pending == nil) {
			t.Fatalf("InjectReceipt delivered: %+v, %+v, %v", got, pending, err)
		}
		if pending != nil && (pending.Status != "pending" || pending.ExpiresAt.Before(time.Now())) {
			t.Errorf("pending %+v", pending)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err = p.Message(ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Delivery != nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got.Delivery == nil || got.Delivery.State != client.DeliveryDelivered || got.Delivery.DeliveredAt == nil {
			t.Fatalf("after delivered: %+v", got)
		}
		got, pending, err = p.InjectReceipt(ctx, conn.ID, client.ReceiptRequest{MessageID: m.ID, State: client.DeliveryFailed,
			Code: "30007", Reason: "filtered"})
		if err != nil || pending != nil || got.Status != client.StatusFailed || got.Delivery.Code == nil || *got.Delivery.Code != "30007" {
			t.Fatalf("InjectReceipt failed: %+v, %+v, %v", got, pending, err)
		}
		failed, err := p.EventsWait(ctx, 0, 0, client.EventMessageFailed, 10*time.Second)
		if err != nil || len(failed) != 1 {
			t.Fatalf("message.failed: %+v, %v", failed, err)
		}
		var ev client.MessageEvent
		if err := failed[0].Decode(&ev); err != nil || ev.Message.ID != m.ID || ev.Message.Delivery == nil || *ev.Message.Delivery.Code != "30007" {
			t.Errorf("message.failed %+v, %v", ev, err)
		}
		if _, _, err := p.InjectReceipt(ctx, conn.ID, client.ReceiptRequest{MessageID: "SMnone", State: client.DeliveryRead}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("a receipt for no message: %v, want ErrNotFound", err)
		}
	})
}

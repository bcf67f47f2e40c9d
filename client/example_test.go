package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/comm-gateway/comm/client"
)

// An agent that answers every message; its cursor survives restarts.
func ExampleClient_Listen() {
	c, err := client.New() // COMM_API_KEY and COMM_BASE_URL from the environment or .env
	if err != nil {
		log.Fatal(err)
	}
	err = c.Listen(context.Background(), func(ctx context.Context, m *client.InboundMessage) error {
		return m.Reply(ctx, "Thanks, "+m.Sender+"! We are on it.")
	},
		client.WithConcurrency(4),
		client.WithErrorHandler(func(e *client.Event, err error) { log.Printf("event %v: %v", e, err) }),
	)
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// A paid channel with a sandbox key answers 402.
func ExampleClient_ConnectIMessage() {
	c, err := client.New()
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.ConnectIMessage(context.Background())
	var e *client.Error
	switch {
	case errors.Is(err, client.ErrPaymentRequired) && errors.As(err, &e):
		fmt.Println("sign in first:", e.Message)
	case err != nil:
		log.Fatal(err)
	}
}

// Receiving push deliveries instead of polling.
func ExampleWebhookHandler() {
	h := client.WebhookHandler(os.Getenv("COMM_WEBHOOK_SECRET"), func(ctx context.Context, e *client.Event) error {
		log.Printf("event %d: %s", e.Seq, e.Type)
		return nil // 2xx: acknowledged; an error makes the gateway deliver it again
	})
	http.Handle("/comm", h)
	log.Fatal(http.ListenAndServe(":8000", nil))
}

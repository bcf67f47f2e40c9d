// Command echo is the smallest comm agent: it answers every message with
// its own text. It reads COMM_API_KEY (and COMM_BASE_URL) from the
// environment or a .env file, and keeps its cursor in .comm-cursor, so a
// restart continues where it stopped.
//
//	go run ./cmd/comm serve &
//	curl -s -X POST localhost:8080/v1/projects/sandbox -H 'Content-Type: application/json' -d '{"name":"echo"}'
//	echo COMM_API_KEY=comm_sandbox_... > .env
//	go run ./examples/echo
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/comm-gateway/comm/client"
)

func main() {
	c, err := client.New()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Printf("echo: listening on %s", c.BaseURL())
	err = c.Listen(ctx, func(ctx context.Context, m *client.InboundMessage) error {
		log.Printf("%s on %s: %s", m.Sender, m.Channel, m.Text)
		return m.Reply(ctx, "You said: "+m.Text)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

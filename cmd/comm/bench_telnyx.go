package main

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/stream"
)

// benchTelnyx measures SMS through Telnyx against the fake Telnyx on
// loopback: Ed25519-signed message.received events POSTed to
// /hooks/sms/{id} -> message.received (1 and 100 accounts), and reply ->
// POST /v2/messages latency.
func benchTelnyx(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	fake := telnyxtest.NewServer()
	defer fake.Close()
	cfg := gateway.Config{Telnyx: telnyx.Options{APIURL: fake.APIURL}}
	var out []bench.Result
	for _, accounts := range []int{1, 100} {
		r, err := onGatewayWith(open, cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
			api := bench.NewAPI(base, clients)
			conns, err := bench.NewTelnyxConnections(ctx, api, fake, accounts)
			if err != nil {
				return bench.Result{}, err
			}
			r, err := bench.TelnyxIngress(ctx, base, conns, clients, d)
			r.Name = fmt.Sprintf("POST /hooks/sms/{id} (Telnyx, Ed25519) -> message.received, %d account(s)", accounts)
			return r, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	r, err := onGatewayWith(open, cfg, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		api := bench.NewAPI(base, 4)
		conns, err := bench.NewTelnyxConnections(ctx, api, fake, 1)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := bench.TelnyxSendLatency(ctx, api, conns[0], 1000)
		r.Name = "reply -> fake POST /v2/messages (telnyx)"
		return r, err
	})
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

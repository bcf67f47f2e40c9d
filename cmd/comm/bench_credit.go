package main

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/testchan"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// benchCredit compares debited sends with free ones on one gateway: the
// test channel's replies, and the same channel registered as a paid one
// ("paidtest", 0.001 USD a message) on a project of a signed-in account,
// alternately, three rounds each, so that the two share the machine's
// noise; the last row compares all rounds together.
func benchCredit(ctx context.Context, open opener, clients int, d time.Duration) ([]bench.Result, error) {
	paid := testchan.Descriptor()
	paid.Channel, paid.Tier = "paidtest", channels.Paid
	prices, err := account.ParsePrices(`{"paidtest":{"in":0,"out":0.001}}`)
	if err != nil {
		return nil, err
	}
	var out []bench.Result
	_, err = onGatewayWith(open, gateway.Config{Channels: []channels.Descriptor{paid}, Credit: account.Options{Prices: prices}},
		func(_ *stream.Log, g *gateway.Gateway, base string) (bench.Result, error) {
			api := bench.NewAPI(base, clients)
			free, err := bench.NewTestConnections(ctx, api, 1)
			if err != nil {
				return bench.Result{}, err
			}
			key, err := benchAccountKey(ctx, g)
			if err != nil {
				return bench.Result{}, err
			}
			var c struct {
				ID string `json:"id"`
			}
			if _, err := api.Do(ctx, "POST", "/v1/connections", key, map[string]string{"channel": "paidtest"}, &c); err != nil {
				return bench.Result{}, err
			}
			for round := range 3 {
				r, err := bench.Replies(ctx, api, free[0].Key, free[0].ConnectionID, clients, d)
				if err != nil {
					return bench.Result{}, err
				}
				if err := drainOutbox(ctx, g); err != nil {
					return bench.Result{}, err
				}
				r.Name = fmt.Sprintf("reply, test channel (free), round %d", round+1)
				out = append(out, r)
				r, err = bench.Replies(ctx, api, key, c.ID, clients, d)
				if err != nil {
					return bench.Result{}, err
				}
				r.Name = fmt.Sprintf("reply, paid channel (debited), round %d", round+1)
				r.Note += fmt.Sprintf("; %.0f%% of the free round's rate", 100*r.Rate()/out[len(out)-1].Rate())
				out = append(out, r)
				if err := drainOutbox(ctx, g); err != nil {
					return bench.Result{}, err
				}
			}
			var freeOps, paidOps int
			var freeT, paidT time.Duration
			for i, r := range out {
				if i%2 == 0 {
					freeOps, freeT = freeOps+r.Ops, freeT+r.Elapsed
				} else {
					paidOps, paidT = paidOps+r.Ops, paidT+r.Elapsed
				}
			}
			freeRate, paidRate := float64(freeOps)/freeT.Seconds(), float64(paidOps)/paidT.Seconds()
			out = append(out, bench.Result{Name: "reply, paid channel (debited), all rounds", Ops: paidOps, Elapsed: paidT,
				Note: fmt.Sprintf("%.0f%% of the free rounds' %.0f/s", 100*paidRate/freeRate, freeRate)})
			var v struct {
				Balance string `json:"balance"`
			}
			if _, err := api.Do(ctx, "GET", "/v1/account", key, nil, &v); err != nil {
				return bench.Result{}, err
			}
			out[len(out)-1].Note += "; balance after: " + v.Balance + " USD"
			return bench.Result{}, nil
		})
	return out, err
}

// benchAccountKey signs a person in and carries a new sandbox project into
// their account, as comm login does; it returns the signed-in key.
func benchAccountKey(ctx context.Context, g *gateway.Gateway) (string, error) {
	sb, err := g.Svc.CreateSandbox(ctx, "bench-credit")
	if err != nil {
		return "", err
	}
	st, err := g.Accounts.StartDevice(ctx, account.DeviceStartInput{APIKey: sb.APIKey})
	if err != nil {
		return "", err
	}
	acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "local", Subject: "bench"})
	if err != nil {
		return "", err
	}
	if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode); err != nil {
		return "", err
	}
	tok, err := g.Accounts.PollDevice(ctx, st.DeviceCode)
	if err != nil {
		return "", err
	}
	if tok.APIKey == "" {
		return "", fmt.Errorf("bench: the device sign-in gave no key (%s)", tok.Status)
	}
	return tok.APIKey, nil
}

// drainOutbox waits until the outbox has delivered every queued message,
// so that one round's deliveries do not slow the next round's sends.
func drainOutbox(ctx context.Context, g *gateway.Gateway) error {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		n, err := g.Svc.Ent().Message.Query().Where(entmsg.StatusIn(entmsg.StatusQueued, entmsg.StatusSending)).Count(tenant.System(ctx))
		if err != nil || n == 0 {
			return err
		}
	}
	return fmt.Errorf("bench: the outbox did not drain in 2 minutes")
}

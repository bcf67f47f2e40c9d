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
// alternately (after a warm-up of each, three rounds each, in alternating
// order), so that the two share the machine's noise and the database's
// growth; the last row compares all rounds together.
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
			type side struct {
				name, key, conn string
				ops             int
				t               time.Duration
			}
			freeSide := &side{name: "test channel (free)", key: free[0].Key, conn: free[0].ConnectionID}
			paidSide := &side{name: "paid channel (debited)", key: key, conn: c.ID}
			run := func(sd *side, round int, dur time.Duration) error {
				r, err := bench.Replies(ctx, api, sd.key, sd.conn, clients, dur)
				if err != nil {
					return err
				}
				if err := drainOutbox(ctx, g); err != nil {
					return err
				}
				if round == 0 {
					return nil // the warm-up is not counted
				}
				r.Name = fmt.Sprintf("reply, %s, round %d", sd.name, round)
				sd.ops, sd.t = sd.ops+r.Ops, sd.t+r.Elapsed
				out = append(out, r)
				return nil
			}
			// A warm-up of each, then three rounds, in alternating order
			// (the database grows as the rounds go, so neither side always
			// runs on the smaller one).
			for round := range 4 {
				first, second := freeSide, paidSide
				if round%2 == 0 {
					first, second = paidSide, freeSide
				}
				dur := d
				if round == 0 {
					dur = d / 5
				}
				if err := run(first, round, dur); err != nil {
					return bench.Result{}, err
				}
				if err := run(second, round, dur); err != nil {
					return bench.Result{}, err
				}
			}
			freeRate, paidRate := float64(freeSide.ops)/freeSide.t.Seconds(), float64(paidSide.ops)/paidSide.t.Seconds()
			out = append(out, bench.Result{Name: "reply, paid channel (debited), all rounds", Ops: paidSide.ops, Elapsed: paidSide.t,
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

package server_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestRateLimitAcrossReplicas: two gateways on one PostgreSQL database,
// each asked for writes with one key faster than the key's budget, grant
// together about the budget (burst + rate × time), not twice it: they
// exchange what they granted (ratelimit.Shared, every 250 ms).
func TestRateLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		if cfg.URL == "" {
			t.Skip("one process on SQLite: nothing to share")
		}
		const rate, burst = 5, 10
		opts := server.Options{WritesPerSecond: rate, WriteBurst: burst}
		// hammer has two replicas grant writes of one key for 3 s, and
		// returns what they granted against the budget.
		hammer := func(every time.Duration) (granted []int, budget float64) {
			su := setup{server: opts, rateLimitSync: every}
			ga, gb := startGateway(t, cfg, su), startGateway(t, cfg, su)
			key := ga.newSandbox(t, "a").APIKey
			const run = 3 * time.Second
			granted = make([]int, 2)
			var wg sync.WaitGroup
			t0 := time.Now()
			for i, g := range []*gateway{ga, gb} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Since(t0) < run {
						// A write the limit counts (answered 404: no such
						// connection) or refuses (429).
						r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/conn_none", Key: key})
						switch r.Status {
						case http.StatusNotFound:
							granted[i]++
						case http.StatusTooManyRequests:
						default:
							t.Errorf("DELETE: %d %s", r.Status, r.Body)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(t0)
			return granted, burst + rate*elapsed.Seconds()
		}

		granted, budget := hammer(0) // shared, every ratelimit.DefaultSync
		total := granted[0] + granted[1]
		t.Logf("shared: the replicas granted %d + %d = %d writes; the budget is %.0f", granted[0], granted[1], total, budget)
		if float64(total) > 1.4*budget {
			t.Errorf("two replicas granted %d writes of a budget of %.0f", total, budget)
		}
		if float64(total) < 0.7*budget {
			t.Errorf("two replicas granted %d writes of a budget of %.0f: fewer than the budget", total, budget)
		}
		if granted[0] == 0 || granted[1] == 0 {
			t.Errorf("one replica granted nothing: %v", granted)
		}

		// The control: not shared (--rate-limit-sync off), each grants the
		// whole budget.
		granted, budget = hammer(-1)
		total = granted[0] + granted[1]
		t.Logf("not shared: the replicas granted %d + %d = %d writes; the budget is %.0f", granted[0], granted[1], total, budget)
		if float64(total) < 1.7*budget {
			t.Errorf("not shared, two replicas granted %d writes of a budget of %.0f; want about twice", total, budget)
		}
	})
}

package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Reads runs `workers` clients fetching GET /v1/events?limit=100 at random
// cursors below head, for d.
func Reads(ctx context.Context, base, key string, head int64, workers int, d time.Duration) (Result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var (
		lat   latencies
		ops   atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	stop := time.Now().Add(d)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				after := r.Int64N(max(head-100, 1))
				req, _ := http.NewRequestWithContext(ctx, "GET",
					fmt.Sprintf("%s/v1/events?after_seq=%d&limit=100", base, after), nil)
				req.Header.Set("Authorization", "Bearer "+key)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					first.CompareAndSwap(nil, err)
					break
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || err != nil || len(body) < 100*200 {
					first.CompareAndSwap(nil, fmt.Errorf("read after_seq=%d: status %d, %d bytes (%v): %.300s", after, resp.StatusCode, len(body), err, body))
					break
				}
				mine = append(mine, time.Since(t0))
				ops.Add(1)
			}
			lat.add(mine)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := first.Load().(error); err != nil {
		return Result{}, err
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: int(ops.Load()), Elapsed: elapsed, P50: p50, P99: p99,
		Note: fmt.Sprintf("%d clients, 100 events a page, %d events stored", workers, head)}, nil
}

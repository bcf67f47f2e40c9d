// Package bench measures comm on the machine it runs on: the event log's
// appends and the REST API's reads, on SQLite and PostgreSQL. Load is
// generated in the same process, on loopback only, for a bounded time; it
// shares the CPU with what it measures.
package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one row of a benchmark table.
type Result struct {
	Name    string
	Engine  string
	Ops     int
	Elapsed time.Duration
	P50     time.Duration
	P99     time.Duration
	Note    string
}

// Rate returns operations per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// PrintTable writes results as a Markdown table.
func PrintTable(w io.Writer, rs []Result) {
	fmt.Fprintln(w, "| benchmark | engine | ops | ops/s | p50 | p99 | note |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %s | %s | %s |\n",
			r.Name, r.Engine, r.Ops, r.Rate(), ms(r.P50), ms(r.P99), r.Note)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// latencies collects per-operation latencies from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(ds []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, ds...)
	l.mu.Unlock()
}

func (l *latencies) percentiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.all)
	return quantile(l.all, 0.50), quantile(l.all, 0.99)
}

// quantile returns the q-quantile of sorted, 0 if it is empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// load runs `workers` goroutines for d, each calling the operation that
// newOp made for it in a loop and timing every call. The first error stops
// its worker and is returned; Note is left to the caller.
func load(workers int, d time.Duration, newOp func(w int) func() error) (Result, error) {
	var (
		lat   latencies
		ops   atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	stop := time.Now().Add(d)
	start := time.Now()
	for w := range workers {
		op := newOp(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				t0 := time.Now()
				if err := op(); err != nil {
					first.CompareAndSwap(nil, err)
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
	return Result{Ops: int(ops.Load()), Elapsed: elapsed, P50: p50, P99: p99}, nil
}

// payload is an event body of about 300 bytes of JSON, like a
// message.received.
func payload(i int) map[string]any {
	return map[string]any{
		"customer_id": "cus_01jd8x5m3r7q6y2b9v0c4k1n8t",
		"agent_id":    "agt_01jd8x5m3r7q6y2b9v0c4k1n8v",
		"message": map[string]any{
			"id":              fmt.Sprintf("msg_%026d", i),
			"conversation_id": "conv_01jd8x5m3r7q6y2b9v0c4k1n8w",
			"connection_id":   "conn_01jd8x5m3r7q6y2b9v0c4k1n8x",
			"channel":         "test",
			"sender":          "someone@example.com",
			"subject":         nil,
			"text":            strings.Repeat("hello ", 6),
			"html":            nil,
		},
	}
}

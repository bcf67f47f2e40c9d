package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// Reads runs `workers` clients fetching GET /v1/events?limit=100 at random
// cursors below head, for d.
func Reads(ctx context.Context, base, key string, head int64, workers int, d time.Duration) (Result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	r, err := load(workers, d, func(w int) func() error {
		rnd := rand.New(rand.NewPCG(uint64(w), 1))
		var buf bytes.Buffer // reused: the load generator shares the server's cores
		return func() error {
			after := rnd.Int64N(max(head-100, 1))
			req, _ := http.NewRequestWithContext(ctx, "GET",
				fmt.Sprintf("%s/v1/events?after_seq=%d&limit=100", base, after), nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			buf.Reset()
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			body := buf.Bytes()
			if resp.StatusCode != 200 || err != nil || len(body) < 100*200 {
				return fmt.Errorf("read after_seq=%d: status %d, %d bytes (%v): %.300s", after, resp.StatusCode, len(body), err, body)
			}
			return nil
		}
	})
	r.Note = fmt.Sprintf("%d clients, 100 events a page, %d events stored", workers, head)
	return r, err
}

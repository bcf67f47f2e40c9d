package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// SendUnderLimit queues n messages to one recipient of a connection at
// once (POST /v1/messages) and measures how fast they go out against a
// fake that enforces the provider's rate limit: the rate should sit at the
// limit, every message sent in order, with few refused calls. limited
// reports how many calls the fake refused with 429.
func SendUnderLimit(ctx context.Context, a *API, key, connID, to string, n int, limited func() int) (Result, error) {
	start := time.Now()
	ids := make([]string, n)
	for i := range n {
		var m struct {
			ID string `json:"id"`
		}
		body := map[string]string{"connection_id": connID, "to": to, "text": fmt.Sprintf("update %d of %d", i+1, n)}
		if code, err := a.Do(ctx, "POST", "/v1/messages", key, body, &m); err != nil || code != http.StatusAccepted && code != http.StatusCreated {
			return Result{}, fmt.Errorf("send %d: %d %v", i, code, err)
		}
		ids[i] = m.ID
	}
	for _, id := range ids {
		for {
			var m struct {
				Status string `json:"status"`
			}
			if _, err := a.Do(ctx, "GET", "/v1/messages/"+id, key, nil, &m); err != nil {
				return Result{}, err
			}
			if m.Status == "sent" {
				break
			}
			if m.Status == "failed" {
				return Result{}, fmt.Errorf("message %s failed", id)
			}
			if time.Since(start) > 3*time.Minute {
				return Result{}, fmt.Errorf("message %s still %s after 3 minutes", id, m.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	el := time.Since(start)
	return Result{Ops: n, Elapsed: el, Note: fmt.Sprintf("%d messages queued at once to one channel, all sent in %.1f s (%.2f/s); the fake refused %d call(s) with 429", n, el.Seconds(), float64(n)/el.Seconds(), limited())}, nil
}

package gateway_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestRetentionWorker: the retention worker StartWorkers runs (as serve
// does with --event-retention) deletes what is due, keeps the head, and
// counts the deletions in comm_log_deleted_events_total.
func TestRetentionWorker(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{})
	// Two hours on (an injected clock), with a retention of one.
	r := &stream.Retention{Keep: time.Hour, Every: 20 * time.Millisecond, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{
		Config:  gateway.Config{Metrics: m},
		Workers: &gateway.Workers{Retention: r},
	})
	scrapeSrv := httptest.NewServer(m.Handler())
	defer scrapeSrv.Close()
	resp := g.Do(t, gatewaytest.Request{Method: "POST", Path: "/v1/projects/sandbox", ContentType: "application/json", Body: `{"name":"retention"}`})
	if resp.Status != 201 {
		t.Fatalf("sandbox: %d %s", resp.Status, resp.Body)
	}
	var sb struct {
		ProjectID string `json:"project_id"`
	}
	if err := json.Unmarshal(resp.Body, &sb); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		if _, err := g.Log.Append(ctx, sb.ProjectID, stream.MessageSent, map[string]int{}); err != nil {
			t.Fatal(err)
		}
	}
	gatewaytest.WaitFor(t, "the retention worker", 10*time.Second, func() bool {
		earliest, err := g.Log.Earliest(ctx, sb.ProjectID)
		return err == nil && earliest == 5
	})
	gatewaytest.WaitFor(t, "comm_log_deleted_events_total", 10*time.Second, func() bool {
		return value(scrape(t, scrapeSrv.URL), "comm_log_deleted_events_total") == 4
	})
	if evs, err := g.Log.Read(ctx, sb.ProjectID, 4, 10, ""); err != nil || len(evs) != 1 || evs[0].Seq != 5 {
		t.Errorf("after the worker: %v, %v; want the head, seq 5", evs, err)
	}
}

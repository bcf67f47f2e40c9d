package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestHandler: /metrics serves the text exposition of what was counted
// and of the scrape-time gauges; a second Watch is ignored; the
// registries of two Metrics are apart.
func TestHandler(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) { testHandler(t, cfg) })
}

func testHandler(t *testing.T, cfg store.Config) {
	db, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := stream.Open(db, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := bench.CreateProjects(context.Background(), l, 1); err != nil {
		t.Fatal(err)
	}
	for _, per := range []bool{false, true} {
		m := metrics.New(metrics.Options{PerProject: per})
		m.Watch(db.R, nil)
		m.Watch(db.R, nil) // the second is ignored
		m.ObserveHTTP("GET /v1/project", 200, time.Millisecond)
		m.ObserveHTTP("", 404, time.Millisecond)
		m.Committed(3, 5, 1, 2*time.Millisecond)
		m.Sent("test", "sent")
		m.ProviderError("sms", "rate_limited")
		m.Refused("key_writes")
		m.WebhookAttempted("http_5xx", time.Second)
		srv := httptest.NewServer(m.Handler())
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		text := string(b)
		if got := strings.Contains(text, "comm_stream_head{project="); got != per {
			t.Errorf("PerProject %v: per-project heads shown: %v", per, got)
		}
		for _, want := range []string{
			`comm_http_requests_total{code="200",route="GET /v1/project"} 1`,
			`comm_http_requests_total{code="404",route="unmatched"} 1`,
			`comm_log_appended_events_total 5`,
			`comm_log_commits_total 1`,
			`comm_log_failed_writes_total 1`,
			`comm_log_commit_batch_size_bucket{le="4"} 1`,
			`comm_sends_total{channel="test",outcome="sent"} 1`,
			`comm_provider_errors_total{channel="sms",class="rate_limited"} 1`,
			`comm_ratelimit_refusals_total{bucket="key_writes"} 1`,
			`comm_webhook_attempts_total{outcome="http_5xx"} 1`,
			`comm_webhook_lag_events 0`,
			`comm_outbox_messages 0`,
			`comm_metrics_scrape_errors_total 0`,
			`go_goroutines`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("PerProject %v: no %q in\n%s", per, want, text)
			}
		}
	}
}

// The costs the hot paths pay per request and per group commit.
func BenchmarkObserveHTTP(b *testing.B) {
	m := metrics.New(metrics.Options{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveHTTP("POST /v1/connections/{id}/inbound", 201, 3*time.Millisecond)
		}
	})
}

func BenchmarkCommitted(b *testing.B) {
	m := metrics.New(metrics.Options{})
	for b.Loop() {
		m.Committed(64, 64, 0, 2*time.Millisecond)
	}
}

package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/webhook"
)

// TestMetrics: a gateway with metrics counts its HTTP requests by route
// and status (a websocket as 101), its log's commits, its webhook
// attempts, and reads the webhook lag, the outbox and the websockets at
// scrape; the exposition parses. Two gateways in one process have
// registries of their own.
func TestMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{})
	metrics.New(metrics.Options{}) // a second registry: no clash
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{
		Config: gateway.Config{Metrics: m, Webhook: webhook.Options{AllowPrivate: true},
			Server: server.Options{SandboxesPerHour: 1}},
		Workers: &gateway.Workers{Webhooks: &delivery.Webhooks{}, Outbox: &delivery.Outbox{}},
	})
	scrapeSrv := httptest.NewServer(m.Handler())
	defer scrapeSrv.Close()

	hooked := make(chan struct{}, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooked <- struct{}{}
	}))
	defer receiver.Close()

	post := func(method, path, key, body string, out any) {
		t.Helper()
		resp := g.Do(t, gatewaytest.Request{Method: method, Path: path, Key: key, ContentType: "application/json", Body: body})
		if resp.Status/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
		}
		if out != nil {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sb struct {
		Key string `json:"api_key"`
	}
	post(http.MethodPost, "/v1/projects/sandbox", "", `{"name":"metrics"}`, &sb)
	if resp := g.Do(t, gatewaytest.Request{Method: http.MethodPost, Path: "/v1/projects/sandbox", ContentType: "application/json", Body: `{"name":"two"}`}); resp.Status != http.StatusTooManyRequests {
		t.Fatalf("second sandbox: %d, want 429", resp.Status)
	}
	post(http.MethodPut, "/v1/webhook", sb.Key, `{"url":"`+receiver.URL+`"}`, nil)
	var conn struct {
		ID string `json:"id"`
	}
	post(http.MethodPost, "/v1/connections", sb.Key, `{"channel":"test"}`, &conn)
	var in struct {
		ID string `json:"id"`
	}
	for range 3 {
		post(http.MethodPost, "/v1/connections/"+conn.ID+"/inbound", sb.Key, `{"sender":"ann@example.com","text":"ping"}`, &in)
	}
	post(http.MethodPost, "/v1/messages/"+in.ID+"/reply", sb.Key, `{"text":"pong"}`, nil)
	post(http.MethodPost, "/v1/messages", sb.Key, `{"connection_id":"`+conn.ID+`","to":"fail-permanent","text":"ping"}`, nil)
	g.Do(t, gatewaytest.Request{Path: "/v1/connections/nope", Key: sb.Key}) // 404
	g.Do(t, gatewaytest.Request{Path: "/no/such/route"})
	select {
	case <-hooked:
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook delivery")
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(g.URL, "http")+"/graphql", http.Header{"Sec-WebSocket-Protocol": {"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()

	var fams map[string]*dto.MetricFamily
	gatewaytest.WaitFor(t, "webhook attempt counted", 10*time.Second, func() bool {
		fams = scrape(t, scrapeSrv.URL+"/metrics")
		return value(fams, "comm_webhook_attempts_total", "outcome", "ok") >= 1 &&
			value(fams, "comm_sends_total", "channel", "test", "outcome", "sent") == 1 &&
			value(fams, "comm_sends_total", "channel", "test", "outcome", "failed") == 1 &&
			value(fams, "comm_provider_errors_total", "channel", "test", "class", "permanent") == 1 &&
			value(fams, "comm_live_sockets") == 1
	})
	for _, c := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"comm_http_requests_total", []string{"route", "POST /v1/connections/{id}/inbound", "code", "201"}, 3},
		{"comm_http_requests_total", []string{"route", "POST /v1/projects/sandbox", "code", "201"}, 1},
		{"comm_http_requests_total", []string{"route", "GET /v1/connections/{id}", "code", "404"}, 1},
		{"comm_http_requests_total", []string{"route", "unmatched", "code", "404"}, 1},
		{"comm_http_requests_total", []string{"route", "GET /graphql", "code", "101"}, 1},
		{"comm_http_requests_total", []string{"route", "POST /v1/projects/sandbox", "code", "429"}, 1},
		{"comm_ratelimit_refusals_total", []string{"bucket", "sandboxes"}, 1},
		{"comm_log_appended_events_total", nil, 3},
		{"comm_log_commits_total", nil, 1},
		{"comm_webhook_endpoints", []string{"status", "active"}, 1},
		{"go_goroutines", nil, 1},
	} {
		if v := value(fams, c.name, c.labels...); v < c.min {
			t.Errorf("%s%v = %v, want >= %v", c.name, c.labels, v, c.min)
		}
	}
	if h := histogram(fams, "comm_http_request_duration_seconds", "route", "POST /v1/connections/{id}/inbound"); h == nil || h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 {
		t.Errorf("inbound latency histogram %v, want 3 samples", h)
	}
	if h := histogram(fams, "comm_log_commit_batch_size"); h == nil || h.GetSampleCount() < 1 {
		t.Errorf("batch size histogram %v", h)
	}
	for _, name := range []string{"comm_live_subscriptions", "comm_webhook_lag_events", "comm_webhook_lag_max_events", "comm_outbox_messages", "comm_live_queued_bytes"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "comm_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s has no comm_ prefix", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "project" {
					t.Errorf("%s has a project label without PerProject", name)
				}
			}
		}
	}
}

// TestMetricsOff: without metrics the gateway serves no /metrics (it is
// never on the API's listener) and counts nothing.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{})
	if resp := g.Do(t, gatewaytest.Request{Path: "/metrics"}); resp.Status != http.StatusNotFound {
		t.Errorf("GET /metrics on the API: %d, want 404", resp.Status)
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// find returns the series of name whose labels include the pairs given.
func find(fams map[string]*dto.MetricFamily, name string, pairs ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(pairs); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	m := find(fams, name, pairs...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

func histogram(fams map[string]*dto.MetricFamily, name string, pairs ...string) *dto.Histogram {
	if m := find(fams, name, pairs...); m != nil {
		return m.Histogram
	}
	return nil
}

// TestMetricsWebhookLag: events a failing receiver has not acknowledged
// show as lag (in total, at most, and per project with PerProject), and
// its attempts as http_5xx.
func TestMetricsWebhookLag(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{PerProject: true})
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{
		Config:  gateway.Config{Metrics: m, Webhook: webhook.Options{AllowPrivate: true}},
		Workers: &gateway.Workers{Webhooks: &delivery.Webhooks{}},
	})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer receiver.Close()
	scrapeSrv := httptest.NewServer(m.Handler())
	defer scrapeSrv.Close()
	post := func(method, path, key, body string, out any) {
		t.Helper()
		resp := g.Do(t, gatewaytest.Request{Method: method, Path: path, Key: key, ContentType: "application/json", Body: body})
		if resp.Status/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
		}
		if out != nil {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sb struct {
		Key       string `json:"api_key"`
		ProjectID string `json:"project_id"`
	}
	post(http.MethodPost, "/v1/projects/sandbox", "", `{"name":"lag"}`, &sb)
	post(http.MethodPut, "/v1/webhook", sb.Key, `{"url":"`+receiver.URL+`"}`, nil)
	var conn struct {
		ID string `json:"id"`
	}
	post(http.MethodPost, "/v1/connections", sb.Key, `{"channel":"test"}`, &conn)
	for range 2 {
		post(http.MethodPost, "/v1/connections/"+conn.ID+"/inbound", sb.Key, `{"sender":"ann@example.com","text":"ping"}`, nil)
	}
	var fams map[string]*dto.MetricFamily
	gatewaytest.WaitFor(t, "a failed attempt", 10*time.Second, func() bool {
		fams = scrape(t, scrapeSrv.URL+"/metrics")
		return value(fams, "comm_webhook_attempts_total", "outcome", "http_5xx") >= 1
	})
	lag := value(fams, "comm_webhook_lag_events")
	if lag < 2 || value(fams, "comm_webhook_lag_max_events") != lag {
		t.Errorf("lag %v, max %v; want at least the 2 messages' events", lag, value(fams, "comm_webhook_lag_max_events"))
	}
	if v := value(fams, "comm_webhook_project_lag_events", "project", sb.ProjectID); v != lag {
		t.Errorf("the project's lag %v, want %v", v, lag)
	}
	if v := value(fams, "comm_stream_head", "project", sb.ProjectID); v < lag {
		t.Errorf("the project's head %v, want at least %v", v, lag)
	}
}

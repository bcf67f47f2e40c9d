package main_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestServeMetrics: `comm serve --metrics-listen` serves Prometheus
// metrics on its own address, counting the API's requests; --help says it
// is off by default.
func TestServeMetrics(t *testing.T) {
	bin := binary(t)
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--metrics-listen", "COMM_METRICS_LISTEN", `default off`, "--metrics-per-project"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	// A free port for the metrics listener (its start line is not read).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := start(t, bin, t.TempDir(), "COMM_METRICS_LISTEN="+addr)
	defer p.stop(t)
	if code, body := call(t, "GET", p.base+"/healthz", "", ""); code != 200 {
		t.Fatalf("healthz: %d %s", code, body)
	}
	if code, _ := call(t, "GET", p.base+"/metrics", "", ""); code != 404 {
		t.Errorf("GET /metrics on the API listener: %d, want 404", code)
	}
	code, body := call(t, "GET", "http://"+addr+"/metrics", "", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, want := range []string{`comm_http_requests_total{code="200",route="GET /healthz"} 1`, "comm_outbox_messages 0", "comm_webhook_lag_events 0", "comm_live_sockets 0", "process_open_fds"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
}

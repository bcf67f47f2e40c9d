package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/stream"
)

// startMetrics serves Prometheus metrics on addr ("" or "off": none, and a
// nil *Metrics) until stop is called; line is the start-up line that says
// where.
func startMetrics(addr, perProject string, logger *slog.Logger) (m *metrics.Metrics, line string, stop func(), err error) {
	if addr == "" || addr == "off" {
		return nil, "", func() {}, nil
	}
	per, err := parseBool("--metrics-per-project", perProject)
	if err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("metrics listen: %w", err)
	}
	m = metrics.New(metrics.Options{PerProject: per, Logger: logger})
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener", "err", err)
		}
	}()
	return m, fmt.Sprintf("comm: metrics on http://%s/metrics\n", ln.Addr()), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// observer is m as the log's observer, or none (not a typed nil).
func observer(m *metrics.Metrics) stream.Observer {
	if m == nil {
		return nil
	}
	return m
}

// benchMetrics are the metrics of the gateway `comm bench --metrics`
// measures (a new one for each database it opens); nil without --metrics.
var benchMetrics *metrics.Metrics

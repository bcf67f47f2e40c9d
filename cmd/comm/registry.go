package main

import (
	"log/slog"
	"time"

	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

// benchGateway wires a gateway for the benchmarks: the abuse limits are
// off, as the load comes from one address and few keys.
func benchGateway(l *stream.Log, opts messaging.Options) (*gateway.Gateway, error) {
	return benchGatewayWith(l, gateway.Config{Service: opts})
}

// benchGatewayWith is benchGateway configured by cfg.
// benchWriteLimit is comm bench --write-limit: 0 off, -1 on and local,
// else on and shared every that long.
var benchWriteLimit time.Duration

func benchGatewayWith(l *stream.Log, cfg gateway.Config) (*gateway.Gateway, error) {
	cfg.Server.SandboxesPerHour, cfg.Server.WritesPerSecond = -1, -1
	cfg.RateLimitSync = -1
	if benchWriteLimit != 0 {
		// On, and never refusing: what it costs, not what it refuses.
		cfg.Server.WritesPerSecond, cfg.Server.WriteBurst = 1<<30, 1<<30
		cfg.RateLimitSync = max(benchWriteLimit, -1)
	}
	if cfg.Server.AccessLog == nil {
		cfg.Server.AccessLog = slog.New(slog.DiscardHandler) // a line per request would measure the terminal
	}
	if cfg.Metrics == nil {
		cfg.Metrics = benchMetrics
	}
	return gateway.New(l, cfg)
}

package main

import (
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/stream"
)

// benchGateway wires a gateway for the benchmarks: the abuse limits are
// off, as the load comes from one address and few keys.
func benchGateway(l *stream.Log, opts messaging.Options) (*gateway.Gateway, error) {
	return gateway.New(l, gateway.Config{Service: opts,
		Server: server.Options{SandboxesPerHour: -1, WritesPerSecond: -1}})
}

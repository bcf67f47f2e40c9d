package main

import (
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/testchan"
)

// registry is every channel comm knows, with the adapters built so far.
func registry() *channels.Registry {
	r := channels.NewRegistry(channels.Known()...)
	r.Add(testchan.Descriptor())
	return r
}

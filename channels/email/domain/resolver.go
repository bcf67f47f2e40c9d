package domain

import (
	"context"
	"net"
	"strings"
)

// Resolver is the part of *net.Resolver that Verify uses.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
}

var _ Resolver = (*net.Resolver)(nil)

// NewResolver returns a pure-Go resolver that sends every query, over UDP
// or TCP, to the DNS server at addr ("127.0.0.1:5353"; port 53 when
// omitted): the COMM_DNS_RESOLVER setting. An empty addr gives the system
// resolver.
func NewResolver(addr string) *net.Resolver {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return &net.Resolver{}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), "53")
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads a comma-separated list of CIDR ranges (or
// single addresses) of reverse proxies whose X-Forwarded-For is believed.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is neither an address nor a CIDR range", f)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range: %v", f, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// peerAddr is the address of the TCP peer of r.
func peerAddr(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor lists the addresses of the X-Forwarded-For headers of r,
// in order (the client first, the last proxy last); an entry that is not
// an address is invalid (the zero Addr).
func forwardedFor(r *http.Request) []netip.Addr {
	var out []netip.Addr
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for _, f := range strings.Split(h, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			a, err := netip.ParseAddr(f)
			if err != nil {
				// "[::1]:1234" or "1.2.3.4:5678" from some proxies.
				if ap, perr := netip.ParseAddrPort(f); perr == nil {
					a, err = ap.Addr(), nil
				}
			}
			if err != nil {
				out = append(out, netip.Addr{})
				continue
			}
			out = append(out, a.WithZone("").Unmap())
		}
	}
	return out
}

// clientIP is the address limits and logs go by: the TCP peer's, unless
// the peer is a trusted proxy; then the rightmost X-Forwarded-For address
// that is not a trusted proxy (what the nearest untrusted hop said cannot
// be believed further left). An unparsable entry stops the walk at the
// proxy that passed it on.
func (s *Server) clientIP(r *http.Request) string {
	peer, ok := peerAddr(r)
	if !ok {
		return r.RemoteAddr
	}
	if len(s.trusted) == 0 || !inAny(peer, s.trusted) {
		return peer.String()
	}
	client := peer
	fwd := forwardedFor(r)
	for i := len(fwd) - 1; i >= 0; i-- {
		a := fwd[i]
		if !a.IsValid() {
			break
		}
		client = a
		if !inAny(a, s.trusted) {
			break
		}
	}
	return client.String()
}

// limitKey is the budget a client IP draws on: the address itself for
// IPv4, its /64 for IPv6 (one subscriber usually holds a whole /64, so
// rotating addresses inside it must not buy a fresh budget).
func limitKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() {
		return ip
	}
	p, err := a.Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}

// proxyHeaders are the headers with which proxies say whom they forward.
var proxyHeaders = []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip", "Cf-Connecting-Ip"}

// fromLoopback reports whether r comes from this machine: its TCP peer is
// a loopback address and, if a proxy forwarded it, every address the
// request was forwarded for is loopback too. A forwarding header that
// cannot be read counts as remote, trusted proxies or not: a loopback
// reverse proxy in front of the gateway must not make the internet local.
func fromLoopback(r *http.Request) bool {
	peer, ok := peerAddr(r)
	if !ok || !peer.IsLoopback() {
		return false
	}
	for _, a := range forwardedFor(r) {
		if !a.IsValid() || !a.IsLoopback() {
			return false
		}
	}
	for _, h := range proxyHeaders[1:] {
		if len(r.Header.Values(h)) > 0 {
			return false
		}
	}
	return true
}

// Package dnstest runs an authoritative DNS server on 127.0.0.1 for tests:
// the domain verification and sender checks of email resolve against it.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server is an authoritative DNS server on 127.0.0.1 (UDP and TCP on the
// same port) serving an in-memory zone that tests edit between checks.
type Server struct {
	// Addr is the host:port the server answers on (UDP and TCP).
	Addr string

	mu          sync.Mutex
	rrs         map[string][]dns.RR // by lowercase FQDN
	servfail    bool
	truncateUDP bool
	queries     map[string]int // by network: "udp", "tcp"

	servers []*dns.Server
}

// Start starts a DNS server, stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	f := &Server{rrs: map[string][]dns.RR{}, queries: map[string]int{}}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 { // the UDP port must also be free for TCP
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("fake dns: no port free for both udp and tcp: %v", err)
	}
	f.Addr = pc.LocalAddr().String()
	f.servers = []*dns.Server{{PacketConn: pc, Handler: f}, {Listener: ln, Handler: f}}
	for _, s := range f.servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() {
			if err := s.ActivateAndServe(); err != nil {
				t.Errorf("fake dns: serve: %v", err)
			}
		}()
		<-started
	}
	t.Cleanup(f.Stop)
	return f
}

// Stop shuts the server down; queries then fail with connection refused.
func (f *Server) Stop() {
	f.mu.Lock()
	servers := f.servers
	f.servers = nil
	f.mu.Unlock()
	for _, s := range servers {
		s.Shutdown()
	}
}

// Publish adds records given as zone-file lines.
func (f *Server) Publish(t testing.TB, lines ...string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, line := range lines {
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("fake dns: bad record %q: %v", line, err)
		}
		name := strings.ToLower(rr.Header().Name)
		f.rrs[name] = append(f.rrs[name], rr)
	}
}

// Remove deletes every record of type typ at name.
func (f *Server) Remove(name string, typ uint16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name = strings.ToLower(dns.Fqdn(name))
	var keep []dns.RR
	for _, rr := range f.rrs[name] {
		if rr.Header().Rrtype != typ {
			keep = append(keep, rr)
		}
	}
	if len(keep) == 0 {
		delete(f.rrs, name)
	} else {
		f.rrs[name] = keep
	}
}

// SetServfail makes every answer SERVFAIL (or not).
func (f *Server) SetServfail(v bool) {
	f.mu.Lock()
	f.servfail = v
	f.mu.Unlock()
}

// SetTruncateUDP truncates UDP answers, so resolvers retry over TCP.
func (f *Server) SetTruncateUDP(v bool) {
	f.mu.Lock()
	f.truncateUDP = v
	f.mu.Unlock()
}

// Count returns the queries received over network ("udp", "tcp").
func (f *Server) Count(network string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[network]
}

// ServeDNS answers authoritatively: the records of the asked type, NODATA
// when the name has other types only, NXDOMAIN when it has none.
func (f *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	network := w.RemoteAddr().Network()
	f.queries[network]++

	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.RecursionAvailable = true
	switch {
	case len(req.Question) != 1:
		m.Rcode = dns.RcodeFormatError
	case f.servfail:
		m.Rcode = dns.RcodeServerFailure
	case f.truncateUDP && network == "udp":
		m.Truncated = true
	default:
		q := req.Question[0]
		rrs, ok := f.rrs[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
		if len(m.Answer) == 0 {
			soa, _ := dns.NewRR(". 3600 IN SOA ns.fake. host.fake. 1 3600 600 86400 60")
			m.Ns = append(m.Ns, soa)
		}
	}
	w.WriteMsg(m)
}

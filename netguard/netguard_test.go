package netguard_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/netguard"
)

// counter is a handler that answers "ok" and counts its requests.
type counter struct{ hits atomic.Int64 }

func (c *counter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.hits.Add(1)
	_, _ = io.WriteString(w, "ok")
}

// serve starts an httptest server on network ("tcp4" or "tcp6") loopback,
// skipping the test when that family is unavailable.
func serve(t *testing.T, network string, h http.Handler) *httptest.Server {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// withHost returns raw with its host name replaced, keeping the port.
func withHost(t *testing.T, raw, host string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

func get(t *testing.T, c *http.Client, raw string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, raw, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { _ = resp.Body.Close() })
	}
	return resp, err
}

func TestClientLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		network string
		host    string // replaces the server's host when set
	}{
		{name: "ipv4", network: "tcp4"},
		{name: "ipv6", network: "tcp6"},
		{name: "localhost", network: "tcp4", host: "localhost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &counter{}
			srv := serve(t, tc.network, h)
			target := srv.URL
			if tc.host != "" {
				target = withHost(t, target, tc.host)
			}

			_, err := get(t, netguard.NewClient(netguard.Options{}), target)
			if !errors.Is(err, netguard.ErrRefused) {
				t.Fatalf("GET %s without AllowPrivate: error %v, want ErrRefused", target, err)
			}
			if n := h.hits.Load(); n != 0 {
				t.Fatalf("refused request reached the server %d times", n)
			}

			resp, err := get(t, netguard.NewClient(netguard.Options{AllowPrivate: true}), target)
			if err != nil {
				t.Fatalf("GET %s with AllowPrivate: %v", target, err)
			}
			body, err := netguard.ReadBody(resp, netguard.BodyPrefix)
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Fatalf("GET %s with AllowPrivate = %d %q, %v; want 200 \"ok\"", target, resp.StatusCode, body, err)
			}
		})
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	target := &counter{}
	dst := serve(t, "tcp4", target)
	src := serve(t, "tcp4", http.RedirectHandler(dst.URL+"/elsewhere", http.StatusFound))

	resp, err := get(t, netguard.NewClient(netguard.Options{AllowPrivate: true}), src.URL)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want %d", resp.StatusCode, http.StatusFound)
	}
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, dst.URL) {
		t.Fatalf("Location %q, want the redirect target %s", loc, dst.URL)
	}
	if n := target.hits.Load(); n != 0 {
		t.Fatalf("redirect target was hit %d times, want 0", n)
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		sendHeaders bool // answer the headers at once, then stall the body
	}{
		{name: "slow headers"},
		{name: "slow body", sendHeaders: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.sendHeaders {
					_, _ = io.WriteString(w, "partial")
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			})
			srv := serve(t, "tcp4", slow)
			c := netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: 200 * time.Millisecond})

			resp, err := get(t, c, srv.URL)
			if err == nil {
				_, err = netguard.ReadBody(resp, netguard.BodyPrefix)
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("GET slow server: error %v, want a timeout", err)
			}
		})
	}
}

func TestClientTLS(t *testing.T) {
	t.Parallel()
	h := &counter{}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	tlsConfig := srv.Client().Transport.(*http.Transport).TLSClientConfig

	resp, err := get(t, netguard.NewClient(netguard.Options{AllowPrivate: true, TLSConfig: tlsConfig}), srv.URL)
	if err != nil {
		t.Fatalf("GET with the server's CA: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET with the server's CA: status %d, TLS %v; want 200 over TLS", resp.StatusCode, resp.TLS != nil)
	}

	_, err = get(t, netguard.NewClient(netguard.Options{TLSConfig: tlsConfig}), srv.URL)
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("GET without AllowPrivate: error %v, want ErrRefused", err)
	}

	_, err = get(t, netguard.NewClient(netguard.Options{AllowPrivate: true}), srv.URL)
	if err == nil || errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("GET without the server's CA: error %v, want a certificate error", err)
	}
	if n := h.hits.Load(); n != 1 {
		t.Fatalf("server hit %d times, want 1", n)
	}
}

// TestClientIgnoresProxyEnvironment sets the proxy variables to a live proxy
// and checks that requests still go straight to the target. Go never proxies
// loopback targets from the environment, so the target listens on a
// non-loopback interface address when the machine has one.
func TestClientIgnoresProxyEnvironment(t *testing.T) {
	proxy := &counter{}
	proxySrv := serve(t, "tcp4", proxy)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		t.Setenv(k, proxySrv.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	c := netguard.NewClient(netguard.Options{AllowPrivate: true})
	if tr, ok := c.Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Fatalf("transport %T has a proxy function, want none", c.Transport)
	}

	ip := interfaceIPv4(t)
	ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	target := &counter{}
	srv := httptest.NewUnstartedServer(target)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := get(t, c, srv.URL)
	if err != nil {
		t.Fatalf("GET %s: %v", srv.URL, err)
	}
	if resp.StatusCode != http.StatusOK || target.hits.Load() != 1 || proxy.hits.Load() != 0 {
		t.Fatalf("status %d, target hits %d, proxy hits %d; want 200, 1, 0",
			resp.StatusCode, target.hits.Load(), proxy.hits.Load())
	}
}

// interfaceIPv4 returns a non-loopback IPv4 address of this machine or skips.
func interfaceIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address")
	return ""
}

func TestReadBodyHugeResponse(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	huge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for i := 0; i < 32<<10; i++ { // up to 1 GiB
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	srv := serve(t, "tcp4", huge)

	resp, err := get(t, netguard.NewClient(netguard.Options{AllowPrivate: true}), srv.URL)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	body, err := netguard.ReadBody(resp, netguard.BodyPrefix)
	if err != nil {
		t.Fatalf("ReadBody: %v", err)
	}
	if len(body) != netguard.BodyPrefix {
		t.Fatalf("read %d bytes, want %d", len(body), netguard.BodyPrefix)
	}
	srv.Close() // waits for the handler, which stops once the client hung up
	if n := written.Load(); n >= 1<<30 {
		t.Fatalf("server wrote the whole %d-byte body", n)
	}
}

func ExampleNewClient() {
	u, err := netguard.CheckURL("https://hooks.example.com/comm", false)
	if err != nil {
		fmt.Println(err) // a *netguard.URLError: answer 400
		return
	}
	c := netguard.NewClient(netguard.Options{Timeout: 10 * time.Second})
	_ = c // c.Post(u.String(), ...); read the reply with netguard.ReadBody
	fmt.Println(u.Host)
	// Output: hooks.example.com
}

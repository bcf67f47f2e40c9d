package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefused is wrapped by the error of every connection the client from
// [NewClient] refuses to open, so callers can test for it with errors.Is.
var ErrRefused = errors.New("netguard: refused to connect to a private, loopback or link-local address")

// DefaultTimeout is the total time a request may take when
// [Options.Timeout] is zero.
const DefaultTimeout = 10 * time.Second

// Options configures [NewClient].
type Options struct {
	// AllowPrivate lets the client reach addresses that [Refused] reports,
	// such as loopback and private networks. Needed for tests and LAN
	// installs; off by default.
	AllowPrivate bool
	// Timeout bounds a whole request, from dialing to reading the last byte
	// of the body. Zero means [DefaultTimeout].
	Timeout time.Duration
	// TLSConfig, if set, is cloned and used for TLS connections, for example
	// to trust the certificate of an httptest.NewTLSServer. Nil means the
	// system roots with TLS 1.2 or later.
	TLSConfig *tls.Config
}

// NewClient returns an HTTP client for requests to user-supplied URLs. Its
// transport never uses a proxy (the environment is ignored), checks the
// address of every connection it opens after DNS resolution (each address
// Happy Eyeballs tries included) and, unless opts.AllowPrivate, refuses
// [Refused] addresses with an error wrapping [ErrRefused]. It sets connect,
// TLS handshake, response header and idle timeouts, and never follows a
// redirect: a 3xx response is returned to the caller as it is.
func NewClient(opts Options) *http.Client {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{
		Timeout:        min(timeout, 5*time.Second),
		KeepAlive:      30 * time.Second,
		ControlContext: control(opts.AllowPrivate),
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.TLSConfig != nil {
		tlsConfig = opts.TLSConfig.Clone()
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        tlsConfig,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    min(timeout, 5*time.Second),
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// control returns a dialer control function that runs just before each
// connect(2), with the resolved address, and refuses what it must.
func control(allowPrivate bool) func(context.Context, string, string, syscall.RawConn) error {
	return func(_ context.Context, network, address string, _ syscall.RawConn) error {
		switch network {
		case "tcp", "tcp4", "tcp6":
		default:
			return fmt.Errorf("netguard: dial %s %s: network not allowed: %w", network, address, ErrRefused)
		}
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("netguard: dial %s: unparsable address: %w", address, ErrRefused)
		}
		if Refused(ap.Addr()) {
			return fmt.Errorf("netguard: dial %s: %w", address, ErrRefused)
		}
		return nil
	}
}

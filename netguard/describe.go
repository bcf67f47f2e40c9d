package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Describe turns the error of a request made with a [NewClient] client into
// words a tenant may see: what went wrong, never an address the URL
// resolved to, nor the gateway's own addresses. Callers log the error
// itself for the operator.
func Describe(err error) string {
	var (
		dns   *net.DNSError
		netE  net.Error
		cert  *tls.CertificateVerificationError
		unkCA x509.UnknownAuthorityError
		host  x509.HostnameError
		inv   x509.CertificateInvalidError
		alert tls.AlertError
		rec   tls.RecordHeaderError
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrRefused):
		return "the URL resolves to a private or reserved address"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "the host name does not resolve"
		}
		if dns.IsTimeout {
			return "DNS lookup timed out"
		}
		return "DNS lookup failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netE) && netE.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &cert), errors.As(err, &unkCA), errors.As(err, &host), errors.As(err, &inv):
		return "TLS certificate not valid for the host"
	case errors.As(err, &alert), errors.As(err, &rec):
		return "TLS handshake failed"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the receiver"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "connection failed"
}

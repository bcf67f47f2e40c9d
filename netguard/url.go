package netguard

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the longest webhook URL [CheckURL] accepts, in bytes.
const MaxURLLength = 2048

// URLError reports why [CheckURL] rejected a webhook URL. It always means the
// caller supplied a bad URL, so a front door maps it to HTTP 400.
type URLError struct {
	// Reason says what is wrong, phrased to follow "webhook url", e.g.
	// "must use https". It never contains the URL itself.
	Reason string
}

// Error returns "webhook url " followed by the reason.
func (e *URLError) Error() string { return "webhook url " + e.Reason }

func urlErr(format string, args ...any) *URLError {
	return &URLError{Reason: fmt.Sprintf(format, args...)}
}

// CheckURL parses and validates a webhook URL at registration time. The URL
// must be absolute, use https (or http when allowPrivate is set), name a host,
// carry no credentials and no fragment, use a port from 1 to 65535 if it gives
// one, contain no spaces or control characters, and be at most [MaxURLLength]
// bytes long, before and after escaping. Unless allowPrivate is set, an IP
// literal host must not be [Refused] nor carry an IPv6 zone, and the host must
// not be "localhost" or a name under ".localhost". Hosts written as
// non-standard IPv4 numbers ("2130706433", "0x7f.1", "0177.0.0.1") are always
// rejected, and zones must name an interface.
//
// CheckURL cannot see what a hostname resolves to: the client from
// [NewClient] checks the actual address at every connection. Every error is a
// [*URLError].
func CheckURL(raw string, allowPrivate bool) (*url.URL, error) {
	if raw == "" {
		return nil, urlErr("is required")
	}
	if len(raw) > MaxURLLength {
		return nil, urlErr("must be at most %d bytes long", MaxURLLength)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return nil, urlErr("must not contain spaces or control characters")
	}
	if strings.Contains(raw, "#") {
		return nil, urlErr("must not contain a fragment (#...)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, urlErr("is not a valid url")
	}
	if !u.IsAbs() {
		return nil, urlErr("must be an absolute url starting with https://")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return nil, urlErr("must use https")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, urlErr("must include a host")
	}
	if u.User != nil {
		return nil, urlErr("must not contain credentials (user:pass@host)")
	}
	if err := checkPort(u); err != nil {
		return nil, err
	}
	if err := checkHost(u, allowPrivate); err != nil {
		return nil, err
	}
	// Escaping can lengthen the URL; what gets stored must fit too.
	if len(u.String()) > MaxURLLength {
		return nil, urlErr("must be at most %d bytes long", MaxURLLength)
	}
	return u, nil
}

// checkPort accepts no port or a number from 1 to 65535.
func checkPort(u *url.URL) *URLError {
	if strings.HasSuffix(u.Host, ":") {
		return urlErr("port must be a number from 1 to 65535")
	}
	p := u.Port()
	if p == "" {
		return nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return urlErr("port must be a number from 1 to 65535")
	}
	return nil
}

// checkHost validates the host as an IP literal or a DNS name.
func checkHost(u *url.URL, allowPrivate bool) *URLError {
	host := u.Hostname()
	if host == "" {
		return urlErr("must include a host")
	}
	bracketed := strings.HasPrefix(u.Host, "[")
	if ip, err := netip.ParseAddr(host); err == nil {
		if bracketed != ip.Is6() {
			return urlErr("host is not a valid ip address")
		}
		if z := ip.Zone(); z != "" && (!allowPrivate || !validZone(z)) {
			return urlErr("host must not carry an ipv6 zone (%%25...)")
		}
		if !allowPrivate && Refused(ip) {
			return urlErr("must not point to a private, loopback or link-local address")
		}
		return nil
	}
	if bracketed {
		return urlErr("host is not a valid ipv6 address")
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if err := checkName(name); err != nil {
		return err
	}
	if !allowPrivate && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		return urlErr("must not point to localhost")
	}
	return nil
}

// validZone accepts an IPv6 zone that names an interface by name or index.
func validZone(z string) bool {
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkName accepts an ASCII DNS name (punycode for international names)
// whose last label is not a number, so that no resolver can read it as an
// IPv4 address in decimal, octal or hex notation.
func checkName(name string) *URLError {
	if len(name) > 253 {
		return urlErr("host name is too long")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return urlErr("host is not a valid host name")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return urlErr("host is not a valid host name (use punycode for international names)")
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return urlErr("host must be a dotted-decimal ip address or a dns name")
	}
	return nil
}

// numeric reports whether a label is a decimal, octal or 0x-hex number, as
// the WHATWG URL standard and inet_aton would read it.
func numeric(l string) bool {
	if strings.HasPrefix(l, "0x") {
		l = l[2:]
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

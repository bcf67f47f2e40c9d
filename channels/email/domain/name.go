package domain

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/net/idna"
)

// ErrInvalidDomain is wrapped by every error Plan returns for a domain name
// (or a PlanConfig host name) that cannot be used. The rest of the message
// says why, in words fit to show the customer.
var ErrInvalidDomain = errors.New("invalid domain name")

// Length limits from RFC 1035, counted in the ASCII (punycode) form without
// the trailing dot.
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// reservedSuffixes are names that never resolve on the public internet
// (RFC 6761, RFC 6762) and so can never be verified.
var reservedSuffixes = []string{"localhost", "local", "invalid", "arpa"}

// NormalizeDomain checks that name is a registrable-looking DNS domain a
// customer can publish records under, and returns its canonical form:
// lowercase ASCII, internationalized labels in punycode (xn--), no trailing
// dot. Surrounding spaces and one trailing dot are accepted.
func NormalizeDomain(name string) (string, error) {
	raw := name
	name = strings.TrimSpace(name)
	name = strings.TrimSuffix(name, ".")
	invalid := func(reason string) error {
		return fmt.Errorf("domain: %w %q: %s", ErrInvalidDomain, raw, reason)
	}
	switch {
	case name == "":
		return "", invalid("the name is empty")
	case strings.Contains(name, "://") || strings.ContainsAny(name, "/?#"):
		return "", invalid("enter a bare domain name such as example.com, not a URL")
	case strings.Contains(name, "@"):
		return "", invalid("enter the domain name (example.com), not an email address")
	case isIP(name):
		return "", invalid("an IP address is not a domain name")
	case strings.Contains(name, ":"):
		return "", invalid("a domain name has no port")
	case strings.HasPrefix(name, "*"):
		return "", invalid("wildcards are not allowed; enter the domain itself")
	}
	ascii := strings.ToLower(name)
	if !isASCII(ascii) {
		converted, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", invalid("not a valid internationalized domain name")
		}
		ascii = converted
	}
	if len(ascii) > maxNameLen {
		return "", invalid(fmt.Sprintf("longer than %d characters", maxNameLen))
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", invalid("needs at least two labels, such as example.com")
	}
	for _, l := range labels {
		if err := checkLabel(l); err != "" {
			return "", invalid(err)
		}
	}
	tld := labels[len(labels)-1]
	if isDigits(tld) {
		return "", invalid("the last label cannot be all digits")
	}
	for _, s := range reservedSuffixes {
		if ascii == s || strings.HasSuffix(ascii, "."+s) {
			return "", invalid(fmt.Sprintf("%q names are reserved and cannot be published in public DNS", "."+s))
		}
	}
	// A punycode label must decode: reject xn--garbage.
	if strings.Contains(ascii, "xn--") {
		if _, err := idna.Lookup.ToUnicode(ascii); err != nil {
			return "", invalid("contains a punycode (xn--) label that does not decode")
		}
	}
	return ascii, nil
}

// checkLabel reports why l is not a valid host-name label, or "".
func checkLabel(l string) string {
	switch {
	case l == "":
		return "contains an empty label (two dots in a row, or a leading dot)"
	case len(l) > maxLabelLen:
		return fmt.Sprintf("label %q is longer than %d characters", l, maxLabelLen)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Sprintf("label %q starts or ends with a hyphen", l)
	case len(l) >= 4 && l[2:4] == "--" && !strings.HasPrefix(l, "xn--"):
		return fmt.Sprintf("label %q has hyphens in the third and fourth positions, reserved for xn-- labels", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Sprintf("label %q contains %q; use letters, digits and hyphens only", l, rune(c))
		}
	}
	return ""
}

// checkLabels checks a relative name such as a selector or "in".
func checkLabels(name string) string {
	for _, l := range strings.Split(name, ".") {
		if err := checkLabel(l); err != "" {
			return err
		}
	}
	return ""
}

func isIP(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if i := strings.IndexByte(s, '%'); i >= 0 { // IPv6 zone
		s = s[:i]
	}
	return net.ParseIP(s) != nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// sameHost compares two host names ignoring case and a trailing dot.
func sameHost(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

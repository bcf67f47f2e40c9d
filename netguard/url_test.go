package netguard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/netguard"
)

// anyError marks inputs that must be refused whether url.Parse or CheckURL
// itself catches them, so the exact message is not pinned.
const anyError = "\x00any"

func TestCheckURL(t *testing.T) {
	t.Parallel()
	long := "https://example.com/" + strings.Repeat("a", netguard.MaxURLLength)
	exact := "https://example.com/" + strings.Repeat("a", netguard.MaxURLLength-len("https://example.com/"))
	tests := []struct {
		raw           string
		strict, loose string // expected error substring with !allowPrivate / allowPrivate; "" = accepted
	}{
		// Good URLs.
		{raw: "https://example.com/hook", strict: "", loose: ""},
		{raw: "https://hooks.example.com:8443/a/b?x=1&y=2", strict: "", loose: ""},
		{raw: "https://EXAMPLE.com./hook", strict: "", loose: ""},
		{raw: "HTTPS://example.com", strict: "", loose: ""},
		{raw: "https://xn--bcher-kva.example/hook", strict: "", loose: ""},
		{raw: "https://my_host.example.com/", strict: "", loose: ""},
		{raw: "https://93.184.216.34/hook", strict: "", loose: ""},
		{raw: "https://[2606:2800:220:1:248:1893:25c8:1946]/hook", strict: "", loose: ""},
		{raw: "https://example.com:65535/", strict: "", loose: ""},
		{raw: exact, strict: "", loose: ""},
		// Scheme.
		{raw: "http://example.com/hook", strict: "must use https", loose: ""},
		{raw: "javascript:alert(1)", strict: "must use https", loose: "must use https"},
		{raw: "ftp://example.com/file", strict: "must use https", loose: "must use https"},
		{raw: "file:///etc/passwd", strict: "must use https", loose: "must use https"},
		{raw: "gopher://127.0.0.1:6379/_", strict: "must use https", loose: "must use https"},
		// Shape.
		{raw: "", strict: "is required", loose: "is required"},
		{raw: "/hook", strict: "absolute", loose: "absolute"},
		{raw: "example.com/hook", strict: "absolute", loose: "absolute"},
		{raw: "//example.com/hook", strict: "absolute", loose: "absolute"},
		{raw: "https://", strict: "must include a host", loose: "must include a host"},
		{raw: "https:///hook", strict: "must include a host", loose: "must include a host"},
		{raw: "https://:443/hook", strict: "must include a host", loose: "must include a host"},
		{raw: "https:example.com", strict: "must include a host", loose: "must include a host"},
		{raw: "https://user:pass@example.com/", strict: "credentials", loose: "credentials"},
		{raw: "https://user@example.com/", strict: "credentials", loose: "credentials"},
		{raw: "https://@example.com/", strict: "credentials", loose: "credentials"},
		{raw: `https://example.com\@127.0.0.1/`, strict: anyError, loose: anyError},
		{raw: "https://example.com/hook#frag", strict: "fragment", loose: "fragment"},
		{raw: "https://example.com/#", strict: "fragment", loose: "fragment"},
		{raw: "https://example.com:0/", strict: "port", loose: "port"},
		{raw: "https://example.com:65536/", strict: "port", loose: "port"},
		{raw: "https://example.com:99999999999/", strict: anyError, loose: anyError},
		{raw: "https://example.com:/", strict: "port", loose: "port"},
		{raw: "https://example.com:https/", strict: anyError, loose: anyError},
		{raw: long, strict: "at most", loose: "at most"},
		{raw: "https://exa mple.com/", strict: "spaces", loose: "spaces"},
		{raw: "https://example.com/a b", strict: "spaces", loose: "spaces"},
		{raw: "https://example.com/a\tb", strict: "spaces", loose: "spaces"},
		{raw: "https://example.com/\x7f", strict: "spaces", loose: "spaces"},
		{raw: " https://example.com/", strict: "spaces", loose: "spaces"},
		{raw: "https://example.com/é", strict: "", loose: ""},
		// Found by FuzzCheckURL: under the limit raw, over it once escaped.
		{raw: "https://a/" + strings.Repeat("\xa2", 1000), strict: "at most", loose: "at most"},
		{raw: "https://example..com/", strict: "host", loose: "host"},
		{raw: "https://.example.com/", strict: "host", loose: "host"},
		{raw: "https://ex%41mple.com/", strict: anyError, loose: anyError},
		{raw: "https://bücher.example/", strict: "punycode", loose: "punycode"},
		{raw: "https://" + strings.Repeat("a", 64) + ".com/", strict: "host", loose: "host"},
		{raw: "https://[example.com]/", strict: anyError, loose: anyError},
		{raw: "https://[1.2.3.4]/", strict: anyError, loose: anyError},
		// IP literals in refused ranges.
		{raw: "https://127.0.0.1/hook", strict: "private", loose: ""},
		{raw: "https://127.1.2.3:8443/hook", strict: "private", loose: ""},
		{raw: "https://10.0.0.1/hook", strict: "private", loose: ""},
		{raw: "https://172.16.0.1/hook", strict: "private", loose: ""},
		{raw: "https://192.168.1.1/hook", strict: "private", loose: ""},
		{raw: "https://169.254.169.254/latest/meta-data/", strict: "private", loose: ""},
		{raw: "https://100.64.0.1/hook", strict: "private", loose: ""},
		{raw: "https://0.0.0.0/hook", strict: "private", loose: ""},
		{raw: "https://255.255.255.255/hook", strict: "private", loose: ""},
		{raw: "https://[::1]/hook", strict: "private", loose: ""},
		{raw: "https://[::1]:8443/hook", strict: "private", loose: ""},
		{raw: "https://[::]/hook", strict: "private", loose: ""},
		{raw: "https://[::ffff:127.0.0.1]/hook", strict: "private", loose: ""},
		{raw: "https://[::ffff:7f00:1]/hook", strict: "private", loose: ""},
		{raw: "https://[::ffff:169.254.169.254]/hook", strict: "private", loose: ""},
		{raw: "https://[64:ff9b::10.0.0.1]/hook", strict: "private", loose: ""},
		{raw: "https://[fe80::1]/hook", strict: "private", loose: ""},
		{raw: "https://[fe80::1%25eth0]/hook", strict: "zone", loose: ""},
		{raw: "https://[2606:4700::1%25eth0]/hook", strict: "zone", loose: ""},
		{raw: "http://[::%25\x80]/", strict: "must use https", loose: "zone"}, // found by FuzzCheckURL
		{raw: "https://[fd00::1]/hook", strict: "private", loose: ""},
		{raw: "http://127.0.0.1:8080/hook", strict: "must use https", loose: ""},
		// Localhost names.
		{raw: "https://localhost/hook", strict: "localhost", loose: ""},
		{raw: "https://LOCALHOST:8443/hook", strict: "localhost", loose: ""},
		{raw: "https://localhost./hook", strict: "localhost", loose: ""},
		{raw: "https://api.localhost/hook", strict: "localhost", loose: ""},
		{raw: "https://notlocalhost.example/hook", strict: "", loose: ""},
		// Non-standard IPv4 notations are never accepted.
		{raw: "https://2130706433/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://0x7f000001/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://0177.0.0.1/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://127.1/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://0x7f.0x0.0x0.0x1/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://1.2.3.4.5/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://host.0x/hook", strict: "dotted-decimal", loose: "dotted-decimal"},
		{raw: "https://123.example/hook", strict: "", loose: ""},
	}
	for _, tc := range tests {
		for _, allow := range []bool{false, true} {
			want := tc.strict
			if allow {
				want = tc.loose
			}
			u, err := netguard.CheckURL(tc.raw, allow)
			if err != nil {
				var ue *netguard.URLError
				if !errors.As(err, &ue) {
					t.Errorf("CheckURL(%q, %v) error %T %v, want *URLError", tc.raw, allow, err, err)
				}
				if !strings.HasPrefix(err.Error(), "webhook url ") {
					t.Errorf("CheckURL(%q, %v) error %q, want prefix %q", tc.raw, allow, err, "webhook url ")
				}
			}
			switch {
			case want == anyError:
				if err == nil {
					t.Errorf("CheckURL(%q, %v) = %v, want an error", tc.raw, allow, u)
				}
			case want == "":
				if err != nil {
					t.Errorf("CheckURL(%q, %v) error %v, want accepted", tc.raw, allow, err)
				} else if u == nil || u.Hostname() == "" {
					t.Errorf("CheckURL(%q, %v) = %v, want a URL with a host", tc.raw, allow, u)
				}
			case err == nil:
				t.Errorf("CheckURL(%q, %v) accepted, want error containing %q", tc.raw, allow, want)
			case !strings.Contains(err.Error(), want):
				t.Errorf("CheckURL(%q, %v) error %q, want it to contain %q", tc.raw, allow, err, want)
			}
		}
	}
}

func TestURLErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := netguard.CheckURL("http://example.com/", false)
	if got, want := err.Error(), "webhook url must use https"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	_, err = netguard.CheckURL("https://alice:secret@example.com/", false)
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %q echoes the credentials", err)
	}
}

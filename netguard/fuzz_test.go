package netguard_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/netguard"
)

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook",
		"https://example.com:8443/a?b=c",
		"http://example.com/",
		"https://93.184.216.34/",
		"https://127.0.0.1/",
		"https://[::1]:443/",
		"https://[::ffff:127.0.0.1]/",
		"https://[fe80::1%25eth0]/",
		"https://169.254.169.254/latest/meta-data",
		"https://localhost/",
		"https://a.localhost./",
		"https://user:pass@example.com/",
		"https://example.com/#frag",
		"https://example.com:0/",
		"https://example.com:/",
		"https://2130706433/",
		"https://0x7f.1/",
		"https:example.com",
		"//example.com",
		"javascript:alert(1)",
		`https://example.com\@127.0.0.1/`,
		"https://%31%32%37.0.0.1/",
		"",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allowPrivate bool) {
		u, err := netguard.CheckURL(raw, allowPrivate)
		if err != nil {
			var ue *netguard.URLError
			if !errors.As(err, &ue) || u != nil {
				t.Fatalf("CheckURL(%q) = %v, %T; want nil, *URLError", raw, u, err)
			}
			return
		}
		if u.Scheme != "https" && !(u.Scheme == "http" && allowPrivate) {
			t.Fatalf("CheckURL(%q, %v) accepted scheme %q", raw, allowPrivate, u.Scheme)
		}
		host := u.Hostname()
		if host == "" || u.User != nil || u.Fragment != "" || len(raw) > netguard.MaxURLLength {
			t.Fatalf("CheckURL(%q, %v) accepted %#v", raw, allowPrivate, u)
		}
		if !allowPrivate {
			if ip, err := netip.ParseAddr(host); err == nil && netguard.Refused(ip) {
				t.Fatalf("CheckURL(%q) accepted refused address %s", raw, ip)
			}
			name := strings.ToLower(strings.TrimSuffix(host, "."))
			if name == "localhost" || strings.HasSuffix(name, ".localhost") {
				t.Fatalf("CheckURL(%q) accepted localhost", raw)
			}
			if _, err := netguard.CheckURL(raw, true); err != nil {
				t.Fatalf("CheckURL(%q) accepted without allowPrivate but not with it: %v", raw, err)
			}
		}
		// What was accepted is stable: its string form is accepted again.
		if _, err := netguard.CheckURL(u.String(), allowPrivate); err != nil {
			t.Fatalf("CheckURL(%q) accepted, but not its string form %q: %v", raw, u, err)
		}
	})
}

func FuzzRefused(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "10.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
		"255.255.255.255", "8.8.8.8", "192.0.2.1", "::1", "::", "fe80::1%eth0",
		"fd00::1", "ff02::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::",
		"2606:4700:4700::1111", "not an address",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{8, 8, 8, 8})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ip, ok := netip.AddrFromSlice(b); ok {
			check(t, ip)
		}
		if ip, err := netip.ParseAddr(string(b)); err == nil {
			check(t, ip)
		}
	})
}

// check asserts that every IPv6 form of an IPv4 address gets the same answer.
func check(t *testing.T, ip netip.Addr) {
	t.Helper()
	got := netguard.Refused(ip)
	if ip.Is4In6() {
		if v4 := netguard.Refused(ip.Unmap()); got != v4 {
			t.Fatalf("Refused(%s) = %v, but its IPv4 form says %v", ip, got, v4)
		}
	}
	if ip.Zone() != "" && got != netguard.Refused(ip.WithZone("")) {
		t.Fatalf("Refused(%s) depends on the zone", ip)
	}
	if !ip.Is4() {
		return
	}
	v4 := ip.As4()
	var nat64 [16]byte
	copy(nat64[:], []byte{0, 0x64, 0xff, 0x9b})
	copy(nat64[12:], v4[:])
	forms := map[string]netip.Addr{
		"mapped": netip.AddrFrom16(ip.As16()),
		"nat64":  netip.AddrFrom16(nat64),
	}
	for name, form := range forms {
		if r := netguard.Refused(form); r != got {
			t.Fatalf("Refused(%s) = %v, but its %s form %s says %v", ip, got, name, form, r)
		}
	}
}

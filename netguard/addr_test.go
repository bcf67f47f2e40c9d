package netguard_test

import (
	"net/netip"
	"testing"

	"github.com/comm-gateway/comm/netguard"
)

func TestRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr    string
		refused bool
	}{
		// Loopback.
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		// Private.
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"::ffff:192.168.1.1", true},
		// Link-local and cloud metadata.
		{"169.254.0.1", true},
		{"169.254.169.254", true},
		{"::ffff:169.254.169.254", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf:ffff::1", true},
		{"fec0::1", true},
		// CGNAT.
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		// Unique local.
		{"fc00::1", true},
		{"fd00::2", true},
		{"fdff:ffff::1", true},
		// Unspecified and "this network".
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"::", true},
		{"::ffff:0.0.0.0", true},
		// Multicast, broadcast, reserved.
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"ff0e::1", true},
		{"255.255.255.255", true},
		{"240.0.0.1", true},
		{"::ffff:255.255.255.255", true},
		// IETF protocol assignments, benchmarking.
		{"192.0.0.1", true},
		{"192.0.0.170", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		// Deprecated IPv4-compatible, discard-only.
		{"::127.0.0.1", true},
		{"::8.8.8.8", true},
		{"100::1", true},
		// NAT64, SIIT, 6to4 and Teredo embedding refused IPv4.
		{"64:ff9b::127.0.0.1", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b::10.0.0.1", true},
		{"64:ff9b:1::1", true},
		{"::ffff:0:127.0.0.1", true},
		{"2002:7f00:1::1", true},
		{"2002:a9fe:a9fe::", true},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", true}, // Teredo client 127.0.0.1
		// Public addresses stay allowed.
		{"1.1.1.1", false},
		{"8.8.8.8", false},
		{"93.184.216.34", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"169.253.255.255", false},
		{"192.0.1.1", false},
		{"198.17.255.255", false},
		{"198.20.0.0", false},
		{"223.255.255.255", false},
		{"::ffff:8.8.8.8", false},
		{"2606:4700:4700::1111", false},
		{"2a00:1450:4001:81b::200e", false},
		{"64:ff9b::8.8.8.8", false},
		{"2002:808:808::1", false},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", false}, // Teredo client 8.8.8.8
		// Documentation ranges may stay allowed.
		{"192.0.2.1", false},
		{"198.51.100.1", false},
		{"203.0.113.1", false},
		{"2001:db8::1", false},
	}
	for _, tc := range tests {
		ip := netip.MustParseAddr(tc.addr)
		if got := netguard.Refused(ip); got != tc.refused {
			t.Errorf("Refused(%s) = %v, want %v", tc.addr, got, tc.refused)
		}
	}
	if !netguard.Refused(netip.Addr{}) {
		t.Errorf("Refused(zero Addr) = false, want true")
	}
}

package netguard

import "net/netip"

// refusedPrefixes are the address ranges a webhook may never reach unless the
// operator allows private targets. IPv4-mapped IPv6 addresses are unmapped
// before the check, so the IPv4 ranges cover them too.
var refusedPrefixes = []netip.Prefix{
	// IPv4.
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", includes unspecified 0.0.0.0
	netip.MustParsePrefix("10.0.0.0/8"),     // private
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, includes 169.254.169.254 cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),  // private
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"), // private
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, includes broadcast 255.255.255.255
	// IPv6.
	netip.MustParsePrefix("::/96"),          // unspecified ::, loopback ::1, deprecated IPv4-compatible
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

// embedding is an IPv6 range whose addresses carry an IPv4 address that the
// packets are eventually delivered to.
type embedding struct {
	prefix netip.Prefix
	offset int  // index of the first IPv4 byte in the 16-byte address
	invert bool // Teredo stores the client address with every bit flipped
}

// embeddings are the translation and tunnelling ranges checked through the
// IPv4 address they embed.
var embeddings = []embedding{
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), offset: 12},            // NAT64 well-known prefix
	{prefix: netip.MustParsePrefix("::ffff:0:0:0/96"), offset: 12},         // SIIT IPv4-translated
	{prefix: netip.MustParsePrefix("2002::/16"), offset: 2},                // 6to4
	{prefix: netip.MustParsePrefix("2001::/32"), offset: 12, invert: true}, // Teredo client
}

// Refused reports whether ip lies in a range an outbound webhook must not
// reach: loopback, private, link-local (including cloud metadata at
// 169.254.169.254), carrier-grade NAT, unique local, unspecified, multicast,
// broadcast, reserved and benchmarking ranges, and any IPv6 form that maps,
// translates or tunnels to such an IPv4 address (::ffff:127.0.0.1,
// 64:ff9b::7f00:1, 2002:7f00:1::). Documentation ranges are allowed. An
// invalid address is refused.
func Refused(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	// Prefix.Contains is false for any address with a zone, so drop it.
	ip = ip.WithZone("").Unmap()
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	if !ip.Is6() {
		return false
	}
	b := ip.As16()
	for _, e := range embeddings {
		if !e.prefix.Contains(ip) {
			continue
		}
		var v4 [4]byte
		copy(v4[:], b[e.offset:e.offset+4])
		if e.invert {
			for i := range v4 {
				v4[i] ^= 0xff
			}
		}
		if Refused(netip.AddrFrom4(v4)) {
			return true
		}
	}
	return false
}

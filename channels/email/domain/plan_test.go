package domain

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()
	good := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"  mail.example.co.uk ", "mail.example.co.uk"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"BÜCHER.de", "xn--bcher-kva.de"},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"a-b.example.com", "a-b.example.com"},
		{"123.example.com", "123.example.com"},
		{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},
	}
	for _, tc := range good {
		got, err := NormalizeDomain(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}

	long := strings.Repeat(strings.Repeat("a", 60)+".", 4) + "com" // 247 + ... > 253
	long = strings.Repeat("b", 10) + "." + long
	bad := []struct{ in, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"com", "at least two labels"},
		{"localhost", "at least two labels"},
		{"printer.local", "reserved"},
		{"foo.localhost", "reserved"},
		{"1.in-addr.arpa", "reserved"},
		{"192.0.2.1", "IP address"},
		{"::1", "IP address"},
		{"[2001:db8::1]", "IP address"},
		{"example.com:25", "no port"},
		{"https://example.com", "not a URL"},
		{"example.com/path", "not a URL"},
		{"user@example.com", "not an email address"},
		{"*.example.com", "wildcards"},
		{"exa mple.com", "letters, digits and hyphens"},
		{"exa_mple.com", "letters, digits and hyphens"},
		{"-example.com", "hyphen"},
		{"example-.com", "hyphen"},
		{"a..com", "empty label"},
		{".example.com", "empty label"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{long, "longer than 253"},
		{"example.123", "all digits"},
		{"ab--cd.com", "third and fourth"},
		{"xn--zz.com", "punycode"},
		{"bad\u200d.com", "internationalized"},
	}
	for _, tc := range bad {
		got, err := NormalizeDomain(tc.in)
		if err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want an error about %q", tc.in, got, tc.why)
			continue
		}
		if !errors.Is(err, ErrInvalidDomain) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("NormalizeDomain(%q): %v; want ErrInvalidDomain mentioning %q", tc.in, err, tc.why)
		}
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	recs, err := Plan("Example.com", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if recs.Domain != "example.com" || recs.InboundDomain != "in.example.com" || recs.Selector != DefaultSelector {
		t.Fatalf("records %+v", recs)
	}
	want := []struct {
		kind     Kind
		typ      string
		name     string
		value    string
		required bool
	}{
		{Ownership, TypeTXT, "_comm-verify.example.com", recs.Token, true},
		{SPF, TypeTXT, "example.com", "v=spf1 include:spf.comm.example ~all", true},
		{DKIM, TypeTXT, "comm._domainkey.example.com", "v=DKIM1; k=rsa; p=", true},
		{DMARC, TypeTXT, "_dmarc.example.com", "v=DMARC1; p=none; rua=mailto:dmarc@comm.example", false},
		{Inbound, TypeMX, "in.example.com", "mx.comm.example", true},
	}
	if len(recs.Records) != len(want) {
		t.Fatalf("%d records, want %d", len(recs.Records), len(want))
	}
	for i, w := range want {
		r := recs.Records[i]
		if r.Kind != w.kind || r.Type != w.typ || r.Name != w.name || !strings.HasPrefix(r.Value, w.value) || r.Required != w.required || r.Purpose == "" {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
		// Every record is a valid zone-file line.
		rr, err := dns.NewRR(r.ZoneLine())
		if err != nil {
			t.Errorf("%s: zone line %q: %v", r.Kind, r.ZoneLine(), err)
			continue
		}
		if txt, ok := rr.(*dns.TXT); ok {
			for _, s := range txt.Txt {
				if len(s) > 255 {
					t.Errorf("%s: TXT string of %d bytes", r.Kind, len(s))
				}
			}
			if strings.Join(txt.Txt, "") != r.Value {
				t.Errorf("%s: zone line does not join back to the value", r.Kind)
			}
		}
	}
	if !strings.Contains(recs.Records[1].Purpose, "merge") && !strings.Contains(recs.Records[1].Purpose, "add include:") {
		t.Errorf("SPF purpose gives no merge guidance: %q", recs.Records[1].Purpose)
	}
	if len(recs.Token) < 30 {
		t.Errorf("token %q too short", recs.Token)
	}

	// The DKIM record publishes the public half of the returned private key.
	signer, err := ParsePrivateKey(recs.DKIMPrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !signer.(*rsa.PrivateKey).Equal(cfg.Key) {
		t.Error("private key PEM is not the configured key")
	}
	dk, _ := recs.Get(DKIM)
	der, err := base64.StdEncoding.DecodeString(dk.Value[strings.Index(dk.Value, "p=")+2:])
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil || !cfg.Key.PublicKey.Equal(pub) {
		t.Errorf("DKIM p= is not the key's public half: %v", err)
	}

	// The private key never leaves in JSON.
	j, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(j), "PRIVATE") {
		t.Error("private key marshalled to JSON")
	}

	// Tokens are random.
	again, err := Plan("example.com", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Token == recs.Token {
		t.Error("two plans share a token")
	}
}

func TestPlanGeneratesKey(t *testing.T) {
	t.Parallel()
	recs, err := Plan("example.com", PlanConfig{SPFInclude: "spf.comm.example", Selector: "S2026"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ParsePrivateKey(recs.DKIMPrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if bits := signer.(*rsa.PrivateKey).N.BitLen(); bits != DKIMKeyBits {
		t.Errorf("key of %d bits", bits)
	}
	if _, ok := recs.Get(Inbound); ok || recs.InboundDomain != "" {
		t.Error("MX planned without an MX host")
	}
	if dk, _ := recs.Get(DKIM); dk.Name != "s2026._domainkey.example.com" {
		t.Errorf("DKIM name %q", dk.Name)
	}
	if dm, _ := recs.Get(DMARC); dm.Value != "v=DMARC1; p=none" {
		t.Errorf("DMARC value %q", dm.Value)
	}
}

func TestPlanRefuses(t *testing.T) {
	t.Parallel()
	k, _ := keys(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	base := func() PlanConfig {
		return PlanConfig{SPFInclude: "spf.comm.example", MXHost: "mx.comm.example", Key: k}
	}
	tests := []struct {
		name   string
		domain string
		cfg    func(c *PlanConfig)
		why    string
	}{
		{"bad domain", "192.0.2.1", func(*PlanConfig) {}, "IP address"},
		{"no SPF include", "example.com", func(c *PlanConfig) { c.SPFInclude = "" }, "SPF include host is not configured"},
		{"bad SPF include", "example.com", func(c *PlanConfig) { c.SPFInclude = "spf_host" }, "SPF include host"},
		{"bad MX host", "example.com", func(c *PlanConfig) { c.MXHost = "1.2.3.4" }, "MX host"},
		{"bad selector", "example.com", func(c *PlanConfig) { c.Selector = "a_b" }, "DKIM selector"},
		{"bad subdomain", "example.com", func(c *PlanConfig) { c.InboundSubdomain = "in box" }, "inbound subdomain"},
		{"derived name too long", strings.Repeat(strings.Repeat("a", 62)+".", 3) + strings.Repeat("b", 50) + ".com", func(*PlanConfig) {}, "too long"},
	}
	for _, tc := range tests {
		c := base()
		tc.cfg(&c)
		_, err := Plan(tc.domain, c)
		if !errors.Is(err, ErrInvalidDomain) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v; want ErrInvalidDomain mentioning %q", tc.name, err, tc.why)
		}
	}
	c := base()
	c.Key = small
	if _, err := Plan("example.com", c); err == nil || !strings.Contains(err.Error(), "at least 2048") {
		t.Errorf("1024-bit key: %v", err)
	}
}

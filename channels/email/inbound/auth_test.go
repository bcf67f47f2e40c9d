package inbound

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// signer signs messages for domain with a fresh Ed25519 key and publishes
// the key in dns.
type signer struct {
	domain string
	key    ed25519.PrivateKey
}

func newSigner(t *testing.T, domain string, dns fakeDNS) signer {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dns["sel1._domainkey."+domain] = []string{"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)}
	return signer{domain: domain, key: key}
}

func (s signer) sign(t *testing.T, raw string) string {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, strings.NewReader(raw), &dkim.SignOptions{
		Domain:     s.domain,
		Selector:   "sel1",
		Signer:     s.key,
		HeaderKeys: []string{"From", "To", "Subject", "Message-ID"},
	})
	if err != nil {
		t.Fatalf("dkim.Sign: %v", err)
	}
	return out.String()
}

func TestAuthenticator(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{"_dmarc.example.com": {"v=DMARC1; p=reject"}}
	own := newSigner(t, "example.com", dns)
	other := newSigner(t, "mailer.test", dns)
	signed := own.sign(t, plainMsg)

	tests := []struct {
		name      string
		resolver  Resolver
		raw       string
		dkim      Verdict
		sigs      []Verdict
		dmarc     Verdict
		dmarcPol  string
		hasReason bool
	}{
		{"signed and aligned", dns, signed, Pass, []Verdict{Pass}, Pass, "reject", false},
		{"tampered body", dns, strings.Replace(signed, "plain note", "plain NOTE", 1), Fail, []Verdict{Fail}, Fail, "reject", false},
		{"tampered subject", dns, strings.Replace(signed, "Hello there", "Pay now", 1), Fail, []Verdict{Fail}, Fail, "reject", false},
		{"signed by another domain", dns, other.sign(t, plainMsg), Pass, []Verdict{Pass}, Fail, "reject", false},
		{"key not published", fakeDNS{}, signed, PermError, []Verdict{PermError}, None, "", false},
		{"unsigned", dns, plainMsg, None, nil, Fail, "reject", false},
		{"unsigned, no dmarc record", dns, latin1QPMsg, None, nil, None, "", false},
		{"no resolver", nil, signed, None, nil, None, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse(strings.NewReader(tt.raw), 0)
			if err != nil {
				t.Fatal(err)
			}
			// A client whose domain publishes no SPF record: SPF is none,
			// with no Reason.
			env := Envelope{ClientIP: net.ParseIP("192.0.2.99"), Helo: "client.test", MailFrom: "sender@client.test"}
			got := Authenticator{Resolver: tt.resolver}.Check(context.Background(), strings.NewReader(tt.raw), m.From, env)
			if got.DKIM != tt.dkim || got.DMARC != tt.dmarc || got.DMARCPolicy != tt.dmarcPol || got.SPF != None {
				t.Errorf("got %+v; want dkim %s dmarc %s policy %q", got, tt.dkim, tt.dmarc, tt.dmarcPol)
			}
			if len(got.DKIMSignatures) != len(tt.sigs) {
				t.Fatalf("signatures = %+v, want %v", got.DKIMSignatures, tt.sigs)
			}
			for i, s := range got.DKIMSignatures {
				if s.Verdict != tt.sigs[i] {
					t.Errorf("signature %d = %+v, want %s", i, s, tt.sigs[i])
				}
			}
			if (got.Reason != "") != tt.hasReason {
				t.Errorf("Reason = %q", got.Reason)
			}
		})
	}
}

func TestAuthenticatorSPF(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{
		"example.com":         {"google-site-verification=abc", "v=spf1 ip4:192.0.2.0/28 ip6:2001:db8::/32 -all"},
		"_dmarc.example.com":  {"v=DMARC1; p=reject"},
		"mail.example.com":    {"v=spf1 ip4:192.0.2.10 -all"},
		"soft.test":           {"v=spf1 ip4:198.51.100.1 ~all"},
		"neutral.test":        {"v=spf1 ?all"},
		"nospf.test":          {"some other text"},
		"inc.test":            {"v=spf1 include:example.com -all"},
		"broken.test":         {servFail},
		"twice.test":          {"v=spf1 -all", "v=spf1 +all"},
		"bad.test":            {"v=spf1 ip4:not-an-ip -all"},
		"strict.test":         {"v=spf1 ip4:192.0.2.10 -all"},
		"bounce.strict.test":  {"v=spf1 ip4:192.0.2.10 -all"},
		"_dmarc.strict.test":  {"v=DMARC1; p=quarantine; aspf=s"},
		"_dmarc.bank.co.uk":   {"v=DMARC1; p=reject"},
		"evil.co.uk":          {"v=spf1 ip4:192.0.2.10 -all"},
		"relaxed.example.com": {"v=spf1 redirect=example.com"},
	}
	listed, unlisted := net.ParseIP("192.0.2.10"), net.ParseIP("203.0.113.5")

	tests := []struct {
		name      string
		resolver  Resolver
		env       Envelope
		from      string // From header address
		spf       Verdict
		spfDomain string
		dmarc     Verdict
		reason    string // substring of Reason; "" wants none
	}{
		{"pass, aligned: DMARC passes with no DKIM", dns, Envelope{listed, "mail.example.com", "bounce@example.com"}, "ann@example.com", Pass, "example.com", Pass, ""},
		{"pass from IPv6", dns, Envelope{net.ParseIP("2001:db8::25"), "mail.example.com", "bounce@example.com"}, "ann@example.com", Pass, "example.com", Pass, ""},
		{"pass from IPv4-mapped IPv6", dns, Envelope{net.ParseIP("::ffff:192.0.2.10"), "mail.example.com", "bounce@example.com"}, "ann@example.com", Pass, "example.com", Pass, ""},
		{"fail: -all and address not listed", dns, Envelope{unlisted, "mail.example.com", "bounce@example.com"}, "ann@example.com", Fail, "example.com", Fail, ""},
		{"softfail: ~all", dns, Envelope{unlisted, "mx.soft.test", "x@soft.test"}, "ann@example.com", SoftFail, "soft.test", Fail, ""},
		{"neutral: ?all", dns, Envelope{unlisted, "mx.neutral.test", "x@neutral.test"}, "ann@example.com", Neutral, "neutral.test", Fail, ""},
		{"none: no SPF record", dns, Envelope{listed, "mx.nospf.test", "x@nospf.test"}, "ann@example.com", None, "nospf.test", Fail, ""},
		{"none: domain does not exist", dns, Envelope{listed, "mx.nowhere.test", "x@NoWhere.test."}, "ann@example.com", None, "nowhere.test", Fail, ""},
		{"include passes", dns, Envelope{listed, "mx.inc.test", "x@inc.test"}, "ann@example.com", Pass, "inc.test", Fail, ""},
		{"redirect, relaxed alignment with a subdomain", dns, Envelope{listed, "mx.example.com", "x@relaxed.example.com"}, "ann@example.com", Pass, "relaxed.example.com", Pass, ""},
		{"bounce: postmaster at the HELO name", dns, Envelope{listed, "mail.example.com.", ""}, "ann@example.com", Pass, "mail.example.com", Pass, ""},
		{"bounce with an address literal HELO", dns, Envelope{listed, "[192.0.2.10]", ""}, "ann@example.com", None, "", Fail, "not a domain name"},
		{"single-label MAIL FROM domain", dns, Envelope{listed, "mail.example.com", "root@localhost"}, "ann@example.com", None, "", Fail, "not a domain name"},
		{"temperror", dns, Envelope{listed, "mx.broken.test", "x@broken.test"}, "ann@example.com", TempError, "broken.test", Fail, "spf: "},
		{"permerror: two records", dns, Envelope{listed, "mx.twice.test", "x@twice.test"}, "ann@example.com", PermError, "twice.test", Fail, "spf: multiple"},
		{"permerror: bad mechanism", dns, Envelope{listed, "mx.bad.test", "x@bad.test"}, "ann@example.com", PermError, "bad.test", Fail, "spf: "},
		{"strict aspf: subdomain does not align", dns, Envelope{listed, "mx.strict.test", "x@bounce.strict.test"}, "ann@strict.test", Pass, "bounce.strict.test", Fail, ""},
		{"strict aspf: same domain aligns", dns, Envelope{listed, "mx.strict.test", "x@strict.test"}, "ann@strict.test", Pass, "strict.test", Pass, ""},
		{"public suffix is no organisational domain", dns, Envelope{listed, "mx.evil.co.uk", "x@evil.co.uk"}, "ann@bank.co.uk", Pass, "evil.co.uk", Fail, ""},
		{"resolver without SPF lookups", txtOnlyDNS{dns}, Envelope{listed, "mail.example.com", "bounce@example.com"}, "ann@example.com", None, "example.com", Fail, "cannot look up MX"},
		{"no client address", dns, Envelope{nil, "mail.example.com", "bounce@example.com"}, "ann@example.com", None, "example.com", Fail, "no SMTP client address"},
		{"no resolver", nil, Envelope{listed, "mail.example.com", "bounce@example.com"}, "ann@example.com", None, "", None, "no resolver configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Authenticator{Resolver: tt.resolver}.Check(context.Background(), strings.NewReader(plainMsg), tt.from, tt.env)
			if got.SPF != tt.spf || got.SPFDomain != tt.spfDomain || got.DMARC != tt.dmarc || got.DKIM != None {
				t.Errorf("got %+v; want spf %s for %q, dmarc %s", got, tt.spf, tt.spfDomain, tt.dmarc)
			}
			if tt.reason == "" && got.Reason != "" || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to hold %q", got.Reason, tt.reason)
			}
		})
	}
}

// TestAuthenticatorSPFAndDKIM: DMARC passes through DKIM alone when SPF
// fails, and both reasons are kept.
func TestAuthenticatorSPFAndDKIM(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{"_dmarc.example.com": {"v=DMARC1; p=reject"}, "example.com": {"v=spf1 -all"}}
	signed := newSigner(t, "example.com", dns).sign(t, plainMsg)
	env := Envelope{net.ParseIP("192.0.2.10"), "mail.example.com", "bounce@example.com"}
	got := Authenticator{Resolver: dns}.Check(context.Background(), strings.NewReader(signed), "ann@example.com", env)
	if got.SPF != Fail || got.DKIM != Pass || got.DMARC != Pass || got.Reason != "" {
		t.Errorf("got %+v; want SPF fail, DKIM and DMARC pass", got)
	}

	got = Authenticator{Resolver: txtOnlyDNS{dns}}.Check(context.Background(), strings.NewReader("From: ann@example.com\r\n\r\nbody\r\n"), "ann@example.com", env)
	if !strings.Contains(got.Reason, "spf: ") || got.DMARC != Fail {
		t.Errorf("got %+v; want DMARC fail and an SPF reason", got)
	}
}

func TestAuthResultJSON(t *testing.T) {
	t.Parallel()
	res := AuthResult{
		SPF: SoftFail, SPFDomain: "example.com", DKIM: Pass,
		DKIMSignatures: []DKIMResult{{Domain: "example.com", Verdict: Pass}, {Domain: "other.test", Verdict: Fail, Reason: "bad signature"}},
		DMARC:          Pass, DMARCPolicy: "reject",
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"spf":"softfail","spf_domain":"example.com","dkim":"pass","dkim_signatures":[{"domain":"example.com","verdict":"pass"},{"domain":"other.test","verdict":"fail","reason":"bad signature"}],"dmarc":"pass","dmarc_policy":"reject"}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	res.Reason = "spf: lookup failed"
	if b, _ := json.Marshal(res); !strings.HasSuffix(string(b), `,"reason":"spf: lookup failed"}`) {
		t.Errorf("JSON with a reason: %s", b)
	}
}

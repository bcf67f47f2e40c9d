package inbound

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
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
			got := Authenticator{Resolver: tt.resolver}.Check(context.Background(), []byte(tt.raw), m.From)
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

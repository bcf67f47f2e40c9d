package outbound

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// fakeDNS answers TXT lookups from a map, as a published zone would.
type fakeDNS map[string]string

func (d fakeDNS) LookupTXT(name string) ([]string, error) {
	v, ok := d[name]
	if !ok {
		return nil, fmt.Errorf("no TXT record for %s", name)
	}
	// net.LookupTXT joins a record's 255-byte character-strings into one.
	return []string{v}, nil
}

// verifyDKIM checks msg against the records in dns and returns the one
// verification.
func verifyDKIM(t *testing.T, msg []byte, dns fakeDNS) *dkim.Verification {
	t.Helper()
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(msg), &dkim.VerifyOptions{LookupTXT: dns.LookupTXT})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(vs) != 1 {
		t.Fatalf("%d signatures, want 1", len(vs))
	}
	return vs[0]
}

// testRSAKey is one 2048-bit key for the package's tests: generating it is
// slow under -race.
var testRSAKey = sync.OnceValues(GenerateKey)

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	key, err := testRSAKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestSignDKIM(t *testing.T) {
	t.Parallel()
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m := baseMail()
	m.InReplyTo = []string{"parent@customer.test"}
	m.References = []string{"parent@customer.test"}
	msg, _, err := Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		key     func(*testing.T) crypto.Signer
		wantTag string
	}{
		{"rsa", func(t *testing.T) crypto.Signer { return rsaKey(t) }, "k=rsa"},
		{"ed25519", func(*testing.T) crypto.Signer { return edKey }, "k=ed25519"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := tt.key(t)
			record, err := DKIMRecord(key.Public())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(record, "v=DKIM1; "+tt.wantTag+"; p=") {
				t.Errorf("record = %q", record)
			}
			signed, err := SignDKIM(msg, "example.com", "comm1", key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(signed, []byte("DKIM-Signature: ")) || !bytes.HasSuffix(signed, msg) {
				t.Fatalf("signed message is not signature + original")
			}
			v := verifyDKIM(t, signed, fakeDNS{DKIMRecordName("example.com", "comm1"): record})
			if v.Err != nil {
				t.Fatalf("signature does not verify: %v", v.Err)
			}
			if v.Domain != "example.com" {
				t.Errorf("d= %q", v.Domain)
			}
			for _, h := range []string{"from", "subject", "message-id", "in-reply-to", "references"} {
				if !slices.ContainsFunc(v.HeaderKeys, func(k string) bool { return strings.EqualFold(k, h) }) {
					t.Errorf("%s not signed: %v", h, v.HeaderKeys)
				}
			}

			tampered := bytes.Replace(signed, []byte("Subject: Hello"), []byte("Subject: Hellp"), 1)
			if v := verifyDKIM(t, tampered, fakeDNS{DKIMRecordName("example.com", "comm1"): record}); v.Err == nil {
				t.Error("tampered subject still verifies")
			}
			other, err := DKIMRecord(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
			if err != nil {
				t.Fatal(err)
			}
			if v := verifyDKIM(t, signed, fakeDNS{DKIMRecordName("example.com", "comm1"): other}); v.Err == nil {
				t.Error("verifies against the wrong published key")
			}
		})
	}
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	key := rsaKey(t)
	if key.N.BitLen() != DKIMKeyBits {
		t.Errorf("key has %d bits, want %d", key.N.BitLen(), DKIMKeyBits)
	}
	if _, err := DKIMRecord("not a key"); err == nil {
		t.Error("DKIMRecord accepted a string")
	}
	if _, err := SignDKIM([]byte("From: a@b\r\n\r\n"), "", "s", key); err == nil {
		t.Error("SignDKIM accepted an empty domain")
	}
}

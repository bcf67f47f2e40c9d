package outbound

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"

	"github.com/emersion/go-msgauth/dkim"
)

// DKIMKeyBits is the size of keys made by GenerateKey.
const DKIMKeyBits = 2048

// SignedHeaders are the header fields covered by the DKIM signature. The
// threading headers are signed even when absent, so none can be added in
// transit without breaking the signature.
var SignedHeaders = []string{
	"From", "To", "Reply-To", "Subject", "Date", "Message-Id", "In-Reply-To", "References",
	"Mime-Version", "Content-Type", "Content-Transfer-Encoding",
}

// SignDKIM returns msg with a DKIM-Signature header (rsa-sha256 or
// ed25519-sha256 after key, relaxed/relaxed canonicalization) for
// domain and selector prepended.
func SignDKIM(msg []byte, domain, selector string, key crypto.Signer) ([]byte, error) {
	if domain == "" || selector == "" || key == nil {
		return nil, fmt.Errorf("email: dkim sign: domain, selector and key are required")
	}
	var out bytes.Buffer
	out.Grow(len(msg) + 1024)
	err := dkim.Sign(&out, bytes.NewReader(msg), &dkim.SignOptions{
		Domain:                 domain,
		Selector:               selector,
		Signer:                 key,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             SignedHeaders,
	})
	if err != nil {
		return nil, fmt.Errorf("email: dkim sign: %w", err)
	}
	return out.Bytes(), nil
}

// GenerateKey makes a new RSA DKIM signing key of DKIMKeyBits bits.
func GenerateKey() (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, DKIMKeyBits)
	if err != nil {
		return nil, fmt.Errorf("email: dkim generate key: %w", err)
	}
	return key, nil
}

// DKIMRecord renders the TXT record value to publish at
// <selector>._domainkey.<domain> for pub: "v=DKIM1; k=rsa; p=<base64 DER>"
// for an RSA key, "v=DKIM1; k=ed25519; p=<base64 raw key>" for Ed25519. The
// value is longer than 255 bytes for RSA 2048; DNS servers split it into
// several character-strings, which resolvers join again.
func DKIMRecord(pub crypto.PublicKey) (string, error) {
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return "", fmt.Errorf("email: dkim record: %w", err)
		}
		return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der), nil
	case ed25519.PublicKey:
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub), nil
	default:
		return "", fmt.Errorf("email: dkim record: unsupported key type %T", pub)
	}
}

// DKIMRecordName is the DNS name that holds the DKIM key of selector on
// domain.
func DKIMRecordName(domain, selector string) string {
	return selector + "._domainkey." + domain
}

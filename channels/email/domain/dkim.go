package domain

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
)

// encodeKey returns the DKIM p= value (base64 of the DER SubjectPublicKeyInfo)
// and the PKCS#8 PEM of the private key.
func encodeKey(key *rsa.PrivateKey) (pub string, priv []byte, err error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", nil, fmt.Errorf("encode DKIM public key: %w", err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", nil, fmt.Errorf("encode DKIM private key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(der), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), nil
}

// ParsePrivateKey reads Records.DKIMPrivateKeyPEM back into a signer for
// DKIM signing (go-msgauth's dkim.SignOptions.Signer).
func ParsePrivateKey(pemBytes []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("domain: parse DKIM key: no PRIVATE KEY PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("domain: parse DKIM key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("domain: parse DKIM key: %T is not a signer", k)
	}
	return s, nil
}

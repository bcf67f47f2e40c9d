// Package sealed encrypts secrets at rest (webhook secrets, provider
// credentials) with AES-256-GCM. The key comes from COMM_ENCRYPTION_KEY
// (base64 of 32 bytes) or, failing that, from a key file in the data
// directory, made on first start. Replicas sharing a database must share
// the key.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the key length in bytes.
const KeySize = 32

// version prefixes every sealed value, so keys or algorithms can change.
const version = 1

// Box seals and opens secrets.
type Box struct {
	aead cipher.AEAD
	key  []byte
}

// New returns a box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealed: key must be %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealed: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sealed: %w", err)
	}
	return &Box{aead: aead, key: append([]byte(nil), key...)}, nil
}

// DeriveKey returns a 32-byte key for one purpose ("session cookies"),
// derived from the box's key with HMAC-SHA256: replicas sharing the
// encryption key derive the same keys, and no derived key reveals the
// encryption key or another purpose's key.
func (b *Box) DeriveKey(purpose string) []byte {
	m := hmac.New(sha256.New, b.key)
	m.Write([]byte("comm sealed.DeriveKey v1: " + purpose))
	return m.Sum(nil)
}

// Load returns the box for the configured key: encoded (base64), if not
// empty; otherwise the key in file, created with a fresh key if missing.
func Load(encoded, file string) (*Box, error) {
	if encoded != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil {
			return nil, fmt.Errorf("sealed: encryption key is not base64: %w", err)
		}
		return New(key)
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("sealed: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("sealed: %w", err)
		}
		enc := base64.StdEncoding.EncodeToString(key)
		if err := os.WriteFile(file, []byte(enc+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("sealed: write key file: %w", err)
		}
		return New(key)
	}
	if err != nil {
		return nil, fmt.Errorf("sealed: read key file: %w", err)
	}
	return Load(string(b), "")
}

// Seal encrypts plain.
func (b *Box) Seal(plain []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), 1+b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("sealed: no randomness: " + err.Error())
	}
	out := append([]byte{version}, nonce...)
	return b.aead.Seal(out, nonce, plain, []byte{version})
}

// Open decrypts a sealed value.
func (b *Box) Open(sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n+b.aead.Overhead() || sealed[0] != version {
		return nil, errors.New("sealed: not a sealed value")
	}
	plain, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte{version})
	if err != nil {
		return nil, errors.New("sealed: cannot open (wrong key?)")
	}
	return plain, nil
}

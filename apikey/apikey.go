// Package apikey makes and checks comm's API keys.
//
// A key is a prefix ("comm_sandbox_" for anonymous keys, "comm_" for
// signed-in ones), 43 base62 characters of randomness (256 bits) and a
// 6-character base62 CRC-32 checksum of everything before it, so a scanner or
// the server can reject a mistyped or truncated key without a lookup. Only the
// SHA-256 hash of a key is stored. The prefix is informational: whether a key
// is anonymous or signed-in is decided from its stored row, never from the
// string.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"hash/crc32"
	"math/big"
	"strings"
)

// Prefixes of the two kinds of key.
const (
	SandboxPrefix  = "comm_sandbox_"
	SignedInPrefix = "comm_"
)

const (
	alphabet  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	bodyLen   = 43 // 256 bits in base62
	sumLen    = 6  // 32 bits in base62
	maxKeyLen = len(SandboxPrefix) + bodyLen + sumLen
)

// ErrMalformed is returned by Parse for anything that is not a well-formed key.
var ErrMalformed = errors.New("malformed api key")

// Hash is the stored form of a key.
type Hash [sha256.Size]byte

// New returns a fresh key with the given prefix.
func New(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("apikey: no randomness: " + err.Error())
	}
	body := pad(new(big.Int).SetBytes(b[:]).Text(62), bodyLen)
	s := prefix + body
	return s + checksum(s)
}

// Parse checks a key's form and checksum and returns its hash.
func Parse(key string) (Hash, error) {
	if len(key) > maxKeyLen {
		return Hash{}, ErrMalformed
	}
	rest, ok := strings.CutPrefix(key, SandboxPrefix)
	if !ok {
		rest, ok = strings.CutPrefix(key, SignedInPrefix)
	}
	if !ok || len(rest) != bodyLen+sumLen {
		return Hash{}, ErrMalformed
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(alphabet, rest[i]) < 0 {
			return Hash{}, ErrMalformed
		}
	}
	head := key[:len(key)-sumLen]
	if checksum(head) != key[len(key)-sumLen:] {
		return Hash{}, ErrMalformed
	}
	return sha256.Sum256([]byte(key)), nil
}

// Display returns the part of a key that is safe to show after creation:
// its prefix and last four characters.
func Display(key string) string {
	prefix := SignedInPrefix
	if strings.HasPrefix(key, SandboxPrefix) {
		prefix = SandboxPrefix
	}
	if len(key) < 4 {
		return prefix + "…"
	}
	return prefix + "…" + key[len(key)-4:]
}

func checksum(s string) string {
	sum := crc32.ChecksumIEEE([]byte(s))
	return pad(new(big.Int).SetUint64(uint64(sum)).Text(62), sumLen)
}

func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return strings.Repeat("0", n-len(s)) + s
}

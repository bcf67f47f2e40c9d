package apikey_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/apikey"
)

const (
	base62  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	tailLen = 43 + 6 // random body + checksum
)

// TestNewParse: every new key carries its prefix, has the documented
// length and alphabet, parses, and hashes to SHA-256 of the key.
func TestNewParse(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{apikey.SandboxPrefix, apikey.SignedInPrefix} {
		seen := map[string]bool{}
		for range 200 {
			key := apikey.New(prefix)
			if !strings.HasPrefix(key, prefix) {
				t.Fatalf("New(%q) = %q: missing prefix", prefix, key)
			}
			if len(key) != len(prefix)+tailLen {
				t.Fatalf("New(%q) = %q: length %d, want %d", prefix, key, len(key), len(prefix)+tailLen)
			}
			if i := strings.IndexFunc(key[len(prefix):], func(r rune) bool { return !strings.ContainsRune(base62, r) }); i >= 0 {
				t.Fatalf("New(%q) = %q: non-base62 character at %d", prefix, key, len(prefix)+i)
			}
			if seen[key] {
				t.Fatalf("New(%q) repeated %q", prefix, key)
			}
			seen[key] = true
			h, err := apikey.Parse(key)
			if err != nil {
				t.Fatalf("Parse(New(%q)) = %v", prefix, err)
			}
			if want := sha256.Sum256([]byte(key)); h != apikey.Hash(want) {
				t.Fatalf("Parse(%q) hash %x, want SHA-256 %x", key, h, want)
			}
		}
	}
}

// TestParseRejects: anything that is not a well-formed key fails with
// ErrMalformed.
func TestParseRejects(t *testing.T) {
	t.Parallel()
	sandbox := apikey.New(apikey.SandboxPrefix)
	signed := apikey.New(apikey.SignedInPrefix)
	sandboxTail := strings.TrimPrefix(sandbox, apikey.SandboxPrefix)
	signedTail := strings.TrimPrefix(signed, apikey.SignedInPrefix)
	cases := map[string]string{
		"empty":                     "",
		"prefix only":               apikey.SandboxPrefix,
		"signed-in prefix only":     apikey.SignedInPrefix,
		"no prefix":                 sandboxTail,
		"wrong prefix":              "sk_live_" + sandboxTail,
		"upper-case prefix":         "COMM_" + signedTail,
		"prefix without underscore": "comm" + signedTail,
		"sandbox swapped to comm_":  apikey.SignedInPrefix + sandboxTail,
		"comm_ swapped to sandbox":  apikey.SandboxPrefix + signedTail,
		"one short":                 sandbox[:len(sandbox)-1],
		"one long":                  sandbox + "0",
		"checksum dropped":          sandbox[:len(sandbox)-6],
		"checksum doubled":          signed + signed[len(signed)-6:],
		"leading space":             " " + signed,
		"trailing newline":          signed + "\n",
		"bearer scheme kept":        "Bearer " + signed,
		"dash in body":              signed[:20] + "-" + signed[21:],
		"underscore in body":        signed[:20] + "_" + signed[21:],
		"non-ASCII in body":         signed[:20] + "é" + signed[22:],
		"NUL in body":               signed[:20] + "\x00" + signed[21:],
		"over-long":                 sandbox + strings.Repeat("A", 1<<20),
		"two keys":                  sandbox + signed,
		"all zeros":                 apikey.SignedInPrefix + strings.Repeat("0", tailLen),
	}
	for name, key := range cases {
		if h, err := apikey.Parse(key); !errors.Is(err, apikey.ErrMalformed) || h != (apikey.Hash{}) {
			t.Errorf("%s: Parse(%.80q) = %x, %v; want zero hash, ErrMalformed", name, key, h, err)
		}
	}
}

// TestChecksumCatchesSubstitutions replaces every character of a few keys,
// prefix included, by every other byte value: not one variant may parse.
func TestChecksumCatchesSubstitutions(t *testing.T) {
	t.Parallel()
	var keys []string
	for range 4 {
		keys = append(keys, apikey.New(apikey.SandboxPrefix), apikey.New(apikey.SignedInPrefix))
	}
	for _, key := range keys {
		b := []byte(key)
		for i := range b {
			orig := b[i]
			for c := range 256 {
				if byte(c) == orig {
					continue
				}
				b[i] = byte(c)
				if _, err := apikey.Parse(string(b)); err == nil {
					t.Errorf("Parse accepted %q: %q with position %d changed from %q to %q", b, key, i, orig, byte(c))
				}
			}
			b[i] = orig
		}
	}
}

// TestChecksumCatchesTranspositions swaps every pair of neighbouring,
// different characters of the random part and checksum.
func TestChecksumCatchesTranspositions(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{apikey.SandboxPrefix, apikey.SignedInPrefix} {
		for range 4 {
			key := apikey.New(prefix)
			b := []byte(key)
			for i := len(prefix); i+1 < len(b); i++ {
				if b[i] == b[i+1] {
					continue
				}
				b[i], b[i+1] = b[i+1], b[i]
				if _, err := apikey.Parse(string(b)); err == nil {
					t.Errorf("Parse accepted %q: %q with %d and %d swapped", b, key, i, i+1)
				}
				b[i], b[i+1] = b[i+1], b[i]
			}
		}
	}
}

// TestDisplay: only the prefix and the last four characters are shown.
func TestDisplay(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{apikey.SandboxPrefix, apikey.SignedInPrefix} {
		key := apikey.New(prefix)
		got := apikey.Display(key)
		want := prefix + "…" + key[len(key)-4:]
		if got != want {
			t.Errorf("Display(%q) = %q, want %q", key, got, want)
		}
		// Nothing else of the secret part may appear: no run of five or
		// more of its characters.
		secret := key[len(prefix):]
		for i := 0; i+5 <= len(secret); i++ {
			if strings.Contains(got, secret[i:i+5]) {
				t.Errorf("Display(%q) = %q leaks %q", key, got, secret[i:i+5])
			}
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "comm_…"},
		{"abc", "comm_…"},
		{"comm_sandbox_", "comm_sandbox_…box_"},
	} {
		if got := apikey.Display(tc.in); got != tc.want {
			t.Errorf("Display(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParse: Parse never panics, and whatever it accepts has a known
// prefix, the fixed length and a base62 tail, and hashes to the SHA-256 of
// the input, the same every time. The seed corpus runs with go test.
func FuzzParse(f *testing.F) {
	// Fixed, valid keys (made by New), so the corpus is the same every run.
	valid := []string{
		"comm_sandbox_2Te4KTfIlE8nIN8kJRjXnwoytv0ED3RWBYjFWMpBR1M3cE88C",
		"comm_Oe6PFP5I6qsAuUtHww2hiBWyt1pgtZGOccgLWlaHkys3nlpnm",
	}
	for _, k := range valid {
		if _, err := apikey.Parse(k); err != nil {
			f.Fatalf("seed %q does not parse: %v", k, err)
		}
		f.Add(k)
		f.Add(k[:len(k)-1])                            // truncated
		f.Add(k + "0")                                 // extended
		f.Add(k[:len(k)-1] + flip(k[len(k)-1]))        // checksum off by one character
		f.Add(k[:20] + flip(k[20]) + k[21:])           // body off by one character
		f.Add(strings.ToUpper(k))                      // case folded
		f.Add(strings.Replace(k, "comm_", "COMM_", 1)) // prefix case
	}
	f.Add(apikey.SignedInPrefix + strings.TrimPrefix(valid[0], apikey.SandboxPrefix))
	f.Add(apikey.SandboxPrefix + strings.TrimPrefix(valid[1], apikey.SignedInPrefix))
	f.Add("")
	f.Add("comm_")
	f.Add("comm_sandbox_")
	f.Add("comm_sandbox_" + strings.Repeat("z", 49))
	f.Add(strings.Repeat("\xff", 62))
	f.Fuzz(func(t *testing.T, key string) {
		h, err := apikey.Parse(key)
		if err != nil {
			if !errors.Is(err, apikey.ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, not ErrMalformed", key, err)
			}
			if h != (apikey.Hash{}) {
				t.Fatalf("Parse(%q) failed but returned hash %x", key, h)
			}
			return
		}
		prefix := apikey.SignedInPrefix
		if strings.HasPrefix(key, apikey.SandboxPrefix) {
			prefix = apikey.SandboxPrefix
		}
		if !strings.HasPrefix(key, prefix) || len(key) != len(prefix)+tailLen {
			t.Fatalf("Parse accepted %q: wrong prefix or length %d", key, len(key))
		}
		if i := strings.IndexFunc(key[len(prefix):], func(r rune) bool { return !strings.ContainsRune(base62, r) }); i >= 0 {
			t.Fatalf("Parse accepted %q with a non-base62 character", key)
		}
		if want := sha256.Sum256([]byte(key)); h != apikey.Hash(want) {
			t.Fatalf("Parse(%q) hash %x, want %x", key, h, want)
		}
		if h2, err := apikey.Parse(key); err != nil || h2 != h {
			t.Fatalf("Parse(%q) not deterministic: %x, %v then %x", key, h, err, h2)
		}
		if d := apikey.Display(key); d != prefix+"…"+key[len(key)-4:] {
			t.Fatalf("Display(%q) = %q", key, d)
		}
	})
}

// flip returns a different base62 character than c.
func flip(c byte) string {
	i := strings.IndexByte(base62, c)
	return string(base62[(i+1)%len(base62)])
}

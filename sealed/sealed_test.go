package sealed

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "k", "encryption.key")
	b, err := Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	s := b.Seal([]byte("whsec_secret"))
	if bytes.Contains(s, []byte("secret")) {
		t.Fatal("sealed value shows the plain text")
	}
	got, err := b.Open(s)
	if err != nil || string(got) != "whsec_secret" {
		t.Fatalf("open: %q %v", got, err)
	}
	// The key file is kept and reused.
	b2, err := Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b2.Open(s); err != nil || string(got) != "whsec_secret" {
		t.Fatalf("reloaded key: %q %v", got, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode())
	}
	// Another key cannot open it; tampering is detected.
	other, _ := Load(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, KeySize)), "")
	if _, err := other.Open(s); err == nil {
		t.Error("opened with another key")
	}
	s[len(s)-1] ^= 1
	if _, err := b.Open(s); err == nil {
		t.Error("opened a tampered value")
	}
	for _, bad := range []string{"nope!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := Load(bad, ""); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func TestDeriveKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	a, _ := New(key)
	b, _ := New(key)
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	if !bytes.Equal(a.DeriveKey("cookies"), b.DeriveKey("cookies")) {
		t.Error("the same key and purpose derive different keys")
	}
	if bytes.Equal(a.DeriveKey("cookies"), a.DeriveKey("other")) {
		t.Error("two purposes derive the same key")
	}
	if bytes.Equal(a.DeriveKey("cookies"), other.DeriveKey("cookies")) {
		t.Error("two encryption keys derive the same key")
	}
	if len(a.DeriveKey("x")) != 32 || bytes.Equal(a.DeriveKey("x"), key) {
		t.Error("derived key has the wrong size or is the encryption key")
	}
}

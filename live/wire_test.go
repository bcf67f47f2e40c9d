package live

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCloseText: a close frame's reason is cut to fit beside its code, at
// a character's start.
func TestCloseText(t *testing.T) {
	for _, text := range []string{"", "short", strings.Repeat("a", 123), strings.Repeat("a", 200), strings.Repeat("é", 100), "x" + strings.Repeat("€", 60)} {
		got := closeText(text)
		if len(got) > 123 || !utf8.ValidString(got) || !strings.HasPrefix(text, got) || (len(text) <= 123 && got != text) || (len(text) > 123 && len(got) < 120) {
			t.Errorf("closeText(%d bytes) = %d bytes %q", len(text), len(got), got)
		}
	}
}

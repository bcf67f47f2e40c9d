package channels_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	wave := "👋" // two UTF-16 units, four bytes
	septets := func(r rune) int {
		if strings.ContainsRune("{}[]", r) {
			return 2
		}
		return 1
	}
	tests := []struct {
		name   string
		text   string
		budget int
		cost   func(rune) int
		want   []string
	}{
		{"empty", "", 10, channels.Runes, []string{""}},
		{"short", "hello", 10, channels.Runes, []string{"hello"}},
		{"exact fit", "0123456789", 10, channels.Runes, []string{"0123456789"}},
		{"one over", "0123456789x", 10, channels.Runes, []string{"0123456789", "x"}},
		{"space in the last quarter", "aaaaaaaa bbbbbbbb", 10, channels.Runes, []string{"aaaaaaaa ", "bbbbbbbb"}},
		{"newline too early, space taken", "aaaaa\nbbb cccccc", 10, channels.Runes, []string{"aaaaa\nbbb ", "cccccc"}},
		{"newline preferred", "aaaaaaaa\nb ccccc", 10, channels.Runes, []string{"aaaaaaaa\n", "b ccccc"}},
		{"break too early: hard cut", "aa bbbbbbbbbbbbbb", 10, channels.Runes, []string{"aa bbbbbbb", "bbbbbbb"}},
		{"break at the start never counts", " bbbbbbbbbbbb", 1, channels.Runes, []string{" ", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b", "b"}},
		{"word longer than the budget", strings.Repeat("x", 25), 10, channels.Runes, []string{strings.Repeat("x", 10), strings.Repeat("x", 10), strings.Repeat("x", 5)}},
		{"runes, not bytes", strings.Repeat("é", 12), 10, channels.Runes, []string{strings.Repeat("é", 10), "éé"}},
		{"emoji as 2 UTF-16 units", strings.Repeat(wave, 6), 10, channels.UTF16Units, []string{strings.Repeat(wave, 5), wave}},
		{"surrogate pair kept whole", "aaaaaaaaa" + wave, 10, channels.UTF16Units, []string{"aaaaaaaaa", wave}},
		{"bytes: no rune split", "aaaaaaaa" + "é" + "é", 10, channels.Bytes, []string{"aaaaaaaaé", "é"}},
		{"bytes: emoji", "aaaaaaa" + wave, 10, channels.Bytes, []string{"aaaaaaa", wave}},
		{"character over the budget goes alone", wave + wave, 1, channels.UTF16Units, []string{wave, wave}},
		{"own cost (GSM-7 escapes)", "ab{}", 4, septets, []string{"ab{", "}"}},
	}
	for _, tt := range tests {
		got := channels.Split(tt.text, tt.budget, tt.cost)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSplitProperties: on long mixed texts, every part fits its budget,
// is valid UTF-8, and the parts rejoin to the text.
func TestSplitProperties(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("Emoji 👋 and wörds.\n", 300) + strings.Repeat("x", 5000) + " tail"
	costs := map[string]func(rune) int{"runes": channels.Runes, "utf16": channels.UTF16Units, "bytes": channels.Bytes}
	for name, cost := range costs {
		for _, budget := range []int{4, 7, 100, 2000, 4096} {
			parts := channels.Split(text, budget, cost)
			if strings.Join(parts, "") != text {
				t.Errorf("%s/%d: the parts do not rejoin to the text", name, budget)
			}
			for i, p := range parts {
				n := 0
				for _, r := range p {
					n += cost(r)
				}
				if n > budget || p == "" || !utf8.ValidString(p) {
					t.Errorf("%s/%d: part %d %q costs %d", name, budget, i, p, n)
				}
			}
		}
	}
}

func TestSplitFromFloor(t *testing.T) {
	t.Parallel()
	// Discord's rule: a break in the second half (offset > cut/2).
	half := func(cut int) int { return cut/2 + 1 }
	got := channels.SplitFrom("aaaaaa bbbbbbbbbb", 10, channels.Runes, half)
	if want := []string{"aaaaaa ", "bbbbbbbbbb"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	// At offset 5 of 10: not past half, a hard cut.
	got = channels.SplitFrom("aaaaa bbbbbbbbbb", 10, channels.Runes, half)
	if want := []string{"aaaaa bbbb", "bbbbbb"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

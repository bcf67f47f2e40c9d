package channels

import (
	"strings"
	"unicode/utf8"
)

// Split cuts s into parts whose characters cost at most budget in all,
// each character costing cost(r): Runes, UTF16Units, Bytes, or a
// provider's own (GSM-7 septets). A part ends after the last line break,
// else the last space, of its final quarter (in bytes) when there is one,
// so that words and lines stay whole, and never inside a character; a
// character costing more than budget alone still makes a part. The parts
// joined are s; an empty s is one empty part.
func Split(s string, budget int, cost func(rune) int) []string {
	return SplitFrom(s, budget, cost, func(cut int) int { return cut * 3 / 4 })
}

// SplitFrom is Split with the start of the break region its own: floor(cut)
// is the least byte offset, in a prefix of cut bytes that fits the budget,
// of a line break or space to end the part after (one at offset 0 never
// counts).
func SplitFrom(s string, budget int, cost func(rune) int, floor func(cut int) int) []string {
	var parts []string
	for {
		// cut is the byte length of the longest prefix within budget.
		cut, used := 0, 0
		for cut < len(s) {
			r, size := utf8.DecodeRuneInString(s[cut:]) // an invalid byte: size 1, U+FFFD
			c := cost(r)
			if used+c > budget {
				break
			}
			used += c
			cut += size
		}
		if cut == len(s) {
			break
		}
		if cut == 0 { // one character over the budget: it goes alone
			_, cut = utf8.DecodeRuneInString(s)
		} else {
			from := max(floor(cut), 1)
			if i := strings.LastIndexByte(s[:cut], '\n'); i >= from {
				cut = i + 1
			} else if i := strings.LastIndexByte(s[:cut], ' '); i >= from {
				cut = i + 1
			}
		}
		parts = append(parts, s[:cut])
		s = s[cut:]
	}
	if s != "" || len(parts) == 0 {
		parts = append(parts, s)
	}
	return parts
}

// Runes counts every character as one (Slack, Discord).
func Runes(rune) int { return 1 }

// UTF16Units is how many UTF-16 code units r takes: two for a character
// beyond the Basic Multilingual Plane (most emoji), else one (Telegram,
// Twilio, Messenger, UCS-2 SMS).
func UTF16Units(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// Bytes is how many bytes of UTF-8 r takes (Instagram). An invalid byte,
// decoded as U+FFFD, counts the three bytes of U+FFFD that JSON sends for it.
func Bytes(r rune) int {
	if n := utf8.RuneLen(r); n > 0 {
		return n
	}
	return 3
}

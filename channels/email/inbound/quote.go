package inbound

import (
	"regexp"
	"strings"
)

var (
	// "-----Original Message-----" (Outlook) and localised look-alikes
	// built the same way, plus "---------- Forwarded message ---------".
	separatorRe = regexp.MustCompile(`(?i)^\s*-{3,}\s*(original message|forwarded message)\s*-{3,}\s*$`)
	// Outlook's rule line above a "From:" block.
	ruleRe = regexp.MustCompile(`^\s*_{10,}\s*$`)
	// "On <date>, <name> wrote:" as one line ...
	onWroteRe = regexp.MustCompile(`(?i)^\s*On\s.+\swrote:\s*$`)
	// ... or wrapped over two lines.
	onStartRe = regexp.MustCompile(`(?i)^\s*On\s.+`)
	wroteRe   = regexp.MustCompile(`(?i)^.*\swrote:\s*$|^\s*wrote:\s*$`)
)

// StripQuoted returns the new text of a reply: text without the quoted
// history. It is deliberately conservative and removes only
//
//   - every line starting with ">" (after optional spaces),
//   - an "On <date>, <someone> wrote:" line (possibly wrapped over two
//     lines) when quoted lines follow it, and
//   - everything from an "-----Original Message-----" separator, or an
//     Outlook "_____" rule followed by "From:", to the end.
//
// When stripping would leave nothing (a bare forward), the text is returned
// unchanged. Line endings are normalised to "\n" and trailing blank lines
// dropped.
func StripQuoted(text string) string {
	if text == "" {
		return ""
	}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	lines = lines[:historyStart(lines)]

	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if isQuoted(line) {
			continue
		}
		if n := attribution(lines, i); n > 0 && quotedFollows(lines, i+n) {
			i += n - 1
			continue
		}
		out = append(out, line)
	}
	stripped := strings.TrimRight(strings.Join(out, "\n"), " \t\n")
	if strings.TrimSpace(stripped) == "" {
		return strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), " \t\n")
	}
	return stripped
}

// historyStart is the index of the first line of a trailing history block
// (Outlook separator), or len(lines).
func historyStart(lines []string) int {
	for i, line := range lines {
		if separatorRe.MatchString(line) {
			return i
		}
		if ruleRe.MatchString(line) && i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "From:") {
			return i
		}
	}
	return len(lines)
}

func isQuoted(line string) bool {
	return strings.HasPrefix(strings.TrimLeft(line, " \t"), ">")
}

// attribution reports how many lines (1 or 2) an "On ... wrote:" line
// starting at i spans, or 0.
func attribution(lines []string, i int) int {
	if onWroteRe.MatchString(lines[i]) {
		return 1
	}
	if onStartRe.MatchString(lines[i]) && i+1 < len(lines) && wroteRe.MatchString(lines[i+1]) {
		return 2
	}
	return 0
}

// quotedFollows reports whether the first non-blank line from i on is
// quoted.
func quotedFollows(lines []string, i int) bool {
	for ; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			continue
		}
		return isQuoted(lines[i])
	}
	return false
}

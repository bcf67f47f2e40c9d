package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// markdownFiles lists the Markdown files whose links must stay inside the
// repository: the root's (README.md, SECURITY.md ...) and all of docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.Join(root, "docs", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range files {
		r, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	for _, want := range []string{"README.md", "SECURITY.md", "docs/README.md", "docs/api.md", "docs/events.md"} {
		found := false
		for _, r := range rel {
			found = found || r == want
		}
		if !found {
			t.Errorf("%s is missing", want)
		}
	}
	return rel
}

var (
	// inlineLink matches [text](target) and ![alt](target); the text may
	// hold code spans and brackets one level deep.
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [label]: target.
	refDef   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	scheme   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// prose returns the lines of a Markdown document outside fenced code
// blocks, with inline code spans blanked, keyed by line number.
func prose(text string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		out[i+1] = line
	}
	return out
}

// stripCode blanks inline code spans, keeping links whose text is code
// (the span is inside the brackets, the target outside).
func stripCode(line string) string {
	return codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat("x", len(s)) })
}

// anchors returns the heading anchors GitHub gives a Markdown document.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(title)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// slugify makes a heading's anchor the way GitHub does: lower case, spaces
// to hyphens, every other character but letters, digits, '-' and '_'
// dropped.
func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinksStayInRepository checks every relative link of the
// repository's Markdown: it names a file (or folder) that exists, never
// leaves the repository, and a #fragment names a heading of a Markdown
// target. Plain-text paths out of the repository (../shared/...) are
// refused too: someone who clones it has only what is inside.
func TestLinksStayInRepository(t *testing.T) {
	files := markdownFiles(t)
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if s, ok := texts[rel]; ok {
			return s, true
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return "", false
		}
		texts[rel] = string(b)
		return string(b), true
	}
	links := 0
	for _, file := range files {
		text, ok := read(file)
		if !ok {
			t.Fatalf("cannot read %s", file)
		}
		if strings.Contains(text, "../shared/") || strings.Contains(text, "/work/shared") {
			t.Errorf("%s names a file outside the repository (../shared/...)", file)
		}
		for n, line := range prose(text) {
			line = stripCode(line)
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refDef.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				links++
				if msg := checkLink(file, target, read); msg != "" {
					t.Errorf("%s:%d: link %q: %s", file, n, target, msg)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("found only %d links; is the link pattern broken?", links)
	}
}

// checkLink says what is wrong with target, a link in file (both relative
// to the repository's root), or "" when nothing is.
func checkLink(file, target string, read func(string) (string, bool)) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // an absolute URL: not a file of the repository
	}
	p, frag, _ := strings.Cut(target, "#")
	if strings.HasPrefix(p, "/") {
		return "an absolute path; link relative to the file"
	}
	dest := file
	if p != "" {
		dest = path.Join(path.Dir(file), p)
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leaves the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return "no such file in the repository"
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	text, ok := read(dest)
	if !ok {
		return "cannot read the target"
	}
	if !anchors(text)[frag] {
		return "no heading #" + frag + " in " + dest
	}
	return ""
}

// TestCheckLink checks the checker on links that must fail.
func TestCheckLink(t *testing.T) {
	read := func(rel string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		return string(b), err == nil
	}
	for _, c := range []struct {
		file, target string
		ok           bool
	}{
		{"README.md", "docs/api.md", true},
		{"README.md", "docs/api.md#errors", true},
		{"README.md", "#quickstart", true},
		{"docs/api.md", "../api/openapi.yaml", true},
		{"docs/channels/paid.md", "../accounts.md#credit-what-the-paid-channels-cost", true},
		{"README.md", "https://example.com/x", true},
		{"README.md", "../shared/docs/design.md", false},
		{"docs/api.md", "../../shared/spec/agent-messaging-service.md", false},
		{"README.md", "docs/nothing.md", false},
		{"README.md", "docs/api.md#no-such-heading", false},
		{"README.md", "/etc/passwd", false},
	} {
		msg := checkLink(c.file, c.target, read)
		if (msg == "") != c.ok {
			t.Errorf("checkLink(%q, %q) = %q; want ok=%v", c.file, c.target, msg, c.ok)
		}
	}
	for title, want := range map[string]string{
		"Credit: what the paid channels cost":                                "credit-what-the-paid-channels-cost",
		"WhatsApp on the operator's numbers (`whatsapp`, provider `hosted`)": "whatsapp-on-the-operators-numbers-whatsapp-provider-hosted",
		"account.balance_low":                                                "accountbalance_low",
	} {
		if got := slugify(title); got != want {
			t.Errorf("slugify(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestReferenceComplete checks that the reference names every event type
// (api/project.go's Event constants) and every error code (fault/fault.go)
// the code has, so a new one cannot go undocumented.
func TestReferenceComplete(t *testing.T) {
	source := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	events, api := source("docs/events.md"), source("docs/api.md")
	types := regexp.MustCompile(`(?m)^\s+Event[A-Za-z]+\s+= "([a-z_.]+)"`).FindAllStringSubmatch(source("api/project.go"), -1)
	if len(types) < 10 {
		t.Fatalf("found %d event types in api/project.go; is the pattern broken?", len(types))
	}
	for _, m := range types {
		if !strings.Contains(events, "### "+m[1]) && !strings.Contains(events, "[`"+m[1]+"`](#") {
			t.Errorf("docs/events.md does not describe event type %s", m[1])
		}
	}
	codes := regexp.MustCompile(`Code: "([a-z_]+)"`).FindAllStringSubmatch(source("fault/fault.go"), -1)
	if len(codes) < 15 {
		t.Fatalf("found %d error codes in fault/fault.go; is the pattern broken?", len(codes))
	}
	for _, m := range codes {
		if !strings.Contains(api, "| `"+m[1]+"` |") {
			t.Errorf("docs/api.md's error table does not list %s", m[1])
		}
	}
}

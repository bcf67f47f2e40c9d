package inbound

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/jhillyerd/enmime/v2"
)

// The MIME structure of a message is bounded before enmime sees it:
// enmime appends each part to its parent by walking the sibling chain
// (Part.AddChild), so parsing n parts costs n² (50,000 empty parts in
// 0.5 MB took 9.5 s of CPU). prescan reads the raw message once, linearly,
// and refuses it when it has more delimiter lines than MaxParts or nests
// multiparts deeper than MaxDepth.
//
// It is deliberately generous in what it counts, so that enmime can never
// see more parts than prescan counted: every "boundary" parameter anywhere
// in the message (headers or not, RFC 2047 encoded words decoded the way
// enmime decodes them) is a candidate, and every line with "--" and a
// candidate at its start (or one byte in, as enmime's boundary reader
// accepts) counts as a delimiter. Where a declared value cannot be read
// exactly (an RFC 2231 encoded value, a quoted value with escapes) its
// readable beginning is used, which only matches more lines.

// Defaults for the zero fields of Parser.
const (
	DefaultMaxParts = 500
	DefaultMaxDepth = 20
	// DefaultMaxBase64Errors caps the bytes outside the base64 alphabet in
	// the base64 parts of a message. enmime drops each with a warning of
	// its own (about 170 bytes of memory each: 10 MB of them took 1.7 GB
	// and 18 s), so more are refused.
	DefaultMaxBase64Errors = 10000
	// DefaultMaxHeaderBytes caps one header section: the message's own
	// and each MIME part's. Header parsers are not all linear: go-msgauth's
	// DKIM reader appends each continuation line to a string, so a 2 MB
	// folded Subject took 12 s of CPU. 256 KiB holds any real header
	// (long Received chains, ARC sets, big References) many times over.
	DefaultMaxHeaderBytes = 256 << 10
	// DefaultMaxHeaderFieldBytes caps one header field as received: its
	// first line and its continuation lines, line breaks included. RFC
	// 5322 limits lines to 998 octets but not folded fields; the longest
	// real fields are the References of long threads (100 KB of them is
	// accepted).
	DefaultMaxHeaderFieldBytes = 128 << 10
)

// maxBoundaryLen caps a candidate boundary; a longer one is cut, which
// matches more lines, never fewer.
const maxBoundaryLen = 200

// scanLimits are the limits prescan checks.
type scanLimits struct {
	maxParts, maxDepth, maxBase64Errors int
	maxHeaderBytes, maxFieldBytes       int
}

// prescan reads r to its end and checks the MIME structure and the header
// sections against the limits; it returns an error wrapping
// ErrTooManyParts, ErrTooDeep, ErrHeaderTooLarge or ErrMalformed, or the
// read error.
func prescan(r io.Reader, l scanLimits) error {
	s := scanner{maxParts: l.maxParts, maxDepth: l.maxDepth, maxB64Errors: l.maxBase64Errors,
		maxHeaderBytes: l.maxHeaderBytes, maxFieldBytes: l.maxFieldBytes, inHeader: true, topLevel: true}
	br := bufio.NewReaderSize(r, 64<<10)
	atStart := true
	for {
		seg, err := br.ReadSlice('\n')
		if len(seg) > 0 {
			if serr := s.segment(seg, atStart); serr != nil {
				return serr
			}
		}
		switch err {
		case nil:
			atStart = true
		case bufio.ErrBufferFull:
			atStart = false // the rest of a long line follows
		case io.EOF:
			return s.endHeader() // a header block at the very end
		default:
			return err
		}
	}
}

// paramState is where a boundary parameter split over folded header lines
// stopped.
type paramState int

const (
	paramNone       paramState = iota
	paramKeyword               // "boundary" seen, "=" expected
	paramKeywordExt            // "boundary*" seen, "=" expected
	paramEquals                // "boundary=" seen, the value expected
	paramExtended              // "boundary*=" seen, the RFC 2231 value expected
)

type scanner struct {
	maxParts, maxDepth, maxB64Errors int
	maxHeaderBytes, maxFieldBytes    int

	hdrBytes   int // bytes of the header section being read, line breaks included
	fieldBytes int // bytes of the header field being read, the same way

	candidates trieNode
	nCandidate int
	parts      int // delimiter lines seen

	stack    []string // boundaries of the multiparts we are in, outermost first
	inHeader bool     // reading the header block of a part (or of the message)
	preamble bool     // before the first delimiter of the multipart opened last
	topLevel bool     // that header block is the message's own
	declared string   // the boundary declared in the current header block
	hasDecl  bool
	pending  paramState // a parameter continued on the next folded line

	inCTE     bool // in a Content-Transfer-Encoding field of a header block
	hdrBase64 bool // the header block declares base64
	base64    bool // reading the body of a base64 part
	b64Errors int  // bytes enmime's base64 cleaner would warn about
}

// segment handles one line, or a piece of a line longer than the reader's
// buffer (atStart false for the pieces after the first).
func (s *scanner) segment(seg []byte, atStart bool) error {
	line := bytes.TrimRight(seg, "\r\n")
	if atStart {
		if !s.topLevel && (s.delimiter(line) || s.preambleDelimiter(line)) {
			return s.checkParts()
		}
		if s.inHeader && len(line) == 0 {
			return s.endHeader()
		}
		folded := len(line) > 0 && (line[0] == ' ' || line[0] == '\t')
		if s.pending != paramNone && !folded {
			s.pending = paramNone // not a folded continuation
		}
		if s.inHeader && !folded {
			s.inCTE = len(line) >= len("content-transfer-encoding") &&
				bytes.EqualFold(line[:len("content-transfer-encoding")], []byte("content-transfer-encoding"))
			s.fieldBytes = 0
		}
	}
	if s.inHeader {
		if err := s.countHeader(len(seg)); err != nil {
			return err
		}
	}
	if s.inHeader && s.inCTE && indexFold(line, "base64") >= 0 {
		s.hdrBase64 = true
	}
	if !s.inHeader && s.base64 {
		if err := s.countBase64Errors(line); err != nil {
			return err
		}
	}
	if err := s.params(line, s.pending); err != nil {
		return err
	}
	if bytes.Contains(line, []byte("=?")) && hasEncodedWord(line) {
		// enmime decodes RFC 2047 in parameter names and values.
		decoded := enmime.DecodeRFC2047(string(line))
		if decoded != string(line) {
			pending := s.pending
			if err := s.params([]byte(decoded), paramNone); err != nil {
				return err
			}
			if s.pending == paramNone {
				s.pending = pending
			}
		}
	}
	return nil
}

// hasEncodedWord reports whether line may hold an RFC 2047 encoded word,
// by the test enmime uses.
func hasEncodedWord(line []byte) bool {
	u := bytes.ToUpper(line)
	return bytes.Contains(u, []byte("?Q?")) || bytes.Contains(u, []byte("?B?"))
}

// delimiter reports whether line is a boundary delimiter: "--" and a
// candidate at offset 0 or 1. It keeps the structure (which multiparts are
// open, whether a part header follows) in step.
func (s *scanner) delimiter(line []byte) bool {
	counted := false
	for off := 0; off <= 1 && off+2 <= len(line); off++ {
		if line[off] != '-' || line[off+1] != '-' {
			continue
		}
		rest := line[off+2:]
		if !s.candidates.matchPrefix(rest) {
			continue
		}
		counted = true
		s.preamble = false
		for i := len(s.stack) - 1; i >= 0; i-- {
			if !bytes.HasPrefix(rest, []byte(s.stack[i])) {
				continue
			}
			if bytes.HasPrefix(rest[len(s.stack[i]):], []byte("--")) {
				s.stack = s.stack[:i] // terminator: this multipart is closed
				s.inHeader = false
			} else {
				s.stack = s.stack[:i+1]
				s.inHeader, s.declared, s.hasDecl = true, "", false
			}
			s.base64, s.hdrBase64, s.inCTE = false, false, false
			break
		}
		break
	}
	if counted {
		s.parts++
		s.pending = paramNone
	}
	return counted
}

// preambleDelimiter reports whether line, in the preamble of the multipart
// opened last, holds its first delimiter anywhere (enmime looks for it
// anywhere in a preamble line, not only at the start).
func (s *scanner) preambleDelimiter(line []byte) bool {
	if !s.preamble || len(s.stack) == 0 || s.inHeader {
		return false
	}
	top := s.stack[len(s.stack)-1]
	i := bytes.Index(line, []byte("--"+top))
	if i < 0 {
		return false
	}
	s.parts++
	s.preamble, s.pending = false, paramNone
	if bytes.HasPrefix(line[i+2+len(top):], []byte("--")) {
		s.stack = s.stack[:len(s.stack)-1]
		return true
	}
	s.inHeader, s.declared, s.hasDecl = true, "", false
	s.base64, s.hdrBase64, s.inCTE = false, false, false
	return true
}

func (s *scanner) checkParts() error {
	if s.parts > s.maxParts {
		return fmt.Errorf("%w: more than %d MIME parts", ErrTooManyParts, s.maxParts)
	}
	return nil
}

// countHeader adds a header line (or a piece of one) of n bytes, its line
// break included, to the header section and field being read, and checks
// them against the limits.
func (s *scanner) countHeader(n int) error {
	s.hdrBytes += n
	s.fieldBytes += n
	which := "the message's header"
	if !s.topLevel {
		which = "a MIME part's header"
	}
	switch {
	case s.fieldBytes > s.maxFieldBytes:
		return fmt.Errorf("%w: a field of %s is longer than %d bytes", ErrHeaderTooLarge, which, s.maxFieldBytes)
	case s.hdrBytes > s.maxHeaderBytes:
		return fmt.Errorf("%w: %s is larger than %d bytes", ErrHeaderTooLarge, which, s.maxHeaderBytes)
	}
	return nil
}

// endHeader closes a header block: a part that declared a boundary opens a
// multipart one level deeper.
func (s *scanner) endHeader() error {
	if !s.inHeader {
		return nil
	}
	s.hdrBytes, s.fieldBytes = 0, 0
	s.inHeader, s.topLevel, s.pending = false, false, paramNone
	s.base64, s.hdrBase64, s.inCTE = s.hdrBase64, false, false
	if !s.hasDecl {
		return nil
	}
	s.stack = append(s.stack, s.declared)
	s.declared, s.hasDecl, s.preamble = "", false, true
	if len(s.stack) > s.maxDepth {
		return fmt.Errorf("%w: multiparts nested more than %d deep", ErrTooDeep, s.maxDepth)
	}
	return nil
}

// countBase64Errors counts the bytes of a base64 body line that enmime's
// base64 cleaner warns about (it looks at the low 7 bits of each byte).
func (s *scanner) countBase64Errors(line []byte) error {
	for _, c := range line {
		c &= 0x7f
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '+', c == '/', c == '=', c == ' ', c == '\t', c == '\r', c == '\n':
		default:
			s.b64Errors++
		}
	}
	if s.b64Errors > s.maxB64Errors {
		return fmt.Errorf("%w: more than %d bytes outside the base64 alphabet in base64 parts", ErrMalformed, s.maxB64Errors)
	}
	return nil
}

// params finds the boundary parameters in line, starting in state st (a
// parameter begun on the previous folded line).
func (s *scanner) params(line []byte, st paramState) error {
	s.pending = paramNone
	i := 0
	for {
		switch st {
		case paramNone:
			j := indexFold(line[i:], "boundary")
			if j < 0 {
				return nil
			}
			i += j + len("boundary")
			st = paramKeyword
			// RFC 2231: boundary*0=, boundary*=, boundary*0*=
			k := i
			for k < len(line) && (line[k] == '*' || (line[k] >= '0' && line[k] <= '9')) {
				k++
			}
			if k > i && line[k-1] == '*' {
				st = paramKeywordExt
			}
			i = k
		case paramKeyword, paramKeywordExt:
			i = skipSpace(line, i)
			if i == len(line) {
				s.pending = st
				return nil
			}
			if line[i] != '=' {
				st = paramNone
				continue
			}
			i++
			if st == paramKeyword {
				st = paramEquals
			} else {
				st = paramExtended
			}
		case paramEquals, paramExtended:
			i = skipSpace(line, i)
			if i == len(line) {
				s.pending = st
				return nil
			}
			v, n, exact := boundaryValue(line[i:], st == paramExtended)
			i += n
			st = paramNone
			if v == "" && exact {
				continue // boundary="" declares no multipart
			}
			if err := s.declare(v); err != nil {
				return err
			}
		}
	}
}

// declare adds a candidate boundary; in a header block it is the one the
// part declares. Its trimmed form is a candidate too (a fixed-up value may
// lose its spaces).
func (s *scanner) declare(v string) error {
	if len(v) > maxBoundaryLen {
		v = v[:maxBoundaryLen]
	}
	if t := strings.TrimSpace(v); t != v {
		if err := s.declare(t); err != nil {
			return err
		}
		v = strings.TrimRight(v, " \t") // a prefix of what it may become
	}
	if s.candidates.add(v) {
		s.nCandidate++
		if s.nCandidate > s.maxParts+1 {
			return fmt.Errorf("%w: more than %d MIME boundaries declared", ErrTooManyParts, s.maxParts)
		}
	}
	if s.inHeader {
		s.declared, s.hasDecl = v, true
	}
	return nil
}

// boundaryValue reads a parameter value at the start of b: the value (or
// the part of it that can be read exactly), the bytes consumed, and
// whether the value is complete.
func boundaryValue(b []byte, extended bool) (v string, n int, exact bool) {
	if extended {
		// charset'language'percent-encoded
		q1 := bytes.IndexByte(b, '\'')
		if q1 < 0 {
			return "", len(b), false
		}
		q2 := bytes.IndexByte(b[q1+1:], '\'')
		if q2 < 0 {
			return "", len(b), false
		}
		start := q1 + 1 + q2 + 1
		end := start
		for end < len(b) && !isValueEnd(b[end]) && b[end] != '%' {
			end++
		}
		return string(b[start:end]), end, end == len(b) || b[end] != '%'
	}
	if b[0] == '"' {
		end := 1
		for end < len(b) && b[end] != '"' && b[end] != '\\' {
			end++
		}
		if end < len(b) && b[end] == '"' {
			return string(b[1:end]), end + 1, true
		}
		return string(b[1:end]), end, false
	}
	end := 0
	for end < len(b) && !isValueEnd(b[end]) {
		end++
	}
	return string(b[:end]), end, true
}

func isValueEnd(c byte) bool {
	return c == ';' || c == ' ' || c == '\t' || c == '"' || c == '\r' || c == '\n'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// indexFold is the index of the lower-case ASCII word w in b, ignoring
// case, or -1.
func indexFold(b []byte, w string) int {
	for i := 0; i+len(w) <= len(b); i++ {
		if b[i]|0x20 != w[0] {
			continue
		}
		if bytes.EqualFold(b[i:i+len(w)], []byte(w)) {
			return i
		}
	}
	return -1
}

// trieNode is a byte trie of candidate boundaries.
type trieNode struct {
	next map[byte]*trieNode
	end  bool
}

// add inserts s and reports whether it was new.
func (t *trieNode) add(s string) bool {
	n := t
	for i := 0; i < len(s); i++ {
		if n.next == nil {
			n.next = map[byte]*trieNode{}
		}
		c := n.next[s[i]]
		if c == nil {
			c = &trieNode{}
			n.next[s[i]] = c
		}
		n = c
	}
	if n.end {
		return false
	}
	n.end = true
	return true
}

// matchPrefix reports whether some candidate is a prefix of b.
func (t *trieNode) matchPrefix(b []byte) bool {
	n := t
	for i := 0; ; i++ {
		if n.end {
			return true
		}
		if i == len(b) || n.next == nil {
			return false
		}
		if n = n.next[b[i]]; n == nil {
			return false
		}
	}
}

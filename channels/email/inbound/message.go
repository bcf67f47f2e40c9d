package inbound

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"

	"github.com/jhillyerd/enmime/v2"
)

// DefaultMaxBytes is the raw message size limit used when none is given.
const DefaultMaxBytes int64 = 25 << 20

// Message is a parsed inbound email.
type Message struct {
	// From is the address of the From header ("ann@example.com"), the
	// sender comm reports; FromName is its display name, decoded.
	From     string
	FromName string
	// To and Cc are the addresses of those headers. Unparseable lists are
	// left empty rather than refusing the message.
	To []string
	Cc []string
	// Subject is decoded from RFC 2047 to UTF-8.
	Subject string
	// MessageID, InReplyTo and References are message ids without the
	// angle brackets.
	MessageID  string
	InReplyTo  []string
	References []string
	// Date is the Date header; zero when missing or unparseable.
	Date time.Time
	// Text is the new text of the message: FullText with the quoted
	// history removed (see StripQuoted).
	Text string
	// FullText is the whole text/plain body in UTF-8 (derived from the HTML
	// part when the message has no text part).
	FullText string
	// HTML is the text/html body in UTF-8, nil when there is none.
	HTML *string
	// Attachments are the attachment and inline parts, decoded.
	Attachments []Attachment
	// Warnings lists recoverable problems the parser met (a bad charset
	// declaration, malformed base64 in one part ...).
	Warnings []string

	// The fields below are filled by Server, not by Parse.

	// MailFrom is the SMTP envelope sender (MAIL FROM); empty for bounces.
	MailFrom string
	// Digest is the hex SHA-256 of the raw message as received.
	Digest string
	// RemoteAddr is the address of the SMTP client.
	RemoteAddr string
	// Auth holds the sender authentication verdicts.
	Auth AuthResult
}

// Attachment is one attached (or inline) file of a message.
type Attachment struct {
	Filename    string
	ContentType string
	// ContentID is the Content-ID without angle brackets, for inline parts
	// referenced from the HTML as cid:.
	ContentID string
	Inline    bool
	// Size is len(Data), the decoded size in bytes.
	Size int64
	Data []byte
}

// Parser parses raw messages with size limits. The zero value uses
// DefaultMaxBytes for every limit.
type Parser struct {
	// MaxBytes caps the raw message. The whole message is read into memory
	// (enmime does not stream), so this bounds memory per message.
	MaxBytes int64
	// MaxAttachmentBytes caps one decoded attachment; 0 means MaxBytes.
	MaxAttachmentBytes int64
	// MaxTotalAttachmentBytes caps all decoded attachments together; 0
	// means MaxBytes.
	MaxTotalAttachmentBytes int64
	// MaxParts caps the MIME parts of a message (ErrTooManyParts beyond);
	// MaxDepth caps how deep multiparts nest (ErrTooDeep beyond). Both are
	// checked by a linear scan of the raw message before it is parsed.
	// DefaultMaxParts and DefaultMaxDepth when 0.
	MaxParts int
	MaxDepth int
	// MaxBase64Errors caps the bytes outside the base64 alphabet in the
	// base64 parts of a message (ErrMalformed beyond; fewer are dropped
	// with a warning); DefaultMaxBase64Errors when 0, none when negative.
	MaxBase64Errors int
	// MaxHeaderBytes caps each header section (the message's and each
	// MIME part's) and MaxHeaderFieldBytes one header field in them, with
	// its continuation lines (ErrHeaderTooLarge beyond); checked by the
	// same scan, before any header parser runs. DefaultMaxHeaderBytes and
	// DefaultMaxHeaderFieldBytes when 0.
	MaxHeaderBytes      int
	MaxHeaderFieldBytes int
	// Timeout bounds the scan and the parse of one message
	// (ErrParseTimeout beyond); DefaultParseTimeout when 0.
	Timeout time.Duration
}

// DefaultParseTimeout is the parse time limit used when none is given.
const DefaultParseTimeout = 20 * time.Second

// Parse parses the raw RFC 5322 message read from r, reading at most
// maxBytes (0 means DefaultMaxBytes). A message above the limit gives an
// error wrapping ErrTooLarge; a message that cannot be parsed an error
// wrapping ErrMalformed.
func Parse(r io.Reader, maxBytes int64) (*Message, error) {
	p := Parser{MaxBytes: maxBytes}
	return p.Parse(r)
}

// Parse parses the raw RFC 5322 message read from r under p's limits. It
// reads the message twice, at most MaxBytes+1 bytes each time: once to
// check its MIME structure against MaxParts and MaxDepth and its header
// sections against MaxHeaderBytes and MaxHeaderFieldBytes (linear in its
// size), then to parse it with enmime, which holds it in memory while it
// decodes. A reader that cannot seek is read into memory first.
func (p Parser) Parse(r io.Reader) (msg *Message, err error) {
	maxBytes := p.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		raw, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		rs = bytes.NewReader(raw)
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	dr := &deadlineReader{r: rs, deadline: time.Now().Add(orDur(p.Timeout, DefaultParseTimeout))}
	lr := &io.LimitedReader{R: dr, N: maxBytes + 1}
	serr := prescan(lr, scanLimits{maxParts: orInt(p.MaxParts, DefaultMaxParts), maxDepth: orInt(p.MaxDepth, DefaultMaxDepth),
		maxBase64Errors: max(limit(p.MaxBase64Errors, DefaultMaxBase64Errors), 0),
		maxHeaderBytes:  orInt(p.MaxHeaderBytes, DefaultMaxHeaderBytes), maxFieldBytes: orInt(p.MaxHeaderFieldBytes, DefaultMaxHeaderFieldBytes)})
	switch {
	case dr.expired:
		return nil, fmt.Errorf("%w: more than %s", ErrParseTimeout, orDur(p.Timeout, DefaultParseTimeout))
	case serr != nil:
		return nil, serr
	case lr.N <= 0:
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return nil, err
	}
	lr = &io.LimitedReader{R: dr, N: maxBytes + 1}

	defer func() {
		// enmime is defensive, but a parser bug must cost one message, not
		// the listener.
		if v := recover(); v != nil {
			msg, err = nil, fmt.Errorf("%w: parser panic: %v", ErrMalformed, v)
		}
	}()

	env, perr := parser.ReadEnvelope(lr)
	if _, cerr := io.Copy(io.Discard, lr); cerr != nil && perr == nil {
		perr = cerr
	}
	if dr.expired {
		return nil, fmt.Errorf("%w: more than %s", ErrParseTimeout, orDur(p.Timeout, DefaultParseTimeout))
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	if perr != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, perr)
	}
	msg, err = p.fromEnvelope(env, maxBytes)
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// deadlineReader fails every read after its deadline, which stops enmime
// at its next read: a parse cannot run on past the time limit.
type deadlineReader struct {
	r        io.Reader
	deadline time.Time
	expired  bool
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if d.expired || time.Now().After(d.deadline) {
		d.expired = true
		return 0, ErrParseTimeout
	}
	return d.r.Read(p)
}

func (p Parser) fromEnvelope(env *enmime.Envelope, maxBytes int64) (*Message, error) {
	from, err := env.AddressList("From")
	if errors.Is(err, mail.ErrHeaderNotPresent) || (err == nil && len(from) == 0) {
		return nil, fmt.Errorf("%w: no From header", ErrMalformed)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: From header: %v", ErrMalformed, err)
	}
	msg := &Message{
		From:       from[0].Address,
		FromName:   from[0].Name,
		To:         addresses(env, "To"),
		Cc:         addresses(env, "Cc"),
		Subject:    strings.TrimSpace(env.GetHeader("Subject")),
		InReplyTo:  msgIDList(env.GetHeader("In-Reply-To")),
		References: msgIDList(env.GetHeader("References")),
		FullText:   env.Text,
		Text:       StripQuoted(env.Text),
	}
	if ids := msgIDList(env.GetHeader("Message-ID")); len(ids) > 0 {
		msg.MessageID = ids[0]
	}
	if d, err := env.Date(); err == nil {
		msg.Date = d
	}
	if env.HTML != "" {
		html := env.HTML
		msg.HTML = &html
	}
	seen := map[string]bool{}
	for _, e := range env.Errors {
		w := e.Error()
		switch {
		case seen[w]:
		case len(msg.Warnings) == maxWarnings:
			msg.Warnings = append(msg.Warnings, "more warnings left out")
		case len(msg.Warnings) < maxWarnings:
			msg.Warnings = append(msg.Warnings, w)
		}
		seen[w] = true
	}
	if err := p.attachments(msg, env, maxBytes); err != nil {
		return nil, err
	}
	msg.sanitize()
	return msg, nil
}

func (p Parser) attachments(msg *Message, env *enmime.Envelope, maxBytes int64) error {
	perPart, total := p.MaxAttachmentBytes, p.MaxTotalAttachmentBytes
	if perPart <= 0 {
		perPart = maxBytes
	}
	if total <= 0 {
		total = maxBytes
	}
	var sum int64
	add := func(part *enmime.Part, inline bool) error {
		size := int64(len(part.Content))
		if size > perPart {
			return fmt.Errorf("%w: attachment %q is %d bytes, limit %d", ErrTooLarge, part.FileName, size, perPart)
		}
		sum += size
		if sum > total {
			return fmt.Errorf("%w: attachments exceed %d bytes", ErrTooLarge, total)
		}
		msg.Attachments = append(msg.Attachments, Attachment{
			Filename:    part.FileName,
			ContentType: part.ContentType,
			ContentID:   strings.Trim(part.ContentID, "<>"),
			Inline:      inline,
			Size:        size,
			Data:        part.Content, // shared with enmime, not copied
		})
		return nil
	}
	for _, part := range env.Attachments {
		if err := add(part, false); err != nil {
			return err
		}
	}
	for _, part := range env.Inlines {
		if err := add(part, true); err != nil {
			return err
		}
	}
	return nil
}

// addresses returns the addresses of an address header, or nil when it is
// missing or does not parse.
func addresses(env *enmime.Envelope, key string) []string {
	list, err := env.AddressList(key)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		out = append(out, a.Address)
	}
	return out
}

// msgIDList splits a Message-ID, In-Reply-To or References value into ids
// without angle brackets. Values that use no brackets at all (seen from
// broken clients) are split on white space.
func msgIDList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	var ids []string
	for {
		start := strings.IndexByte(v, '<')
		if start < 0 {
			break
		}
		end := strings.IndexByte(v[start:], '>')
		if end < 0 {
			break
		}
		if id := strings.TrimSpace(v[start+1 : start+end]); id != "" {
			ids = append(ids, id)
		}
		v = v[start+end+1:]
	}
	if ids == nil && !strings.ContainsAny(v, "<>") {
		ids = strings.Fields(v)
	}
	return ids
}

// parser trusts a part's declared charset and guesses (an expensive n-gram
// detection) only for parts that declare none.
// A multipart without a boundary is read as one part (enmime would split it
// at every line starting with "--"). A part whose base64 breaks off keeps
// what decoded before the break, with a warning, instead of nothing.
var parser = enmime.NewParser(enmime.DisableCharacterDetection(true),
	enmime.MultipartWOBoundaryAsSinglePart(true),
	enmime.MaxStoredPartErrors(maxPartWarnings),
	enmime.SetReadPartErrorPolicy(func(_ *enmime.Part, err error) bool { return enmime.IsBase64CorruptInputError(err) }))

// maxWarnings caps the distinct warnings kept per message.
const maxWarnings = 20

// maxPartWarnings caps the warnings kept per part.
const maxPartWarnings = 10

// Package outbound builds, signs and submits comm's outbound email.
//
// Compose turns a Mail into an RFC 5322 message (UTF-8, quoted-printable,
// text/plain or multipart/alternative) with the threading headers a reply
// needs. SignDKIM adds a DKIM-Signature for a custom sending domain.
// Relay submits the result to an SMTP relay (STARTTLS or implicit TLS) and
// classifies failures as channels.ErrTransient or channels.ErrPermanent.
package outbound

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode"

	gomail "github.com/emersion/go-message/mail"
)

// ErrHeaderInjection is returned by Compose when a header value that
// cannot be made one line (an address or a message id) contains CR or LF;
// subjects and display names are made one line instead.
var ErrHeaderInjection = errors.New("header value contains CR or LF")

// Mail is one outbound message.
type Mail struct {
	// From is the sender; its domain is the sending domain that generated
	// Message-IDs use. Name is the display name, may be empty.
	From mail.Address
	// To are the recipients named in the To header; at least one.
	To []mail.Address
	// Subject as the reader sees it; non-ASCII is RFC 2047 encoded. A "Re: "
	// prefix is the caller's to add.
	Subject string
	// Text is the plain-text body. Required unless HTML is set.
	Text string
	// HTML, when set, makes the message multipart/alternative (Text first).
	HTML string
	// MessageID is the id without angle brackets, e.g. "abc@example.com".
	// Empty: Compose generates <random@sending-domain>.
	MessageID string
	// InReplyTo lists the ids (without angle brackets) of the message
	// answered; normally one.
	InReplyTo []string
	// References lists the parent's References followed by the parent's id.
	References []string
	// ReplyTo, when set, is where answers should go (Reply-To).
	ReplyTo *mail.Address
	// Date is the origination date; zero means now.
	Date time.Time
}

// Compose renders m as an RFC 5322 message with CRLF line endings and
// returns it with its Message-ID (without angle brackets), generated on the
// sending domain when m.MessageID is empty.
func Compose(m Mail) (msg []byte, messageID string, err error) {
	// Free text becomes one line: a subject or a name that arrived with
	// CR or LF in it (from an encoded word of an inbound mail, say) is
	// answered with the line breaks as spaces, never as header breaks.
	m.Subject = OneLine(m.Subject)
	m.From.Name = OneLine(m.From.Name)
	m.To = slices.Clone(m.To)
	for i := range m.To {
		m.To[i].Name = OneLine(m.To[i].Name)
	}
	if m.ReplyTo != nil {
		rt := *m.ReplyTo
		rt.Name = OneLine(rt.Name)
		m.ReplyTo = &rt
	}
	if err := m.validate(); err != nil {
		return nil, "", fmt.Errorf("email: compose: %w", err)
	}
	messageID = m.MessageID
	if messageID == "" {
		if messageID, err = NewMessageID(domainOf(m.From.Address)); err != nil {
			return nil, "", fmt.Errorf("email: compose: %w", err)
		}
	}
	date := m.Date
	if date.IsZero() {
		date = time.Now()
	}

	var h gomail.Header
	h.SetDate(date)
	h.SetAddressList("From", []*gomail.Address{{Name: m.From.Name, Address: m.From.Address}})
	to := make([]*gomail.Address, len(m.To))
	for i, a := range m.To {
		to[i] = &gomail.Address{Name: a.Name, Address: a.Address}
	}
	h.SetAddressList("To", to)
	if m.ReplyTo != nil {
		h.SetAddressList("Reply-To", []*gomail.Address{{Name: m.ReplyTo.Name, Address: m.ReplyTo.Address}})
	}
	h.SetSubject(m.Subject)
	h.SetMessageID(messageID)
	h.SetMsgIDList("In-Reply-To", trimIDs(m.InReplyTo))
	h.SetMsgIDList("References", trimIDs(m.References))

	var b strings.Builder
	if err := writeBody(&b, h, m.Text, m.HTML); err != nil {
		return nil, "", fmt.Errorf("email: compose: %w", err)
	}
	return []byte(b.String()), messageID, nil
}

// OneLine makes header text one line: every run of control characters
// (CR, LF, tab, NUL ...) becomes one space.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// NewMessageID returns a fresh random message id "random@domain" (without
// angle brackets).
func NewMessageID(domain string) (string, error) {
	if domain == "" || strings.ContainsAny(domain, "<>@ \t\r\n") {
		return "", fmt.Errorf("invalid message id domain %q", domain)
	}
	var buf [20]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	return strings.ToLower(enc.EncodeToString(buf[:])) + "@" + domain, nil
}

func writeBody(b *strings.Builder, h gomail.Header, text, html string) error {
	textHeader := func(kind string) gomail.InlineHeader {
		var ih gomail.InlineHeader
		ih.SetContentType(kind, map[string]string{"charset": "utf-8"})
		ih.Set("Content-Transfer-Encoding", "quoted-printable")
		return ih
	}
	if html == "" {
		th := textHeader("text/plain")
		h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
		h.Set("Content-Transfer-Encoding", th.Get("Content-Transfer-Encoding"))
		w, err := gomail.CreateSingleInlineWriter(b, h)
		if err != nil {
			return fmt.Errorf("write header: %w", err)
		}
		return writeClose(w, text)
	}
	iw, err := gomail.CreateInlineWriter(b, h)
	if err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	for _, part := range []struct{ kind, body string }{{"text/plain", text}, {"text/html", html}} {
		pw, err := iw.CreatePart(textHeader(part.kind))
		if err != nil {
			return fmt.Errorf("create %s part: %w", part.kind, err)
		}
		if err := writeClose(pw, part.body); err != nil {
			return err
		}
	}
	if err := iw.Close(); err != nil {
		return fmt.Errorf("close multipart: %w", err)
	}
	return nil
}

func writeClose(w interface {
	Write([]byte) (int, error)
	Close() error
}, body string) error {
	if _, err := w.Write([]byte(body)); err != nil {
		return fmt.Errorf("write body: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close body: %w", err)
	}
	return nil
}

// validate rejects what would break or inject into the header.
func (m Mail) validate() error {
	fields := []struct{ name, value string }{
		{"from name", m.From.Name},
		{"from address", m.From.Address},
		{"subject", m.Subject},
		{"message id", m.MessageID},
	}
	for _, a := range m.To {
		fields = append(fields, struct{ name, value string }{"to name", a.Name}, struct{ name, value string }{"to address", a.Address})
	}
	for _, id := range m.InReplyTo {
		fields = append(fields, struct{ name, value string }{"in-reply-to", id})
	}
	for _, id := range m.References {
		fields = append(fields, struct{ name, value string }{"references", id})
	}
	for _, f := range fields {
		if strings.ContainsAny(f.value, "\r\n") {
			return fmt.Errorf("%s %q: %w", f.name, f.value, ErrHeaderInjection)
		}
	}
	if err := checkAddress("from", m.From.Address); err != nil {
		return err
	}
	if m.ReplyTo != nil {
		if strings.ContainsAny(m.ReplyTo.Name+m.ReplyTo.Address, "\r\n") {
			return fmt.Errorf("reply-to %q: %w", m.ReplyTo.Address, ErrHeaderInjection)
		}
		if err := checkAddress("reply-to", m.ReplyTo.Address); err != nil {
			return err
		}
	}
	if len(m.To) == 0 {
		return errors.New("no recipient")
	}
	for _, a := range m.To {
		if err := checkAddress("to", a.Address); err != nil {
			return err
		}
	}
	if m.MessageID != "" {
		if err := checkMsgID(m.MessageID); err != nil {
			return err
		}
	}
	for _, id := range append(append([]string(nil), m.InReplyTo...), m.References...) {
		if err := checkMsgID(strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")); err != nil {
			return err
		}
	}
	return nil
}

func checkAddress(field, addr string) error {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr {
		return fmt.Errorf("%s address %q is not a bare addr-spec", field, addr)
	}
	return nil
}

// ValidMessageID reports whether id (without angle brackets) is a message
// id Compose accepts in In-Reply-To and References.
func ValidMessageID(id string) bool { return checkMsgID(id) == nil }

func checkMsgID(id string) error {
	left, right, ok := strings.Cut(id, "@")
	if !ok || left == "" || right == "" || strings.ContainsAny(id, "<> \t\"\\()[],;:") || strings.Count(id, "@") != 1 {
		return fmt.Errorf("invalid message id %q", id)
	}
	for _, r := range id {
		if r < '!' || r > '~' {
			return fmt.Errorf("invalid message id %q", id)
		}
	}
	return nil
}

func trimIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id = strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">"); id != "" {
			out = append(out, id)
		}
	}
	return out
}

func domainOf(addr string) string {
	return addr[strings.LastIndexByte(addr, '@')+1:]
}

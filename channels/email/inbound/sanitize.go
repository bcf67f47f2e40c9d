package inbound

import (
	"strings"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels/email/outbound"
)

// sanitize makes every text field of msg storable: NUL bytes (which
// PostgreSQL refuses in text columns and JSON) and byte sequences that are
// not UTF-8 become U+FFFD. A message that needed it says so in Warnings.
// Attachment bytes are left alone.
func (msg *Message) sanitize() {
	changed := false
	fix := func(s *string) {
		if c, ok := cleanText(*s); !ok {
			*s, changed = c, true
		}
	}
	fixAll := func(list []string) {
		for i := range list {
			fix(&list[i])
		}
	}
	fix(&msg.From)
	fix(&msg.FromName)
	fixAll(msg.To)
	fixAll(msg.Cc)
	fix(&msg.Subject)
	fix(&msg.MessageID)
	fixAll(msg.InReplyTo)
	fixAll(msg.References)
	fix(&msg.Text)
	fix(&msg.FullText)
	if msg.HTML != nil {
		fix(msg.HTML)
	}
	fixAll(msg.Warnings)
	for i := range msg.Attachments {
		a := &msg.Attachments[i]
		fix(&a.Filename)
		fix(&a.ContentType)
		fix(&a.ContentID)
	}
	fix(&msg.MailFrom)
	// An encoded CR or LF in a one-line header would break the headers of
	// a reply that quotes it.
	msg.Subject, msg.FromName = outbound.OneLine(msg.Subject), outbound.OneLine(msg.FromName)
	for i := range msg.Attachments {
		msg.Attachments[i].Filename = outbound.OneLine(msg.Attachments[i].Filename)
	}
	if changed {
		msg.Warnings = append(msg.Warnings, "NUL bytes or invalid UTF-8 in the headers or text were replaced with U+FFFD")
	}
}

// cleanText returns s with NUL bytes and invalid UTF-8 replaced by U+FFFD,
// and whether s was clean already.
func cleanText(s string) (string, bool) {
	if !strings.Contains(s, "\x00") && utf8.ValidString(s) {
		return s, true
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD"), false
}

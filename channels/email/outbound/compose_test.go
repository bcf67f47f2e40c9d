package outbound

import (
	"bytes"
	"errors"
	"io"
	"net/mail"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"
)

func baseMail() Mail {
	return Mail{
		From:    mail.Address{Name: "Agent Smith", Address: "agent@example.com"},
		To:      []mail.Address{{Name: "Ann", Address: "ann@customer.test"}},
		Subject: "Hello",
		Text:    "Hi Ann,\nsee you.\n",
		Date:    time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	}
}

// parsed is a composed message read back with go-message.
type parsed struct {
	header gomail.Header
	parts  map[string]string // content type -> decoded body
}

func parse(t *testing.T, msg []byte) parsed {
	t.Helper()
	if bytes.Contains(bytes.ReplaceAll(msg, []byte("\r\n"), nil), []byte("\n")) {
		t.Fatalf("bare LF in message:\n%s", msg)
	}
	r, err := gomail.CreateReader(bytes.NewReader(msg))
	if err != nil {
		t.Fatalf("read message: %v\n%s", err, msg)
	}
	p := parsed{header: r.Header, parts: map[string]string{}}
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("next part: %v", err)
		}
		h, ok := part.Header.(*gomail.InlineHeader)
		if !ok {
			t.Fatalf("part header %T, want inline", part.Header)
		}
		ct, params, _ := h.ContentType()
		if params["charset"] != "utf-8" {
			t.Errorf("%s charset = %q, want utf-8", ct, params["charset"])
		}
		if cte := h.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
			t.Errorf("%s Content-Transfer-Encoding = %q, want quoted-printable", ct, cte)
		}
		b, err := io.ReadAll(part.Body)
		if err != nil {
			t.Fatal(err)
		}
		p.parts[ct] = string(b)
	}
	return p
}

func TestCompose(t *testing.T) {
	t.Parallel()
	longLine := strings.Repeat("Grüße aus Köln — ", 20)
	tests := []struct {
		name        string
		edit        func(*Mail)
		wantType    string
		wantParts   map[string]string
		wantSubject string
		wantID      string // "" means generated on example.com
		wantReplyTo []string
		wantRefs    []string
	}{
		{
			name:        "text only",
			wantType:    "text/plain",
			wantParts:   map[string]string{"text/plain": "Hi Ann,\r\nsee you.\r\n"},
			wantSubject: "Hello",
		},
		{
			name: "text and html",
			edit: func(m *Mail) {
				m.HTML = "<p>Hi Ann, <b>see you</b>.</p>"
			},
			wantType: "multipart/alternative",
			wantParts: map[string]string{
				"text/plain": "Hi Ann,\r\nsee you.\r\n",
				"text/html":  "<p>Hi Ann, <b>see you</b>.</p>",
			},
			wantSubject: "Hello",
		},
		{
			name: "reply with threading and non-ASCII",
			edit: func(m *Mail) {
				m.Subject = "Re: Grüße – 会議の件 😀 " + strings.Repeat("long subject ", 8)
				m.Text = longLine
				m.MessageID = "fixed.1@example.com"
				m.InReplyTo = []string{"<parent@customer.test>"}
				m.References = []string{"root@customer.test", "parent@customer.test"}
			},
			wantType:    "text/plain",
			wantParts:   map[string]string{"text/plain": longLine},
			wantSubject: "Re: Grüße – 会議の件 😀 " + strings.Repeat("long subject ", 8),
			wantID:      "fixed.1@example.com",
			wantReplyTo: []string{"parent@customer.test"},
			wantRefs:    []string{"root@customer.test", "parent@customer.test"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := baseMail()
			if tt.edit != nil {
				tt.edit(&m)
			}
			msg, id, err := Compose(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(msg), "\r\n") {
				if len(line) > 998 {
					t.Errorf("line longer than 998 octets: %.60q...", line)
				}
				if !isASCII(line) {
					t.Errorf("non-ASCII line (want 7-bit): %q", line)
				}
			}
			p := parse(t, msg)
			if ct, _, _ := p.header.ContentType(); ct != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", ct, tt.wantType)
			}
			for ct, want := range tt.wantParts {
				if got := p.parts[ct]; got != want {
					t.Errorf("%s body = %q, want %q", ct, got, want)
				}
			}
			if len(p.parts) != len(tt.wantParts) {
				t.Errorf("parts %v, want %d", p.parts, len(tt.wantParts))
			}
			if got, _ := p.header.Subject(); got != tt.wantSubject {
				t.Errorf("Subject = %q, want %q", got, tt.wantSubject)
			}
			gotID, err := p.header.MessageID()
			if err != nil || gotID != id {
				t.Errorf("Message-ID = %q (%v), returned %q", gotID, err, id)
			}
			if tt.wantID != "" && id != tt.wantID {
				t.Errorf("Message-ID = %q, want %q", id, tt.wantID)
			}
			if tt.wantID == "" && (!strings.HasSuffix(id, "@example.com") || len(id) < 20) {
				t.Errorf("generated Message-ID = %q, want random@example.com", id)
			}
			if got, _ := p.header.MsgIDList("In-Reply-To"); !equal(got, tt.wantReplyTo) {
				t.Errorf("In-Reply-To = %q, want %q", got, tt.wantReplyTo)
			}
			if got, _ := p.header.MsgIDList("References"); !equal(got, tt.wantRefs) {
				t.Errorf("References = %q, want %q", got, tt.wantRefs)
			}
			from, err := p.header.AddressList("From")
			if err != nil || len(from) != 1 || from[0].Name != "Agent Smith" || from[0].Address != "agent@example.com" {
				t.Errorf("From = %v (%v)", from, err)
			}
			if d, err := p.header.Date(); err != nil || !d.Equal(m.Date) {
				t.Errorf("Date = %v (%v), want %v", d, err, m.Date)
			}
		})
	}
}

func TestComposeGeneratesUniqueIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 50 {
		_, id, err := Compose(baseMail())
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate Message-ID %q", id)
		}
		seen[id] = true
	}
}

func TestComposeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		edit      func(*Mail)
		injection bool
	}{
		{"LF in to address", func(m *Mail) { m.To[0].Address = "ann@customer.test\nBcc: x@y.z" }, true},
		{"CRLF in message id", func(m *Mail) { m.MessageID = "a@b\r\nX: y" }, true},
		{"CRLF in in-reply-to", func(m *Mail) { m.InReplyTo = []string{"a@b>\r\nBcc: <x@y"} }, true},
		{"LF in references", func(m *Mail) { m.References = []string{"a@b\nX: y"} }, true},
		{"no recipient", func(m *Mail) { m.To = nil }, false},
		{"bad from", func(m *Mail) { m.From.Address = "not an address" }, false},
		{"from with name syntax", func(m *Mail) { m.From.Address = "X <agent@example.com>" }, false},
		{"bad message id", func(m *Mail) { m.MessageID = "no-at-sign" }, false},
		{"message id with brackets", func(m *Mail) { m.MessageID = "a>b@c" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := baseMail()
			tt.edit(&m)
			msg, _, err := Compose(m)
			if err == nil {
				t.Fatalf("Compose succeeded:\n%s", msg)
			}
			if got := errors.Is(err, ErrHeaderInjection); got != tt.injection {
				t.Errorf("errors.Is(%v, ErrHeaderInjection) = %v, want %v", err, got, tt.injection)
			}
			if !strings.HasPrefix(err.Error(), "email: compose: ") {
				t.Errorf("error %q lacks the email: compose: prefix", err)
			}
		})
	}
}

// TestComposeOneLine: CR and LF in a subject or a display name (from an
// inbound mail's encoded words) become spaces; no header is injected.
func TestComposeOneLine(t *testing.T) {
	t.Parallel()
	m := baseMail()
	m.Subject = "Hi\r\nBcc: victim@example.org"
	m.From.Name = "Agent\rX-Evil: 1"
	m.To[0].Name = "Ann\nBcc: x@y.z"
	m.ReplyTo = &mail.Address{Name: "R\r\nX-Evil: 2", Address: "agent@example.com"}
	msg, _, err := Compose(m)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(msg), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		if strings.HasPrefix(line, "Bcc:") || strings.HasPrefix(line, "X-Evil:") {
			t.Errorf("injected header line %q in\n%s", line, head)
		}
	}
	if !strings.Contains(head, "Subject: Hi Bcc: victim@example.org") {
		t.Errorf("subject not made one line:\n%s", head)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

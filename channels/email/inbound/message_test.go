package inbound

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		raw   string
		check func(t *testing.T, m *Message)
	}{
		{"plain", plainMsg, func(t *testing.T, m *Message) {
			eq(t, "From", m.From, "ann@example.com")
			eq(t, "FromName", m.FromName, "Ann Example")
			eq(t, "Subject", m.Subject, "Hello there")
			eq(t, "MessageID", m.MessageID, "plain-1@example.com")
			eq(t, "Text", m.Text, "Just a plain note.")
			if m.HTML != nil {
				t.Errorf("HTML = %q, want nil", *m.HTML)
			}
			if !slices.Equal(m.To, []string{"inbox@in.comm.test"}) {
				t.Errorf("To = %v", m.To)
			}
			if m.Date.IsZero() || m.Date.UTC().Hour() != 22 {
				t.Errorf("Date = %v", m.Date)
			}
		}},
		{"multipart alternative with attachment", multipartMsg, func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, "See the report attached.")
			if m.HTML == nil || !strings.Contains(*m.HTML, "<b>report</b>") {
				t.Errorf("HTML = %v", m.HTML)
			}
			if !slices.Equal(m.To, []string{"inbox@in.comm.test", "other@in.comm.test"}) || !slices.Equal(m.Cc, []string{"carol@example.net"}) {
				t.Errorf("To = %v, Cc = %v", m.To, m.Cc)
			}
			if len(m.Attachments) != 1 {
				t.Fatalf("attachments = %d, want 1", len(m.Attachments))
			}
			a := m.Attachments[0]
			eq(t, "Filename", a.Filename, "report.pdf")
			eq(t, "ContentType", a.ContentType, "application/pdf")
			if a.Size != int64(len(attachmentData)) || !bytes.Equal(a.Data, attachmentData) || a.Inline {
				t.Errorf("attachment = %+v", a)
			}
		}},
		{"iso-8859-1 quoted-printable", latin1QPMsg, func(t *testing.T, m *Message) {
			eq(t, "Subject", m.Subject, "Café crème")
			eq(t, "FromName", m.FromName, "René")
			eq(t, "Text", m.Text, "Déjà vu, garçon.")
		}},
		{"iso-8859-1 base64", latin1B64Msg, func(t *testing.T, m *Message) {
			eq(t, "Subject", m.Subject, "Grüße")
			eq(t, "Text", m.Text, "Grüße aus Köln")
		}},
		{"shift_jis", sjisMsg, func(t *testing.T, m *Message) {
			eq(t, "Subject", m.Subject, "こんにちは")
			eq(t, "Text", m.Text, "こんにちは")
		}},
		{"reply with quoted history and threading", replyMsg, func(t *testing.T, m *Message) {
			eq(t, "Text", m.Text, "Sounds good, see you Tuesday.")
			if !strings.Contains(m.FullText, "> Shall we meet on Tuesday?") || !strings.Contains(m.FullText, "wrote:") {
				t.Errorf("FullText lost the history: %q", m.FullText)
			}
			eq(t, "MessageID", m.MessageID, "reply-2@example.com")
			if !slices.Equal(m.InReplyTo, []string{"out-1@in.comm.test"}) {
				t.Errorf("InReplyTo = %q", m.InReplyTo)
			}
			if !slices.Equal(m.References, []string{"root-0@example.com", "out-1@in.comm.test"}) {
				t.Errorf("References = %q", m.References)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse(strings.NewReader(tt.raw), 1<<20)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, m)
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		raw    string
		parser Parser
		want   error
	}{
		{"no From", noFromMsg, Parser{}, ErrMalformed},
		{"unparseable From", badFromMsg, Parser{}, ErrMalformed},
		{"empty input", "", Parser{}, ErrMalformed},
		{"message over limit", plainMsg, Parser{MaxBytes: 50}, ErrTooLarge},
		{"attachment over limit", multipartMsg, Parser{MaxAttachmentBytes: 10}, ErrTooLarge},
		{"attachments over total", multipartMsg, Parser{MaxTotalAttachmentBytes: 10}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := tt.parser.Parse(strings.NewReader(tt.raw))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse = %+v, %v; want %v", m, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "email: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

// TestParseNeverPanics feeds every truncation and some corruptions of a
// multipart message: each must parse or fail with ErrMalformed.
func TestParseNeverPanics(t *testing.T) {
	t.Parallel()
	inputs := []string{multipartMsg, replyMsg, latin1QPMsg}
	for _, raw := range inputs {
		for i := 0; i <= len(raw); i += 7 {
			variants := []string{
				raw[:i],
				raw[:i] + "\x00\xff\r\n--outer\r\nContent-Type: multipart/mixed; boundary=\r\n\r\n",
				strings.Replace(raw[:i], ":", "", 1) + raw[i:],
			}
			for _, v := range variants {
				_, err := Parse(strings.NewReader(v), 1<<20)
				if err != nil && !errors.Is(err, ErrMalformed) {
					t.Fatalf("Parse(%q) = %v, want nil or ErrMalformed", v, err)
				}
			}
		}
	}
}

func TestMsgIDList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"<a@b>", []string{"a@b"}},
		{" <a@b>\r\n\t<c@d> ", []string{"a@b", "c@d"}},
		{"<a@b> (comment) <c@d>", []string{"a@b", "c@d"}},
		{"a@b c@d", []string{"a@b", "c@d"}},
		{"<>", nil},
	}
	for _, tt := range tests {
		if got := msgIDList(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("msgIDList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func eq(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeBackend knows a fixed set of inboxes and records deliveries.
type fakeBackend struct {
	inboxes    map[string]bool
	deliverErr error

	mu        sync.Mutex
	delivered []delivery
}

type delivery struct {
	rcpts []string
	msg   *Message
}

func (b *fakeBackend) Accept(_ context.Context, rcpt string) error {
	if !b.inboxes[strings.ToLower(rcpt)] {
		return fmt.Errorf("lookup %s: %w", rcpt, ErrUnknownRecipient)
	}
	return nil
}

func (b *fakeBackend) Deliver(_ context.Context, rcpts []string, msg *Message) error {
	if b.deliverErr != nil {
		return b.deliverErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delivered = append(b.delivered, delivery{rcpts, msg})
	return nil
}

func (b *fakeBackend) deliveries() []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.delivered)
}

// startServer serves srv on a fresh 127.0.0.1 port and returns its address.
func startServer(t *testing.T, srv *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

func newTestServer(t *testing.T, mod func(*Server, *fakeBackend)) (string, *fakeBackend) {
	t.Helper()
	be := &fakeBackend{inboxes: map[string]bool{"inbox@in.comm.test": true, "other@in.comm.test": true}}
	srv := &Server{Domain: "in.comm.test", Backend: be, MaxMessageBytes: 64 << 10}
	if mod != nil {
		mod(srv, be)
	}
	return startServer(t, srv), be
}

// send runs one SMTP transaction with net/smtp and returns the first
// error with the stage it happened at.
func send(addr, from string, rcpts []string, raw string) (stage string, err error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return "dial", err
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		return "helo", err
	}
	if err := c.Mail(from); err != nil {
		return "mail", err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return "rcpt", err
		}
	}
	w, err := c.Data()
	if err != nil {
		return "data", err
	}
	if _, err := w.Write([]byte(raw)); err != nil {
		return "data", err
	}
	if err := w.Close(); err != nil {
		return "data", err
	}
	return "", c.Quit()
}

func code(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

func TestServerDelivers(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{"_dmarc.example.com": {"v=DMARC1; p=quarantine"}}
	signed := newSigner(t, "example.com", dns).sign(t, replyMsg)
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.Resolver = dns })

	tests := []struct {
		name  string
		rcpts []string
		raw   string
		check func(t *testing.T, d delivery)
	}{
		{"plain", []string{"inbox@in.comm.test"}, plainMsg, func(t *testing.T, d delivery) {
			eq(t, "From", d.msg.From, "ann@example.com")
			eq(t, "Text", d.msg.Text, "Just a plain note.")
			eq(t, "MailFrom", d.msg.MailFrom, "sender@client.test")
			if d.msg.Auth.DKIM != None || d.msg.Auth.DMARC != Fail {
				t.Errorf("Auth = %+v, want unsigned and DMARC fail", d.msg.Auth)
			}
		}},
		{"multipart with html and attachment", []string{"inbox@in.comm.test", "other@in.comm.test"}, multipartMsg, func(t *testing.T, d delivery) {
			if !slices.Equal(d.rcpts, []string{"inbox@in.comm.test", "other@in.comm.test"}) {
				t.Errorf("rcpts = %v", d.rcpts)
			}
			if d.msg.HTML == nil || len(d.msg.Attachments) != 1 || string(d.msg.Attachments[0].Data) != string(attachmentData) {
				t.Errorf("message = %+v", d.msg)
			}
		}},
		{"iso-8859-1 quoted-printable", []string{"inbox@in.comm.test"}, latin1QPMsg, func(t *testing.T, d delivery) {
			eq(t, "Subject", d.msg.Subject, "Café crème")
			eq(t, "Text", d.msg.Text, "Déjà vu, garçon.")
		}},
		{"iso-8859-1 base64", []string{"inbox@in.comm.test"}, latin1B64Msg, func(t *testing.T, d delivery) {
			eq(t, "Text", d.msg.Text, "Grüße aus Köln")
		}},
		{"signed reply with quoted history", []string{"inbox@in.comm.test"}, signed, func(t *testing.T, d delivery) {
			eq(t, "Text", d.msg.Text, "Sounds good, see you Tuesday.")
			if !strings.Contains(d.msg.FullText, "> Shall we meet") {
				t.Errorf("FullText = %q", d.msg.FullText)
			}
			if !slices.Equal(d.msg.References, []string{"root-0@example.com", "out-1@in.comm.test"}) || !slices.Equal(d.msg.InReplyTo, []string{"out-1@in.comm.test"}) {
				t.Errorf("threading = %q / %q", d.msg.InReplyTo, d.msg.References)
			}
			if d.msg.Auth.DKIM != Pass || d.msg.Auth.DMARC != Pass || d.msg.Auth.DMARCPolicy != "quarantine" {
				t.Errorf("Auth = %+v, want DKIM and DMARC pass", d.msg.Auth)
			}
			if sum := sha256.Sum256([]byte(signed)); d.msg.Digest != hex.EncodeToString(sum[:]) {
				t.Errorf("digest %s is not the SHA-256 of what was sent", d.msg.Digest)
			}
		}},
	}
	// Sequential: each case looks at the delivery it caused.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(be.deliveries())
			if stage, err := send(addr, "sender@client.test", tt.rcpts, tt.raw); err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			got := be.deliveries()
			if len(got) != before+1 {
				t.Fatalf("deliveries = %d, want %d", len(got), before+1)
			}
			tt.check(t, got[before])
		})
	}
}

// TestServerSPF: the session hands the client address, the EHLO name and
// MAIL FROM to the SPF check.
func TestServerSPF(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{
		"example.test":        {"v=spf1 ip4:127.0.0.1 -all"},
		"_dmarc.example.test": {"v=DMARC1; p=reject"},
		"client.test":         {"v=spf1 ip4:192.0.2.1 -all"}, // send's EHLO name
	}
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.Resolver = dns })
	raw := strings.Replace(plainMsg, "ann@example.com", "ann@example.test", 1)

	tests := []struct {
		name, mailFrom string
		spf            Verdict
		spfDomain      string
		dmarc          Verdict
	}{
		{"MAIL FROM domain lists the client", "sender@example.test", Pass, "example.test", Pass},
		{"bounce: HELO name does not list the client", "", Fail, "client.test", Fail},
		{"MAIL FROM domain without a record", "sender@other.test", None, "other.test", Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(be.deliveries())
			if stage, err := send(addr, tt.mailFrom, []string{"inbox@in.comm.test"}, raw); err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			got := be.deliveries()
			if len(got) != before+1 {
				t.Fatalf("deliveries = %d, want %d", len(got), before+1)
			}
			a := got[before].msg.Auth
			if a.SPF != tt.spf || a.SPFDomain != tt.spfDomain || a.DMARC != tt.dmarc || a.Reason != "" {
				t.Errorf("Auth = %+v; want SPF %s for %q, DMARC %s", a, tt.spf, tt.spfDomain, tt.dmarc)
			}
		})
	}
}

func TestServerRefuses(t *testing.T) {
	t.Parallel()
	big := crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: big", "") + strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n", 2000)
	tests := []struct {
		name       string
		mod        func(*Server, *fakeBackend)
		rcpts      []string
		raw        string
		wantStage  string
		wantCode   int
		wantInText string
	}{
		{"unknown recipient", nil, []string{"nobody@in.comm.test"}, plainMsg, "rcpt", 550, "5.1.1"},
		{"oversize", nil, []string{"inbox@in.comm.test"}, big, "data", 552, "5.3.4"},
		{"missing From", nil, []string{"inbox@in.comm.test"}, noFromMsg, "data", 554, "no From header"},
		{"malformed From", nil, []string{"inbox@in.comm.test"}, badFromMsg, "data", 554, "From header"},
		{"attachment over limit", func(s *Server, _ *fakeBackend) { s.MaxAttachmentBytes = 8 }, []string{"inbox@in.comm.test"}, multipartMsg, "data", 552, "attachment"},
		{"too many recipients", func(s *Server, _ *fakeBackend) { s.MaxRecipients = 1 }, []string{"inbox@in.comm.test", "other@in.comm.test"}, plainMsg, "rcpt", 452, "4.5.3"},
		{"backend transient", func(_ *Server, b *fakeBackend) { b.deliverErr = errors.New("database is locked") }, []string{"inbox@in.comm.test"}, plainMsg, "data", 451, "4.3.0"},
		{"backend permanent", func(_ *Server, b *fakeBackend) { b.deliverErr = fmt.Errorf("store: %w", ErrPermanent) }, []string{"inbox@in.comm.test"}, plainMsg, "data", 554, "5.3.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, be := newTestServer(t, tt.mod)
			stage, err := send(addr, "sender@client.test", tt.rcpts, tt.raw)
			if stage != tt.wantStage || code(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantInText) {
				t.Fatalf("got %s: %v; want %s: %d ...%s...", stage, err, tt.wantStage, tt.wantCode, tt.wantInText)
			}
			if n := len(be.deliveries()); n != 0 {
				t.Errorf("%d messages delivered, want none", n)
			}
			// The connection stays usable: a good message goes through.
			if tt.mod == nil {
				if stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, plainMsg); err != nil {
					t.Fatalf("follow-up %s: %v", stage, err)
				}
			}
		})
	}
}

func TestServerCloseBeforeServe(t *testing.T) {
	t.Parallel()
	srv := &Server{Backend: &fakeBackend{}}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close = %v", err)
	}
}

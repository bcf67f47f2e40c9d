package outbound

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email/smtptest"
)

var relayUsers = map[string]string{"comm": "s3cret pass"}

// TestReplyThroughRelay is the outbound path end to end: compose a reply,
// sign it for the custom domain, submit it over STARTTLS with AUTH, and
// check what the relay received.
func TestReplyThroughRelay(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := smtptest.SelfSigned(t)
	fr := smtptest.StartRelay(t, smtptest.RelayOptions{TLS: serverTLS, Users: relayUsers})

	key := rsaKey(t)
	record, err := DKIMRecord(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	subject := "Re: Grüße – 会議の件"
	msg, id, err := Compose(Mail{
		From:       mail.Address{Name: "Support Bot", Address: "bot@brand.example"},
		To:         []mail.Address{{Name: "Zoë", Address: "zoe@customer.test"}},
		Subject:    subject,
		Text:       "Thanks, Zoë — fixed.\n\n> old text\n",
		HTML:       "<p>Thanks, Zoë — fixed.</p>",
		InReplyTo:  []string{"q2@customer.test"},
		References: []string{"q1@customer.test", "q2@customer.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := SignDKIM(msg, "brand.example", "comm2025", key)
	if err != nil {
		t.Fatal(err)
	}

	relay, err := ParseRelay("smtp://comm:s3cret%20pass@" + fr.Addr)
	if err != nil {
		t.Fatal(err)
	}
	relay.TLSConfig = clientTLS
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := relay.Send(ctx, "bounce@brand.example", []string{"zoe@customer.test"}, signed); err != nil {
		t.Fatal(err)
	}

	got := fr.Messages()
	if len(got) != 1 {
		t.Fatalf("relay captured %d messages, want 1", len(got))
	}
	c := got[0]
	if !c.TLS || c.User != "comm" || c.From != "bounce@brand.example" || !equal(c.To, []string{"zoe@customer.test"}) {
		t.Errorf("envelope: tls=%v user=%q from=%q to=%q", c.TLS, c.User, c.From, c.To)
	}
	r, err := gomail.CreateReader(bytes.NewReader(c.Data))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header
	if gotID, _ := h.MessageID(); gotID != id || !strings.HasSuffix(gotID, "@brand.example") {
		t.Errorf("Message-ID = %q, want %q on brand.example", gotID, id)
	}
	if got, _ := h.MsgIDList("In-Reply-To"); !equal(got, []string{"q2@customer.test"}) {
		t.Errorf("In-Reply-To = %q", got)
	}
	if got, _ := h.MsgIDList("References"); !equal(got, []string{"q1@customer.test", "q2@customer.test"}) {
		t.Errorf("References = %q", got)
	}
	if got, _ := h.Subject(); got != subject {
		t.Errorf("Subject = %q, want %q", got, subject)
	}
	v := verifyDKIM(t, c.Data, fakeDNS{"comm2025._domainkey.brand.example": record})
	if v.Err != nil {
		t.Errorf("DKIM does not verify after relaying: %v", v.Err)
	}
}

func TestSendImplicitTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := smtptest.SelfSigned(t)
	fr := smtptest.StartRelay(t, smtptest.RelayOptions{TLS: serverTLS, Implicit: true, Users: relayUsers})
	relay, err := ParseRelay("smtps://comm:s3cret%20pass@" + fr.Addr)
	if err != nil {
		t.Fatal(err)
	}
	relay.TLSConfig = clientTLS
	msg, _, err := Compose(baseMail())
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Send(t.Context(), "agent@example.com", []string{"ann@customer.test"}, msg); err != nil {
		t.Fatal(err)
	}
	if got := fr.Messages(); len(got) != 1 || !got[0].TLS || !bytes.Equal(got[0].Data, msg) {
		t.Fatalf("captured %+v", got)
	}
}

// TestSendPlaintextAuth: credentials never cross an unencrypted connection
// to a remote host unless the operator says so.
func TestSendPlaintextAuth(t *testing.T) {
	t.Parallel()
	fr := smtptest.StartRelay(t, smtptest.RelayOptions{Users: relayUsers}) // no TLS at all
	// dialRelay makes a remote-looking host name reach the local relay.
	dialRelay := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, fr.Addr)
	}
	_, port, _ := net.SplitHostPort(fr.Addr)
	tests := []struct {
		name    string
		url     string
		wantErr error
	}{
		{"remote host refused", "smtp://comm:s3cret%20pass@relay.example.test:587", channels.ErrPermanent},
		{"remote host with insecure=true", "smtp://comm:s3cret%20pass@relay.example.test:587?insecure=true", nil},
		{"loopback IP", "smtp://comm:s3cret%20pass@127.0.0.1:" + port, nil},
		{"localhost", "smtp://comm:s3cret%20pass@localhost:" + port, nil},
		{"no credentials", "smtp://relay.example.test", channels.ErrPermanent}, // the relay wants AUTH: 530
	}
	msg, _, err := Compose(baseMail())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			relay, err := ParseRelay(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			relay.Dial = dialRelay
			err = relay.Send(t.Context(), "agent@example.com", []string{"ann@customer.test"}, msg)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Send = %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// TestSendFailures: what the relay answers decides whether the outbox
// retries.
func TestSendFailures(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := smtptest.SelfSigned(t)
	fr := smtptest.StartRelay(t, smtptest.RelayOptions{TLS: serverTLS, Users: relayUsers})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never greets
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	tests := []struct {
		name     string
		url      string
		tls      bool
		to       string
		timeout  time.Duration
		wantErr  error
		wantText []string
	}{
		{"4xx at rcpt", "smtp://comm:s3cret%20pass@" + fr.Addr, true, "busy@customer.test", 0,
			channels.ErrTransient, []string{"451", "4.3.0 mailbox busy, try later", "rcpt to busy@customer.test"}},
		{"5xx at rcpt", "smtp://comm:s3cret%20pass@" + fr.Addr, true, "nobody@customer.test", 0,
			channels.ErrPermanent, []string{"550", "5.1.1 no such user"}},
		{"bad password", "smtp://comm:wrong@" + fr.Addr, true, "ann@customer.test", 0,
			channels.ErrPermanent, []string{"auth", "535", "bad credentials"}},
		{"untrusted certificate", "smtp://comm:s3cret%20pass@" + fr.Addr, false, "ann@customer.test", 0,
			channels.ErrPermanent, []string{"certificate"}},
		{"connection refused", "smtp://" + closedAddr, false, "ann@customer.test", 0,
			channels.ErrTransient, []string{"connect", closedAddr}},
		{"timeout", "smtp://" + silent.Addr().String(), false, "ann@customer.test", 200 * time.Millisecond,
			channels.ErrTransient, []string{"context deadline exceeded"}},
	}
	msg, _, err := Compose(baseMail())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			relay, err := ParseRelay(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tls {
				relay.TLSConfig = clientTLS
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			err = relay.Send(ctx, "agent@example.com", []string{tt.to}, msg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Send = %v, want %v", err, tt.wantErr)
			}
			other := channels.ErrPermanent
			if tt.wantErr == channels.ErrPermanent {
				other = channels.ErrTransient
			}
			if errors.Is(err, other) {
				t.Errorf("Send = %v is both transient and permanent", err)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if !strings.HasPrefix(err.Error(), "email: relay ") {
				t.Errorf("error %q lacks the email: relay prefix", err)
			}
		})
	}
	if got := fr.Messages(); len(got) != 0 {
		t.Errorf("relay captured %d messages from failed sends", len(got))
	}
}

func TestParseRelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    Relay
		wantErr bool
	}{
		{url: "smtp://user:p%40ss@mail.example.com", want: Relay{Addr: "mail.example.com:587", Username: "user", Password: "p@ss"}},
		{url: "smtp://mail.example.com:2525", want: Relay{Addr: "mail.example.com:2525"}},
		{url: "smtps://u:p@[::1]", want: Relay{Addr: "[::1]:465", Username: "u", Password: "p", ImplicitTLS: true}},
		{url: "smtp://u:p@host?insecure=true", want: Relay{Addr: "host:587", Username: "u", Password: "p", AllowInsecureAuth: true}},
		{url: "http://host", wantErr: true},
		{url: "smtp://", wantErr: true},
		{url: "smtp://host?insecure=maybe", wantErr: true},
		{url: "smtp://u:p@host:bad port", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRelay(tt.url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseRelay = %+v, want error", got)
				}
				if strings.Contains(err.Error(), ":p@") {
					t.Errorf("error leaks credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Addr != tt.want.Addr || got.Username != tt.want.Username || got.Password != tt.want.Password ||
				got.ImplicitTLS != tt.want.ImplicitTLS || got.AllowInsecureAuth != tt.want.AllowInsecureAuth {
				t.Errorf("ParseRelay = %+v, want %+v", *got, tt.want)
			}
			if got.Password != "" && strings.Contains(got.String(), ":"+got.Password+"@") {
				t.Errorf("String() = %q shows the password", got.String())
			}
		})
	}
}

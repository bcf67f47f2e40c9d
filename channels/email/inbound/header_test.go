package inbound

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// foldedSubject is a message whose Subject is folded over lines of about
// lineLen bytes until it holds size bytes (the helper's report: 2 MB
// subjects kept a core busy in the DKIM check's header reader).
func foldedSubject(size, lineLen int) []byte {
	var b bytes.Buffer
	b.WriteString("From: a@example.com\r\nTo: inbox@in.comm.test\r\nMessage-ID: <big-subject@example.com>\r\nSubject: big")
	word := strings.Repeat("x", lineLen-3)
	for b.Len() < size {
		b.WriteString("\r\n ")
		b.WriteString(word)
	}
	b.WriteString("\r\n\r\nbody\r\n")
	return b.Bytes()
}

// TestSMTPHugeFoldedSubject: a mail with a 2 MB Subject folded over
// 80-byte lines is refused with 552 5.3.4 before any header parser or the
// DKIM check reads it; the session's CPU time is logged and bounded
// generously.
func TestSMTPHugeFoldedSubject(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU figures are meaningless under the race detector")
	}
	var log syncLog
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) {
		s.MaxMessageBytes = 25 << 20
		s.Resolver = fakeDNS{} // the sender checks run
		s.Logger = log.logger()
	})
	raw := foldedSubject(2<<20, 80)
	cpu0, t0 := cpuSeconds(t), time.Now()
	stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, string(raw))
	cpu, took := cpuSeconds(t)-cpu0, time.Since(t0)
	t.Logf("2 MB folded Subject (%d bytes): %s %v; session CPU %.2f s, wall %.2f s", len(raw), stage, err, cpu, took.Seconds())
	if stage != "data" || code(err) != 552 || !strings.Contains(err.Error(), "5.3.4") || !strings.Contains(err.Error(), "header") {
		t.Fatalf("got %s: %v; want 552 5.3.4 naming the header", stage, err)
	}
	if cpu > 5 {
		t.Errorf("the refused session took %.1f s of CPU", cpu)
	}
	if n := len(be.deliveries()); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
	if !strings.Contains(log.String(), "big-subject@example.com") || !strings.Contains(log.String(), "remote=127.0.0.1") {
		t.Errorf("the refusal is not logged with the Message-ID and remote address:\n%s", log.String())
	}
}

// TestSMTPHeaderLimits: a header section above MaxHeaderBytes (the
// message's or a MIME part's) and a MIME part's header field above
// MaxHeaderFieldBytes are refused with 552 5.3.4 naming them, and logged;
// a header just within both limits is accepted.
func TestSMTPHeaderLimits(t *testing.T) {
	t.Parallel()
	var log syncLog
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) {
		s.MaxMessageBytes = 4 << 20
		s.Logger = log.logger()
	})
	manyFields := func(size int) string {
		var b strings.Builder
		b.WriteString("From: a@example.com\r\nTo: inbox@in.comm.test\r\nSubject: many fields\r\n")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "X-Field-%d: %s\r\n", i, strings.Repeat("v", 90))
		}
		b.WriteString("\r\nbody\r\n")
		return b.String()
	}
	partField := crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: part", "MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="b"`, "", "--b", "Content-Type: text/plain",
		"X-Big: "+strings.Repeat(strings.Repeat("p", 98)+"\r\n ", 2000), "", "text", "--b--")
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"300 KB of header fields", manyFields(300 << 10), "the message's header is larger than 262144 bytes"},
		{"200 KB field in a part header", partField, "a field of a MIME part's header is longer than 131072 bytes"},
	} {
		stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, tc.raw)
		if stage != "data" || code(err) != 552 || !strings.Contains(err.Error(), "5.3.4") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %s: %v; want 552 5.3.4 %q", tc.name, stage, err, tc.want)
		}
	}
	if n := len(be.deliveries()); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
	if got := strings.Count(log.String(), "header is l"); got != 2 || !strings.Contains(log.String(), "remote=127.0.0.1") {
		t.Errorf("%d refusals logged with the remote address, want 2:\n%s", got, log.String())
	}
	if stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, manyFields(250<<10)); err != nil {
		t.Fatalf("250 KB of header fields: %s: %v", stage, err)
	}
}

// longReferences is a reply whose References header lists n message ids,
// one per continuation line.
func longReferences(n int) string {
	var b strings.Builder
	b.WriteString("From: Ann <ann@example.com>\r\nTo: inbox@in.comm.test\r\nSubject: Re: a long thread\r\nMessage-ID: <reply@example.com>\r\nReferences:")
	for i := range n {
		fmt.Fprintf(&b, "\r\n <message-%06d.%s@mail.example.com>", i, strings.Repeat("x", 12))
	}
	fmt.Fprintf(&b, "\r\nIn-Reply-To: <message-%06d.%s@mail.example.com>\r\n\r\nThe latest answer.\r\n", n-1, strings.Repeat("x", 12))
	return b.String()
}

// TestSMTPLongReferences: a signed reply with a 100 KB References header
// (2,200 ids) is within the limits: accepted, every id kept, its DKIM
// signature (which signs References) verified.
func TestSMTPLongReferences(t *testing.T) {
	t.Parallel()
	dns := fakeDNS{}
	sg := newSigner(t, "example.com", dns)
	var signed bytes.Buffer
	raw := longReferences(2200)
	if err := dkim.Sign(&signed, strings.NewReader(raw), &dkim.SignOptions{Domain: "example.com", Selector: "sel1", Signer: sg.key,
		HeaderKeys: []string{"From", "To", "Subject", "Message-ID", "References", "In-Reply-To"}}); err != nil {
		t.Fatal(err)
	}
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxMessageBytes = 1 << 20; s.Resolver = dns })
	cpu0 := cpuSeconds(t)
	if stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, signed.String()); err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	d := be.deliveries()
	if len(d) != 1 {
		t.Fatalf("%d deliveries", len(d))
	}
	m := d[0].msg
	refs := strings.Index(raw, "\r\nIn-Reply-To") - strings.Index(raw, "References:")
	t.Logf("References header of %d bytes: %d ids stored, DKIM %s %q, session CPU %.2f s", refs, len(m.References), m.Auth.DKIM, m.Auth.Reason, cpuSeconds(t)-cpu0)
	if refs < 100_000 || len(m.References) != 2200 || m.References[2199] != "message-002199.xxxxxxxxxxxx@mail.example.com" {
		t.Errorf("References header %d bytes, %d ids stored", refs, len(m.References))
	}
	if m.Auth.DKIM != Pass {
		t.Errorf("DKIM = %+v, want pass", m.Auth)
	}
}

// TestSMTPDKIMWorkBounded: messages that would make go-msgauth's DKIM
// verification costly are accepted with a bounded DKIM check: 1,000
// DKIM-Signature fields (the first 5 are verified, a valid one among them
// still passes), a 128 KiB field folded into one-byte lines next to a
// signature, and a signature naming 3,001 header fields. The session CPU
// is logged for each and bounded generously.
func TestSMTPDKIMWorkBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU figures are meaningless under the race detector")
	}
	dns := fakeDNS{}
	sg := newSigner(t, "example.com", dns)
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxMessageBytes = 1 << 20; s.Resolver = dns })
	bogus := "DKIM-Signature: v=1; a=ed25519-sha256; d=example.com; s=sel1; h=from; bh=AAAA; b=AAAA\r\n"

	signed := sg.sign(t, plainMsg)
	thousand := strings.Replace(signed, "\r\nFrom:", "\r\n"+strings.Repeat(bogus, 999)+"From:", 1)

	var folded strings.Builder
	folded.WriteString(bogus + "X-Folded: a")
	for folded.Len() < 128<<10-8 {
		folded.WriteString("\r\n a")
	}
	folded.WriteString("\r\n" + plainMsg)

	// go-smtp refuses lines over 2,000 bytes: the h= tag is folded.
	names := "DKIM-Signature: v=1; a=ed25519-sha256; d=example.com; s=sel1; bh=AAAA; b=AAAA; h=from" +
		strings.Repeat("\r\n\t"+strings.Repeat(":x", 100), 30) + "\r\n" + plainMsg

	for _, tc := range []struct {
		name, raw string
		dkim      Verdict
		sigs      int
		reason    string
	}{
		{"1,000 DKIM-Signature fields", thousand, Pass, 5, "1000 signatures, the first 5 verified"},
		{"128 KiB field folded into one-byte lines", folded.String(), PermError, 0, "folded into too many lines"},
		{"a signature naming 3,001 fields", names, PermError, 0, "the signatures name 3001 header fields"},
	} {
		before := len(be.deliveries())
		cpu0, t0 := cpuSeconds(t), time.Now()
		stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, tc.raw)
		cpu, took := cpuSeconds(t)-cpu0, time.Since(t0)
		if err != nil {
			t.Errorf("%s: %s: %v", tc.name, stage, err)
			continue
		}
		d := be.deliveries()
		if len(d) != before+1 {
			t.Fatalf("%s: %d deliveries, want %d", tc.name, len(d), before+1)
		}
		a := d[before].msg.Auth
		t.Logf("%s (%d bytes): DKIM %s, %d verified, %q; session CPU %.2f s, wall %.2f s", tc.name, len(tc.raw), a.DKIM, len(a.DKIMSignatures), a.Reason, cpu, took.Seconds())
		if a.DKIM != tc.dkim || len(a.DKIMSignatures) != tc.sigs || !strings.Contains(a.Reason, tc.reason) {
			t.Errorf("%s: DKIM %s, %d verified, %q; want %s, %d, %q", tc.name, a.DKIM, len(a.DKIMSignatures), a.Reason, tc.dkim, tc.sigs, tc.reason)
		}
		if cpu > 5 {
			t.Errorf("%s: the session took %.1f s of CPU", tc.name, cpu)
		}
	}
}

// TestSMTPLongLine: a line longer than go-smtp reads (2,000 bytes) in
// DATA, as an unfolded 2 MB Subject has, is refused with 554 5.6.0 naming
// it and logged with the remote address (it was a 451, the sender retried
// forever, and nothing was logged).
func TestSMTPLongLine(t *testing.T) {
	t.Parallel()
	var log syncLog
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxMessageBytes = 4 << 20; s.Logger = log.logger() })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	reply := func() string {
		var last string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the reply: %v (so far %q)", err, last+l)
			}
			if len(l) < 4 || l[3] != '-' {
				return strings.TrimSpace(l)
			}
			last = l
		}
	}
	reply()
	for _, cmd := range []string{"EHLO client.test", "MAIL FROM:<sender@client.test>", "RCPT TO:<inbox@in.comm.test>", "DATA"} {
		fmt.Fprintf(c, "%s\r\n", cmd)
		reply()
	}
	fmt.Fprintf(c, "From: a@example.com\r\nMessage-ID: <long-line@example.com>\r\nSubject: %s\r\n\r\nbody\r\n.\r\n", strings.Repeat("s", 100_000))
	got := reply()
	if !strings.HasPrefix(got, "554 5.6.0") || !strings.Contains(got, "line is longer than 2000 bytes") {
		t.Errorf("reply %q, want 554 5.6.0 naming the long line", got)
	}
	// The Message-ID is logged when it arrived before the long line; here
	// it came in the same read, which go-smtp drops.
	if !strings.Contains(log.String(), "line in input stream") || !strings.Contains(log.String(), "remote=127.0.0.1") {
		t.Errorf("not logged with the reason and remote address:\n%s", log.String())
	}
	if n := len(be.deliveries()); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
}

// TestDKIMDeadline: the DKIM check stops reading at its deadline (the
// parse timeout in the server) with a temperror saying so; a backstop
// behind the bounds above.
func TestDKIMDeadline(t *testing.T) {
	dns := fakeDNS{}
	signed := newSigner(t, "example.com", dns).sign(t, plainMsg)
	env := Envelope{MailFrom: "ann@example.com"}
	got := Authenticator{Resolver: dns, Timeout: time.Nanosecond}.Check(context.Background(), strings.NewReader(signed), "ann@example.com", env)
	if got.DKIM != TempError || !strings.Contains(got.Reason, "dkim: not verified within 1ns") {
		t.Errorf("DKIM %s %q, want temperror naming the deadline", got.DKIM, got.Reason)
	}
	got = Authenticator{Resolver: dns, Timeout: time.Minute}.Check(context.Background(), strings.NewReader(signed), "ann@example.com", env)
	if got.DKIM != Pass {
		t.Errorf("DKIM %s %q, want pass", got.DKIM, got.Reason)
	}
}

package main_test

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestServeSMTPLimits: the SMTP limits are settings of comm serve
// (COMM_SMTP_MAX_PARTS, COMM_SMTP_MAX_SESSIONS_PER_IP,
// COMM_SMTP_MAX_HEADER_BYTES, COMM_SMTP_MAX_HEADER_FIELD_BYTES ...): the binary
// refuses a mail over the part limit with 552 and a connection over the
// per-address cap with 421 at connect, still takes mail within them, and
// refuses bad values at start.
func TestServeSMTPLimits(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "COMM_SMTP_MAX_PARTS=50", "COMM_SMTP_MAX_SESSIONS_PER_IP=2", "COMM_SMTP_PARSE_TIMEOUT=5s",
		"COMM_SMTP_MAX_HEADER_BYTES=8192", "COMM_SMTP_MAX_HEADER_FIELD_BYTES=2048")
	g.api(t, "POST", "/v1/connections", `{"channel":"email","config":{"address":"limits"}}`, 201, nil)
	var cursor int64
	g.next(t, &cursor, "connection.active")

	parts := func(n int) string {
		var b strings.Builder
		b.WriteString("From: ann@customer.test\nTo: limits@comm.localhost\nSubject: parts\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"p\"\n\n")
		for i := range n {
			fmt.Fprintf(&b, "--p\nContent-Type: text/plain\n\npart %d\n", i)
		}
		b.WriteString("--p--\n")
		return b.String()
	}
	err := sendMail(g.smtp, "ann@customer.test", []string{"limits@comm.localhost"}, parts(60))
	if smtpCode(err) != 552 || !strings.Contains(err.Error(), "more than 50 MIME parts") {
		t.Fatalf("60 parts: %v, want 552 naming the limit", err)
	}
	if err := sendMail(g.smtp, "ann@customer.test", []string{"limits@comm.localhost"}, parts(10)); err != nil {
		t.Fatalf("10 parts: %v", err)
	}
	if m := g.next(t, &cursor, "message.received"); !strings.HasPrefix(m.Text, "part 0") {
		t.Fatalf("received %+v", m)
	}
	folded := "From: ann@customer.test\nTo: limits@comm.localhost\nSubject: long" + strings.Repeat("\n folded", 300) + "\n\nbody\n"
	if err := sendMail(g.smtp, "ann@customer.test", []string{"limits@comm.localhost"}, folded); smtpCode(err) != 552 ||
		!strings.Contains(err.Error(), "a field of the message's header is longer than 2048 bytes") {
		t.Fatalf("a 2.4 KB Subject: %v, want 552 naming the field limit", err)
	}
	fields := "From: ann@customer.test\nTo: limits@comm.localhost\n" + strings.Repeat("X-Filler: 0123456789012345678901234567890123456789\n", 200) + "\nbody\n"
	if err := sendMail(g.smtp, "ann@customer.test", []string{"limits@comm.localhost"}, fields); smtpCode(err) != 552 ||
		!strings.Contains(err.Error(), "the message's header is larger than 8192 bytes") {
		t.Fatalf("a 10 KB header: %v, want 552 naming the header limit", err)
	}

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	greet := func() string {
		c, err := net.DialTimeout("tcp", g.smtp, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	// The sessions above end on the server a moment after QUIT: until they
	// have, their places are taken.
	deadline := time.Now().Add(10 * time.Second)
	for ok := 0; ok < 2; {
		l := greet()
		switch {
		case strings.HasPrefix(l, "220 "):
			ok++
		case strings.HasPrefix(l, "421 ") && time.Now().Before(deadline):
			held[len(held)-1].Close()
			held = held[:len(held)-1]
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("greeting %q", l)
		}
	}
	if l := greet(); !strings.HasPrefix(l, "421 4.7.0") {
		t.Fatalf("third connection from one address: %q, want 421 4.7.0", l)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	g.stop(t) // the log is complete once the process exited
	if !strings.Contains(g.out.String(), "connections refused over the session limits") ||
		!strings.Contains(g.out.String(), "more than 50 MIME parts") || !strings.Contains(g.out.String(), "header is larger than 8192 bytes") {
		t.Errorf("log lacks the refusals:\n%s", g.out.String())
	}

	for _, bad := range [][]string{
		{"serve", "--smtp-max-parts", "0"},
		{"serve", "--smtp-parse-timeout", "soon"},
		{"serve", "--smtp-max-sessions-per-ip", "-3"},
		{"serve", "--smtp-max-header-bytes", "100"},
		{"serve", "--smtp-max-header-field-bytes", "big"},
	} {
		cmd := exec.Command(g.cmd.Path, bad...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), bad[1]) {
			t.Errorf("%v: %v %s", bad, err, out)
		}
	}
}

package inbound

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/smtp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds is the CPU time (user + system) this process used so far;
// the SMTP server runs in it.
func cpuSeconds(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// emptyParts is a multipart message of n empty parts (issue 12: 50,000 of
// them in 0.5 MB took 9.5 s of CPU).
func emptyParts(n int) []byte {
	var b bytes.Buffer
	b.WriteString(crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: parts", "MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="b"`, ""))
	for range n {
		b.WriteString("--b\r\n\r\n\r\n\r\n") // 10 bytes a part, as in the issue
	}
	b.WriteString("--b--\r\n")
	return b.Bytes()
}

// tinyAttachments is a multipart message of n attachments of a few bytes
// each (issue 12: 100,000 of them, 10 MB, took 75 s and +270 MB).
func tinyAttachments(n int) []byte {
	var b bytes.Buffer
	b.WriteString(crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: attachments", "MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="b"`, "", "--b", "Content-Type: text/plain", "", "Files."))
	for i := range n {
		fmt.Fprintf(&b, "--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d\r\n\r\n%d\r\n", i, i%10)
	}
	b.WriteString("--b--\r\n")
	return b.Bytes()
}

// nested is a message whose multiparts nest depth deep, a text part at
// the bottom.
func nested(depth int) []byte {
	var b bytes.Buffer
	b.WriteString(crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: deep", "MIME-Version: 1.0"))
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"n%d\"\r\n\r\n--n%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\nbottom\r\n")
	for i := depth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--n%d--\r\n", i)
	}
	return b.Bytes()
}

// TestSMTPTooManyParts (issue 12, item 1): 50,000 empty parts and
// 100,000 tiny attachments are refused with 552 5.3.4 before enmime parses
// them, with the session's CPU time and the server's heap logged and
// bounded generously; the session stays usable.
func TestSMTPTooManyParts(t *testing.T) {
	if raceEnabled {
		t.Skip("CPU and heap figures are meaningless under the race detector")
	}
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxMessageBytes = 25 << 20 })
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"50,000 empty parts", emptyParts(50_000)},
		{"100,000 tiny attachments", tinyAttachments(100_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var base runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { // sample the heap while the session runs
				defer close(done)
				var m runtime.MemStats
				for {
					runtime.ReadMemStats(&m)
					if m.HeapInuse > peak.Load() {
						peak.Store(m.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			cpu0, t0 := cpuSeconds(t), time.Now()
			stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, string(tc.raw))
			cpu, took := cpuSeconds(t)-cpu0, time.Since(t0)
			close(stop)
			<-done
			heap := float64(peak.Load()) - float64(base.HeapInuse)
			t.Logf("%s (%.1f MB): %s %v; session CPU %.2f s, wall %.2f s, peak heap +%.1f MB", tc.name,
				float64(len(tc.raw))/(1<<20), stage, err, cpu, took.Seconds(), heap/(1<<20))
			if stage != "data" || code(err) != 552 || !strings.Contains(err.Error(), "5.3.4") || !strings.Contains(err.Error(), "MIME parts") {
				t.Fatalf("got %s: %v; want 552 5.3.4 naming the MIME parts", stage, err)
			}
			if cpu > 5 {
				t.Errorf("the refused session took %.1f s of CPU", cpu)
			}
			if heap > 150<<20 {
				t.Errorf("the heap grew by %.0f MB", heap/(1<<20))
			}
		})
	}
	if n := len(be.deliveries()); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
}

// TestSMTPPartsWithinLimits: a mail with 50 attachments and one nested 20
// deep are accepted; 21 deep is refused with 554 naming the nesting.
func TestSMTPPartsWithinLimits(t *testing.T) {
	t.Parallel()
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxMessageBytes = 1 << 20 })

	var b bytes.Buffer
	b.WriteString(crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: fifty", "MIME-Version: 1.0",
		`Content-Type: multipart/mixed;`, ` boundary="=_fifty"`, "", "--=_fifty", "Content-Type: text/plain", "", "Fifty files."))
	for i := range 50 {
		fmt.Fprintf(&b, "--=_fifty\r\nContent-Type: application/pdf; name=\"f%d.pdf\"\r\nContent-Disposition: attachment; filename=\"f%d.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n", i, i)
	}
	b.WriteString("--=_fifty--\r\n")
	if stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, b.String()); err != nil {
		t.Fatalf("50 attachments: %s: %v", stage, err)
	}
	if d := be.deliveries(); len(d) != 1 || len(d[0].msg.Attachments) != 50 || d[0].msg.Text != "Fifty files." {
		t.Fatalf("deliveries %+v", d)
	}

	if stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, string(nested(DefaultMaxDepth))); err != nil {
		t.Fatalf("nested %d deep: %s: %v", DefaultMaxDepth, stage, err)
	}
	if d := be.deliveries(); len(d) != 2 || d[1].msg.Text != "bottom" {
		t.Fatalf("nested delivery %+v", d[len(d)-1].msg)
	}
	stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, string(nested(DefaultMaxDepth+1)))
	if stage != "data" || code(err) != 554 || !strings.Contains(err.Error(), "nested more than 20") {
		t.Fatalf("nested %d deep: %s: %v; want 554", DefaultMaxDepth+1, stage, err)
	}
	if n := len(be.deliveries()); n != 2 {
		t.Fatalf("%d deliveries, want 2", n)
	}
}

// TestSMTPParseTimeout: with the part limit out of the way, the parse
// deadline stops enmime's quadratic work: 451 4.3.0, logged.
func TestSMTPParseTimeout(t *testing.T) {
	t.Parallel()
	logs := &syncLog{}
	addr, be := newTestServer(t, func(s *Server, _ *fakeBackend) {
		s.MaxMessageBytes, s.MaxParts, s.ParseTimeout = 25<<20, 1_000_000, 200*time.Millisecond
		s.Logger = logs.logger()
	})
	raw := emptyParts(50_000)
	t0 := time.Now()
	stage, err := send(addr, "sender@client.test", []string{"inbox@in.comm.test"}, string(raw))
	t.Logf("50,000 empty parts with a 200 ms parse deadline: %s %v after %.2f s", stage, err, time.Since(t0).Seconds())
	if stage != "data" || code(err) != 451 || !strings.Contains(err.Error(), "parsing took too long") {
		t.Fatalf("got %s: %v; want 451 naming the parse time", stage, err)
	}
	if n := len(be.deliveries()); n != 0 {
		t.Fatalf("%d delivered", n)
	}
	if l := logs.String(); !strings.Contains(l, "parsing took too long") || !strings.Contains(l, "code=451") {
		t.Fatalf("log:\n%s", l)
	}
}

// TestParserBoundaryDisguises: the pre-scan finds boundaries however
// enmime would read them (folded, RFC 2231, RFC 2047 encoded, unquoted,
// case), so 600 parts are refused whatever the disguise; enmime itself does
// read each of these as a multipart of 600 parts.
func TestParserBoundaryDisguises(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, header, boundary string }{
		{"plain", `Content-Type: multipart/mixed; boundary="b1"`, "b1"},
		{"unquoted upper case", `Content-Type: MULTIPART/MIXED; BOUNDARY=b2`, "b2"},
		{"folded", "Content-Type: multipart/mixed;\r\n boundary=\r\n \"b3\"", "b3"},
		{"no semicolon", `Content-Type: multipart/mixed boundary="b4"`, "b4"},
		{"RFC 2231 continuation", `Content-Type: multipart/mixed; boundary*0="b5"; boundary*1="x"`, "b5x"},
		{"RFC 2231 encoded", `Content-Type: multipart/mixed; boundary*=us-ascii''%62%36`, "b6"},
		{"RFC 2047 parameter", `Content-Type: multipart/mixed; =?us-ascii?q?boundary=3D=22b7=22?=`, "b7"},
		{"RFC 2047 value", `Content-Type: multipart/mixed; boundary="=?utf-8?b?Yjg=?="`, "b8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			b.WriteString("From: a@example.com\r\nMIME-Version: 1.0\r\n" + tc.header + "\r\n\r\n")
			for i := range 600 {
				fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain\r\n\r\npart %d\r\n", tc.boundary, i)
			}
			fmt.Fprintf(&b, "--%s--\r\n", tc.boundary)
			// What enmime makes of it without the limit.
			env, err := parser.ReadEnvelope(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			parts := 0
			for c := env.Root.FirstChild; c != nil; c = c.NextSibling {
				parts++
			}
			_, err = Parser{MaxParts: 500}.Parse(bytes.NewReader(b.Bytes()))
			t.Logf("enmime reads %d parts; Parse: %v", parts, err)
			if parts > 500 && !errors.Is(err, ErrTooManyParts) {
				t.Fatalf("enmime reads %d parts, Parse answered %v", parts, err)
			}
			if parts <= 1 {
				t.Logf("enmime does not read this disguise as a multipart at all")
			}
		})
	}
}

// TestSMTPSessionLimits: connections over the per-IP cap are answered 421
// 4.7.0 at connect while another address still gets in; over the overall
// cap everyone waits; a closed session frees its place.
func TestSMTPSessionLimits(t *testing.T) {
	t.Parallel()
	addr, _ := newTestServer(t, func(s *Server, _ *fakeBackend) { s.MaxSessionsPerIP, s.MaxSessions = 3, 5 })
	connect := func(local string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	dial := func(local string) (net.Conn, string) {
		t.Helper()
		c := connect(local)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("greeting from %s: %v", local, err)
		}
		return c, strings.TrimSpace(line)
	}
	var open []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})
	for i := range 3 {
		c, greet := dial("127.0.0.1")
		open = append(open, c)
		if !strings.HasPrefix(greet, "220 ") {
			t.Fatalf("connection %d: %q", i+1, greet)
		}
	}
	c, greet := dial("127.0.0.1")
	c.Close()
	if !strings.HasPrefix(greet, "421 4.7.0") || !strings.Contains(greet, "your address") {
		t.Fatalf("4th connection from one address: %q, want 421 4.7.0", greet)
	}
	// Another address is served, and a whole session works.
	c2 := connect("127.0.0.2")
	cl, err := smtp.NewClient(c2, "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	open = append(open, c2)
	c3, _ := dial("127.0.0.3")
	open = append(open, c3)
	// Five open now: the overall cap refuses a sixth from anywhere.
	c4, greet := dial("127.0.0.4")
	c4.Close()
	if !strings.HasPrefix(greet, "421 4.7.0") || strings.Contains(greet, "your address") {
		t.Fatalf("6th connection overall: %q, want 421 4.7.0", greet)
	}
	// Closing one frees its place.
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, greet := dial("127.0.0.1")
		c.Close()
		if strings.HasPrefix(greet, "220 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a close: %q", greet)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncLog collects a server's log lines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *syncLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

package inbound

import (
	"bytes"
	"strings"
	"testing"
	"time"
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

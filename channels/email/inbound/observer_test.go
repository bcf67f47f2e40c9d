package inbound

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

type countingObserver struct {
	mu       sync.Mutex
	sessions int
	refused  map[string]int
}

func (o *countingObserver) SMTPSession() { o.mu.Lock(); o.sessions++; o.mu.Unlock() }
func (o *countingObserver) SMTPRefused(reason string) {
	o.mu.Lock()
	o.refused[reason]++
	o.mu.Unlock()
}

// TestServerObserver: the Observer hears of every session and of each
// refusal, with its reason.
func TestServerObserver(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{refused: map[string]int{}}
	big := crlf("From: a@example.com", "To: inbox@in.comm.test", "Subject: big", "") + strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n", 2000)
	addr, _ := newTestServer(t, func(s *Server, _ *fakeBackend) { s.Observer = obs })
	sends := []struct {
		rcpt, raw string
		ok        bool
	}{
		{"inbox@in.comm.test", plainMsg, true},
		{"nobody@in.comm.test", plainMsg, false},
		{"inbox@in.comm.test", big, false},
		{"inbox@in.comm.test", noFromMsg, false},
	}
	for _, s := range sends {
		if stage, err := send(addr, "sender@client.test", []string{s.rcpt}, s.raw); (err == nil) != s.ok {
			t.Fatalf("send to %s: %s %v", s.rcpt, stage, err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	got := fmt.Sprint(obs.sessions, obs.refused)
	if want := fmt.Sprint(4, map[string]int{"recipient": 1, "read": 1, "parse": 1}); got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/smtp"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// NewEmailInboxes makes n sandbox projects, each with an email inbox, and
// returns the inbox addresses and the projects' keys.
func NewEmailInboxes(ctx context.Context, a *API, n int) (addrs, keys []string, err error) {
	for i := range n {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("mail ", i)}, &sb); err != nil {
			return nil, nil, err
		}
		var c struct {
			Address string `json:"address"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, map[string]any{"channel": "email"}, &c); err != nil {
			return nil, nil, err
		}
		addrs, keys = append(addrs, c.Address), append(keys, sb.APIKey)
	}
	return addrs, keys, nil
}

// mailBody is a text message of about size bytes from a rotating sender,
// with a fresh Message-ID.
func mailBody(rcpt string, w, i, size int) string {
	var b strings.Builder
	b.Grow(size + 512)
	fmt.Fprintf(&b, "From: Sender %d <sender%d@load.test>\r\nTo: %s\r\nSubject: load %d-%d\r\nMessage-ID: <%d.%d.%d@load.test>\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", w, i%50, rcpt, w, i, time.Now().UnixNano(), w, i)
	line := "The quick brown fox jumps over the lazy dog, and the agent answers within a minute.\r\n"
	for b.Len() < size {
		b.WriteString(line)
	}
	return b.String()
}

// Mail runs `workers` SMTP clients, each on one connection to the
// listener at addr, sending messages of about size bytes to rcpts in
// turn for d. An operation is one MAIL, RCPT, DATA exchange answered 250:
// the message is stored and its message.received appended.
func Mail(ctx context.Context, addr string, rcpts []string, workers, size int, d time.Duration) (Result, error) {
	clients := make([]*smtp.Client, workers)
	for w := range clients {
		c, err := smtp.Dial(addr)
		if err != nil {
			return Result{}, err
		}
		if err := c.Hello("load.test"); err != nil {
			return Result{}, err
		}
		clients[w] = c
	}
	defer func() {
		for _, c := range clients {
			c.Quit()
		}
	}()
	r, err := load(workers, d, func(w int) func() error {
		c, i := clients[w], 0
		return func() error {
			i++
			rcpt := rcpts[(w+i)%len(rcpts)]
			msg := mailBody(rcpt, w, i, size)
			if err := c.Mail(fmt.Sprintf("sender%d@load.test", i%50)); err != nil {
				return err
			}
			if err := c.Rcpt(rcpt); err != nil {
				return err
			}
			wc, err := c.Data()
			if err != nil {
				return err
			}
			if _, err := io.WriteString(wc, msg); err != nil {
				return err
			}
			return wc.Close()
		}
	})
	r.Note = fmt.Sprintf("%d SMTP connections, %d KB messages to %d inboxes", workers, size>>10, len(rcpts))
	return r, err
}

// MailMemory sends one message of about size bytes (a base64 attachment)
// to rcpt, generated as it is written so the sender holds none of it, and
// samples the Go heap of this process meanwhile. It returns the peak heap
// in use above what was in use before.
func MailMemory(ctx context.Context, addr, rcpt string, size int) (peak uint64, elapsed time.Duration, err error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var top atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > top.Load() {
				top.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	err = sendStreamed(addr, rcpt, size)
	elapsed = time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return 0, elapsed, err
	}
	if top.Load() < base {
		return 0, elapsed, nil
	}
	return top.Load() - base, elapsed, nil
}

func sendStreamed(addr, rcpt string, size int) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Mail("big@load.test"); err != nil {
		return err
	}
	if err := c.Rcpt(rcpt); err != nil {
		return err
	}
	wc, err := c.Data()
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(wc, 64<<10)
	fmt.Fprintf(bw, "From: big@load.test\r\nTo: %s\r\nSubject: big\r\nMessage-ID: <big.%d@load.test>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"+
		"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=big.bin\r\n"+
		"Content-Transfer-Encoding: base64\r\n\r\n", rcpt, time.Now().UnixNano())
	line := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9w", 2)[:76] + "\r\n"
	for written := 0; written < size-1024; written += len(line) {
		bw.WriteString(line)
	}
	bw.WriteString("\r\n--b--\r\n")
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := wc.Close(); err != nil {
		return err
	}
	return c.Quit()
}

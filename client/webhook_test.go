package client_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/signature"
	"github.com/comm-gateway/comm/store/storetest"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signed returns the headers of a delivery of body signed with secret at
// ts.
func signed(t *testing.T, secret string, body []byte, ts time.Time) http.Header {
	t.Helper()
	key, err := signature.Key(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	signature.SetHeaders(h, key, "evt_1", ts, body)
	return h
}

// TestVerifyWebhook: a delivery signed the Standard Webhooks way verifies
// and decodes; every tampered variant is refused with the reason.
func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	body := []byte(`{"seq":7,"type":"message.received","data":{"message":{"id":"msg_1","text":"hi"}}}`)
	now := time.Now()
	good := signed(t, testSecret, body, now)

	e, err := client.VerifyWebhook(testSecret, good, body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 7 || e.Type != client.EventMessageReceived || !strings.Contains(string(e.Data), "msg_1") {
		t.Errorf("event %+v", e)
	}
	// A plain (non-whsec_) secret is used as its bytes.
	if _, err := client.VerifyWebhook("plain secret", signed(t, "plain secret", body, now), body); err != nil {
		t.Errorf("plain secret: %v", err)
	}
	// Several signatures (during a secret rotation): one match suffices.
	multi := good.Clone()
	multi.Set(signature.HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString([]byte("old"))+" "+good.Get(signature.HeaderSignature))
	if _, err := client.VerifyWebhook(testSecret, multi, body); err != nil {
		t.Errorf("several signatures: %v", err)
	}

	tampered := bytes.Replace(body, []byte(`"hi"`), []byte(`"HI"`), 1)
	otherID := good.Clone()
	otherID.Set(signature.HeaderID, "evt_2")
	badSig := good.Clone()
	badSig.Set(signature.HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	noSig := good.Clone()
	noSig.Del(signature.HeaderSignature)
	for _, tc := range []struct {
		name    string
		secret  string
		headers http.Header
		body    []byte
		want    error
	}{
		{"tampered body", testSecret, good, tampered, signature.ErrMismatch},
		{"other id", testSecret, otherID, body, signature.ErrMismatch},
		{"forged signature", testSecret, badSig, body, signature.ErrMismatch},
		{"wrong secret", "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key")), good, body, signature.ErrMismatch},
		{"missing signature", testSecret, noSig, body, signature.ErrMissingHeaders},
		{"no headers", testSecret, http.Header{}, body, signature.ErrMissingHeaders},
		{"too old", testSecret, signed(t, testSecret, body, now.Add(-6*time.Minute)), body, signature.ErrTimestamp},
		{"from the future", testSecret, signed(t, testSecret, body, now.Add(6*time.Minute)), body, signature.ErrTimestamp},
	} {
		_, err := client.VerifyWebhook(tc.secret, tc.headers, tc.body)
		if !errors.Is(err, client.ErrWebhookSignature) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want ErrWebhookSignature and %v", tc.name, err, tc.want)
		}
	}

	// Signed, but not an event.
	for _, b := range []string{`not json`, `{"seq":0,"type":"x","data":{}}`, `{"seq":1,"data":{}}`, `{"seq":1,"type":"x","data":{}} {}`} {
		_, err := client.VerifyWebhook(testSecret, signed(t, testSecret, []byte(b), now), []byte(b))
		if !errors.Is(err, client.ErrWebhookPayload) {
			t.Errorf("body %s: %v, want ErrWebhookPayload", b, err)
		}
	}
	// An unusable secret is the receiver's fault, not the sender's.
	if _, err := client.VerifyWebhook("", good, body); err == nil || errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("empty secret: %v", err)
	}
}

// TestWebhookHandler: the handler answers 2xx only after fn succeeded, and
// 401, 400, 413, 405 and 500 in the other cases without calling fn (or
// after fn failed).
func TestWebhookHandler(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls []int64
	)
	h := client.WebhookHandler(testSecret, func(ctx context.Context, e *client.Event) error {
		mu.Lock()
		calls = append(calls, e.Seq)
		mu.Unlock()
		switch e.Type {
		case "fail":
			return errors.New("downstream is down")
		case "panic":
			panic("bug")
		}
		return nil
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	event := func(seq int, typ string) []byte {
		return []byte(`{"seq":` + string(rune('0'+seq)) + `,"type":"` + typ + `","data":{}}`)
	}
	big := append(append([]byte(`{"seq":9,"type":"message.received","data":{"x":"`), bytes.Repeat([]byte("a"), client.MaxWebhookBody)...), `"}}`...)
	for _, tc := range []struct {
		name    string
		method  string
		body    []byte
		headers http.Header
		status  int
		called  bool
	}{
		{"ok", "POST", event(1, "message.received"), nil, http.StatusNoContent, true},
		{"tampered", "POST", event(2, "message.received"), signed(t, testSecret, event(3, "message.received"), time.Now()), http.StatusUnauthorized, false},
		{"unsigned", "POST", event(2, "message.received"), http.Header{}, http.StatusUnauthorized, false},
		{"not an event", "POST", []byte(`[1,2]`), nil, http.StatusBadRequest, false},
		{"handler error", "POST", event(4, "fail"), nil, http.StatusInternalServerError, true},
		{"handler panic", "POST", event(5, "panic"), nil, http.StatusInternalServerError, true},
		{"too large", "POST", big, nil, http.StatusRequestEntityTooLarge, false},
		{"GET", "GET", nil, nil, http.StatusMethodNotAllowed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			calls = nil
			mu.Unlock()
			headers := tc.headers
			if headers == nil {
				headers = signed(t, testSecret, tc.body, time.Now())
			}
			req, _ := http.NewRequest(tc.method, hs.URL, bytes.NewReader(tc.body))
			for k, v := range headers {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(calls) == 1) != tc.called || len(calls) > 1 {
				t.Errorf("fn called %d times, want called=%v", len(calls), tc.called)
			}
		})
	}
}

// TestWebhookEndToEnd: the gateway's push worker delivers the stream to a
// WebhookHandler registered with SetWebhook, in seq order; an event whose
// handler failed is delivered again.
func TestWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{Webhooks: true})
	ctx := context.Background()
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	var (
		mu     sync.Mutex
		got    []int64
		failed bool
	)
	receiver := httptest.NewServer(client.WebhookHandler(testSecret, func(ctx context.Context, e *client.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if e.Type == client.EventMessageReceived && !failed {
			failed = true
			return errors.New("not now")
		}
		got = append(got, e.Seq)
		return nil
	}))
	defer receiver.Close()
	if _, err := p.SetWebhook(ctx, receiver.URL+"/comm", testSecret, client.WebhookFromSeq(0)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p.inject(t, conn.ID, "alice", "hello "+string(rune('a'+i)))
	}
	eventually(t, "all four events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 4
	})
	mu.Lock()
	if !failed || len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Errorf("delivered %v (failed once: %v), want 1..4 in order", got, failed)
	}
	mu.Unlock()
	// The worker records an attempt after the receiver answered.
	var as []client.WebhookAttempt
	eventually(t, "five attempts recorded", func() bool {
		var err error
		as, err = p.WebhookAttempts(ctx, "", 0)
		return err == nil && len(as) >= 5
	})
	var failures int
	for _, a := range as {
		if !a.OK {
			failures++
			if a.StatusCode != http.StatusInternalServerError {
				t.Errorf("failed attempt %+v, want status 500", a)
			}
		}
	}
	if failures != 1 || len(as) != 5 {
		t.Errorf("%d attempts, %d failed; want 5 and 1", len(as), failures)
	}
}

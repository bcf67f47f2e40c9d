package metatest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"
)

// Sign is the X-Hub-Signature-256 of body with secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Entry is one entry of a webhook POST: the events of one Page (or
// Instagram account).
type Entry struct {
	ID        string
	Time      int64 // ms; now when 0
	Messaging []Event
}

// Event is one entry[].messaging[] item; build it with Text, Delivery,
// Read ...
type Event map[string]any

// Batch is a webhook body of object ("page" or "instagram") carrying the
// entries, as Meta batches them.
func Batch(object string, entries ...Entry) []byte {
	var es []map[string]any
	for _, e := range entries {
		t := e.Time
		if t == 0 {
			t = time.Now().UnixMilli()
		}
		ms := e.Messaging
		if ms == nil {
			ms = []Event{}
		}
		es = append(es, map[string]any{"id": e.ID, "time": t, "messaging": ms})
	}
	b, _ := json.Marshal(map[string]any{"object": object, "entry": es})
	return b
}

// Message is a person's message.
type Message struct {
	// Sender is the person (PSID or IGSID), Recipient the Page (or
	// Instagram account).
	Sender, Recipient string
	MID, Text         string
	// ReplyTo is the mid of the message answered.
	ReplyTo string
	// Attachments are (type, url) pairs: "image", "video", "audio",
	// "file", "location" ...
	Attachments [][2]string
	// Echo makes it the Page's own message echoed back (is_echo), with
	// sender and recipient swapped.
	Echo bool
	// Timestamp in ms; now when 0.
	Timestamp int64
}

// Event is the messaging item of m.
func (m Message) Event() Event {
	ts := m.Timestamp
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	msg := map[string]any{"mid": m.MID}
	if m.Text != "" {
		msg["text"] = m.Text
	}
	if m.ReplyTo != "" {
		msg["reply_to"] = map[string]string{"mid": m.ReplyTo}
	}
	if len(m.Attachments) > 0 {
		var as []map[string]any
		for _, a := range m.Attachments {
			as = append(as, map[string]any{"type": a[0], "payload": map[string]string{"url": a[1]}})
		}
		msg["attachments"] = as
	}
	sender, recipient := m.Sender, m.Recipient
	if m.Echo {
		msg["is_echo"] = true
		msg["app_id"] = 1234567890
		sender, recipient = recipient, sender
	}
	return Event{"sender": map[string]string{"id": sender}, "recipient": map[string]string{"id": recipient}, "timestamp": ts, "message": msg}
}

// Delivery is a delivery receipt for mids (may be empty) up to watermark
// (ms).
func Delivery(person, page string, mids []string, watermark int64) Event {
	d := map[string]any{"watermark": watermark}
	if len(mids) > 0 {
		d["mids"] = mids
	}
	return Event{"sender": map[string]string{"id": person}, "recipient": map[string]string{"id": page}, "timestamp": watermark, "delivery": d}
}

// Read is a Messenger read receipt: every message up to watermark (ms).
func Read(person, page string, watermark int64) Event {
	return Event{"sender": map[string]string{"id": person}, "recipient": map[string]string{"id": page}, "timestamp": watermark,
		"read": map[string]any{"watermark": watermark}}
}

// Seen is an Instagram messaging_seen event for mid.
func Seen(person, account, mid string, ts int64) Event {
	return Event{"sender": map[string]string{"id": person}, "recipient": map[string]string{"id": account}, "timestamp": ts,
		"read": map[string]any{"mid": mid}}
}

// Postback is a button tap.
func Postback(person, page, mid, title, payload string) Event {
	return Event{"sender": map[string]string{"id": person}, "recipient": map[string]string{"id": page}, "timestamp": time.Now().UnixMilli(),
		"postback": map[string]string{"mid": mid, "title": title, "payload": payload}}
}

// SignedRequest is Meta's POST of body to target, signed with secret.
func SignedRequest(target, secret string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "facebookexternalua")
	r.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	return r
}

// Verification is Meta's GET verification of a callback URL.
func Verification(target, token, challenge string) *http.Request {
	q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {token}, "hub.challenge": {challenge}}
	return httptest.NewRequest(http.MethodGet, target+"?"+q.Encode(), nil)
}

// Webhook delivers signed webhook POSTs to a callback URL as Meta does:
// a non-200 answer or a failure to connect is retried (Attempts in all,
// Backoff apart).
type Webhook struct {
	URL, Secret string
	Client      *http.Client
	// Attempts is how many times one body is tried; 3 when 0.
	Attempts int
	// Backoff is the pause between attempts; 50 ms when 0.
	Backoff time.Duration
}

// Post delivers body and returns the attempts made and the last status.
func (w *Webhook) Post(ctx context.Context, body []byte) (attempts, status int, err error) {
	n, pause := w.Attempts, w.Backoff
	if n <= 0 {
		n = 3
	}
	if pause <= 0 {
		pause = 50 * time.Millisecond
	}
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	for attempts = 1; ; attempts++ {
		status, err = w.once(ctx, c, body)
		if err == nil && status == http.StatusOK {
			return attempts, status, nil
		}
		if attempts >= n {
			if err == nil {
				err = fmt.Errorf("metatest: webhook answered %d after %d attempts", status, attempts)
			}
			return attempts, status, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return attempts, status, ctx.Err()
		}
	}
}

// PostOnce delivers body once and returns the status.
func (w *Webhook) PostOnce(ctx context.Context, body []byte) (int, error) {
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	return w.once(ctx, c, body)
}

func (w *Webhook) once(ctx context.Context, c *http.Client, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", Sign(w.Secret, body))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

package telnyxtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Signature headers, as Telnyx sends them.
const (
	SignatureHeader = "telnyx-signature-ed25519"
	TimestampHeader = "telnyx-timestamp"
)

// Sign returns the base64 Ed25519 signature of "<timestamp>|<body>".
func Sign(key ed25519.PrivateKey, timestamp string, body []byte) string {
	msg := append(append([]byte(timestamp), '|'), body...)
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// Inbound is an inbound message as a message.received event carries it.
type Inbound struct {
	// ID is Telnyx's message id; a fresh UUID when empty. A retry of the
	// event carries the same one.
	ID   string
	From string
	// To is the account's number the message was sent to; the account's
	// Number when empty.
	To   string
	Text string
	// Media are URLs of the MMS's files (AddMedia).
	Media []string
}

// Event returns the body of a webhook delivery of event type typ with
// payload, its attempt number in meta (1 when 0).
func (a *Account) Event(typ string, payload any, attempt int) []byte {
	if attempt <= 0 {
		attempt = 1
	}
	b, _ := json.Marshal(map[string]any{
		"data": map[string]any{
			"record_type": "event", "id": uuid(), "event_type": typ,
			"occurred_at": a.s.now().UTC().Format("2006-01-02T15:04:05.000-07:00"), "payload": payload,
		},
		"meta": map[string]any{"attempt": attempt, "delivered_to": a.Webhook()},
	})
	return b
}

// Received returns the payload of message.received for m (m.ID and m.To
// filled in).
func (a *Account) Received(m *Inbound) map[string]any {
	if m.ID == "" {
		m.ID = uuid()
	}
	if m.To == "" {
		m.To = a.Number
	}
	typ := "SMS"
	media := []any{}
	for _, u := range m.Media {
		media = append(media, a.s.mediaEntry(u))
		typ = "MMS"
	}
	return map[string]any{
		"record_type": "message", "direction": "inbound", "id": m.ID, "type": typ,
		"messaging_profile_id": a.ProfileID,
		"from":                 map[string]any{"phone_number": m.From, "carrier": "T-Mobile USA, Inc.", "line_type": "Wireless"},
		"to":                   []map[string]any{{"phone_number": m.To, "status": "webhook_delivered", "carrier": "Telnyx", "line_type": "Wireless"}},
		"cc":                   []any{}, "text": m.Text, "media": media, "encoding": "GSM-7", "parts": 1, "tags": []any{},
		"received_at": a.s.now().UTC().Format(time.RFC3339Nano), "errors": []any{},
	}
}

// Error is a delivery error of message.finalized.
type Error struct {
	Code, Title, Detail string
}

// Report returns the payload of message.sent (status "sent") or
// message.finalized (delivered, delivery_failed, sending_failed,
// delivery_unconfirmed ...) for the message the account sent with id.
func (a *Account) Report(id, status string, errs ...Error) (map[string]any, error) {
	var sm *Sent
	for _, s := range a.Sent() {
		if s.ID == id {
			sm = &s
		}
	}
	if sm == nil {
		return nil, fmt.Errorf("telnyxtest: the account sent no message %s", id)
	}
	list := []map[string]any{}
	for _, e := range errs {
		list = append(list, map[string]any{"code": e.Code, "title": e.Title, "detail": e.Detail})
	}
	now := a.s.now().UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"record_type": "message", "direction": "outbound", "id": sm.ID, "type": "SMS",
		"messaging_profile_id": sm.MessagingProfileID,
		"from":                 map[string]any{"phone_number": sm.From, "carrier": "Telnyx", "line_type": "VoIP"},
		"to":                   []map[string]any{{"phone_number": sm.To, "status": status, "carrier": "T-MOBILE USA, INC.", "line_type": "Wireless"}},
		"text":                 sm.Text, "media": []any{}, "encoding": "GSM-7", "parts": sm.Parts,
		"sent_at": now, "completed_at": now, "errors": list,
	}, nil
}

// Request returns a POST of body to url signed as Telnyx signs, with the
// fake's clock.
func (a *Account) Request(ctx context.Context, url string, body []byte) (*http.Request, error) {
	return a.RequestAt(ctx, url, body, a.s.now())
}

// RequestAt is Request with the timestamp at.
func (a *Account) RequestAt(ctx context.Context, url string, body []byte, at time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "telnyx-webhooks")
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(a.Key, ts, body))
	return req, nil
}

// Deliver POSTs body, signed, to the profile's webhook_url and returns
// the status and the answer's body.
func (a *Account) Deliver(ctx context.Context, body []byte) (int, []byte, error) {
	url := a.Webhook()
	if url == "" {
		return 0, nil, fmt.Errorf("telnyxtest: the messaging profile %s has no webhook_url", a.ProfileID)
	}
	req, err := a.Request(ctx, url, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := a.s.WebhookClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, b, nil
}

// Incoming delivers message.received for m to the profile's webhook and
// fails unless it is answered 2xx. It returns the body, for a retry.
func (a *Account) Incoming(ctx context.Context, m *Inbound) ([]byte, error) {
	body := a.Event("message.received", a.Received(m), 1)
	st, resp, err := a.Deliver(ctx, body)
	if err != nil {
		return body, err
	}
	if st < 200 || st > 299 {
		return body, fmt.Errorf("telnyxtest: the webhook answered %d: %s", st, resp)
	}
	return body, nil
}

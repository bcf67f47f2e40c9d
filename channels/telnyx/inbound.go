package telnyx

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Webhook headers.
const (
	SignatureHeader = "Telnyx-Signature-Ed25519"
	TimestampHeader = "Telnyx-Timestamp"
)

// LastAttempt is the delivery attempt (meta.attempt) after which Telnyx
// stops retrying a webhook at the same URL: up to then a media download
// that failed transiently fails the request (Telnyx delivers it again);
// on it, the downloads get Options.LastAttemptMedia in all, and the
// message is stored without the media that failed, which are listed in
// its details.
const LastAttempt = 3

// Sign returns the telnyx-signature-ed25519 value of body sent at
// timestamp (unix seconds), as Telnyx signs: the base64 Ed25519 signature
// of "<timestamp>|<body>".
func Sign(key ed25519.PrivateKey, timestamp string, body []byte) string {
	msg := make([]byte, 0, len(timestamp)+1+len(body))
	msg = append(append(append(msg, timestamp...), '|'), body...)
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// Verify checks a webhook's signature and timestamp against pub at now,
// allowing tolerance either way. Failures wrap channels.ErrSignature and
// say what is wrong.
func Verify(pub ed25519.PublicKey, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	sig, ts := h.Get(SignatureHeader), h.Get(TimestampHeader)
	switch {
	case sig == "":
		return fmt.Errorf("telnyx: webhook: no %s header: %w", strings.ToLower(SignatureHeader), channels.ErrSignature)
	case ts == "":
		return fmt.Errorf("telnyx: webhook: no %s header: %w", strings.ToLower(TimestampHeader), channels.ErrSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(ts) > 12 {
		return fmt.Errorf("telnyx: webhook: %s %q is not unix seconds: %w", strings.ToLower(TimestampHeader), clip(ts, 40), channels.ErrSignature)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("telnyx: webhook: %s is not a base64 Ed25519 signature: %w", strings.ToLower(SignatureHeader), channels.ErrSignature)
	}
	msg := make([]byte, 0, len(ts)+1+len(body))
	msg = append(append(append(msg, ts...), '|'), body...)
	if !ed25519.Verify(pub, msg, raw) {
		return fmt.Errorf("telnyx: webhook: the signature does not verify with the connection's public key: %w", channels.ErrSignature)
	}
	// Checked after the signature, so that the timestamp is Telnyx's.
	age := now.Sub(time.Unix(secs, 0))
	switch {
	case age > tolerance:
		return fmt.Errorf("telnyx: webhook: the timestamp is %s old, more than the %s allowed (a replay, or a clock far off): %w",
			age.Truncate(time.Second), tolerance, channels.ErrSignature)
	case -age > tolerance:
		return fmt.Errorf("telnyx: webhook: the timestamp is %s in the future, more than the %s allowed: %w",
			(-age).Truncate(time.Second), tolerance, channels.ErrSignature)
	}
	return nil
}

// event is a webhook delivery.
type event struct {
	Data *struct {
		RecordType string          `json:"record_type"`
		ID         string          `json:"id"`
		EventType  string          `json:"event_type"`
		OccurredAt string          `json:"occurred_at"`
		Payload    json.RawMessage `json:"payload"`
	} `json:"data"`
	Meta struct {
		Attempt int `json:"attempt"`
	} `json:"meta"`
}

// party is a from or to entry.
type party struct {
	PhoneNumber string `json:"phone_number"`
	Carrier     string `json:"carrier,omitempty"`
	LineType    string `json:"line_type,omitempty"`
	Status      string `json:"status,omitempty"`
}

// media is an MMS media entry.
type media struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	HashSHA256  string `json:"hash_sha256"`
}

// message is the payload of the message events.
type message struct {
	ID                 string   `json:"id"`
	Direction          string   `json:"direction"`
	Type               string   `json:"type"`
	MessagingProfileID string   `json:"messaging_profile_id"`
	From               party    `json:"from"`
	To                 []party  `json:"to"`
	Text               string   `json:"text"`
	Subject            string   `json:"subject"`
	Media              []media  `json:"media"`
	Encoding           string   `json:"encoding"`
	Parts              int      `json:"parts"`
	ReceivedAt         string   `json:"received_at"`
	CompletedAt        string   `json:"completed_at"`
	Errors             []apiErr `json:"errors"`
}

// Event types.
const (
	EventReceived  = "message.received"
	EventSent      = "message.sent"
	EventFinalized = "message.finalized"
)

// ParseWebhook verifies the signature and the timestamp, then parses one
// event: message.received is a message, message.sent and
// message.finalized a channels.Receipt; other events give nothing. A
// media download that failed transiently fails the request (before
// LastAttempt), so that Telnyx delivers it again.
func (a *Adapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if err := Verify(a.pub, r.Header, body, a.opts.Now(), a.opts.Tolerance); err != nil {
		return nil, err
	}
	if len(body) > MaxEvent {
		return nil, fmt.Errorf("telnyx: webhook: the event exceeds %d bytes", MaxEvent)
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("telnyx: webhook: not a Telnyx event: %w", err)
	}
	if ev.Data == nil || ev.Data.EventType == "" {
		return nil, errors.New("telnyx: webhook: not a Telnyx event: no data.event_type")
	}
	switch ev.Data.EventType {
	case EventReceived, EventSent, EventFinalized:
	default:
		return nil, nil
	}
	var m message
	if err := json.Unmarshal(ev.Data.Payload, &m); err != nil {
		return nil, fmt.Errorf("telnyx: webhook: %s: malformed payload: %w", ev.Data.EventType, err)
	}
	if m.ID == "" {
		return nil, fmt.Errorf("telnyx: webhook: %s: the payload has no message id", ev.Data.EventType)
	}
	if ev.Data.EventType != EventReceived {
		return a.receipt(ev.Data.ID, ev.Data.EventType, ev.Data.OccurredAt, m), nil
	}
	return a.received(r.Context(), ev.Data.ID, ev.Meta.Attempt, m)
}

// received turns message.received into a message.
func (a *Adapter) received(ctx context.Context, eventID string, attempt int, m message) ([]channels.Inbound, error) {
	if m.From.PhoneNumber == "" {
		return nil, errors.New("telnyx: webhook: message.received without from.phone_number")
	}
	if a.cfg.From != "" && len(m.To) > 0 && !toUs(m.To, a.cfg.From) {
		// The profile's other numbers share its webhook: not this
		// connection's message.
		a.opts.Logger.Info("telnyx: an inbound message to another number of the messaging profile was dropped", "connection", a.conn.ID)
		return nil, nil
	}
	in := channels.Inbound{
		ProviderID: m.ID,
		ThreadKey:  m.From.PhoneNumber,
		Sender:     m.From.PhoneNumber,
		Text:       m.Text,
	}
	d := details{EventID: eventID, Type: m.Type, Carrier: m.From.Carrier, LineType: m.From.LineType,
		Encoding: m.Encoding, Parts: m.Parts, ReceivedAt: m.ReceivedAt}
	for _, t := range m.To {
		d.To = append(d.To, t.PhoneNumber)
	}
	if m.Subject != "" {
		d.Subject = m.Subject
	}
	atts, skipped, err := a.attachments(ctx, m.Media, attempt)
	if err != nil {
		return nil, err
	}
	in.Attachments, d.Skipped = atts, skipped
	in.Details, _ = json.Marshal(d) // plain structs: never fails
	return []channels.Inbound{in}, nil
}

// toUs reports whether one of to is from.
func toUs(to []party, from string) bool {
	for _, t := range to {
		if t.PhoneNumber == from {
			return true
		}
	}
	return false
}

// details are the Telnyx facts kept with an inbound message.
type details struct {
	EventID    string    `json:"event_id,omitempty"`
	Type       string    `json:"type,omitempty"` // SMS or MMS
	To         []string  `json:"to,omitempty"`
	Subject    string    `json:"subject,omitempty"`
	Carrier    string    `json:"carrier,omitempty"`
	LineType   string    `json:"line_type,omitempty"`
	Encoding   string    `json:"encoding,omitempty"`
	Parts      int       `json:"parts,omitempty"`
	ReceivedAt string    `json:"received_at,omitempty"`
	Skipped    []skipped `json:"skipped_media,omitempty"`
}

// skipped is a media file left out of the message.
type skipped struct {
	URL         string `json:"url,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Reason      string `json:"reason"`
}

// receipt turns message.sent and message.finalized into a Receipt.
func (a *Adapter) receipt(eventID, typ, occurred string, m message) []channels.Inbound {
	if m.Direction != "" && m.Direction != "outbound" {
		return nil
	}
	status := ""
	if len(m.To) > 0 {
		status = m.To[0].Status
	}
	rc := &channels.Receipt{MessageID: m.ID}
	if t, err := time.Parse(time.RFC3339Nano, occurred); err == nil {
		rc.At = t.UTC()
	}
	switch status {
	case "delivered":
		rc.State = channels.ReceiptDelivered
	case "sending_failed", "delivery_failed", "expired":
		rc.State = channels.ReceiptFailed
		rc.Code, rc.Reason = failure(status, m.Errors)
	case "sent", "delivery_unconfirmed":
		// delivery_unconfirmed is final without a carrier receipt: sent
		// is all that is known.
		rc.State = channels.ReceiptSent
	default:
		if typ != EventSent {
			return nil // queued, sending: no news
		}
		rc.State = channels.ReceiptSent
	}
	return []channels.Inbound{{ProviderID: eventID, Receipt: rc}}
}

// failure is the code and reason of a failed message: Telnyx's first
// error, else the status.
func failure(status string, errs []apiErr) (string, string) {
	if len(errs) == 0 {
		return "", strings.ReplaceAll(status, "_", " ")
	}
	e := errs[0]
	reason := strings.TrimSpace(e.Title)
	if e.Detail != "" && e.Detail != e.Title {
		if reason != "" {
			reason += ": "
		}
		reason += e.Detail
	}
	if reason == "" {
		reason = strings.ReplaceAll(status, "_", " ")
	}
	return string(e.Code), clip(reason, 500)
}

// errTooBig is media over a bound; it is left out.
var errTooBig = errors.New("too big")

// attachments downloads the message's media within the bounds. Media a
// download cannot get (gone, too big, over the bounds) are listed in
// skipped; a transient failure is an error before LastAttempt.
func (a *Adapter) attachments(ctx context.Context, ms []media, attempt int) ([]channels.Attachment, []skipped, error) {
	if attempt >= LastAttempt && len(ms) > 0 {
		// Telnyx hangs up after about 2 s and will not ask again: the
		// media get what is left of LastAttemptMedia, so that the text is
		// stored in time.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.opts.LastAttemptMedia)
		defer cancel()
	}
	var atts []channels.Attachment
	var skips []skipped
	var total int64
	for i, m := range ms {
		skip := func(reason string) {
			skips = append(skips, skipped{URL: m.URL, ContentType: m.ContentType, Reason: reason})
			a.opts.Logger.Info("telnyx: an inbound media file was left out", "connection", a.conn.ID, "reason", reason)
		}
		if i >= a.opts.MaxMedia {
			skip(fmt.Sprintf("more than %d media in one message", a.opts.MaxMedia))
			continue
		}
		limit := min(a.opts.MaxAttachment, a.opts.MaxMediaTotal-total)
		if m.Size > limit {
			skip(fmt.Sprintf("larger than %d bytes", limit))
			continue
		}
		data, ctype, err := a.download(ctx, m, limit)
		switch {
		case err == nil:
		case errors.Is(err, errTooBig):
			skip(fmt.Sprintf("larger than %d bytes", limit))
			continue
		case errors.Is(err, channels.ErrTransient) && attempt < LastAttempt:
			return nil, nil, err
		default:
			skip(err.Error())
			continue
		}
		total += int64(len(data))
		atts = append(atts, channels.Attachment{Filename: filename(m.URL, ctype, i), ContentType: ctype, Data: data})
	}
	return atts, skips, nil
}

// download fetches one media file, at most limit bytes, without the API
// key (Telnyx's media URLs are signed). 4xx answers are permanent;
// network failures, 5xx and a file that does not match its sha256
// transient.
func (a *Adapter) download(ctx context.Context, m media, limit int64) ([]byte, string, error) {
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, "", channels.Permanent("telnyx: download media: not an http(s) URL")
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", channels.Permanent("telnyx: download media: %v", err)
	}
	resp, err := a.opts.MediaClient.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		} else if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, "", channels.Transient(0, "telnyx: download media: %v", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, "", channels.Transient(0, "telnyx: download media: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return nil, "", channels.Permanent("telnyx: download media: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	case resp.ContentLength > limit:
		return nil, "", errTooBig
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", channels.Transient(0, "telnyx: download media: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, "", errTooBig
	}
	if m.HashSHA256 != "" {
		sum := sha256.Sum256(data)
		if want, err := hex.DecodeString(m.HashSHA256); err == nil && !bytes.Equal(want, sum[:]) {
			return nil, "", channels.Transient(0, "telnyx: download media: the file does not match its sha256")
		}
	}
	ctype := m.ContentType
	if ctype == "" {
		ctype = resp.Header.Get("Content-Type")
	}
	if mt, _, err := mime.ParseMediaType(ctype); err == nil {
		ctype = mt
	} else {
		ctype = "application/octet-stream"
	}
	return data, ctype, nil
}

// filename is a name for the i-th media file: the URL's last path
// element when it has an extension, else "media<i>" with one from the
// content type.
func filename(rawURL, ctype string, i int) string {
	if u, err := url.Parse(rawURL); err == nil {
		if base := path.Base(u.Path); path.Ext(base) != "" && len(base) <= 128 && !strings.ContainsAny(base, `/\`) {
			return base
		}
	}
	name := "media" + strconv.Itoa(i+1)
	if exts, _ := mime.ExtensionsByType(ctype); len(exts) > 0 {
		name += exts[0]
	}
	return name
}

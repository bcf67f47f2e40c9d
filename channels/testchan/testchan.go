// Package testchan is the built-in "test" channel: a free channel that needs
// no provider account, for trying an agent in minutes (like a payment API's
// test mode). Inbound messages are injected through the REST API
// (POST /v1/connections/{id}/inbound), which hands the body to ParseWebhook;
// outbound messages are delivered at once; deliveries and typing are recorded
// (Sent, Typings).
//
// Magic recipients let an agent exercise failure handling: sending to
// "fail-permanent" fails for good, "fail-transient" fails with a retryable
// error every time, and "flaky" fails transiently on the first attempt only.
//
// A receipt can be injected too, as the provider's report on a message
// sent earlier: {"receipt": {"message_id": "msg_...", "state": "failed",
// "code": "30007", "reason": "carrier violation"}} (states sent, delivered,
// read, failed). The provider id of a sent message is "test_" followed by
// the body of its comm id (ProviderID), so message_id takes either.
package testchan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ident"
)

// Magic recipients.
const (
	FailPermanent = "fail-permanent"
	FailTransient = "fail-transient"
	Flaky         = "flaky"
)

// Limits of injected messages.
const (
	MaxSender  = 320
	MaxText    = 64 << 10 // text and html each
	MaxSubject = 998
	MaxID      = 200
)

// MaxRecorded is how many sent messages and typing indicators a test
// connection remembers (the most recent); a long-lived connection must not
// grow without bound.
const MaxRecorded = 100

// Descriptor returns the test channel's descriptor.
func Descriptor() channels.Descriptor {
	return channels.Descriptor{Channel: "test", Tier: channels.Free, New: New,
		Summary: "A channel with no provider, for trying an agent: inject messages over the API; nothing to fill in."}
}

// Adapter is a test connection.
type Adapter struct {
	conn channels.Connection

	mu        sync.Mutex
	tries     map[string]int // failed attempts per comm message id, to Flaky only (at most MaxRecorded)
	delivered []channels.Outbound
	typing    []channels.Typing
}

var (
	_ channels.Adapter         = (*Adapter)(nil)
	_ channels.Typer           = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
	_ channels.Injector        = (*Adapter)(nil)
)

// New provisions a test connection. It takes no configuration: the config
// is absent, null or an empty object.
func New(_ context.Context, conn channels.Connection) (channels.Adapter, error) {
	if c := bytes.TrimSpace(conn.Config); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(c, &fields); err != nil || len(fields) > 0 {
			return nil, fmt.Errorf("test: the test channel takes no config; leave config out or send {}")
		}
	}
	return &Adapter{conn: conn, tries: map[string]int{}}, nil
}

// Send delivers at once. Sending the same comm message twice returns the
// first provider id: the test provider is idempotent by message id (when
// there is one).
func (a *Adapter) Send(_ context.Context, msg channels.Outbound) (channels.SendResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch msg.To {
	case "":
		return channels.SendResult{}, fmt.Errorf("test: send: no recipient: %w", channels.ErrPermanent)
	case FailPermanent:
		return channels.SendResult{}, fmt.Errorf("test: send: recipient %q rejects every message: %w", msg.To, channels.ErrPermanent)
	case FailTransient:
		return channels.SendResult{}, fmt.Errorf("test: send: recipient %q is unreachable for now: %w", msg.To, channels.ErrTransient)
	case Flaky:
		if a.recent(msg.MessageID) {
			break // sent before: a repeat goes out
		}
		if _, failed := a.tries[msg.MessageID]; !failed {
			if len(a.tries) >= MaxRecorded {
				clear(a.tries) // messages never tried again; their next try fails once more
			}
			a.tries[msg.MessageID] = 1
			return channels.SendResult{}, fmt.Errorf("test: send: first attempt to %q failed: %w", msg.To, channels.ErrTransient)
		}
		delete(a.tries, msg.MessageID)
	}
	if msg.MessageID == "" {
		id := ProviderID(ident.New(ident.Message))
		a.delivered = record(a.delivered, msg)
		return channels.SendResult{ProviderID: id}, nil
	}
	// The provider id follows from the message id, so a repeat gets the
	// same one; it is recorded once (among the recent ones: nothing here
	// grows with the messages sent).
	if !a.recent(msg.MessageID) {
		a.delivered = record(a.delivered, msg)
	}
	return channels.SendResult{ProviderID: ProviderID(msg.MessageID)}, nil
}

// recent reports whether the message id is among the recorded sends.
func (a *Adapter) recent(messageID string) bool {
	return slices.ContainsFunc(a.delivered, func(o channels.Outbound) bool { return o.MessageID == messageID })
}

// ProviderID is the test provider's id of the comm message messageID:
// "test_" and the id's body, so a test (or an agent trying failure
// handling) knows it before the send.
func ProviderID(messageID string) string {
	return "test_" + strings.TrimPrefix(messageID, ident.Message+"_")
}

// Sent returns the messages delivered so far, oldest first (the last
// MaxRecorded).
func (a *Adapter) Sent() []channels.Outbound {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]channels.Outbound(nil), a.delivered...)
}

// record appends v to a list that keeps the last MaxRecorded entries.
func record[T any](list []T, v T) []T {
	if len(list) >= MaxRecorded {
		list = append(list[:0], list[len(list)-MaxRecorded+1:]...)
	}
	return append(list, v)
}

// Typing records the indicator.
func (a *Adapter) Typing(_ context.Context, t channels.Typing) error {
	a.mu.Lock()
	a.typing = record(a.typing, t)
	a.mu.Unlock()
	return nil
}

// Typings returns the typing indicators shown so far, oldest first (the
// last MaxRecorded).
func (a *Adapter) Typings() []channels.Typing {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]channels.Typing(nil), a.typing...)
}

// Inject is the body of POST /v1/connections/{id}/inbound.
type Inject struct {
	Sender  string  `json:"sender"`
	Text    string  `json:"text"`
	Subject *string `json:"subject"`
	HTML    *string `json:"html"`
	// ID plays the provider's message id: repeating it is a duplicate
	// delivery. Made up when absent.
	ID string `json:"id"`
	// Receipt, instead of a message, plays the provider's report on a
	// message sent earlier; it comes alone.
	Receipt *InjectReceipt `json:"receipt,omitempty"`
}

// InjectReceipt is an injected provider report on a sent message.
type InjectReceipt struct {
	// MessageID names the message: its comm id (msg_...) or its provider
	// id (test_...).
	MessageID string `json:"message_id"`
	// State is sent, delivered, read or failed.
	State string `json:"state"`
	// Code and Reason are the provider's error code and its meaning, on
	// failed only.
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// At is when the provider saw it (RFC 3339); when it arrives if
	// absent.
	At *time.Time `json:"at"`
}

// Limits of injected receipts.
const (
	MaxCode   = 64
	MaxReason = 1000
)

// FieldError names the field of an injected message that is wrong.
type FieldError = channels.ConfigError

// ParseWebhook parses an injected message, as Inject does; the
// conformance suite drives the test channel through it.
func (a *Adapter) ParseWebhook(_ *http.Request, body []byte) ([]channels.Inbound, error) {
	return a.Inject(body)
}

// Inject parses an injected message (POST /v1/connections/{id}/inbound).
// The REST API has already authenticated the caller, so there is no
// signature to verify.
func (a *Adapter) Inject(body []byte) ([]channels.Inbound, error) {
	// encoding/json turns invalid UTF-8 into U+FFFD silently: check first.
	if !utf8.Valid(body) {
		return nil, invalidUTF8(body)
	}
	var in Inject
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("test: inbound: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("test: inbound: data after the JSON object")
	}
	if in.Receipt != nil {
		if in.Sender != "" || in.Text != "" || in.Subject != nil || in.HTML != nil || in.ID != "" {
			return nil, &FieldError{Field: "receipt", Msg: "a receipt comes alone: leave sender, text, subject, html and id out"}
		}
		return receipt(in.Receipt)
	}
	switch {
	case strings.TrimSpace(in.Sender) == "":
		return nil, &FieldError{Field: "sender", Msg: "required"}
	case len(in.Sender) > MaxSender || strings.ContainsFunc(in.Sender, unicode.IsControl):
		return nil, &FieldError{Field: "sender", Msg: fmt.Sprintf("at most %d bytes, no control characters", MaxSender)}
	case in.Text == "" && (in.HTML == nil || *in.HTML == ""):
		return nil, &FieldError{Field: "text", Msg: "text or html is required"}
	case len(in.Text) > MaxText:
		return nil, &FieldError{Field: "text", Msg: fmt.Sprintf("at most %d bytes", MaxText)}
	case in.HTML != nil && len(*in.HTML) > MaxText:
		return nil, &FieldError{Field: "html", Msg: fmt.Sprintf("at most %d bytes", MaxText)}
	case in.Subject != nil && (len(*in.Subject) > MaxSubject || strings.ContainsFunc(*in.Subject, unicode.IsControl)):
		return nil, &FieldError{Field: "subject", Msg: fmt.Sprintf("at most %d bytes, one line", MaxSubject)}
	case len(in.ID) > MaxID || strings.ContainsFunc(in.ID, unicode.IsControl):
		return nil, &FieldError{Field: "id", Msg: fmt.Sprintf("at most %d bytes, no control characters", MaxID)}
	}
	id := in.ID
	if id == "" {
		id = "inj_" + strings.TrimPrefix(ident.New(ident.Message), ident.Message+"_")
	}
	return []channels.Inbound{{
		ProviderID: id, ThreadKey: in.Sender, Sender: in.Sender,
		Subject: in.Subject, Text: in.Text, HTML: in.HTML,
	}}, nil
}

// receipt checks an injected receipt and returns it as the provider's
// report.
func receipt(r *InjectReceipt) ([]channels.Inbound, error) {
	states := []string{channels.ReceiptSent, channels.ReceiptDelivered, channels.ReceiptRead, channels.ReceiptFailed}
	switch {
	case r.MessageID == "":
		return nil, &FieldError{Field: "receipt.message_id", Msg: "required: the id of a message sent on this connection (msg_...) or its provider id (test_...)"}
	case len(r.MessageID) > MaxID || strings.ContainsFunc(r.MessageID, unicode.IsControl):
		return nil, &FieldError{Field: "receipt.message_id", Msg: fmt.Sprintf("at most %d bytes, no control characters", MaxID)}
	case !slices.Contains(states, r.State):
		return nil, &FieldError{Field: "receipt.state", Msg: fmt.Sprintf("must be one of %s, not %q", strings.Join(states, ", "), r.State)}
	case r.State != channels.ReceiptFailed && (r.Code != "" || r.Reason != ""):
		return nil, &FieldError{Field: "receipt.code", Msg: "code and reason come only with state failed"}
	case len(r.Code) > MaxCode || strings.ContainsFunc(r.Code, unicode.IsControl):
		return nil, &FieldError{Field: "receipt.code", Msg: fmt.Sprintf("at most %d bytes, no control characters", MaxCode)}
	case len(r.Reason) > MaxReason:
		return nil, &FieldError{Field: "receipt.reason", Msg: fmt.Sprintf("at most %d bytes", MaxReason)}
	}
	id := r.MessageID
	if ident.Check(id, ident.Message) == nil {
		id = ProviderID(id)
	}
	out := &channels.Receipt{MessageID: id, State: r.State, Code: r.Code, Reason: r.Reason}
	if r.At != nil {
		out.At = *r.At
	}
	return []channels.Inbound{{Receipt: out}}, nil
}

// invalidUTF8 names the field of body that is not valid UTF-8, where it
// can tell.
func invalidUTF8(body []byte) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		for _, f := range []string{"sender", "text", "subject", "html", "id", "receipt"} {
			if !utf8.Valid(fields[f]) {
				return &FieldError{Field: f, Msg: "must be valid UTF-8"}
			}
		}
	}
	return fmt.Errorf("test: inbound: the body is not valid UTF-8")
}

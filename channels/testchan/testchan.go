// Package testchan is the built-in "test" channel: a free channel that needs
// no provider account, for trying an agent in minutes (like a payment API's
// test mode). Inbound messages are injected through the REST API
// (POST /v1/connections/{id}/inbound), which hands the body to ParseWebhook;
// outbound messages are delivered at once; typing is recorded.
//
// Magic recipients let an agent exercise failure handling: sending to
// "fail-permanent" fails for good, "fail-transient" fails with a retryable
// error every time, and "flaky" fails transiently on the first attempt only.
package testchan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
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
	MaxSender = 320
	MaxText   = 64 << 10
)

// Descriptor returns the test channel's descriptor.
func Descriptor() channels.Descriptor {
	return channels.Descriptor{Channel: "test", Tier: channels.Free, New: New}
}

// Adapter is a test connection.
type Adapter struct {
	conn channels.Connection

	mu     sync.Mutex
	sent   map[string]string // comm message id -> provider id
	tries  map[string]int
	typing []channels.Typing
}

var (
	_ channels.Adapter         = (*Adapter)(nil)
	_ channels.Typer           = (*Adapter)(nil)
	_ channels.WebhookReceiver = (*Adapter)(nil)
)

// New provisions a test connection. It takes no configuration.
func New(_ context.Context, conn channels.Connection) (channels.Adapter, error) {
	if c := bytes.TrimSpace(conn.Config); len(c) > 0 && !bytes.Equal(c, []byte("null")) && !bytes.Equal(c, []byte("{}")) {
		return nil, fmt.Errorf("test: the test channel takes no config")
	}
	return &Adapter{conn: conn, sent: map[string]string{}, tries: map[string]int{}}, nil
}

// Send delivers at once. Sending the same comm message twice returns the
// first provider id: the test provider is idempotent by message id.
func (a *Adapter) Send(_ context.Context, msg channels.Outbound) (channels.SendResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tries[msg.MessageID]++
	switch msg.To {
	case "":
		return channels.SendResult{}, fmt.Errorf("test: send: no recipient: %w", channels.ErrPermanent)
	case FailPermanent:
		return channels.SendResult{}, fmt.Errorf("test: send: recipient %q rejects every message: %w", msg.To, channels.ErrPermanent)
	case FailTransient:
		return channels.SendResult{}, fmt.Errorf("test: send: recipient %q is unreachable for now: %w", msg.To, channels.ErrTransient)
	case Flaky:
		if a.tries[msg.MessageID] == 1 {
			return channels.SendResult{}, fmt.Errorf("test: send: first attempt to %q failed: %w", msg.To, channels.ErrTransient)
		}
	}
	if id, ok := a.sent[msg.MessageID]; ok {
		return channels.SendResult{ProviderID: id}, nil
	}
	id := "test_" + strings.TrimPrefix(ident.New(ident.Message), ident.Message+"_")
	a.sent[msg.MessageID] = id
	return channels.SendResult{ProviderID: id}, nil
}

// Typing records the indicator.
func (a *Adapter) Typing(_ context.Context, t channels.Typing) error {
	a.mu.Lock()
	a.typing = append(a.typing, t)
	a.mu.Unlock()
	return nil
}

// Typings returns the typing indicators shown so far.
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
}

// FieldError names the field of an injected message that is wrong.
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ParseWebhook parses an injected message. The REST API has already
// authenticated the caller, so there is no signature to verify.
func (a *Adapter) ParseWebhook(_ *http.Request, body []byte) ([]channels.Inbound, error) {
	var in Inject
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("test: inbound: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("test: inbound: data after the JSON object")
	}
	switch {
	case strings.TrimSpace(in.Sender) == "":
		return nil, &FieldError{"sender", "required"}
	case len(in.Sender) > MaxSender:
		return nil, &FieldError{"sender", fmt.Sprintf("at most %d bytes", MaxSender)}
	case in.Text == "" && in.HTML == nil:
		return nil, &FieldError{"text", "text or html is required"}
	case len(in.Text) > MaxText:
		return nil, &FieldError{"text", fmt.Sprintf("at most %d bytes", MaxText)}
	case !utf8.ValidString(in.Sender + in.Text):
		return nil, &FieldError{"text", "must be valid UTF-8"}
	case len(in.ID) > 200:
		return nil, &FieldError{"id", "at most 200 bytes"}
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

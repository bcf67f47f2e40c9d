package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/comm-gateway/comm/signature"
)

// MaxWebhookBody bounds the body WebhookHandler reads.
const MaxWebhookBody = 1 << 20

// Errors of VerifyWebhook, for errors.Is.
var (
	// ErrWebhookSignature: the delivery is not signed with the secret
	// (missing headers, no matching signature, or a timestamp more than
	// signature.Tolerance (5 min) from now). The error also wraps
	// signature.ErrMissingHeaders, ErrMismatch or ErrTimestamp.
	ErrWebhookSignature = errors.New("comm: webhook signature does not verify")
	// ErrWebhookPayload: the signed body is not an event.
	ErrWebhookPayload = errors.New("comm: webhook body is not an event")
)

// VerifyWebhook checks a push delivery's Standard Webhooks signature
// (headers webhook-id, webhook-timestamp, webhook-signature) against its
// raw body and the secret given to SetWebhook, and decodes the event. Pass
// the body exactly as received. A delivery may arrive more than once (a
// retry after a lost acknowledgement, or ReplayWebhook): Event.Seq tells
// them apart.
func VerifyWebhook(secret string, headers http.Header, body []byte) (*Event, error) {
	if _, err := signature.Key(secret); err != nil {
		return nil, fmt.Errorf("comm: webhook secret: %w", err)
	}
	if err := signature.Verify(secret, headers, body, time.Now()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWebhookSignature, err)
	}
	var e Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWebhookPayload, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the event", ErrWebhookPayload)
	}
	if e.Seq <= 0 || e.Type == "" || len(e.Data) == 0 {
		return nil, fmt.Errorf("%w: want {seq, type, data}", ErrWebhookPayload)
	}
	return &e, nil
}

// WebhookHandler returns an http.Handler that receives push deliveries:
// it reads the body (at most MaxWebhookBody: 413 beyond), verifies it with
// VerifyWebhook (401 when the signature does not verify, 400 when the body
// is not an event) and calls fn with the request's context. It answers 204
// when fn returns nil, acknowledging the event; 500 when fn fails or
// panics, so that the gateway delivers the event again later (deliveries
// are in seq order: later events wait). Methods other than POST get 405.
func WebhookHandler(secret string, fn func(ctx context.Context, e *Event) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, "reading the body failed", http.StatusBadRequest)
			return
		}
		e, err := VerifyWebhook(secret, r.Header, body)
		switch {
		case errors.Is(err, ErrWebhookSignature):
			http.Error(w, "signature does not verify", http.StatusUnauthorized)
			return
		case errors.Is(err, ErrWebhookPayload):
			http.Error(w, "body is not an event", http.StatusBadRequest)
			return
		case err != nil: // the receiver's secret is unusable
			http.Error(w, "receiver misconfigured", http.StatusInternalServerError)
			return
		}
		if err := callSafely(r.Context(), e, fn); err != nil {
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// PanicError is a handler's panic, recovered.
type PanicError struct {
	Value any
	Stack []byte
}

// Error reports the panic value.
func (p *PanicError) Error() string { return fmt.Sprintf("comm: handler panicked: %v", p.Value) }

// callSafely calls fn, turning a panic into a *PanicError.
func callSafely[T any](ctx context.Context, v T, fn func(context.Context, T) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, v)
}

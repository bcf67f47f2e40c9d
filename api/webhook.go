package api

import "time"

// Webhook is the project's push endpoint.
type Webhook struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Status string `json:"status"`
	// Cursor is the seq of the last acknowledged delivery.
	Cursor         int64      `json:"cursor"`
	LastError      *string    `json:"last_error"`
	FailingSince   *time.Time `json:"failing_since"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	DisabledReason *string    `json:"disabled_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	// Secret is set only when the gateway generated it (a registration
	// with an empty secret): store it, it is not shown again.
	Secret string `json:"secret,omitempty"`
}

// WebhookAttempt is one recorded push delivery attempt.
type WebhookAttempt struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	Seq        int64     `json:"seq"`
	OK         bool      `json:"ok"`
	StatusCode int       `json:"status_code"`
	LatencyMS  int       `json:"latency_ms"`
	Error      *string   `json:"error"`
	At         time.Time `json:"at"`
}

// WebhookRequest is the body of PUT /v1/webhook: it registers (or
// replaces) the project's push endpoint.
type WebhookRequest struct {
	URL string `json:"url"`
	// Secret signs deliveries; a "whsec_" secret is base64 after the
	// prefix. Generated (and shown once) when empty.
	Secret string `json:"secret,omitempty"`
	// FromSeq starts (or moves) the cursor: deliveries resume after it.
	// Default: a new registration starts at the stream's head; a
	// re-registration keeps its cursor.
	FromSeq *int64 `json:"from_seq,omitempty"`
}

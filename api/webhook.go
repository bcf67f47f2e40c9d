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

package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Sandbox is a new anonymous project and its key (shown once): the answer
// of POST /v1/projects/sandbox.
type Sandbox struct {
	ProjectID  string `json:"project_id"`
	APIKey     string `json:"api_key"`
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
}

// Project is the key's project and the head of its event stream: the
// answer of GET /v1/project.
type Project struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
	// LastSeq is the seq of the newest event (0 for an empty stream).
	LastSeq   int64     `json:"last_seq"`
	CreatedAt time.Time `json:"created_at"`
}

// Event types: the Type of an Event.
const (
	EventMessageReceived      = "message.received"
	EventMessageSent          = "message.sent"
	EventMessageFailed        = "message.failed"
	EventConnectionActive     = "connection.active"
	EventConnectionAuthorized = "connection.authorized"
	EventConnectionDegraded   = "connection.degraded"
	EventConnectionRevoked    = "connection.revoked"
	EventDomainVerified       = "domain.verified"
	EventDomainUnverified     = "domain.unverified"
	EventWebhookDisabled      = "webhook.disabled"
	EventWebhookEnabled       = "webhook.enabled"
	EventAccountBalanceLow    = "account.balance_low"
)

// Event is one entry of the project's stream: GET /v1/events, the GraphQL
// subscription and push deliveries all carry this shape.
type Event struct {
	// Seq is dense and strictly increasing per project: the cursor.
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Decode unmarshals the event's data into v.
func (e *Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("comm: event %d (%s): decode data: %w", e.Seq, e.Type, err)
	}
	return nil
}

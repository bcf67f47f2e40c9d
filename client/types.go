package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event types of the stream.
const (
	EventMessageReceived      = "message.received"
	EventMessageSent          = "message.sent"
	EventMessageFailed        = "message.failed"
	EventConnectionActive     = "connection.active"
	EventConnectionAuthorized = "connection.authorized"
	EventDomainVerified       = "domain.verified"
	EventWebhookDisabled      = "webhook.disabled"
	EventWebhookEnabled       = "webhook.enabled"
)

// Sandbox is a new anonymous project and its key (shown once).
type Sandbox struct {
	ProjectID  string `json:"project_id"`
	APIKey     string `json:"api_key"`
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
}

// Project is the key's project and the head of its event stream.
type Project struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
	// LastSeq is the seq of the newest event (0 for an empty stream).
	LastSeq   int64     `json:"last_seq"`
	CreatedAt time.Time `json:"created_at"`
}

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

// MessageEvent is the data of message.received, message.sent and
// message.failed.
type MessageEvent struct {
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
	Message    struct {
		ID             string  `json:"id"`
		ConversationID string  `json:"conversation_id"`
		ConnectionID   string  `json:"connection_id"`
		Channel        string  `json:"channel"`
		Sender         string  `json:"sender"`
		Subject        *string `json:"subject"`
		Text           string  `json:"text"`
		HTML           *string `json:"html"`
		// The fields below are set on message.sent and message.failed.
		Recipient *string    `json:"recipient,omitempty"`
		InReplyTo *string    `json:"in_reply_to,omitempty"`
		Status    string     `json:"status,omitempty"`
		SentAt    *time.Time `json:"sent_at,omitempty"`
		Error     *string    `json:"error,omitempty"`
		Attempts  int        `json:"attempts,omitempty"`
	} `json:"message"`
}

// Connection is a channel connection (an inbox, a bot, an app).
type Connection struct {
	ID         string    `json:"id"`
	Channel    string    `json:"channel"`
	Provider   *string   `json:"provider"`
	Status     string    `json:"status"`
	CustomerID string    `json:"customer_id"`
	AgentID    string    `json:"agent_id"`
	Name       *string   `json:"name"`
	Address    *string   `json:"address"`
	CreatedAt  time.Time `json:"created_at"`
}

// ConnectRequest is the body of Connect. Empty fields are left out: the
// channel's only provider, and the project's default customer and agent.
type ConnectRequest struct {
	Channel    string `json:"channel"`
	Provider   string `json:"provider,omitempty"`
	CustomerID string `json:"customer_id,omitempty"`
	AgentID    string `json:"agent_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// Config is the channel's configuration (credentials and such),
	// encoded as JSON.
	Config any `json:"config,omitempty"`
}

// Conversation is a thread with one participant on one connection.
type Conversation struct {
	ID           string  `json:"id"`
	ConnectionID string  `json:"connection_id"`
	Participant  string  `json:"participant"`
	Subject      *string `json:"subject"`
	// Typing reports a live typing indicator, until TypingUntil.
	Typing        bool       `json:"typing"`
	TypingUntil   *time.Time `json:"typing_until"`
	LastMessageAt time.Time  `json:"last_message_at"`
	CreatedAt     time.Time  `json:"created_at"`
}

// Message directions and statuses.
const (
	DirectionInbound  = "inbound"
	DirectionOutbound = "outbound"

	StatusReceived = "received"
	StatusQueued   = "queued"
	StatusSending  = "sending"
	StatusSent     = "sent"
	StatusFailed   = "failed"
)

// Message is a stored message, inbound or outbound.
type Message struct {
	ID             string     `json:"id"`
	ConversationID string     `json:"conversation_id"`
	ConnectionID   string     `json:"connection_id"`
	Channel        string     `json:"channel"`
	Direction      string     `json:"direction"`
	Status         string     `json:"status"`
	Sender         string     `json:"sender"`
	Recipient      *string    `json:"recipient"`
	Subject        *string    `json:"subject"`
	Text           string     `json:"text"`
	HTML           *string    `json:"html"`
	InReplyTo      *string    `json:"in_reply_to"`
	Error          *string    `json:"error"`
	Attempts       int        `json:"attempts"`
	CreatedAt      time.Time  `json:"created_at"`
	SentAt         *time.Time `json:"sent_at"`
}

// ReplyRequest is the body of Reply. Text or HTML is required. Subject
// defaults to "Re: " and the subject of the message answered, when it has
// one.
type ReplyRequest struct {
	Text    string `json:"text,omitempty"`
	HTML    string `json:"html,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// SendRequest is the body of Send: a proactive message.
type SendRequest struct {
	ConnectionID string `json:"connection_id"`
	To           string `json:"to"`
	Text         string `json:"text,omitempty"`
	HTML         string `json:"html,omitempty"`
	Subject      string `json:"subject,omitempty"`
}

// InjectRequest is a message injected into a test connection as if Sender
// had written it. A repeated ID is a duplicate delivery: nothing new is
// stored.
type InjectRequest struct {
	Sender  string `json:"sender"`
	Text    string `json:"text,omitempty"`
	Subject string `json:"subject,omitempty"`
	HTML    string `json:"html,omitempty"`
	ID      string `json:"id,omitempty"`
}

// TypingState is the answer of Typing: the indicator shows until
// TypingUntil, or until a reply is sent.
type TypingState struct {
	ConversationID string    `json:"conversation_id"`
	TypingUntil    time.Time `json:"typing_until"`
}

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
	// Secret is set only when the gateway generated it (SetWebhook with
	// an empty secret): store it, it is not shown again.
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

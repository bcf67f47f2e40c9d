package api

import (
	"encoding/json"
	"time"
)

// The data of the stream's events, by type. The gateway writes
// message.received's message as ReceivedMessage and message.sent's and
// message.failed's as SentMessage; a reader decodes any of the three into
// MessageEvent, whose EventMessage has the fields of both.

// ReceivedMessage is the message object of message.received: the spec's
// fields, plus attachments and details on channels that have them.
type ReceivedMessage struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversation_id"`
	ConnectionID   string  `json:"connection_id"`
	Channel        string  `json:"channel"`
	Sender         string  `json:"sender"`
	Subject        *string `json:"subject"`
	Text           string  `json:"text"`
	HTML           *string `json:"html"`
	// Attachments and Details are set on channels that have them (email),
	// as on Message; Details never carries full_text in an event.
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	Details     json.RawMessage  `json:"details,omitempty"`
	// Truncated says the event carries less than the message: text, html
	// or subject cut to the gateway's cap, or details left out; GET
	// /v1/messages/{id} has all.
	Truncated bool `json:"truncated,omitempty"`
	// Unbilled is set on a paid channel's message stored while the
	// account's credit did not cover its price.
	Unbilled bool `json:"unbilled,omitempty"`
}

// SentMessage is the message object of message.sent and message.failed:
// message.received's fields plus the outcome.
type SentMessage struct {
	ReceivedMessage
	Recipient string     `json:"recipient"`
	InReplyTo *string    `json:"in_reply_to"`
	Status    string     `json:"status"`
	SentAt    *time.Time `json:"sent_at"`
	Error     *string    `json:"error"`
	Attempts  int        `json:"attempts"`
	// Delivery is set on a message.failed the provider's report caused
	// (a message sent, then not delivered): its code and reason.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// MessageEvent is the data of message.received, message.sent and
// message.failed, as a reader decodes it.
type MessageEvent struct {
	CustomerID string       `json:"customer_id"`
	AgentID    string       `json:"agent_id"`
	Message    EventMessage `json:"message"`
}

// EventMessage is the message of a MessageEvent: the fields of
// ReceivedMessage and SentMessage in one type.
type EventMessage struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversation_id"`
	ConnectionID   string  `json:"connection_id"`
	Channel        string  `json:"channel"`
	Sender         string  `json:"sender"`
	Subject        *string `json:"subject"`
	Text           string  `json:"text"`
	HTML           *string `json:"html"`
	// Attachments and Details are set on channels that have them (email),
	// as on Message.
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	Details     json.RawMessage  `json:"details,omitempty"`
	// Truncated is as on ReceivedMessage.
	Truncated bool `json:"truncated,omitempty"`
	// Unbilled is as on ReceivedMessage.
	Unbilled bool `json:"unbilled,omitempty"`
	// The fields below are set on message.sent and message.failed.
	Recipient *string    `json:"recipient,omitempty"`
	InReplyTo *string    `json:"in_reply_to,omitempty"`
	Status    string     `json:"status,omitempty"`
	SentAt    *time.Time `json:"sent_at,omitempty"`
	Error     *string    `json:"error,omitempty"`
	Attempts  int        `json:"attempts,omitempty"`
	Delivery  *Delivery  `json:"delivery,omitempty"`
}

// ConnectionEvent is the data of connection.active, connection.authorized,
// connection.degraded and connection.revoked: the scope, like
// message.received, and the connection as GET /v1/connections/{id} shows
// it.
type ConnectionEvent struct {
	CustomerID string      `json:"customer_id"`
	AgentID    string      `json:"agent_id"`
	Connection *Connection `json:"connection"`
	// Reason says why, on connection.degraded and connection.revoked.
	Reason string `json:"reason,omitempty"`
}

// DomainEvent is the data of domain.verified and domain.unverified.
type DomainEvent struct {
	Domain *Domain `json:"domain"`
}

// WebhookEvent is the data of webhook.disabled and webhook.enabled.
type WebhookEvent struct {
	Webhook *Webhook `json:"webhook"`
	// Reason says why it was disabled or enabled.
	Reason string `json:"reason,omitempty"`
}

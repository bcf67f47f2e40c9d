package api

import (
	"encoding/json"
	"time"
)

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
	// Delivery is what the provider reported about an outbound message
	// after it was sent (status callbacks, delivery and read receipts);
	// null until it reports, and on inbound messages.
	Delivery *Delivery `json:"delivery"`
	// Attachments lists the message's attachments, on channels that have
	// them (email).
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	// Details is channel-specific JSON, absent on channels without it.
	// Email: message_id, from_name, to, cc, in_reply_to, references, date,
	// mail_from, full_text, auth (sender authentication) and warnings.
	// A message in an event never carries full_text.
	Details json.RawMessage `json:"details,omitempty"`
	// Truncated is set on a message in an event that carries less than
	// the message: text, html or subject cut to the gateway's cap, or
	// details left out. GET /v1/messages/{id} never sets it.
	Truncated bool `json:"truncated,omitempty"`
	// Unbilled is set on an inbound message of a paid channel that was
	// stored while the account's credit did not cover its price.
	Unbilled bool `json:"unbilled,omitempty"`
}

// Delivery states.
const (
	DeliverySent      = "sent"
	DeliveryDelivered = "delivered"
	DeliveryRead      = "read"
	DeliveryFailed    = "failed"
)

// Delivery is the provider's latest report on an outbound message. It
// never moves back: read and failed are final, and a late "delivered"
// does not undo "read".
type Delivery struct {
	// State is sent (the provider handed it on), delivered, read or
	// failed.
	State string `json:"state"`
	// Code and Reason are the provider's error code and what it said, on
	// failed (Twilio 30007, Meta 131047 ...); null otherwise.
	Code   *string `json:"code"`
	Reason *string `json:"reason"`
	// DeliveredAt and ReadAt are when the provider saw the message
	// delivered and read (a read message counts as delivered then at the
	// latest); null until it did.
	DeliveredAt *time.Time `json:"delivered_at"`
	ReadAt      *time.Time `json:"read_at"`
}

// PendingReceipt answers POST /v1/connections/{id}/inbound (202) for a
// receipt about a message whose send has not been recorded yet: the report
// is kept and applied once the provider's id of the message is known.
type PendingReceipt struct {
	// Status is "pending".
	Status string `json:"status"`
	// MessageID is the provider's id the receipt named.
	MessageID string `json:"message_id"`
	// ExpiresAt is when the report is dropped if no sent message has the
	// id by then.
	ExpiresAt time.Time `json:"expires_at"`
}

// AttachmentInfo describes an attachment of a message; GET
// /v1/messages/{id}/attachments/{attachment} serves its bytes.
type AttachmentInfo struct {
	ID string `json:"id"`
	// Filename is the name the sender gave; it may be empty.
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	// Size is in bytes.
	Size int64 `json:"size"`
	// Inline reports a part the HTML body shows in place, referencing it
	// as cid:ContentID.
	Inline    bool    `json:"inline"`
	ContentID *string `json:"content_id"`
}

// TypingState is the answer of POST /v1/messages/{id}/typing: the
// indicator shows until TypingUntil, or until a reply is sent.
type TypingState struct {
	ConversationID string    `json:"conversation_id"`
	TypingUntil    time.Time `json:"typing_until"`
}

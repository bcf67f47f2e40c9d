// Package channels is the contract between comm and the providers it
// speaks to, and the registry of every channel comm knows.
//
// A provider is a Descriptor (channel, provider, tier, constructor). Its
// constructor turns a connection's typed configuration into an Adapter. An
// Adapter must send (Sender); everything else is optional and found by type
// assertion: Typer shows a typing indicator, WebhookReceiver parses signed
// provider webhooks, Poller pulls messages, Closer releases resources.
//
// Lifecycle: New (validate the configuration and provision) -> Send, Typing,
// ParseWebhook, Poll, any number of times, concurrently -> Close.
//
// Every adapter passes the conformance suite in channels/channeltest.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// Tier is who may connect a channel: any key (free) or a signed-in key
// (paid).
type Tier string

// Tiers.
const (
	Free Tier = "free"
	Paid Tier = "paid"
)

// Descriptor describes one provider of one channel.
type Descriptor struct {
	// Channel is the medium, also the channel field of messages: "email",
	// "sms", "whatsapp", "test" ...
	Channel string
	// Provider names the provider where a medium has several ("twilio",
	// "telnyx", "hosted"); empty where it has one.
	Provider string
	// Tier decides which keys may connect it.
	Tier Tier
	// New provisions an adapter for a connection from its configuration
	// (the "config" object of POST /v1/connections). Nil while the adapter
	// is not built yet: connecting answers 501.
	New func(ctx context.Context, conn Connection) (Adapter, error)
}

// Connection is what an adapter knows of the connection it serves.
type Connection struct {
	ID        string
	ProjectID string
	Config    json.RawMessage
}

// Adapter is a provisioned connection of one provider.
type Adapter interface {
	Sender
}

// Sender delivers an outbound message. Required.
type Sender interface {
	// Send delivers msg and returns the provider's id for it. It returns an
	// error wrapping ErrTransient for failures worth retrying (timeouts,
	// 429, 5xx) and ErrPermanent for the rest (bad recipient, 4xx).
	Send(ctx context.Context, msg Outbound) (SendResult, error)
}

// Typer shows a typing indicator in a conversation.
type Typer interface {
	Typing(ctx context.Context, t Typing) error
}

// WebhookReceiver parses a provider's webhook request. It verifies the
// signature over the raw body before parsing and returns ErrSignature when
// it does not verify.
type WebhookReceiver interface {
	ParseWebhook(r *http.Request, body []byte) ([]Inbound, error)
}

// Poller pulls inbound messages (providers without webhooks).
type Poller interface {
	Poll(ctx context.Context, emit func(Inbound) error) error
}

// Inbox is an adapter whose connection receives at an address this gateway
// hosts (an email inbox on comm's SMTP listener). Connect stores the
// address on the connection and keeps it unique across the gateway, so
// inbound mail finds its connection by address.
type Inbox interface {
	InboxAddress() string
}

// Closer releases an adapter's resources.
type Closer interface {
	Close() error
}

// Inbound is a normalised inbound message.
type Inbound struct {
	// ProviderID is the provider's id of the message; a repeat delivery
	// carries the same one and stores nothing new.
	ProviderID string
	// ThreadKey names the provider-side thread (chat id, peer address);
	// messages with the same key share a conversation.
	ThreadKey string
	Sender    string
	Subject   *string
	Text      string
	HTML      *string
	// References are provider ids of earlier messages this one answers,
	// the nearest last (email In-Reply-To and References, a chat's reply
	// reference). The message joins the conversation of the first of them
	// stored on the same connection, before ThreadKey is considered.
	References []string
	// ConversationID names a comm conversation the provider address
	// pointed at (an email reply-to plus-address); used when References
	// find none, and only when it is a conversation of the same connection.
	ConversationID string
	// Attachments are files that came with the message.
	Attachments []Attachment
	// Details are channel-specific facts kept on the message and shown
	// with it (email: headers, full text, sender authentication); a JSON
	// object, or nil.
	Details json.RawMessage
}

// Attachment is a file that came with an inbound message.
type Attachment struct {
	Filename    string
	ContentType string
	// ContentID is set on inline parts the HTML references as cid:.
	ContentID string
	Inline    bool
	Data      []byte
}

// Outbound is a message to deliver.
type Outbound struct {
	// MessageID is comm's id; providers that take an idempotency key get it.
	MessageID string
	ThreadKey string
	To        string
	Subject   *string
	Text      string
	HTML      *string
	// InReplyTo is the provider id of the message answered, if any.
	InReplyTo string
	// References are the provider ids of the thread so far, oldest first,
	// ending with InReplyTo (email References).
	References []string
	// ConversationID is comm's conversation; a channel that can carry it
	// in an address (email's reply-to plus-address) routes answers back.
	ConversationID string
}

// SendResult is what a provider said about a delivered message.
type SendResult struct {
	ProviderID string
}

// Typing asks for a typing indicator in a thread.
type Typing struct {
	ThreadKey string
	To        string
}

// Failure classes; adapters wrap them.
var (
	ErrTransient = errors.New("transient provider failure")
	ErrPermanent = errors.New("permanent provider failure")
	ErrSignature = errors.New("webhook signature does not verify")
)

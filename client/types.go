package client

import (
	"time"

	"github.com/comm-gateway/comm/api"
)

// Event types of the stream.
const (
	EventMessageReceived      = api.EventMessageReceived
	EventMessageSent          = api.EventMessageSent
	EventMessageFailed        = api.EventMessageFailed
	EventConnectionActive     = api.EventConnectionActive
	EventConnectionAuthorized = api.EventConnectionAuthorized
	EventConnectionDegraded   = api.EventConnectionDegraded
	EventConnectionRevoked    = api.EventConnectionRevoked
	EventDomainVerified       = api.EventDomainVerified
	EventDomainUnverified     = api.EventDomainUnverified
	EventWebhookDisabled      = api.EventWebhookDisabled
	EventWebhookEnabled       = api.EventWebhookEnabled
	EventAccountBalanceLow    = api.EventAccountBalanceLow
)

// Sandbox is a new anonymous project and its key (shown once).
type Sandbox = api.Sandbox

// Project is the key's project and the head of its event stream.
type Project = api.Project

// Event is one entry of the project's stream: GET /v1/events, the GraphQL
// subscription and push deliveries all carry this shape.
type Event = api.Event

// MessageEvent is the data of message.received, message.sent and
// message.failed.
type MessageEvent = api.MessageEvent

// Connection is a channel connection (an inbox, a bot, an app).
type Connection = api.Connection

// ChannelInfo is a channel of the gateway, with its connect form
// (Channels).
type ChannelInfo = api.ChannelInfo

// ChannelField is one config key of a channel's connect form.
type ChannelField = api.ChannelField

// Binding is a person who joined a connection on its shared line.
type Binding = api.Binding

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
type Conversation = api.Conversation

// Message directions and statuses.
const (
	DirectionInbound  = api.DirectionInbound
	DirectionOutbound = api.DirectionOutbound

	StatusReceived = api.StatusReceived
	StatusQueued   = api.StatusQueued
	StatusSending  = api.StatusSending
	StatusSent     = api.StatusSent
	StatusFailed   = api.StatusFailed
)

// Message is a stored message, inbound or outbound.
type Message = api.Message

// AttachmentInfo describes an attachment of a message; Client.Attachment
// downloads its bytes.
type AttachmentInfo = api.AttachmentInfo

// AttachmentFile is an attachment's content, as Client.Attachment
// downloads it.
type AttachmentFile struct {
	// Filename is the name the sender gave, else the attachment's id.
	Filename string
	// ContentType is the media type the gateway serves the bytes with
	// (application/octet-stream when the sender's was unusable).
	ContentType string
	Data        []byte
}

// Domain statuses and domain record states.
const (
	DomainPending = api.DomainPending
	// DomainUnverified: verified once, then its ownership record was
	// missing past the gateway's grace period.
	DomainUnverified = api.DomainUnverified
	DomainVerified   = api.DomainVerified

	RecordPending  = api.RecordPending
	RecordFound    = api.RecordFound
	RecordMissing  = api.RecordMissing
	RecordMismatch = api.RecordMismatch
)

// Domain is a custom email domain of the project: the DNS records its
// owner publishes, and what verification found. Once verified, mail from
// the domain is DKIM-signed and inboxes on InboundDomain receive mail.
type Domain = api.Domain

// DomainRecord is one DNS record to publish, and what verification found.
type DomainRecord = api.DomainRecord

// ReplyRequest is the body of Reply. Text or HTML is required (or a
// Template, instead). Subject defaults to "Re: " and the subject of the
// message answered, when it has one.
type ReplyRequest struct {
	Text     string    `json:"text,omitempty"`
	HTML     string    `json:"html,omitempty"`
	Subject  string    `json:"subject,omitempty"`
	Template *Template `json:"template,omitempty"`
}

// SendRequest is the body of Send: a proactive message.
type SendRequest struct {
	ConnectionID string    `json:"connection_id"`
	To           string    `json:"to"`
	Text         string    `json:"text,omitempty"`
	HTML         string    `json:"html,omitempty"`
	Subject      string    `json:"subject,omitempty"`
	Template     *Template `json:"template,omitempty"`
}

// Template is a provider-approved message template sent in place of text:
// on WhatsApp connections through Twilio, a Content SID ("HX..."); on
// hosted WhatsApp (the WhatsApp Cloud API), the template's Name and
// Language ("en_US"); with the values of its variables ("1", "2" ...).
// WhatsApp needs one outside the 24 hours after the person's last
// message.
type Template struct {
	ContentSID string            `json:"content_sid,omitempty"`
	Name       string            `json:"name,omitempty"`
	Language   string            `json:"language,omitempty"`
	Variables  map[string]string `json:"variables,omitempty"`
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

// ReceiptRequest is a provider's report on a message sent on a test
// connection, injected as if the provider had sent it: State is one of
// DeliverySent, DeliveryDelivered, DeliveryRead, DeliveryFailed; Code and
// Reason go with DeliveryFailed only. MessageID is the message's id (or its
// test provider id).
type ReceiptRequest struct {
	MessageID string     `json:"message_id"`
	State     string     `json:"state"`
	Code      string     `json:"code,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	At        *time.Time `json:"at,omitempty"`
}

// Delivery is what the provider reported about an outbound message
// (Message.Delivery): it only moves forward, read and failed are final.
type Delivery = api.Delivery

// Delivery states.
const (
	DeliverySent      = api.DeliverySent
	DeliveryDelivered = api.DeliveryDelivered
	DeliveryRead      = api.DeliveryRead
	DeliveryFailed    = api.DeliveryFailed
)

// PendingReceipt is InjectReceipt's answer while the message's send is
// still out: the report is applied once it is recorded.
type PendingReceipt = api.PendingReceipt

// TypingState is the answer of Typing: the indicator shows until
// TypingUntil, or until a reply is sent.
type TypingState = api.TypingState

// Webhook is the project's push endpoint.
type Webhook = api.Webhook

// WebhookAttempt is one recorded push delivery attempt.
type WebhookAttempt = api.WebhookAttempt

// Key kinds and ledger entry kinds.
const (
	KeySandbox  = api.KeySandbox
	KeySignedIn = api.KeySignedIn

	CreditGrant  = api.CreditGrant
	CreditDebit  = api.CreditDebit
	CreditRefund = api.CreditRefund
)

// BalanceLowEvent is the data of account.balance_low.
type BalanceLowEvent = api.BalanceLowEvent

// Account is who signed in (comm login): the owner of signed-in projects.
type Account = api.Account

// AccountView is the answer of Account: the account owning the key's
// project, its credit and its projects.
type AccountView = api.AccountView

// CreditEntry is one entry of an account's ledger.
type CreditEntry = api.CreditEntry

// ProjectSummary describes a project of an account.
type ProjectSummary = api.ProjectSummary

// Key is an API key of the project as listings show it: never the key
// itself.
type Key = api.Key

// NewKey is a key just made: its listing fields and the key itself, which
// is shown only this once.
type NewKey = api.NewKey

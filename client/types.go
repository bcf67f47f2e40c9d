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
	EventConnectionDegraded   = "connection.degraded"
	EventConnectionRevoked    = "connection.revoked"
	EventDomainVerified       = "domain.verified"
	EventDomainUnverified     = "domain.unverified"
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
		// Attachments and Details are set on channels that have them
		// (email), as in Message.
		Attachments []AttachmentInfo `json:"attachments,omitempty"`
		Details     json.RawMessage  `json:"details,omitempty"`
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
	ID         string  `json:"id"`
	Channel    string  `json:"channel"`
	Provider   *string `json:"provider"`
	Status     string  `json:"status"`
	CustomerID string  `json:"customer_id"`
	AgentID    string  `json:"agent_id"`
	Name       *string `json:"name"`
	// Address is the connection's own address on its channel: an inbox
	// address, a bot's @username.
	Address *string `json:"address"`
	// WebhookURL is where the provider sends this connection's events,
	// for the channels where it is given to the provider by hand.
	WebhookURL *string   `json:"webhook_url"`
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
	// Attachments lists the message's attachments, on channels that have
	// them (email); Client.Attachment downloads one.
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	// Details is channel-specific JSON, absent on channels without it.
	// Email: message_id, from_name, to, cc, in_reply_to, references, date,
	// mail_from, full_text, auth (sender authentication) and warnings.
	// A message in an event never carries full_text.
	Details json.RawMessage `json:"details,omitempty"`
	// Truncated is set on a message in an event that carries less than
	// the message: text, html or subject cut to the gateway's cap, or
	// details left out. Client.Message reads it whole.
	Truncated bool `json:"truncated,omitempty"`
}

// AttachmentInfo describes an attachment of a message; Client.Attachment
// downloads its bytes.
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
	DomainPending = "pending"
	// DomainUnverified: verified once, then its ownership record was
	// missing past the gateway's grace period.
	DomainUnverified = "unverified"
	DomainVerified   = "verified"

	RecordPending  = "pending"
	RecordFound    = "found"
	RecordMissing  = "missing"
	RecordMismatch = "mismatch"
)

// Domain is a custom email domain of the project: the DNS records its
// owner publishes, and what verification found. Once verified, mail from
// the domain is DKIM-signed and inboxes on InboundDomain receive mail.
type Domain struct {
	ID string `json:"id"`
	// Domain is the domain, normalized (lowercase, punycode).
	Domain string `json:"domain"`
	// InboundDomain is the domain inbox addresses live on (Domain or a
	// subdomain of it); nil when the domain only sends.
	InboundDomain *string `json:"inbound_domain"`
	// Status is DomainPending until every required record is found, then
	// DomainVerified.
	Status string `json:"status"`
	// Records are the records to publish, in the order to show them.
	Records []DomainRecord `json:"records"`
	// LastError says why the last check did not complete: a DNS failure,
	// or the domain verified by another project.
	LastError *string `json:"last_error"`
	// CheckedAt is when verification last looked (VerifyDomain or the
	// gateway's periodic check).
	CheckedAt  *time.Time `json:"checked_at"`
	VerifiedAt *time.Time `json:"verified_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// DomainRecord is one DNS record to publish, and what verification found.
type DomainRecord struct {
	// Kind is what the record is for: ownership, spf, dkim, dmarc or mx.
	Kind string `json:"kind"`
	// Type is TXT or MX.
	Type string `json:"type"`
	// Name is the fully qualified owner name, without the trailing dot.
	Name string `json:"name"`
	// Value is the TXT text (unsplit) or the MX target host.
	Value string `json:"value"`
	// Priority is the MX preference; zero for TXT.
	Priority int `json:"priority,omitempty"`
	// Required records must all be found before the domain is verified.
	Required bool `json:"required"`
	// Purpose explains the record, for the domain's owner.
	Purpose string `json:"purpose"`
	// State is RecordPending until verification has looked, then
	// RecordFound, RecordMissing or RecordMismatch.
	State string `json:"state"`
	// Seen is what DNS answered at Name (TXT texts, MX hosts); Detail
	// explains a missing or mismatched record.
	Seen   []string `json:"seen,omitempty"`
	Detail string   `json:"detail,omitempty"`
	// Zone is the record as a zone-file line, ready to paste.
	Zone string `json:"zone"`
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

// Key kinds and ledger entry kinds.
const (
	KeySandbox  = "sandbox"
	KeySignedIn = "signed_in"

	CreditGrant = "grant"
	CreditDebit = "debit"
)

// Account is who signed in (comm login): the owner of signed-in projects.
type Account struct {
	ID string `json:"id"`
	// Issuer is the identity provider's issuer URL (or "local"), Subject
	// the person's id there.
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	// Email and Name are as the identity provider gave them; either may
	// be empty.
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// AccountView is the answer of Account: the account owning the key's
// project, its credit and its projects.
type AccountView struct {
	Account Account `json:"account"`
	// Currency is the currency of the amounts ("USD").
	Currency string `json:"currency"`
	// BalanceCents is the sum of the ledger; Balance is the same in the
	// currency's units ("100.00").
	BalanceCents int64  `json:"balance_cents"`
	Balance      string `json:"balance"`
	// Ledger lists the credit entries, oldest first.
	Ledger []CreditEntry `json:"ledger"`
	// Projects lists the account's projects, oldest first.
	Projects []ProjectSummary `json:"projects"`
}

// CreditEntry is one entry of an account's ledger.
type CreditEntry struct {
	ID string `json:"id"`
	// Kind is CreditGrant or CreditDebit.
	Kind string `json:"kind"`
	// AmountCents is signed (negative for a debit); Amount is the same in
	// the currency's units ("100.00", "-0.25").
	AmountCents int64  `json:"amount_cents"`
	Amount      string `json:"amount"`
	Description string `json:"description"`
	// ProjectID is the project the entry is for; nil for an account-wide
	// entry.
	ProjectID *string   `json:"project_id"`
	CreatedAt time.Time `json:"created_at"`
}

// ProjectSummary describes a project of an account.
type ProjectSummary struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Connections counts its live connections.
	Connections int `json:"connections"`
	// LastSeq is the head of its event stream.
	LastSeq   int64     `json:"last_seq"`
	CreatedAt time.Time `json:"created_at"`
}

// Key is an API key of the project as listings show it: never the key
// itself.
type Key struct {
	ID string `json:"id"`
	// Kind is KeySandbox or KeySignedIn.
	Kind string `json:"kind"`
	// Display is the key's prefix and last four characters
	// ("comm_sandbox_…abcd").
	Display string `json:"display"`
	// Name is what the key is for, nil when its maker gave none.
	Name *string `json:"name"`
	// Current is true for the key that made the request.
	Current    bool       `json:"current"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is nil for a live key.
	RevokedAt *time.Time `json:"revoked_at"`
}

// NewKey is a key just made: its listing fields and the key itself, which
// is shown only this once.
type NewKey struct {
	Key
	APIKey string `json:"api_key"`
}

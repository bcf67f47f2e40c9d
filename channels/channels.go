// Package channels is the contract between comm and the providers it
// speaks to, and the registry of every channel comm knows.
//
// A provider is a Descriptor (channel, provider, tier, constructor). Its
// constructor turns a connection's typed configuration into an Adapter. An
// Adapter must send (Sender); everything else is optional and found by type
// assertion: Provisioner contacts the provider once when the connection is
// made, Typer shows a typing indicator, Responder answers handshakes,
// WebhookReceiver parses signed provider webhooks, Poller runs a long-lived
// inbound session, Injector takes messages from the API caller (the test
// channel), Deprovisioner undoes the provider-side setup when the
// connection is deleted, Acknowledger chooses the answer to a webhook
// whose messages were stored (Twilio's empty TwiML), TemplateSender sends
// provider templates (WhatsApp outside its 24-hour window), Closer
// releases resources at shutdown.
//
// Lifecycle: New (validate the configuration; no network) -> Provision
// (only when the connection is made) -> Send, Typing, Respond,
// ParseWebhook, Poll, any number of times, concurrently -> Deprovision
// (the connection was deleted) -> Close (this process lets go of it). New
// runs again in every process that serves the connection (after a restart,
// on another replica) with the configuration Provision returned.
//
// Failures of provider calls are *Error values (or wrap ErrTransient or
// ErrPermanent): the class decides whether the outbox retries, and
// RetryAfter, when the provider names it, when.
//
// Every adapter passes the conformance suite in channels/channeltest.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
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
	// Summary says in one line what the channel is and what connecting it
	// takes, for a connect form.
	Summary string
	// Fields are the configuration keys a caller sets, in the order a
	// connect form shows them; none when the channel takes no
	// configuration. Shared with every copy of the descriptor: read only.
	Fields []Field
	// OAuth says that connecting with an empty configuration starts an
	// install of the operator's app (the adapter is an Installer whose
	// NeedsInstall is true): the connection comes back pending with its
	// authorize URL. The Fields, if any, are the other way in (the
	// caller's own app or bot).
	OAuth bool
	// Settings names the operator settings that turn the channel on
	// ("COMM_X_CLIENT_ID and COMM_X_CLIENT_SECRET"), for saying why New is
	// nil; empty when it needs none.
	Settings string
	// New provisions an adapter for a connection from its configuration
	// (the "config" object of POST /v1/connections). Nil while the adapter
	// is not built yet, or the operator has not set it up (Settings):
	// connecting answers 501.
	New func(ctx context.Context, conn Connection) (Adapter, error)
	// App takes the provider's app-level webhook (/hooks/<channel>), for
	// providers that send every tenant's events to one URL (Slack, Meta,
	// X). Nil when the channel has none.
	App AppWebhook
	// Session is the long-lived inbound session of the operator's own
	// app (the Discord gateway of the operator's bot), serving every
	// connection the app was installed for. Nil when the channel has
	// none.
	Session AppSession
	// Shared is set for a channel on the operator's own lines shared among
	// projects (hosted WhatsApp numbers, iMessage relays); see SharedApp.
	// Its App verifies the app-level webhook.
	Shared SharedApp
}

// AppSession is the operator's app's own long-lived inbound session: one
// across all replicas (a database lease named after the channel), run
// while at least one live connection registered a routing key
// (Provisioned.RouteKey), its events routed by that key. Run blocks and
// fails as Poller.Poll does; emit stores messages for the connection
// holding key, as an Emit does (nil, storing nothing, for a key no live
// connection holds).
type AppSession interface {
	Run(ctx context.Context, emit func(key string, ins ...Inbound) error) error
}

// AppWebhook verifies a request to a channel's app-level webhook with the
// app's own secret (an operator setting) and says which connections it is
// for, by the routing keys connections registered when they were made
// (Provisioned.RouteKey). Only then does the gateway hand the request to
// each such connection's WebhookReceiver, which returns the messages that
// are its own (none, and no error, for another tenant's events). An
// unverified payload field never chooses a tenant. ParseWebhook still
// verifies app-level requests itself (with the app secret, which the
// Descriptor can hand to its adapters): the connection's own ingress
// calls it without Route.
type AppWebhook interface {
	// Route returns the routing keys the request's events are for, or a
	// Response when the request is a handshake the app answers itself.
	// A request that does not verify is ErrSignature.
	Route(r *http.Request, body []byte) (keys []string, resp *Response, err error)
}

// Connection is what an adapter knows of the connection it serves.
type Connection struct {
	ID        string
	ProjectID string
	// Config is the connection's configuration: what the caller sent, as
	// Provision amended it. It holds credentials; the gateway keeps it
	// sealed at rest and never shows it.
	Config json.RawMessage
	// WebhookURL is the public URL of this connection's provider ingress
	// (https://<base>/hooks/<channel>/<connection id>), built from the
	// operator's base URL, never from a request's Host. Empty when the
	// gateway has no public base URL; an adapter that can poll instead
	// polls then.
	WebhookURL string
	// Line is the ID of the operator's line the gateway gave the
	// connection, on a channel with Descriptor.Shared; empty otherwise.
	Line string
	// Credentials stores what the adapter rotates (OAuth tokens) in the
	// connection's sealed configuration. Nil before the connection is
	// stored (in New and Provision of a new connection: return the
	// configuration from Provision instead) and in unit tests that do not
	// set one.
	Credentials Credentials
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

// SendGate applies a channel's own rules before an outbound message is
// queued (email: who may write to outside addresses, and how much). Its
// error reaches the caller as it is, so it should be one of the core's
// errors naming the field ("to").
type SendGate interface {
	AllowSend(ctx context.Context, r SendRequest) error
}

// Addresser puts a recipient in the channel's canonical form before a
// message to it is queued (a phone number in E.164, a WhatsApp number
// without its "whatsapp:" prefix). Conversations are keyed by that form,
// so a message sent to a person joins the conversation of their own
// messages; a recipient the channel can never reach is refused at once
// (400 naming "to") instead of failing in the outbox. The error says what
// is wrong with to.
type Addresser interface {
	Address(to string) (string, error)
}

// SendRequest is an outbound message about to be queued.
type SendRequest struct {
	To string
	// SignedIn says the caller's key is a signed-in one (not a sandbox).
	SignedIn bool
}

// Provisioner sets a new connection up at the provider (checks the
// credentials, registers the webhook URL) when the connection is made; it
// is not called again when another process builds an adapter for the same
// connection.
type Provisioner interface {
	// Provision returns what the gateway stores: the configuration to keep
	// (secrets Provision made up, such as a webhook secret, included) and
	// the connection's channel-native address. A rejected credential is a
	// *ConfigError naming the field.
	Provision(ctx context.Context) (Provisioned, error)
}

// Installer is an adapter whose connection can be made by installing the
// operator's app with OAuth (Slack, Discord) instead of with credentials
// of the caller's own. When NeedsInstall says so, the gateway does not call
// Provision at once: it answers the connection as pending with the URL
// AuthorizeURL gives (its state bound to the connection); when the person
// approves, the provider redirects to <base>/oauth/<channel>/callback,
// and Install turns the code into the connection's credentials. Then
// connection.authorized is appended, the adapter is built again from the
// returned Config (New), Provision runs if the adapter has it, and
// connection.active follows.
type Installer interface {
	// NeedsInstall reports whether the connection has no credentials of
	// its own and waits for an install of the operator's app.
	NeedsInstall() bool
	// AuthorizeURL is where the person approves the install; state and
	// redirectURL go into it as the provider's OAuth flow asks.
	AuthorizeURL(state, redirectURL string) string
	// Install exchanges the code for the connection's credentials. A code
	// the provider refuses is a *ConfigError on "code".
	Install(ctx context.Context, code, redirectURL string) (Provisioned, error)
}

// Provisioned is what Provision set up.
type Provisioned struct {
	// Config replaces the stored configuration when not nil: the gateway
	// builds the connection's adapter again from it (New), here and in
	// every other process, and lets go of the one that provisioned.
	Config json.RawMessage
	// Address is the connection's own address on the channel (a bot's
	// @username, a phone number), shown on the connection.
	Address string
	// RouteKey is the key app-level events for this connection carry (a
	// Slack team id, a page id; see AppWebhook); unique among the live
	// connections of the channel. Empty when the channel has no app-level
	// webhook.
	RouteKey string
}

// Deprovisioner undoes Provision when the connection is deleted (deletes
// the webhook, unsubscribes the app). Close, in contrast, only lets go of
// process resources at shutdown; the connection lives on.
type Deprovisioner interface {
	Deprovision(ctx context.Context) error
}

// Typer shows a typing indicator in a conversation.
type Typer interface {
	Typing(ctx context.Context, t Typing) error
}

// TypingRefresher is a Typer whose indicator fades on its own before
// comm's typing lease ends (Telegram's after about 5 s): the gateway calls
// Typing again every TypingEvery while the lease lasts.
type TypingRefresher interface {
	TypingEvery() time.Duration
}

// Responder answers provider requests that carry no message (a
// verification handshake, a challenge, a ping), GET requests included. The
// gateway calls it before ParseWebhook for every request to the
// connection's ingress; it verifies what the provider signs first.
type Responder interface {
	// Respond returns the answer, or nil when r is not a handshake and
	// goes on to ParseWebhook. Errors are as ParseWebhook's.
	Respond(r *http.Request, body []byte) (*Response, error)
}

// Response is an answer to a provider request.
type Response struct {
	Status int // 200 if 0
	Header http.Header
	Body   []byte
}

// WebhookReceiver parses a provider's webhook request. It verifies the
// signature over the raw body before parsing and returns ErrSignature when
// it does not verify. A request that carries nothing to store (an update
// of a kind comm does not keep) returns no Inbound and no error.
// Inbound.ProviderID must be unique per connection (Telegram
// "<chat_id>:<message_id>", Slack "<channel>:<ts>").
type WebhookReceiver interface {
	ParseWebhook(r *http.Request, body []byte) ([]Inbound, error)
}

// Poller runs a long-lived inbound session (Telegram getUpdates, a
// gateway websocket, a stream). The gateway runs at most one per
// connection across all replicas, under a database lease, and restarts it
// with a backoff when it returns while the lease is held. Poll blocks until
// ctx ends (return nil then) or the session fails: an error wrapping
// ErrPermanent or ErrRevoked stops the session until the connection is
// changed. emit stores messages and returns only once they are committed
// (see Emit); the session acknowledges to the provider only what emit
// accepted, so a new owner re-reads the rest (inbound is idempotent by
// ProviderID). Call emit from one goroutine at a time.
type Poller interface {
	Poll(ctx context.Context, emit Emit) error
}

// Emit stores a session's inbound messages, in order, and returns once all
// are committed (or none is, with an error). Handing it what arrived
// together (a getUpdates page, the frames a gateway read while the last
// batch was stored) costs one commit for all of them instead of one each;
// a session that keeps up hands over one at a time.
type Emit func(ins ...Inbound) error

// Injector takes inbound messages from the API caller itself (POST
// /v1/connections/{id}/inbound): the test channel. There is no signature;
// the API key authenticated the caller. Errors naming a field are
// *ConfigError values.
type Injector interface {
	Inject(body []byte) ([]Inbound, error)
}

// Inbox is an adapter whose connection receives at an address this gateway
// hosts (an email inbox on comm's SMTP listener). Connect stores the
// address on the connection and keeps it unique across the gateway, so
// inbound mail finds its connection by address.
type Inbox interface {
	InboxAddress() string
}

// State keeps small facts of a provider's long-lived sessions in the
// gateway's database, shared by every process and replica: what a session
// needs to go on where another left off (a gateway's session id and
// sequence number), and budgets a provider counts per credential (the
// identifies a bot token spent today). The gateway hands one to the
// channel's options; keys are the adapter's own (the gateway keeps each
// channel's apart), values at most MaxStateBytes.
type State interface {
	// Get returns key's value, or nil when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put sets key's value (nil deletes it).
	Put(ctx context.Context, key string, value []byte) error
}

// MaxStateBytes bounds a State value.
const MaxStateBytes = 64 << 10

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
	// Receipt, when set, makes this item no message but the provider's
	// report on an outbound message sent earlier (a status callback, a
	// delivery or read receipt): the other fields are ignored and nothing
	// is stored as a message.
	Receipt *Receipt
}

// Receipt is a provider's report on an outbound message: a status
// callback (Twilio, Telnyx), a delivery or read receipt (Meta). The core
// finds the message by the provider id Send returned on the same
// connection, records the state on it, and appends message.failed when a
// message already sent was not delivered after all. Reports arrive out of
// order and more than once (a callback may even come before Send's
// answer): a state never moves back (failed and read are final;
// delivered does not undo read).
type Receipt struct {
	// MessageID is the provider's id of the outbound message
	// (SendResult.ProviderID).
	MessageID string
	// State is one of ReceiptSent, ReceiptDelivered, ReceiptRead,
	// ReceiptFailed.
	State string
	// Code and Reason are the provider's error code and its meaning, on
	// ReceiptFailed (Twilio 30007, Meta 131047 ...).
	Code   string
	Reason string
	// At is when the provider saw the change (zero: when it arrived).
	At time.Time
}

// Receipt states.
const (
	ReceiptSent      = "sent"
	ReceiptDelivered = "delivered"
	ReceiptRead      = "read"
	ReceiptFailed    = "failed"
)

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
	// Template, when set, is a provider-approved template the provider
	// sends in place of Text (WhatsApp outside its 24-hour window). Only
	// adapters that are TemplateSenders get one.
	Template *Template
}

// Template is a provider-approved message template and the values of its
// variables. It is the "template" object of POST /v1/messages and of a
// reply. A template is named by the provider's way: Twilio's Content API
// by ContentSID (sent as ContentSid and ContentVariables), the WhatsApp
// Cloud API (hosted WhatsApp) by Name and Language.
type Template struct {
	// ContentSID names a Twilio template ("HX" + 32 hex digits).
	ContentSID string `json:"content_sid,omitempty"`
	// Name is a WhatsApp Cloud API template's name, as Meta approved it
	// ("order_update").
	Name string `json:"name,omitempty"`
	// Language is the Cloud API template's language code ("en_US").
	Language string `json:"language,omitempty"`
	// Variables fill the template's placeholders, by name ("1", "2" ...).
	Variables map[string]string `json:"variables,omitempty"`
}

// TemplateSender is an adapter that sends templates (Outbound.Template).
type TemplateSender interface {
	// CheckTemplate says whether t can go out on this connection: nil,
	// or a *ConfigError naming the field of the template that is wrong
	// ("template" when the connection takes no templates at all).
	CheckTemplate(t Template) error
}

// Acknowledger is a WebhookReceiver whose provider expects a particular
// answer once a request's messages are stored (Twilio: an empty TwiML
// document, so that nothing replies automatically). Without it the answer
// is an empty 200.
type Acknowledger interface {
	Ack() *Response
}

// SendResult is what a provider said about a delivered message.
type SendResult struct {
	ProviderID string
}

// Typing asks for a typing indicator in a thread.
type Typing struct {
	ThreadKey string
	To        string
	// InReplyTo is the provider id of the inbound message being answered
	// (WhatsApp and Twilio show typing on a message, Slack in its thread);
	// empty when there is none.
	InReplyTo string
}

// Failure classes; adapters wrap them (or return an *Error of the class).
var (
	ErrTransient = errors.New("transient provider failure")
	ErrPermanent = errors.New("permanent provider failure")
	// ErrRevoked is a permanent failure because the provider rejected the
	// connection's credentials (a revoked token): the connection is
	// revoked until it is made again.
	ErrRevoked   = errors.New("provider rejected the credentials")
	ErrSignature = errors.New("webhook signature does not verify")
)

// Error is a provider call that failed. errors.Is(err, ErrTransient) (or
// ErrPermanent, ErrRevoked) tells the class; a revoked credential is also
// permanent.
type Error struct {
	// Class is ErrTransient, ErrPermanent or ErrRevoked.
	Class error
	// RetryAfter is how long the provider asked to wait (Telegram and
	// Discord retry_after, HTTP Retry-After); 0 when it did not say.
	RetryAfter time.Duration
	// Msg says what failed, naming the channel and the provider's reason.
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the class (and ErrPermanent for a revoked credential).
func (e *Error) Unwrap() []error {
	if e.Class == ErrRevoked {
		return []error{ErrRevoked, ErrPermanent}
	}
	return []error{e.Class}
}

// Transient returns a retryable failure, to retry no sooner than after
// (0: the gateway's backoff decides).
func Transient(after time.Duration, format string, args ...any) *Error {
	return &Error{Class: ErrTransient, RetryAfter: after, Msg: fmt.Sprintf(format, args...)}
}

// Permanent returns a failure no retry fixes.
func Permanent(format string, args ...any) *Error {
	return &Error{Class: ErrPermanent, Msg: fmt.Sprintf(format, args...)}
}

// Revoked returns a failure because the provider rejected the
// credentials.
func Revoked(format string, args ...any) *Error {
	return &Error{Class: ErrRevoked, Msg: fmt.Sprintf(format, args...)}
}

// RetryAfter returns how long the provider asked to wait before a retry of
// what failed with err, or 0.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// ConfigError is a connection configuration (or an injected message) that
// is wrong, naming the field: "bot_token", "address". New, Provision and
// Inject return it so the caller hears which field to fix.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/api"
)

// MaxWait is the longest long-poll wait the gateway accepts.
const MaxWait = 60 * time.Second

// CreateSandbox creates an anonymous project (POST /v1/projects/sandbox)
// and returns it with its API key, which is shown only this once. It needs
// no key. An empty baseURL is configured as in New (COMM_BASE_URL from the
// environment or a .env file, else DefaultBaseURL).
func CreateSandbox(ctx context.Context, baseURL, name string) (*Sandbox, error) {
	c, err := keyless(baseURL)
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	err = c.do(ctx, request{method: http.MethodPost, path: "/v1/projects/sandbox",
		body: map[string]string{"name": name}, out: &sb, noAuth: true})
	if err != nil {
		return nil, err
	}
	return &sb, nil
}

// keyless returns a client without a key, for the calls that need none.
// An empty baseURL is configured as in New.
func keyless(baseURL string) (*Client, error) {
	if baseURL == "" {
		cfg, err := resolve(nil, map[string]string{EnvBaseURL: ""})
		if err != nil {
			return nil, err
		}
		baseURL = cfg[EnvBaseURL]
	}
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	return &Client{baseURL: base, hc: http.DefaultClient, timeout: DefaultTimeout, backoff: defaultBackoff}, nil
}

// Project returns the key's project and its stream head (GET /v1/project).
func (c *Client) Project(ctx context.Context) (*Project, error) {
	var p Project
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/project", out: &p}); err != nil {
		return nil, err
	}
	return &p, nil
}

// Events returns up to limit events with seq greater than afterSeq, in seq
// order (GET /v1/events). limit 0 is the gateway's default (100; at most
// 1000); typ, if not empty, keeps one event type. Page by passing the last
// seq received as afterSeq. A page may hold fewer than limit events even
// when more follow (pages also have a byte budget, 4 MiB by default): only
// an empty page means the stream is read to its end.
func (c *Client) Events(ctx context.Context, afterSeq int64, limit int, typ string) ([]Event, error) {
	return c.EventsWait(ctx, afterSeq, limit, typ, 0)
}

// EventsWait is Events as a long poll: while there is no event after
// afterSeq the gateway holds the request for up to wait (rounded up to
// whole seconds, at most MaxWait) and answers as soon as one commits; an
// empty page means the wait ran out.
func (c *Client) EventsWait(ctx context.Context, afterSeq int64, limit int, typ string, wait time.Duration) ([]Event, error) {
	q := url.Values{}
	q.Set("after_seq", strconv.FormatInt(afterSeq, 10))
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if typ != "" {
		q.Set("type", typ)
	}
	wait = min(wait, MaxWait)
	if t := c.hc.Timeout; t > 0 && wait > 0 {
		// The HTTP client's own timeout covers the whole request: keep the
		// hold well inside it.
		wait = min(wait, (t-2*time.Second)/time.Second*time.Second)
	}
	if wait > 0 {
		secs := (wait + time.Second - 1) / time.Second
		q.Set("wait", strconv.FormatInt(int64(secs), 10))
		wait = secs * time.Second
	}
	evs := []Event{}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/events", query: q, out: &evs, wait: max(wait, 0)}); err != nil {
		return nil, err
	}
	return evs, nil
}

// WebhookOption adjusts SetWebhook.
type WebhookOption func(*api.WebhookRequest)

// WebhookFromSeq sets the endpoint's cursor: deliveries resume with the
// event after seq. By default a new registration starts at the stream's
// head and a re-registration keeps its cursor.
func WebhookFromSeq(seq int64) WebhookOption {
	return func(r *api.WebhookRequest) { r.FromSeq = &seq }
}

// SetWebhook registers (or replaces) the project's push endpoint
// (PUT /v1/webhook). Deliveries are signed with secret (Standard Webhooks;
// a "whsec_" secret is base64 after the prefix); with an empty secret the
// gateway generates one and returns it in Webhook.Secret, once. Check
// deliveries with VerifyWebhook or WebhookHandler.
func (c *Client) SetWebhook(ctx context.Context, webhookURL, secret string, opts ...WebhookOption) (*Webhook, error) {
	in := api.WebhookRequest{URL: webhookURL, Secret: secret}
	for _, o := range opts {
		o(&in)
	}
	var w Webhook
	if err := c.do(ctx, request{method: http.MethodPut, path: "/v1/webhook", body: in, out: &w}); err != nil {
		return nil, err
	}
	return &w, nil
}

// GetWebhook returns the push endpoint, its status and cursor (never its
// secret) (GET /v1/webhook); ErrNotFound when none is registered.
func (c *Client) GetWebhook(ctx context.Context) (*Webhook, error) {
	var w Webhook
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/webhook", out: &w}); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWebhook removes the push endpoint and its attempt history
// (DELETE /v1/webhook); ErrNotFound when none is registered.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/webhook"})
}

// ReplayWebhook moves the push endpoint's cursor to fromSeq: deliveries
// resume with the event after it (POST /v1/webhook/replay).
func (c *Client) ReplayWebhook(ctx context.Context, fromSeq int64) (*Webhook, error) {
	var w Webhook
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/webhook/replay",
		body: map[string]int64{"from_seq": fromSeq}, out: &w})
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// WebhookAttempts lists the latest push attempts, newest first
// (GET /v1/webhook/attempts). Page with after (the last attempt id
// received); limit 0 is the gateway's default (50; at most 500).
func (c *Client) WebhookAttempts(ctx context.Context, after string, limit int) ([]WebhookAttempt, error) {
	out := []WebhookAttempt{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/webhook/attempts", query: page(nil, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Channels lists the gateway's channels (GET /v1/channels), each with its
// connect form (the config keys Connect takes), whether it connects by
// OAuth (an empty config answers a pending connection with its
// AuthorizeURL), and whether this key can connect it now (Available; else
// Reason says why, as Connect's ErrPaymentRequired or ErrNotImplemented
// would).
func (c *Client) Channels(ctx context.Context) ([]ChannelInfo, error) {
	out := []ChannelInfo{}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/channels", out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// Connect connects a channel (POST /v1/connections). A paid channel with
// an anonymous key fails with ErrPaymentRequired; a channel this gateway
// has no adapter for with ErrNotImplemented.
func (c *Client) Connect(ctx context.Context, in ConnectRequest) (*Connection, error) {
	var conn Connection
	if err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/connections", body: in, out: &conn}); err != nil {
		return nil, err
	}
	return &conn, nil
}

// ConnectIMessage connects the iMessage channel, a paid channel: with an
// anonymous (sandbox) key it fails with an *Error matching
// ErrPaymentRequired whose message says how to sign in; the same call with
// the signed-in key then succeeds. The connection is on one of the
// operator's iMessage relays: Address is the relay's address and, unless
// the relay is the connection's alone (IMessageDedicated), JoinCode is
// what a person sends ("join <code>") to that address to reach this
// connection, and JoinLink an sms: link that opens that message. A
// gateway with no relays answers ErrNotImplemented.
func (c *Client) ConnectIMessage(ctx context.Context, opts ...IMessageOption) (*Connection, error) {
	cfg := map[string]any{}
	for _, o := range opts {
		o(cfg)
	}
	in := ConnectRequest{Channel: "imessage"}
	if len(cfg) > 0 {
		in.Config = cfg
	}
	return c.Connect(ctx, in)
}

// IMessageOption chooses the relay of ConnectIMessage.
type IMessageOption func(config map[string]any)

// IMessageLine puts the connection on the relay with this address
// (config.line).
func IMessageLine(address string) IMessageOption {
	return func(config map[string]any) { config["line"] = address }
}

// IMessageDedicated asks for a relay of the connection's own: no join
// step, everyone who writes to it reaches the connection
// (config.dedicated). It fails with a conflict when no relay is free.
func IMessageDedicated() IMessageOption {
	return func(config map[string]any) { config["dedicated"] = true }
}

// Connections lists the live connections, oldest first
// (GET /v1/connections). Page with after (the last id received); limit 0
// is the gateway's default (50; at most 500).
func (c *Client) Connections(ctx context.Context, after string, limit int) ([]Connection, error) {
	out := []Connection{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/connections", query: page(nil, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Connection returns one connection (GET /v1/connections/{id}).
func (c *Client) Connection(ctx context.Context, id string) (*Connection, error) {
	var conn Connection
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/connections/" + url.PathEscape(id), out: &conn}); err != nil {
		return nil, err
	}
	return &conn, nil
}

// DeleteConnection removes a connection: it stops receiving and sending;
// its conversations and messages stay readable
// (DELETE /v1/connections/{id}).
func (c *Client) DeleteConnection(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/connections/" + url.PathEscape(id)})
}

// Bindings lists the people who joined a connection on its shared line
// (hosted WhatsApp, iMessage) by sending its join code, oldest first
// (GET /v1/connections/{id}/bindings). Page with after (the last
// binding's id) and limit as in Connections.
func (c *Client) Bindings(ctx context.Context, connectionID, after string, limit int) ([]Binding, error) {
	out := []Binding{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/connections/" + url.PathEscape(connectionID) + "/bindings",
		query: page(nil, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unbind removes a person's binding to a connection: their messages on the
// line reach no connection until they join again
// (DELETE /v1/connections/{id}/bindings/{person}). A person who has not
// joined it is ErrNotFound.
func (c *Client) Unbind(ctx context.Context, connectionID, person string) error {
	return c.do(ctx, request{method: http.MethodDelete,
		path: "/v1/connections/" + url.PathEscape(connectionID) + "/bindings/" + url.PathEscape(person)})
}

// Conversations lists conversations, oldest first, of one connection or
// (connectionID "") all (GET /v1/conversations). Page with after and
// limit as in Connections.
func (c *Client) Conversations(ctx context.Context, connectionID, after string, limit int) ([]Conversation, error) {
	q := url.Values{}
	if connectionID != "" {
		q.Set("connection_id", connectionID)
	}
	out := []Conversation{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/conversations", query: page(q, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Conversation returns one conversation, with its typing state
// (GET /v1/conversations/{id}).
func (c *Client) Conversation(ctx context.Context, id string) (*Conversation, error) {
	var conv Conversation
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/conversations/" + url.PathEscape(id), out: &conv}); err != nil {
		return nil, err
	}
	return &conv, nil
}

// Messages lists a conversation's messages, oldest first
// (GET /v1/conversations/{id}/messages). Page with after (the last message
// id received); limit 0 is the gateway's default (50; at most 500). A page
// may hold fewer than limit messages when they are large (the gateway's
// page byte budget): only an empty page means there are no more.
func (c *Client) Messages(ctx context.Context, conversationID, after string, limit int) ([]Message, error) {
	out := []Message{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/conversations/" + url.PathEscape(conversationID) + "/messages",
		query: page(nil, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Message returns one message with its delivery status
// (GET /v1/messages/{id}).
func (c *Client) Message(ctx context.Context, id string) (*Message, error) {
	var m Message
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/messages/" + url.PathEscape(id), out: &m}); err != nil {
		return nil, err
	}
	return &m, nil
}

// Reply answers a message in its conversation, through its connection
// (POST /v1/messages/{id}/reply). The reply is stored as queued and sent
// by the gateway; message.sent (or message.failed) follows in the stream.
// It also ends the conversation's typing indicator.
func (c *Client) Reply(ctx context.Context, messageID string, in ReplyRequest) (*Message, error) {
	var m Message
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/messages/" + url.PathEscape(messageID) + "/reply", body: in, out: &m})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Typing shows a typing indicator in a message's conversation for about
// 10 seconds, or until a reply is sent (POST /v1/messages/{id}/typing).
func (c *Client) Typing(ctx context.Context, messageID string) (*TypingState, error) {
	var st TypingState
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/messages/" + url.PathEscape(messageID) + "/typing", out: &st})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Send sends a proactive message to a recipient on a connection, starting
// or continuing the conversation with them (POST /v1/messages).
func (c *Client) Send(ctx context.Context, in SendRequest) (*Message, error) {
	var m Message
	if err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/messages", body: in, out: &m}); err != nil {
		return nil, err
	}
	return &m, nil
}

// Inject delivers a message into a test connection as if a person had
// written it (POST /v1/connections/{id}/inbound), which appends
// message.received. A repeated InjectRequest.ID returns the message stored
// the first time and appends nothing.
func (c *Client) Inject(ctx context.Context, connectionID string, in InjectRequest) (*Message, error) {
	var m Message
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/connections/" + url.PathEscape(connectionID) + "/inbound", body: in, out: &m})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// InjectReceipt reports on a message sent on a test connection as its
// provider would (POST /v1/connections/{id}/inbound with a receipt): it
// returns the message with its Delivery as the report left it, or, while
// the message's send is still out, nil and the pending report, applied
// when the send is recorded. A report on a message sent and then failed
// appends message.failed. A message not of the connection is ErrNotFound.
func (c *Client) InjectReceipt(ctx context.Context, connectionID string, in ReceiptRequest) (*Message, *PendingReceipt, error) {
	var raw json.RawMessage
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/connections/" + url.PathEscape(connectionID) + "/inbound",
		body: map[string]ReceiptRequest{"receipt": in}, out: &raw})
	if err != nil {
		return nil, nil, err
	}
	var probe struct {
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.ExpiresAt != nil {
		var p PendingReceipt
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, nil, fmt.Errorf("comm: inject receipt: decode answer: %w", err)
		}
		return nil, &p, nil
	}
	var m Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, fmt.Errorf("comm: inject receipt: decode answer: %w", err)
	}
	return &m, nil, nil
}

// page adds the after and limit parameters of list endpoints to q.
func page(q url.Values, after string, limit int) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

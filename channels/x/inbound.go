package x

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Webhook signature headers (docs.x.com/x-api/webhooks): the OAuth 2.0
// one is made with the client secret, the legacy one with the consumer
// secret; both are "sha256=" + base64(HMAC-SHA256(secret, raw body)).
const (
	SignatureHeader       = "X-Twitter-Webhooks-Signature"
	SignatureHeaderOAuth2 = "X-Twitter-Webhooks-Signature-Oauth2"
)

// maxCRCToken bounds the crc_token answered.
const maxCRCToken = 512

// Sign returns the signature of msg with secret: "sha256=" +
// base64(HMAC-SHA256(secret, msg)). CRC answers and webhook signatures
// are made with it.
func Sign(secret string, msg []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(msg)
	return "sha256=" + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// CRC returns the answer to a challenge-response check: 200
// {"response_token":"sha256=…"}.
func CRC(secret, token string) *channels.Response {
	body, _ := json.Marshal(map[string]string{"response_token": Sign(secret, []byte(token))})
	return &channels.Response{Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
}

// verify checks a webhook POST: the OAuth 2.0 signature when present,
// else the legacy one (when the operator gave the consumer secret). Its
// error wraps channels.ErrSignature.
func (o Options) verify(h http.Header, body []byte) error {
	if got := h.Get(SignatureHeaderOAuth2); got != "" {
		if o.ClientSecret != "" && hmac.Equal([]byte(got), []byte(Sign(o.ClientSecret, body))) {
			return nil
		}
		return fmt.Errorf("x: %s does not verify: %w", SignatureHeaderOAuth2, channels.ErrSignature)
	}
	got := h.Get(SignatureHeader)
	if got == "" {
		return fmt.Errorf("x: the request carries no %s: %w", SignatureHeader, channels.ErrSignature)
	}
	if o.ConsumerSecret != "" && hmac.Equal([]byte(got), []byte(Sign(o.ConsumerSecret, body))) {
		return nil
	}
	return fmt.Errorf("x: %s does not verify: %w", SignatureHeader, channels.ErrSignature)
}

// crcToken returns a CRC's token: a GET with a crc_token query parameter.
func crcToken(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet {
		return "", false
	}
	t := r.URL.Query().Get("crc_token")
	return t, t != "" && len(t) <= maxCRCToken
}

// delivery is a webhook body: the X Activity API envelope ({"data":
// {"event_type","filter","payload"}}) or the Account Activity API's
// ({"for_user_id","direct_message_events"}).
type delivery struct {
	Data *struct {
		EventUUID json.RawMessage `json:"event_uuid"`
		EventType string          `json:"event_type"`
		Filter    struct {
			UserID string `json:"user_id"`
		} `json:"filter"`
		Payload json.RawMessage `json:"payload"`
	} `json:"data"`
	ForUserID string    `json:"for_user_id"`
	Events    []dmEvent `json:"direct_message_events"`
}

// dmPayload is the payload of dm.received and dm.sent (and of
// oauth.revoke: user_id).
type dmPayload struct {
	Events []dmEvent `json:"direct_message_events"`
	UserID string    `json:"user_id"`
}

// dmEvent is a (v1.1-shaped) direct message event.
type dmEvent struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	CreatedTimestamp string `json:"created_timestamp"`
	MessageCreate    struct {
		Target struct {
			RecipientID string `json:"recipient_id"`
		} `json:"target"`
		SenderID    string `json:"sender_id"`
		MessageData struct {
			Text string `json:"text"`
		} `json:"message_data"`
	} `json:"message_create"`
}

// event is a parsed webhook body: whose it is, what type, and its DM
// events.
type event struct {
	user   string // the subscribed user (the routing key)
	typ    string // "dm.received", "chat.received", "oauth.revoke" ... ("aaa" for the Account Activity API)
	uuid   string
	dms    []dmEvent
	revoke string // the user whose grant was revoked
}

func parseDelivery(body []byte) (event, error) {
	if len(body) > MaxEvent {
		return event{}, channels.Permanent("x: a webhook body over %d bytes", MaxEvent)
	}
	var d delivery
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil {
		return event{}, channels.Permanent("x: malformed webhook body: %v", err)
	}
	if d.Data == nil {
		return event{typ: "aaa", user: d.ForUserID, dms: d.Events}, nil
	}
	ev := event{typ: d.Data.EventType, user: d.Data.Filter.UserID}
	if len(d.Data.EventUUID) > 0 && len(d.Data.EventUUID) < 64 {
		ev.uuid = string(bytes.Trim(d.Data.EventUUID, `"`))
	}
	var p dmPayload
	if len(d.Data.Payload) > 0 && d.Data.Payload[0] == '{' {
		if err := json.Unmarshal(d.Data.Payload, &p); err != nil {
			return event{}, channels.Permanent("x: malformed %s payload: %v", clean(ev.typ), err)
		}
	}
	switch ev.typ {
	case "dm.received", "dm.sent":
		ev.dms = p.Events
	case "oauth.revoke":
		ev.revoke = p.UserID
		if ev.user == "" {
			ev.user = p.UserID
		}
	}
	return ev, nil
}

// App is the operator app's webhook (/hooks/x).
type App struct {
	opts Options
}

// Route answers CRCs (GET ?crc_token=) and verifies event deliveries with
// the app's secrets, routing them by the subscribed user id.
func (p *App) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if token, ok := crcToken(r); ok {
		return nil, CRC(p.opts.crcSecret(), token), nil
	}
	if r.Method != http.MethodPost {
		return nil, nil, fmt.Errorf("x: %s without a crc_token: %w", r.Method, channels.ErrSignature)
	}
	if err := p.opts.verify(r.Header, body); err != nil {
		return nil, nil, err
	}
	ev, err := parseDelivery(body)
	if err != nil {
		return nil, nil, err
	}
	if idRE.MatchString(ev.user) {
		return []string{ev.user}, nil, nil
	}
	return nil, nil, nil
}

// ParseWebhook verifies and parses a delivery: dm.received (and the
// Account Activity API's direct_message_events) give the messages
// written to the connection's account by others; oauth.revoke of the
// account revokes the connection; X Chat (chat.*) events cannot be read
// and are logged; the rest, and other accounts' events, give nothing.
func (a *Adapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if err := a.opts.verify(r.Header, body); err != nil {
		return nil, err
	}
	ev, err := parseDelivery(body)
	if err != nil {
		return nil, err
	}
	me := a.config().UserID
	if me == "" || ev.user != me {
		return nil, nil // another account's event (the app-level route)
	}
	switch ev.typ {
	case "dm.received", "aaa":
	case "oauth.revoke":
		return nil, channels.Revoked("x: the account @%s revoked the gateway's X app", a.config().Username)
	case "chat.received", "chat.sent", "chat.conversation_join":
		a.opts.Logger.Warn("x: an end-to-end encrypted X Chat event arrived; comm cannot read X Chat (no Go implementation of its encryption) and stores nothing",
			"connection", a.conn.ID, "event_type", ev.typ)
		return nil, nil
	default:
		return nil, nil
	}
	var out []channels.Inbound
	for _, dm := range ev.dms {
		in, ok := a.inbound(dm, ev.uuid)
		if ok {
			out = append(out, in)
		}
	}
	return out, nil
}

// inbound is the message of a DM event written to the account by someone
// else; false for anything else (its own sends, other event types).
func (a *Adapter) inbound(dm dmEvent, uuid string) (channels.Inbound, bool) {
	me := a.config().UserID
	from, to := dm.MessageCreate.SenderID, dm.MessageCreate.Target.RecipientID
	if dm.Type != "message_create" || !idRE.MatchString(dm.ID) || !idRE.MatchString(from) || from == me {
		return channels.Inbound{}, false
	}
	if to == "" {
		to = me
	}
	if to != me {
		return channels.Inbound{}, false
	}
	in := channels.Inbound{ProviderID: dm.ID, Sender: from, ThreadKey: Conversation(from, me), Text: dm.MessageCreate.MessageData.Text}
	details := map[string]any{"dm_event_id": dm.ID}
	if ms, err := strconv.ParseInt(dm.CreatedTimestamp, 10, 64); err == nil && ms > 0 {
		details["created_at"] = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	if uuid != "" {
		details["event_uuid"] = uuid
	}
	in.Details, _ = json.Marshal(details)
	return in, true
}

// Conversation is the dm_conversation_id of the one-to-one conversation
// of two users: "<smaller id>-<larger id>".
func Conversation(a, b string) string {
	if idLess(b, a) {
		a, b = b, a
	}
	return a + "-" + b
}

// idLess compares two numeric ids.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

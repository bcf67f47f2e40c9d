package wacloudtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/channels/meta/metatest"
)

// Sign is the X-Hub-Signature-256 of body with secret.
func Sign(secret string, body []byte) string { return metatest.Sign(secret, body) }

// SignedRequest is Meta's POST of body to target, signed with secret.
func SignedRequest(target, secret string, body []byte) *http.Request {
	return metatest.SignedRequest(target, secret, body)
}

// Verification is Meta's GET verification of a callback URL.
func Verification(target, token, challenge string) *http.Request {
	return metatest.Verification(target, token, challenge)
}

// Webhook delivers signed webhook POSTs as Meta does (retrying a non-200
// answer): metatest's sender, which signs the same way.
type Webhook = metatest.Webhook

// Message is a person's message to a number.
type Message struct {
	// From is the person's wa_id (digits; empty when Meta withholds the
	// phone number), UserID their business-scoped user id (empty before
	// Meta sends one), Name their profile name.
	From, UserID, Name string
	// ID is the wamid; made up when empty.
	ID string
	// Text is a text message's body, or a media message's caption.
	Text string
	// Context is the wamid of the message quoted.
	Context string
	// Type is "text" when empty and no Media; else the media's type
	// ("image", "audio", "video", "document", "sticker") or another type
	// ("reaction", "unsupported", "location").
	Type string
	// MediaID is a media message's id (Number.AddMedia), MimeType its
	// type and Filename a document's name.
	MediaID, MimeType, Filename string
	// Timestamp is when it was sent (unix seconds); now when 0.
	Timestamp int64
}

// Status is Meta's report on a message a number sent.
type Status struct {
	// ID is the wamid of the message sent; Status "sent", "delivered",
	// "read" or "failed".
	ID, Status string
	// RecipientID is the person's wa_id, RecipientUserID their BSUID.
	RecipientID, RecipientUserID string
	// Code, Title and Message are a failure's first error.
	Code           int
	Title, Message string
	Timestamp      int64
}

// Value is one change's value: what came to number.
type Value struct {
	Number   *Number
	Messages []Message
	Statuses []Status
}

// idSeq numbers the wamids made up.
var idSeq atomic.Int64

// Payload is a webhook body of object whatsapp_business_account with one
// entry per value (Meta batches them so).
func Payload(values ...Value) []byte {
	var entries []map[string]any
	for _, v := range values {
		entries = append(entries, map[string]any{"id": "102290129340398", "changes": []map[string]any{
			{"field": "messages", "value": v.value()}}})
	}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": entries})
	return b
}

func (v Value) value() map[string]any {
	val := map[string]any{"messaging_product": "whatsapp",
		"metadata": map[string]string{"display_phone_number": trimPlus(v.Number.DisplayNumber), "phone_number_id": v.Number.PhoneNumberID}}
	var contacts, messages []map[string]any
	for _, m := range v.Messages {
		c := map[string]any{"profile": map[string]string{"name": m.Name}}
		if m.From != "" {
			c["wa_id"] = m.From
		}
		if m.UserID != "" {
			c["user_id"] = m.UserID
		}
		contacts = append(contacts, c)
		messages = append(messages, m.item())
	}
	if len(messages) > 0 {
		val["contacts"], val["messages"] = contacts, messages
	}
	var statuses []map[string]any
	for _, s := range v.Statuses {
		statuses = append(statuses, s.item())
	}
	if len(statuses) > 0 {
		val["statuses"] = statuses
	}
	return val
}

func trimPlus(s string) string {
	if len(s) > 0 && s[0] == '+' {
		return s[1:]
	}
	return s
}

func stamp(ts int64) string {
	if ts == 0 {
		ts = time.Now().Unix()
	}
	return strconv.FormatInt(ts, 10)
}

// item is the messages[] element of m.
func (m Message) item() map[string]any {
	id := m.ID
	if id == "" {
		id = "wamid.HBgL" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(idSeq.Add(1), 10)
	}
	typ := m.Type
	if typ == "" {
		typ = "text"
		if m.MediaID != "" {
			typ = "image"
		}
	}
	it := map[string]any{"id": id, "timestamp": stamp(m.Timestamp), "type": typ}
	if m.From != "" {
		it["from"] = m.From
	}
	if m.UserID != "" {
		it["from_user_id"] = m.UserID
	}
	if m.Context != "" {
		it["context"] = map[string]string{"from": "15550001111", "id": m.Context}
	}
	switch typ {
	case "text":
		it["text"] = map[string]string{"body": m.Text}
	case "image", "audio", "video", "document", "sticker":
		md := map[string]string{"id": m.MediaID, "mime_type": m.MimeType, "sha256": "c2hhMjU2"}
		if m.Text != "" {
			md["caption"] = m.Text
		}
		if m.Filename != "" {
			md["filename"] = m.Filename
		}
		it[typ] = md
	case "reaction":
		it["reaction"] = map[string]string{"message_id": m.Context, "emoji": "👍"}
	case "location":
		it["location"] = map[string]any{"latitude": 52.52, "longitude": 13.405, "name": m.Text}
	case "unsupported":
		it["errors"] = []map[string]any{{"code": 131051, "title": "Message type unknown", "message": "Message type unknown"}}
	}
	return it
}

// item is the statuses[] element of s.
func (s Status) item() map[string]any {
	it := map[string]any{"id": s.ID, "status": s.Status, "timestamp": stamp(s.Timestamp)}
	if s.RecipientID != "" {
		it["recipient_id"] = s.RecipientID
	}
	if s.RecipientUserID != "" {
		it["recipient_user_id"] = s.RecipientUserID
	}
	if s.Status == "failed" && s.Code != 0 {
		it["errors"] = []map[string]any{{"code": s.Code, "title": s.Title, "message": s.Message,
			"error_data": map[string]string{"details": s.Message}}}
	}
	return it
}

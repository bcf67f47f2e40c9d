package telegram

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// MaxText is the longest text of one Telegram message, in UTF-16 code
// units (what Telegram counts).
const MaxText = 4096

// sentMessage is the part of a sent Message the adapter reads.
type sentMessage struct {
	MessageID int64 `json:"message_id"`
	Chat      struct {
		ID int64 `json:"id"`
	} `json:"chat"`
}

// target is the chat a message or typing indicator goes to: the thread
// (the chat of a conversation a person started), else the recipient (a
// user id: a private chat's id is the user's).
func target(thread, to string) (string, any, error) {
	s := thread
	if s == "" {
		s = to
	}
	if s == "" {
		return "", nil, channels.Permanent("telegram: send message: no chat id (the message has neither a thread nor a recipient)")
	}
	id, err := chatID(s)
	if err != nil {
		return "", nil, channels.Permanent("telegram: send message: %v", err)
	}
	return s, id, nil
}

// Send delivers msg.Text with sendMessage, as a reply when InReplyTo names
// a message of the same chat. A text longer than MaxText goes out as
// several messages, split at a line break or space where one is near the
// limit and never inside a character; the provider id returned is the
// first message's. When a later part fails, the error is returned and a
// retry sends every part again.
func (b *bot) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	chat, id, err := target(msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("telegram: send message: the message has no text")
	}
	var reply map[string]any
	if rc, rid, ok := strings.Cut(msg.InReplyTo, ":"); ok && rc == chat {
		if n, err := strconv.ParseInt(rid, 10, 64); err == nil && n > 0 {
			reply = map[string]any{"message_id": n, "allow_sending_without_reply": true}
		}
	}
	var first string
	for i, part := range Split(msg.Text, MaxText) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue // Telegram refuses a blank message
		}
		params := map[string]any{"chat_id": id, "text": part}
		if i == 0 && reply != nil {
			params["reply_parameters"] = reply
		}
		var m sentMessage
		if err := b.call(ctx, "send message", "sendMessage", params, &m); err != nil {
			return channels.SendResult{}, err
		}
		if i == 0 {
			if m.MessageID == 0 {
				return channels.SendResult{}, channels.Transient(0, "telegram: send message: the answer has no message_id")
			}
			c := chat
			if m.Chat.ID != 0 {
				c = strconv.FormatInt(m.Chat.ID, 10)
			}
			first = c + ":" + strconv.FormatInt(m.MessageID, 10)
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// Typing shows "typing..." in the chat (sendChatAction); Telegram shows it
// for about 5 s or until the bot's next message.
func (b *bot) Typing(ctx context.Context, t channels.Typing) error {
	_, id, err := target(t.ThreadKey, t.To)
	if err != nil {
		return channels.Permanent("telegram: typing: %s", strings.TrimPrefix(err.Error(), "telegram: send message: "))
	}
	return b.call(ctx, "typing", "sendChatAction", map[string]any{"chat_id": id, "action": "typing"}, nil)
}

// TypingRefresh is how often the gateway shows typing again while an
// agent's typing lease lasts: Telegram's indicator fades after about 5 s.
const TypingRefresh = 4 * time.Second

// TypingEvery is TypingRefresh (channels.TypingRefresher).
func (b *bot) TypingEvery() time.Duration { return TypingRefresh }

// UTF16Len is the length of s in UTF-16 code units, as Telegram counts.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += channels.UTF16Units(r)
	}
	return n
}

// Split cuts s into parts of at most limit UTF-16 code units, never inside a
// character (a surrogate pair stays whole). A part ends after the last line
// break, else the last space, of its final quarter when there is one, so
// words stay whole; the parts joined are s.
func Split(s string, limit int) []string {
	return channels.Split(s, max(limit, 2), channels.UTF16Units)
}

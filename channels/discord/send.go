package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// channelFor resolves where an outbound message or typing goes: the
// ThreadKey channel when it is not the recipient, else To ("channel:<id>"
// or a user id, whose DM channel is opened).
func (a *Adapter) channelFor(ctx context.Context, op, threadKey, to string) (string, error) {
	if threadKey != "" && threadKey != to {
		if id, ok := strings.CutPrefix(threadKey, "channel:"); ok {
			threadKey = id
		}
		if !snowflake(threadKey) {
			return "", channels.Permanent("discord: %s: thread %q is not a channel id", op, threadKey)
		}
		return threadKey, nil
	}
	if id, ok := strings.CutPrefix(to, "channel:"); ok {
		if !snowflake(id) {
			return "", channels.Permanent("discord: %s: %q is not a channel id", op, to)
		}
		return id, nil
	}
	if to == "" {
		return "", channels.Permanent("discord: %s: no recipient (want a user id or channel:<id>)", op)
	}
	if !snowflake(to) {
		return "", channels.Permanent("discord: %s: recipient %q is not a user id (a snowflake) or channel:<id>", op, to)
	}
	return a.rest.dmChannel(ctx, to)
}

// message is what POST /channels/{id}/messages answers.
type message struct {
	ID string `json:"id"`
}

// Send posts msg's text (split at 2000 characters) to its channel. Each
// part carries a nonce derived from MessageID with enforce_nonce, so a
// retried send within Discord's dedup window returns the same message.
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if a.closed.Err() != nil {
		return channels.SendResult{}, channels.Transient(0, "discord: send: %v", errClosed)
	}
	ch, err := a.channelFor(ctx, "send", msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	parts := split(msg.Text, MaxContent)
	if len(parts) == 0 {
		return channels.SendResult{}, channels.Permanent("discord: send: the message has no text")
	}
	route := "POST /channels/" + ch + "/messages"
	var first string
	for i, p := range parts {
		body := map[string]any{"content": p, "allowed_mentions": map[string]any{"parse": []string{}, "replied_user": false}}
		if msg.MessageID != "" {
			body["nonce"] = nonce(msg.MessageID, i)
			body["enforce_nonce"] = true
		}
		if i == 0 && msg.InReplyTo != "" && snowflake(msg.InReplyTo) {
			body["message_reference"] = map[string]any{"message_id": msg.InReplyTo, "fail_if_not_exists": false}
		}
		var m message
		if err := a.rest.call(ctx, "send message", http.MethodPost, "/channels/"+ch+"/messages", route, body, &m); err != nil {
			return channels.SendResult{}, err
		}
		if !snowflake(m.ID) {
			return channels.SendResult{}, channels.Transient(0, "discord: send message: the answer has no message id")
		}
		if i == 0 {
			first = m.ID
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// nonce is part i's idempotency key: the MessageID itself when it fits
// Discord's 25 characters (part 0), else a hash of it.
func nonce(id string, i int) string {
	if i == 0 && len(id) <= 25 {
		return id
	}
	h := sha256.Sum256([]byte(id + "\x00" + strconv.Itoa(i)))
	return "c" + hex.EncodeToString(h[:12]) // 25 characters
}

// split cuts text into parts of at most n characters, preferring a line
// break, then a space, in the part's second half; an empty text has no
// parts.
func split(text string, n int) []string {
	if text == "" {
		return nil
	}
	return channels.SplitFrom(text, n, channels.Runes, func(cut int) int { return cut/2 + 1 })
}

// Typing shows the typing indicator in the conversation's channel (POST
// /channels/{id}/typing).
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	ch, err := a.channelFor(ctx, "typing", t.ThreadKey, t.To)
	if err != nil {
		return err
	}
	return a.rest.call(ctx, "typing", http.MethodPost, "/channels/"+ch+"/typing", "POST /channels/"+ch+"/typing", nil, nil)
}

package x

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// MaxText is the most characters one DM carries (X allows 10,000); a
// longer text goes out as several DMs.
const MaxText = 10000

// ErrXChat is why a message to an end-to-end encrypted X Chat
// conversation fails.
var ErrXChat = errors.New("end-to-end encrypted X Chat conversations are not supported (no Go implementation of X's Chat encryption)")

// Address accepts a numeric X user id. An @username is refused: comm does
// not look names up (each lookup is a billed X API call); find the id with
// GET /2/users/by/username/{name}, or answer a message the person sent.
func (a *Adapter) Address(to string) (string, error) {
	to = strings.TrimSpace(to)
	switch {
	case idRE.MatchString(to):
		return to, nil
	case strings.HasPrefix(to, "@"):
		return "", errors.New("x: send to the person's numeric X user id, not an @username (comm does not look usernames up; GET /2/users/by/username/{name} gives the id)")
	case isChat(to):
		return "", errors.New("x: " + ErrXChat.Error())
	}
	return "", errors.New("x: not an X user id (digits, like 2244994945)")
}

// isChat reports whether s names an X Chat conversation ("<id>:<id>", or
// a group chat id starting with "g").
func isChat(s string) bool {
	return strings.Contains(s, ":") || (strings.HasPrefix(s, "g") && len(s) > 1 && idRE.MatchString(s[1:]))
}

// target is where msg goes: a participant (a one-to-one conversation) or
// a group conversation id.
func (a *Adapter) target(msg channels.Outbound) (participant, conversation string, err error) {
	thread, to := msg.ThreadKey, msg.To
	if isChat(thread) || isChat(to) {
		return "", "", channels.Permanent("x: send message: %v", ErrXChat)
	}
	me := a.config().UserID
	if lo, hi, ok := strings.Cut(thread, "-"); ok && idRE.MatchString(lo) && idRE.MatchString(hi) {
		switch {
		case lo == me:
			return hi, "", nil
		case hi == me:
			return lo, "", nil
		case idRE.MatchString(to):
			return to, "", nil
		}
		return "", "", channels.Permanent("x: send message: conversation %q is not of this account", thread)
	}
	switch {
	case idRE.MatchString(thread) && to != "" && thread != to:
		return "", thread, nil // a group conversation
	case idRE.MatchString(to):
		return to, "", nil
	case idRE.MatchString(thread):
		return thread, "", nil
	}
	return "", "", channels.Permanent("x: send message: no recipient: want a numeric X user id in to (got %q)", clean(to))
}

// sent is the answer to a DM send.
type sent struct {
	Data struct {
		ConversationID string `json:"dm_conversation_id"`
		EventID        string `json:"dm_event_id"`
	} `json:"data"`
}

// Send delivers msg.Text as classic DMs: POST
// /2/dm_conversations/with/{participant_id}/messages (or, in a group
// conversation, /2/dm_conversations/{id}/messages). The provider id is
// the first DM's event id.
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if a.NeedsInstall() {
		return channels.SendResult{}, channels.Permanent("x: send message: the connection waits for the install of the gateway's X app")
	}
	participant, conversation, err := a.target(msg)
	if err != nil {
		return channels.SendResult{}, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("x: send message: the message has no text")
	}
	path := "/2/dm_conversations/with/" + url.PathEscape(participant) + "/messages"
	if conversation != "" {
		path = "/2/dm_conversations/" + url.PathEscape(conversation) + "/messages"
	}
	var first string
	for i, part := range channels.Split(msg.Text, MaxText, channels.Runes) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		var r sent
		err := a.withToken(ctx, func(token string) error {
			return a.call(ctx, "send message", http.MethodPost, path, token, nil, map[string]string{"text": part}, &r)
		})
		if err != nil {
			return channels.SendResult{}, sendError(err)
		}
		if i == 0 {
			if !idRE.MatchString(r.Data.EventID) {
				return channels.SendResult{}, channels.Transient(0, "x: send message: the answer has no dm_event_id")
			}
			first = r.Data.EventID
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// sendError recognises X's refusal of an encrypted conversation. X's exact
// answer is not documented; a 403 whose detail speaks of encryption or X
// Chat is taken as one.
func sendError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusForbidden {
		d := strings.ToLower(ae.detail)
		if strings.Contains(d, "encrypt") || strings.Contains(d, "xchat") || strings.Contains(d, "x chat") {
			return channels.Permanent("x: send message: %v (X said: %s)", ErrXChat, ae.detail)
		}
	}
	return err
}

package telegramtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf16"
)

// params is a call's JSON body.
type params map[string]json.RawMessage

func (p params) str(name string) (string, bool) {
	raw, ok := p[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true
	}
	return "", false
}

func (p params) int(name string) int64 {
	s, _ := p.str(name)
	var n json.Number = json.Number(s)
	v, _ := n.Int64()
	return v
}

func (p params) bool(name string) bool {
	var v bool
	_ = json.Unmarshal(p[name], &v)
	return v
}

var (
	chatIDRE = regexp.MustCompile(`^(-?[0-9]{1,20}|@[A-Za-z0-9_]{1,64})$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

// call answers a Bot API method.
func (b *Bot) call(w http.ResponseWriter, r *http.Request, method string) {
	// Read the body first: only then does the request's context end when
	// the client goes away (a held call must notice).
	p := params{}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if !b.takeFailure(w, r, method) {
		return
	}
	switch {
	case err != nil:
		return
	case len(body) > maxBody:
		fail(w, Failure{Code: 413, Description: "Request Entity Too Large"})
		return
	case len(strings.TrimSpace(string(body))) > 0:
		if err := json.Unmarshal(body, &p); err != nil {
			badRequest(w, "can't parse JSON object")
			return
		}
	}
	switch method {
	case "getMe":
		reply(w, map[string]any{"id": b.ID, "is_bot": true, "first_name": b.Username, "username": b.Username,
			"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false}, "")
	case "setWebhook":
		b.setWebhook(w, p)
	case "deleteWebhook":
		b.mu.Lock()
		had := b.webhook.URL != ""
		b.webhook = Webhook{}
		if p.bool("drop_pending_updates") {
			b.pending = nil
		}
		b.wakeLocked()
		b.mu.Unlock()
		if had {
			reply(w, true, "Webhook was deleted")
		} else {
			reply(w, true, "Webhook is already deleted")
		}
	case "getWebhookInfo":
		b.mu.Lock()
		info := map[string]any{"url": b.webhook.URL, "has_custom_certificate": false, "pending_update_count": len(b.pending)}
		if len(b.webhook.AllowedUpdates) > 0 {
			info["allowed_updates"] = b.webhook.AllowedUpdates
		}
		b.mu.Unlock()
		reply(w, info, "")
	case "getUpdates":
		b.getUpdates(w, r, p)
	case "sendMessage":
		b.sendMessage(w, p)
	case "sendChatAction":
		chat, _ := p.str("chat_id")
		action, _ := p.str("action")
		switch {
		case !chatIDRE.MatchString(chat):
			badRequest(w, "chat not found")
		case action == "":
			badRequest(w, "action is empty")
		default:
			b.mu.Lock()
			b.actions = record(b.actions, Action{ChatID: chat, Action: action})
			b.mu.Unlock()
			reply(w, true, "")
		}
	case "getFile":
		id, _ := p.str("file_id")
		b.mu.Lock()
		f, ok := b.files[id]
		b.mu.Unlock()
		switch {
		case !ok:
			badRequest(w, "invalid file_id")
		case len(f.data) > MaxFileSize:
			badRequest(w, "file is too big")
		default:
			reply(w, map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(f.data), "file_path": f.path}, "")
		}
	default:
		fail(w, Failure{Code: 404, Description: "Not Found"})
	}
}

func (b *Bot) setWebhook(w http.ResponseWriter, p params) {
	u, _ := p.str("url")
	secret, hasSecret := p.str("secret_token")
	var allowed []string
	_ = json.Unmarshal(p["allowed_updates"], &allowed)
	if u != "" {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Scheme != "https" || parsed.Host == "" {
			badRequest(w, "bad webhook: An HTTPS URL must be provided for webhook")
			return
		}
	}
	if hasSecret && secret != "" && !secretRE.MatchString(secret) {
		badRequest(w, "secret token contains unallowed characters")
		return
	}
	b.mu.Lock()
	if u == "" {
		b.webhook = Webhook{}
	} else {
		b.webhook = Webhook{URL: u, SecretToken: secret, AllowedUpdates: allowed}
	}
	if p.bool("drop_pending_updates") {
		b.pending = nil
	}
	b.wakeLocked()
	b.mu.Unlock()
	if u == "" {
		reply(w, true, "Webhook was deleted")
		return
	}
	reply(w, true, "Webhook was set")
}

func (b *Bot) sendMessage(w http.ResponseWriter, p params) {
	chat, _ := p.str("chat_id")
	text, _ := p.str("text")
	var rp struct {
		MessageID         int64 `json:"message_id"`
		AllowWithoutReply bool  `json:"allow_sending_without_reply"`
	}
	_ = json.Unmarshal(p["reply_parameters"], &rp)
	if rp.MessageID == 0 {
		rp.MessageID = p.int("reply_to_message_id")
	}
	switch {
	case chat == "":
		badRequest(w, "chat_id is empty")
		return
	case !chatIDRE.MatchString(chat):
		badRequest(w, "chat not found")
		return
	case strings.TrimSpace(text) == "":
		badRequest(w, "message text is empty")
		return
	case len(utf16.Encode([]rune(text))) > 4096:
		badRequest(w, "message is too long")
		return
	}
	b.mu.Lock()
	b.nextMsg[chat]++
	id := b.nextMsg[chat]
	b.sent = record(b.sent, Sent{ChatID: chat, MessageID: id, Text: text, ReplyTo: rp.MessageID, AllowWithoutReply: rp.AllowWithoutReply})
	b.sentTotal++
	if b.sentWake != nil {
		close(b.sentWake)
		b.sentWake = nil
	}
	b.mu.Unlock()
	chatObj := map[string]any{"id": json.RawMessage(chat), "type": "private"}
	if strings.HasPrefix(chat, "@") {
		chatObj = map[string]any{"id": -1000000000000 - b.ID, "type": "channel", "username": chat[1:]}
	}
	m := map[string]any{
		"message_id": id, "date": time.Now().Unix(), "text": text, "chat": chatObj,
		"from": map[string]any{"id": b.ID, "is_bot": true, "first_name": b.Username, "username": b.Username},
	}
	reply(w, m, "")
}

// getUpdates answers the pending updates from offset, holding the request
// until there is one or the timeout passes. A newer getUpdates ends a held
// one with 409, and so does a webhook.
func (b *Bot) getUpdates(w http.ResponseWriter, r *http.Request, p params) {
	offset := p.int("offset")
	timeout := min(max(p.int("timeout"), 0), maxPollTimeout)
	limit := p.int("limit")
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()

	b.mu.Lock()
	b.polls++
	gen := b.polls
	b.wakeLocked()
	if offset > 0 {
		kept := b.pending[:0]
		for _, u := range b.pending {
			if u.UpdateID >= offset {
				kept = append(kept, u)
			}
		}
		b.pending = kept
	}
	for {
		switch {
		case b.revoked:
			b.mu.Unlock()
			fail(w, Unauthorized)
			return
		case b.webhook.URL != "":
			b.mu.Unlock()
			fail(w, Failure{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
			return
		case gen != b.polls:
			b.mu.Unlock()
			fail(w, Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
			return
		}
		if len(b.pending) > 0 || timeout == 0 {
			n := min(int64(len(b.pending)), limit)
			out := append([]Update{}, b.pending[:n]...)
			b.mu.Unlock()
			reply(w, out, "")
			return
		}
		wake := b.wake
		b.held++
		b.mu.Unlock()
		ended := false
		select {
		case <-wake:
		case <-deadline.C:
			timeout = 0 // answer what there is (nothing, or what came just now)
		case <-r.Context().Done():
			ended = true
		case <-b.s.done:
			ended = true
		}
		b.mu.Lock()
		b.held--
		if ended {
			b.mu.Unlock()
			return
		}
	}
}

// download serves a file's bytes (GET /file/bot<token>/<path>).
func (b *Bot) download(w http.ResponseWriter, r *http.Request, path string) {
	if !b.takeFailure(w, r, "download") {
		return
	}
	b.mu.Lock()
	var data []byte
	found := false
	for _, f := range b.files {
		if f.path == path {
			data, found = f.data, true
			break
		}
	}
	b.mu.Unlock()
	if !found {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

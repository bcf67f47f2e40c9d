package discord

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// maxAttachments bounds the files taken from one message (Discord allows
// 10).
const maxAttachments = 10

// gwMessage is the Message of a MESSAGE_CREATE.
type gwMessage struct {
	ID               string `json:"id"`
	ChannelID        string `json:"channel_id"`
	GuildID          string `json:"guild_id"`
	Author           user   `json:"author"`
	Content          string `json:"content"`
	Type             int    `json:"type"`
	WebhookID        string `json:"webhook_id"`
	Mentions         []user `json:"mentions"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	ReferencedMessage *struct {
		Author user `json:"author"`
	} `json:"referenced_message"`
	Attachments []struct {
		ID          string `json:"id"`
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Size        int64  `json:"size"`
		URL         string `json:"url"`
	} `json:"attachments"`
}

// inbound turns a MESSAGE_CREATE into the messages comm keeps (none or
// one). Errors are transient (a download to retry) unless the message can
// never be taken.
func (a *Adapter) inbound(ctx context.Context, raw json.RawMessage) ([]channels.Inbound, string, error) {
	var m gwMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		a.opts.Logger.Warn("discord: gateway: malformed MESSAGE_CREATE left out", "connection", a.conn.ID, "error", err)
		return nil, "", nil
	}
	ins, err := a.message(ctx, m)
	return ins, m.GuildID, err
}

// message is the inbound message of a MESSAGE_CREATE this connection (or
// the operator's app session) keeps, if any.
func (a *Adapter) message(ctx context.Context, m gwMessage) ([]channels.Inbound, error) {
	botID := a.gw.bot()
	switch {
	case !snowflake(m.ID) || !snowflake(m.ChannelID) || !snowflake(m.Author.ID):
		return nil, nil
	case m.Author.Bot || m.WebhookID != "" || m.Author.ID == botID:
		return nil, nil // bots (ourselves included) and webhooks
	case m.Type != 0 && m.Type != 19:
		return nil, nil // service messages (joins, pins ...); 19 is a reply
	}
	if a.cfg.App == AppOperator || a.appEmit != nil {
		// The operator's bot serves many guilds: a connection keeps its
		// guild's messages only, the app session every guild's. DMs name
		// no guild and are left out.
		if m.GuildID == "" || (a.appEmit == nil && m.GuildID != a.cfg.GuildID) {
			return nil, nil
		}
	}
	if m.GuildID != "" {
		mentioned := false
		for _, u := range m.Mentions {
			if u.ID == botID {
				mentioned = true
			}
		}
		repliesToBot := m.ReferencedMessage != nil && m.ReferencedMessage.Author.ID == botID
		if !mentioned && !repliesToBot {
			return nil, nil
		}
	}
	text := m.Content
	if botID != "" {
		text = strings.ReplaceAll(text, "<@"+botID+">", "")
		text = strings.ReplaceAll(text, "<@!"+botID+">", "")
		text = strings.TrimSpace(text)
	}
	in := channels.Inbound{ProviderID: m.ID, ThreadKey: m.ChannelID, Sender: m.Author.ID, Text: text}
	if m.MessageReference != nil && snowflake(m.MessageReference.MessageID) {
		in.References = []string{m.MessageReference.MessageID}
	}
	var skipped []string
	for i, at := range m.Attachments {
		if i >= maxAttachments {
			skipped = append(skipped, at.Filename)
			continue
		}
		if at.Size > a.opts.MaxAttachment {
			skipped = append(skipped, at.Filename)
			continue
		}
		data, ctype, err := a.rest.download(ctx, at.URL, a.opts.MaxAttachment)
		switch {
		case errors.Is(err, errTooBig), errors.Is(err, channels.ErrPermanent):
			a.opts.Logger.Info("discord: attachment left out", "connection", a.conn.ID, "message", m.ID, "error", err)
			skipped = append(skipped, at.Filename)
			continue
		case err != nil:
			return nil, err
		}
		if at.ContentType != "" {
			ctype = at.ContentType
		}
		in.Attachments = append(in.Attachments, channels.Attachment{Filename: at.Filename, ContentType: ctype, Data: data})
	}
	details := map[string]any{"channel_id": m.ChannelID, "author_username": m.Author.Username}
	if m.GuildID != "" {
		details["guild_id"] = m.GuildID
	}
	if len(skipped) > 0 {
		details["attachments_left_out"] = skipped
	}
	in.Details, _ = json.Marshal(details)
	return []channels.Inbound{in}, nil
}

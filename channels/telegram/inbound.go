package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/comm-gateway/comm/channels"
)

// SecretHeader carries the webhook secret on Telegram's requests.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// update is the part of an Update comm reads.
type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type chat struct {
	ID       int64  `json:"id"`
	Type     string `json:"type"`
	Title    string `json:"title"`
	Username string `json:"username"`
}

type fileRef struct {
	FileID   string `json:"file_id"`
	FileSize int64  `json:"file_size"`
	FileName string `json:"file_name"`
	MimeType string `json:"mime_type"`
	// Stickers.
	IsAnimated bool `json:"is_animated"`
	IsVideo    bool `json:"is_video"`
	// Photo sizes.
	Width  int `json:"width"`
	Height int `json:"height"`
}

type message struct {
	MessageID     int64     `json:"message_id"`
	From          *user     `json:"from"`
	SenderChat    *chat     `json:"sender_chat"`
	Chat          chat      `json:"chat"`
	Date          int64     `json:"date"`
	Text          string    `json:"text"`
	Caption       string    `json:"caption"`
	ReplyTo       *message  `json:"reply_to_message"`
	Photo         []fileRef `json:"photo"`
	Document      *fileRef  `json:"document"`
	Audio         *fileRef  `json:"audio"`
	Voice         *fileRef  `json:"voice"`
	Video         *fileRef  `json:"video"`
	VideoNote     *fileRef  `json:"video_note"`
	Animation     *fileRef  `json:"animation"`
	Sticker       *fileRef  `json:"sticker"`
	MessageThread int64     `json:"message_thread_id"`
}

// ParseWebhook verifies the secret header (constant time) and parses one
// Update. Updates comm does not keep give no message and no error. A
// failed attachment download is a transient error: answering non-2xx makes
// Telegram deliver the update again.
func (a *WebhookAdapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	got := r.Header.Get(SecretHeader)
	if a.cfg.SecretToken == "" || got == "" ||
		subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.SecretToken)) != 1 {
		return nil, fmt.Errorf("telegram: webhook: the %s header is missing or wrong: %w", SecretHeader, channels.ErrSignature)
	}
	if len(body) > MaxUpdate {
		return nil, fmt.Errorf("telegram: webhook: the update exceeds %d bytes", MaxUpdate)
	}
	var u update
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, fmt.Errorf("telegram: webhook: not a Telegram update: %w", err)
	}
	if u.UpdateID == 0 && u.Message == nil {
		return nil, errors.New("telegram: webhook: not a Telegram update: no update_id")
	}
	return a.inbound(r.Context(), u)
}

// inbound turns an update into the messages comm keeps (none or one).
func (b *bot) inbound(ctx context.Context, u update) ([]channels.Inbound, error) {
	m := u.Message
	if m == nil || m.MessageID == 0 || m.Chat.ID == 0 {
		return nil, nil
	}
	media := m.media()
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	if text == "" && media == nil {
		return nil, nil // a service message: members, pins, a poll ...
	}
	chatKey := strconv.FormatInt(m.Chat.ID, 10)
	sender := chatKey
	switch {
	case m.From != nil && m.From.ID != 0:
		sender = strconv.FormatInt(m.From.ID, 10)
	case m.SenderChat != nil && m.SenderChat.ID != 0:
		sender = strconv.FormatInt(m.SenderChat.ID, 10)
	}
	in := channels.Inbound{
		ProviderID: chatKey + ":" + strconv.FormatInt(m.MessageID, 10),
		ThreadKey:  chatKey,
		Sender:     sender,
		Text:       text,
	}
	if m.ReplyTo != nil && m.ReplyTo.MessageID != 0 {
		in.References = []string{chatKey + ":" + strconv.FormatInt(m.ReplyTo.MessageID, 10)}
	}
	d := details{UpdateID: u.UpdateID, Date: m.Date, Chat: detailChat{Type: m.Chat.Type, Title: m.Chat.Title, Username: m.Chat.Username}}
	if m.From != nil {
		d.From = &detailUser{Username: m.From.Username, FirstName: m.From.FirstName, LastName: m.From.LastName, IsBot: m.From.IsBot}
	}
	if m.MessageThread != 0 {
		d.MessageThreadID = m.MessageThread
	}
	if media != nil {
		att, err := b.attachment(ctx, *media)
		switch {
		case err == nil:
			in.Attachments = []channels.Attachment{att}
		case errors.Is(err, errTooBig):
			d.Skipped = append(d.Skipped, skipped{Kind: media.kind, Reason: fmt.Sprintf("larger than %d bytes", b.opts.MaxAttachment)})
			b.opts.Logger.Info("telegram: an inbound file was left out: too big", "connection", b.conn.ID, "kind", media.kind)
		case errors.Is(err, channels.ErrPermanent) && !errors.Is(err, channels.ErrRevoked):
			d.Skipped = append(d.Skipped, skipped{Kind: media.kind, Reason: err.Error()})
			b.opts.Logger.Info("telegram: an inbound file was left out", "connection", b.conn.ID, "kind", media.kind, "error", err)
		default:
			return nil, err
		}
	}
	in.Details, _ = json.Marshal(d) // plain structs: never fails
	return []channels.Inbound{in}, nil
}

// details are the Telegram facts kept with an inbound message.
type details struct {
	UpdateID        int64       `json:"update_id,omitempty"`
	Date            int64       `json:"date,omitempty"`
	Chat            detailChat  `json:"chat"`
	From            *detailUser `json:"from,omitempty"`
	MessageThreadID int64       `json:"message_thread_id,omitempty"`
	Skipped         []skipped   `json:"skipped_attachments,omitempty"`
}

type detailChat struct {
	Type     string `json:"type,omitempty"`
	Title    string `json:"title,omitempty"`
	Username string `json:"username,omitempty"`
}

type detailUser struct {
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	IsBot     bool   `json:"is_bot,omitempty"`
}

type skipped struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// mediaRef is a message's file with what is known of it beforehand.
type mediaRef struct {
	fileRef
	kind        string // "photo", "document" ...
	filename    string // default name
	contentType string // default type
}

// media returns the message's file, if any. A photo comes in several
// sizes; the largest is taken.
func (m *message) media() *mediaRef {
	switch {
	case len(m.Photo) > 0:
		best := m.Photo[0]
		for _, p := range m.Photo[1:] {
			if p.Width*p.Height > best.Width*best.Height || (p.Width*p.Height == best.Width*best.Height && p.FileSize > best.FileSize) {
				best = p
			}
		}
		return &mediaRef{fileRef: best, kind: "photo", filename: "photo.jpg", contentType: "image/jpeg"}
	case m.Document != nil:
		return &mediaRef{fileRef: *m.Document, kind: "document", filename: "document", contentType: "application/octet-stream"}
	case m.Audio != nil:
		return &mediaRef{fileRef: *m.Audio, kind: "audio", filename: "audio.mp3", contentType: "audio/mpeg"}
	case m.Voice != nil:
		return &mediaRef{fileRef: *m.Voice, kind: "voice", filename: "voice.ogg", contentType: "audio/ogg"}
	case m.Video != nil:
		return &mediaRef{fileRef: *m.Video, kind: "video", filename: "video.mp4", contentType: "video/mp4"}
	case m.VideoNote != nil:
		return &mediaRef{fileRef: *m.VideoNote, kind: "video_note", filename: "video_note.mp4", contentType: "video/mp4"}
	case m.Animation != nil:
		return &mediaRef{fileRef: *m.Animation, kind: "animation", filename: "animation.mp4", contentType: "video/mp4"}
	case m.Sticker != nil:
		s := &mediaRef{fileRef: *m.Sticker, kind: "sticker", filename: "sticker.webp", contentType: "image/webp"}
		switch {
		case m.Sticker.IsAnimated:
			s.filename, s.contentType = "sticker.tgs", "application/x-tgsticker"
		case m.Sticker.IsVideo:
			s.filename, s.contentType = "sticker.webm", "video/webm"
		}
		return s
	}
	return nil
}

// attachment downloads a message's file.
func (b *bot) attachment(ctx context.Context, m mediaRef) (channels.Attachment, error) {
	if m.FileID == "" {
		return channels.Attachment{}, channels.Permanent("telegram: download file: the %s has no file_id", m.kind)
	}
	if m.FileSize > b.opts.MaxAttachment {
		return channels.Attachment{}, errTooBig
	}
	data, filePath, err := b.download(ctx, m.FileID)
	if err != nil {
		return channels.Attachment{}, err
	}
	att := channels.Attachment{Filename: m.filename, ContentType: m.contentType, Data: data}
	if m.FileName != "" {
		att.Filename = m.FileName
	} else if ext := path.Ext(filePath); ext != "" && m.kind == "document" {
		att.Filename += ext
	}
	if m.MimeType != "" {
		att.ContentType = m.MimeType
	} else if t := mime.TypeByExtension(path.Ext(filePath)); t != "" && m.kind == "document" {
		att.ContentType = t
	}
	return att, nil
}

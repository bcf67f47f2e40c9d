package wacloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/meta"
)

// Object is the webhook object of WhatsApp Business Account events.
const Object = "whatsapp_business_account"

// App is the operator's Meta app as hosted WhatsApp sees it: the webhook
// of every number (/hooks/whatsapp: channels.AppWebhook) and the numbers
// shared among projects (channels.SharedApp).
type App struct {
	opts  Options
	lines map[string]*line // by phone_number_id
}

var (
	_ channels.AppWebhook = (*App)(nil)
	_ channels.SharedApp  = (*App)(nil)
)

// Route answers the GET verification with the verify token and verifies
// a POST's X-Hub-Signature-256 with the app secret (channels.ErrSignature
// when it does not). It names no routing keys: the gateway routes hosted
// WhatsApp by line and sender (Receive).
func (p *App) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if r.Method == http.MethodGet {
		resp, err := meta.Challenge(name, p.opts.VerifyToken, r)
		return nil, resp, err
	}
	if err := meta.Verify(name, p.opts.AppSecret, r.Header, body); err != nil {
		return nil, nil, err
	}
	return nil, nil, nil
}

// Lines are the operator's numbers, in the order configured.
func (p *App) Lines() []channels.Line {
	out := make([]channels.Line, 0, len(p.opts.Numbers))
	for _, n := range p.opts.Numbers {
		out = append(out, channels.Line{ID: n.PhoneNumberID, Address: n.DisplayNumber, JoinLink: joinLink(n.DisplayNumber)})
	}
	return out
}

// joinLink returns the wa.me link that opens "join <code>" to number.
func joinLink(number string) func(code string) string {
	digits := strings.TrimPrefix(number, "+")
	return func(code string) string {
		return "https://wa.me/" + digits + "?text=" + strings.ReplaceAll(url.QueryEscape("join "+code), "+", "%20")
	}
}

// Answer sends text from line to the person to (a wa_id or a BSUID),
// outside any connection.
func (p *App) Answer(ctx context.Context, lineID, to, text string) error {
	l, ok := p.lines[lineID]
	if !ok {
		return fmt.Errorf("%w: %q", errUnknownLine, lineID)
	}
	_, err := l.text(ctx, never, to, to, text, "")
	return err
}

// payload is a webhook POST.
type payload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value value  `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type value struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []contact `json:"contacts"`
	Messages []message `json:"messages"`
	Statuses []status  `json:"statuses"`
}

type contact struct {
	Profile struct {
		Name     string `json:"name"`
		Username string `json:"username"`
	} `json:"profile"`
	WaID   string `json:"wa_id"`
	UserID string `json:"user_id"`
}

type media struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
}

type message struct {
	From       string `json:"from"`
	FromUserID string `json:"from_user_id"`
	ID         string `json:"id"`
	Timestamp  string `json:"timestamp"`
	Type       string `json:"type"`
	Text       *struct {
		Body string `json:"body"`
	} `json:"text"`
	Context *struct {
		From string `json:"from"`
		ID   string `json:"id"`
	} `json:"context"`
	Image    *media `json:"image"`
	Audio    *media `json:"audio"`
	Video    *media `json:"video"`
	Document *media `json:"document"`
	Sticker  *media `json:"sticker"`
	Button   *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply"`
		ListReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"list_reply"`
	} `json:"interactive"`
	Location *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
		Address   string  `json:"address"`
	} `json:"location"`
}

type status struct {
	ID              string `json:"id"`
	Status          string `json:"status"`
	Timestamp       string `json:"timestamp"`
	RecipientID     string `json:"recipient_id"`
	RecipientUserID string `json:"recipient_user_id"`
	Errors          []struct {
		Code      int    `json:"code"`
		Title     string `json:"title"`
		Message   string `json:"message"`
		ErrorData struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"errors"`
}

// Bounds of one payload.
const (
	maxEntries = 1000
	maxItems   = 1000 // messages or statuses of one change
	maxText    = 64 << 10
	maxID      = 512
)

// Receive verifies the request (again: an unverified payload never
// chooses a connection) and returns its messages and receipts, each with
// the number it came to. Events of numbers the operator does not
// configure, and of other objects, are dropped (logged). A media download
// that fails for a reason worth retrying fails the request, so that Meta
// delivers it again.
func (p *App) Receive(r *http.Request, body []byte) ([]channels.LineInbound, error) {
	if len(body) > MaxEvent {
		return nil, channels.Permanent("%s: a webhook request over %d bytes", name, MaxEvent)
	}
	if err := meta.Verify(name, p.opts.AppSecret, r.Header, body); err != nil {
		return nil, err
	}
	var pl payload
	if err := json.Unmarshal(body, &pl); err != nil {
		return nil, channels.Permanent("%s: malformed webhook request: %v", name, err)
	}
	if pl.Object != Object {
		p.opts.Logger.Info(name+": a webhook of another object dropped", "object", meta.Sanitize(pl.Object))
		return nil, nil
	}
	if len(pl.Entry) > maxEntries {
		return nil, channels.Permanent("%s: a webhook request with over %d entries", name, maxEntries)
	}
	var out []channels.LineInbound
	for _, e := range pl.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" {
				continue
			}
			ins, err := p.change(r.Context(), ch.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, ins...)
		}
	}
	return out, nil
}

// change is one entry[].changes[].value of the messages field.
func (p *App) change(ctx context.Context, v value) ([]channels.LineInbound, error) {
	id := v.Metadata.PhoneNumberID
	l, ok := p.lines[id]
	if !ok {
		p.opts.Logger.Info(name+": events of a number not configured dropped", "phone_number_id", meta.Sanitize(id))
		return nil, nil
	}
	if len(v.Messages) > maxItems || len(v.Statuses) > maxItems || len(v.Contacts) > maxItems {
		return nil, channels.Permanent("%s: a webhook change with over %d messages, statuses or contacts", name, maxItems)
	}
	out, err := l.messages(ctx, v.Messages, v.Contacts)
	if err != nil {
		return nil, err
	}
	for _, s := range v.Statuses {
		if in, ok := receipt(s); ok {
			out = append(out, channels.LineInbound{Line: id, Inbound: in})
		}
	}
	return out, nil
}

// parallelMedia bounds the media downloads of one change in flight at
// once.
const parallelMedia = 4

// messages turns a change's messages into what comm stores, in order;
// their media are downloaded up to parallelMedia at a time. The first
// failure (a download worth retrying) fails them all.
func (l *line) messages(ctx context.Context, ms []message, contacts []contact) ([]channels.LineInbound, error) {
	type result struct {
		in  channels.Inbound
		ok  bool
		err error
	}
	results := make([]result, len(ms))
	sem := make(chan struct{}, parallelMedia)
	var wg sync.WaitGroup
	for i, m := range ms {
		if mediaOf(m) == nil {
			in, ok, err := l.message(ctx, m, contacts)
			results[i] = result{in, ok, err}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			in, ok, err := l.message(ctx, m, contacts)
			results[i] = result{in, ok, err}
		}()
	}
	wg.Wait()
	var out []channels.LineInbound
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.ok {
			out = append(out, channels.LineInbound{Line: l.num.PhoneNumberID, Inbound: r.in})
		}
	}
	return out, nil
}

// person is who wrote m: the business-scoped user id where Meta sends one
// (on the message, or on its contact), else the wa_id; the contact's
// profile with it.
func person(m message, contacts []contact) (id string, c contact) {
	for _, k := range contacts {
		if (m.From != "" && k.WaID == m.From) || (m.FromUserID != "" && k.UserID == m.FromUserID) {
			c = k
			break
		}
	}
	if c.WaID == "" && c.UserID == "" && len(contacts) == 1 {
		c = contacts[0]
	}
	if c.WaID == "" {
		c.WaID = m.From
	}
	if m.FromUserID != "" {
		c.UserID = m.FromUserID
	}
	switch {
	case bsuidRE.MatchString(c.UserID):
		return c.UserID, c
	case waIDRE.MatchString(c.WaID):
		return c.WaID, c
	}
	return "", c
}

// mediaOf returns the media of m, if m is a media message.
func mediaOf(m message) *media {
	switch m.Type {
	case "image":
		return m.Image
	case "audio":
		return m.Audio
	case "video":
		return m.Video
	case "document":
		return m.Document
	case "sticker":
		return m.Sticker
	}
	return nil
}

// message turns a person's message into what comm stores; false for what
// it does not store (reactions, system notices, a message without id or
// sender).
func (l *line) message(ctx context.Context, m message, contacts []contact) (channels.Inbound, bool, error) {
	who, c := person(m, contacts)
	if who == "" || m.ID == "" || len(m.ID) > maxID {
		l.opts.Logger.Info(name+": a message without a usable id or sender dropped", "phone_number_id", l.num.PhoneNumberID)
		return channels.Inbound{}, false, nil
	}
	if m.Type == "reaction" || m.Type == "system" || m.Type == "ephemeral" {
		return channels.Inbound{}, false, nil
	}
	in := channels.Inbound{ProviderID: m.ID, ThreadKey: who, Sender: who}
	details := map[string]any{"type": meta.Sanitize(m.Type), "phone_number_id": l.num.PhoneNumberID}
	if c.WaID != "" && waIDRE.MatchString(c.WaID) {
		details["wa_id"] = c.WaID
	}
	if bsuidRE.MatchString(c.UserID) {
		details["user_id"] = c.UserID
	}
	if c.Profile.Name != "" {
		details["profile_name"] = meta.Sanitize(c.Profile.Name)
	}
	if c.Profile.Username != "" {
		details["username"] = meta.Sanitize(c.Profile.Username)
	}
	if ts, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil && ts > 0 {
		details["timestamp"] = time.Unix(ts, 0).UTC().Format(time.RFC3339)
	}
	if m.Context != nil && m.Context.ID != "" && len(m.Context.ID) <= maxID {
		in.References = []string{m.Context.ID}
	}
	switch md := mediaOf(m); {
	case m.Type == "text" && m.Text != nil:
		in.Text = m.Text.Body
	case md != nil:
		in.Text = md.Caption
		att, err := l.download(ctx, m.Type, *md)
		switch {
		case errors.Is(err, errSkip):
			details["attachments_left_out"] = []string{m.Type}
		case err != nil:
			return channels.Inbound{}, false, err
		default:
			in.Attachments = []channels.Attachment{att}
		}
	case m.Type == "button" && m.Button != nil:
		in.Text = m.Button.Text
		details["button_payload"] = meta.Sanitize(m.Button.Payload)
	case m.Type == "interactive" && m.Interactive != nil && m.Interactive.ButtonReply != nil:
		in.Text = m.Interactive.ButtonReply.Title
		details["reply_id"] = meta.Sanitize(m.Interactive.ButtonReply.ID)
	case m.Type == "interactive" && m.Interactive != nil && m.Interactive.ListReply != nil:
		in.Text = m.Interactive.ListReply.Title
		details["reply_id"] = meta.Sanitize(m.Interactive.ListReply.ID)
	case m.Type == "location" && m.Location != nil:
		lo := m.Location
		in.Text = strings.TrimSpace(fmt.Sprintf("%s %s (%.6f, %.6f)", lo.Name, lo.Address, lo.Latitude, lo.Longitude))
		details["location"] = map[string]any{"latitude": lo.Latitude, "longitude": lo.Longitude,
			"name": meta.Sanitize(lo.Name), "address": meta.Sanitize(lo.Address)}
	default:
		// contacts, order, unsupported ...: stored, noted.
		details["unsupported"] = true
	}
	if len(in.Text) > maxText {
		in.Text = in.Text[:maxText]
		details["truncated"] = true
	}
	in.Details, _ = json.Marshal(details)
	return in, true, nil
}

// receipt turns a status into a Receipt item.
func receipt(s status) (channels.Inbound, bool) {
	state := ""
	switch s.Status {
	case "sent":
		state = channels.ReceiptSent
	case "delivered":
		state = channels.ReceiptDelivered
	case "read":
		state = channels.ReceiptRead
	case "failed":
		state = channels.ReceiptFailed
	default:
		return channels.Inbound{}, false // "deleted", "warning" ...
	}
	if s.ID == "" || len(s.ID) > maxID {
		return channels.Inbound{}, false
	}
	who := s.RecipientID
	if bsuidRE.MatchString(s.RecipientUserID) {
		who = s.RecipientUserID
	}
	if len(who) > maxID {
		who = ""
	}
	rc := &channels.Receipt{MessageID: s.ID, State: state}
	if ts, err := strconv.ParseInt(s.Timestamp, 10, 64); err == nil && ts > 0 {
		rc.At = time.Unix(ts, 0).UTC()
	}
	if state == channels.ReceiptFailed && len(s.Errors) > 0 {
		e := s.Errors[0]
		rc.Code = strconv.Itoa(e.Code)
		reason := e.Title
		if e.Message != "" && e.Message != e.Title {
			reason = strings.TrimSpace(reason + ": " + e.Message)
		}
		if e.ErrorData.Details != "" {
			reason += " (" + e.ErrorData.Details + ")"
		}
		if e.Code == codeReengagement {
			reason += "; outside the 24-hour window a template is needed"
		}
		rc.Reason = meta.Sanitize(reason)
	}
	return channels.Inbound{ProviderID: "receipt:" + state + ":" + s.ID, Sender: who, ThreadKey: who, Receipt: rc}, true
}

// errSkip is media left out (too big, gone, a URL not Meta's).
var errSkip = errors.New("media left out")

// mediaInfo is GET /{media-id}'s answer.
type mediaInfo struct {
	URL      string `json:"url"`
	MimeType string `json:"mime_type"`
	FileSize int64  `json:"file_size"`
}

// download fetches a message's media: its URL from GET /{media-id}, then
// the file, both with the number's token (which is only ever sent to the
// Graph API and Meta's own hosts). A file larger than MaxAttachment, or
// one Meta no longer has, is errSkip; a failure to reach Meta is
// transient.
func (l *line) download(ctx context.Context, kind string, md media) (channels.Attachment, error) {
	if !idRE.MatchString(md.ID) {
		return channels.Attachment{}, errSkip
	}
	var info mediaInfo
	err := l.call(ctx, never, "media", http.MethodGet, "/"+md.ID, nil, &info)
	if err != nil {
		if errors.Is(err, channels.ErrTransient) {
			return channels.Attachment{}, err
		}
		l.opts.Logger.Info(name+": media left out", "phone_number_id", l.num.PhoneNumberID, "err", err)
		return channels.Attachment{}, errSkip
	}
	if info.FileSize > l.opts.MaxAttachment || !meta.FileURLAllowed(info.URL, l.opts.GraphURL) {
		l.opts.Logger.Info(name+": media left out (too large, or not on Meta's hosts)", "phone_number_id", l.num.PhoneNumberID, "size", info.FileSize)
		return channels.Attachment{}, errSkip
	}
	ctx, cancel := channels.Bound(ctx, never, errClosed, l.opts.CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.URL, nil)
	if err != nil {
		return channels.Attachment{}, errSkip
	}
	req.Header.Set("Authorization", "Bearer "+l.num.AccessToken)
	ans, err := meta.Exchange(l.opts.HTTPClient, req, name, "download media", l.opts.MaxAttachment)
	switch {
	case err != nil:
		return channels.Attachment{}, err
	case ans.Status == http.StatusTooManyRequests || ans.Status >= 500:
		return channels.Attachment{}, channels.Transient(meta.UsageDelay(ans.Header), "%s: download media: HTTP %d %s", name, ans.Status, http.StatusText(ans.Status))
	case ans.Status != http.StatusOK || ans.TooLarge:
		l.opts.Logger.Info(name+": media left out", "phone_number_id", l.num.PhoneNumberID, "status", ans.Status, "too_large", ans.TooLarge)
		return channels.Attachment{}, errSkip
	}
	ct := info.MimeType
	if ct == "" {
		ct = md.MimeType
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || len(ct) > 255 {
		ct = "application/octet-stream"
	} else {
		ct = mt
	}
	fn := meta.Sanitize(md.Filename)
	if fn == "" || strings.ContainsAny(fn, `/\`) {
		fn = kind
		if exts, _ := mime.ExtensionsByType(ct); len(exts) > 0 {
			fn += exts[0]
		}
	}
	return channels.Attachment{Filename: fn, ContentType: ct, Data: ans.Body}, nil
}

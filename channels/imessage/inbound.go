package imessage

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// message is a BlueBubbles Message as its serializer writes it (the
// fields comm reads).
type message struct {
	GUID   string `json:"guid"`
	Text   string `json:"text"`
	Handle *struct {
		Address string `json:"address"`
		Service string `json:"service"`
	} `json:"handle"`
	Chats []struct {
		GUID string `json:"guid"`
	} `json:"chats"`
	Attachments           []attachment    `json:"attachments"`
	Subject               string          `json:"subject"`
	IsFromMe              bool            `json:"isFromMe"`
	DateCreated           int64           `json:"dateCreated"`
	DateDelivered         int64           `json:"dateDelivered"`
	DateRead              int64           `json:"dateRead"`
	AssociatedMessageGUID string          `json:"associatedMessageGuid"`
	AssociatedMessageType json.RawMessage `json:"associatedMessageType"`
	ThreadOriginatorGUID  string          `json:"threadOriginatorGuid"`
	Error                 int             `json:"error"`
	ItemType              int             `json:"itemType"`
}

type attachment struct {
	GUID         string `json:"guid"`
	MimeType     string `json:"mimeType"`
	TransferName string `json:"transferName"`
	TotalBytes   int64  `json:"totalBytes"`
}

// event is a webhook POST (and a Socket.IO event): {"type","data"}.
type event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Bounds of one event.
const (
	maxAttachments = 10
	maxText        = 64 << 10
	maxID          = 512
)

// tapback reports whether m is a reaction to another message (a tapback:
// associatedMessageType "love", "like", 2000 … or their removals).
func (m message) tapback() bool {
	t := strings.TrimSpace(string(m.AssociatedMessageType))
	return m.AssociatedMessageGUID != "" && t != "" && t != "null" && t != "0" && t != `""`
}

// App verifies requests to /hooks/imessage: the relay's id and secret in
// the URL (BlueBubbles signs nothing).
type App struct{ ch *channel }

// Route checks the request's relay and secret, in constant time. The
// channel routes by line (Shared.Receive), so no keys are returned.
func (p *App) Route(r *http.Request, _ []byte) ([]string, *channels.Response, error) {
	if _, err := p.ch.verify(r); err != nil {
		return nil, nil, err
	}
	return nil, nil, nil
}

// verify returns the relay a webhook request names when its secret is
// right; else an error wrapping channels.ErrSignature.
func (c *channel) verify(r *http.Request) (*relay, error) {
	q := r.URL.Query()
	rl := c.byID(q.Get("relay"))
	got := q.Get("secret")
	if rl == nil {
		return nil, fmt.Errorf("imessage: the webhook URL names no relay of this gateway: %w", channels.ErrSignature)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(rl.secret)) != 1 {
		return nil, fmt.Errorf("imessage: the webhook URL's secret is wrong or missing: %w", channels.ErrSignature)
	}
	return rl, nil
}

// Shared is the channel's lines: one per relay.
type Shared struct{ ch *channel }

// Lines lists the relays' addresses, in the operator's order. Each
// line's join link is an sms: link with the body "join <code>"
// (sms:<address>?&body=join%20<code>): it opens Messages on an iPhone or
// a Mac, which sends it as an iMessage to an address registered with
// iMessage; the "?&" form is read by iOS and by other phones alike.
// There is no documented imessage: link scheme.
func (s *Shared) Lines() []channels.Line {
	var out []channels.Line
	for _, r := range s.ch.opts.relays {
		addr := r.Address
		out = append(out, channels.Line{ID: addr, Address: addr, JoinLink: func(code string) string {
			return JoinLink(addr, code)
		}})
	}
	return out
}

// JoinLink is the sms: link that opens a message "join <code>" to
// address.
func JoinLink(address, code string) string {
	return "sms:" + address + "?&body=" + url.PathEscape("join "+code)
}

// Receive returns the messages and receipts of a verified webhook
// request, each with its relay's address as the line.
func (s *Shared) Receive(r *http.Request, body []byte) ([]channels.LineInbound, error) {
	rl, err := s.ch.verify(r)
	if err != nil {
		return nil, err
	}
	if len(body) > MaxEvent {
		return nil, channels.Permanent("imessage: a webhook request over %d bytes", MaxEvent)
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, channels.Permanent("imessage: malformed webhook request: %v", err)
	}
	ins, err := s.ch.event(r.Context(), rl, ev)
	if err != nil {
		return nil, err
	}
	return onLine(rl, ins), nil
}

func onLine(r *relay, ins []channels.Inbound) []channels.LineInbound {
	var out []channels.LineInbound
	for _, in := range ins {
		out = append(out, channels.LineInbound{Line: r.Address, Inbound: in})
	}
	return out
}

// Answer sends text from line's relay to the person to (how to join, a
// join's confirmation), outside any connection.
func (s *Shared) Answer(ctx context.Context, line, to, text string) error {
	r := s.ch.byLine(line)
	if r == nil || line == "" {
		return channels.Permanent("imessage: answer: no relay has the address %q", line)
	}
	_, err := s.ch.send(ctx, r, channels.Outbound{To: to, Text: text})
	return err
}

// event turns one webhook event into what comm stores: a message of
// someone else (new-message), receipts of our own (updated-message).
// Other events give nothing.
func (c *channel) event(ctx context.Context, r *relay, ev event) ([]channels.Inbound, error) {
	if ev.Type != "new-message" && ev.Type != "updated-message" {
		return nil, nil
	}
	var m message
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		return nil, channels.Permanent("imessage: malformed %s event: %v", ev.Type, err)
	}
	if ev.Type == "updated-message" {
		return receipts(m), nil
	}
	in, ok := c.message(ctx, r, m)
	if !ok {
		return nil, nil
	}
	return []channels.Inbound{in}, nil
}

// receipts are the delivered or read reports an update of one of our own
// messages carries (read only when it was read: a state never moves
// back).
func receipts(m message) []channels.Inbound {
	if !m.IsFromMe || m.GUID == "" || len(m.GUID) > maxID {
		return nil
	}
	state, at := "", int64(0)
	switch {
	case m.DateRead > 0:
		state, at = channels.ReceiptRead, m.DateRead
	case m.DateDelivered > 0:
		state, at = channels.ReceiptDelivered, m.DateDelivered
	default:
		return nil
	}
	return []channels.Inbound{{ProviderID: "receipt:" + state + ":" + m.GUID,
		Receipt: &channels.Receipt{MessageID: m.GUID, State: state, At: time.UnixMilli(at).UTC()}}}
}

// message turns a person's message into an Inbound; false for what is not
// stored (our own, a tapback, one without a guid or sender).
func (c *channel) message(ctx context.Context, r *relay, m message) (channels.Inbound, bool) {
	switch {
	case m.IsFromMe, m.GUID == "", len(m.GUID) > maxID, m.Handle == nil, len(m.Text) > maxText:
		return channels.Inbound{}, false
	case m.tapback():
		c.opts.stats.Tapbacks.Add(1)
		c.opts.Logger.Debug("imessage: a tapback was ignored", "relay", r.Address)
		return channels.Inbound{}, false
	}
	sender, err := Address(m.Handle.Address)
	if err != nil {
		sender = sanitize(strings.TrimSpace(m.Handle.Address)) // a short code, an unusual handle
	}
	if sender == "" {
		return channels.Inbound{}, false
	}
	// A person's own chat is keyed by their address (as comm's sends to
	// them are), a group by its chat guid.
	thread, chat := sender, ""
	if len(m.Chats) > 0 && isChatGUID(m.Chats[0].GUID) {
		chat = m.Chats[0].GUID
		if strings.Contains(chat, ";+;") {
			thread = chat
		} else if _, h, _ := strings.Cut(chat, ";-;"); h == m.Handle.Address || h == sender {
			r.chats.put(sender, chat)
		}
	}
	in := channels.Inbound{ProviderID: m.GUID, Sender: sender, ThreadKey: thread,
		Text: strings.TrimSpace(strings.ReplaceAll(m.Text, "\ufffc", ""))}
	if m.ThreadOriginatorGUID != "" && len(m.ThreadOriginatorGUID) <= maxID {
		in.References = []string{m.ThreadOriginatorGUID}
	}
	if m.Subject != "" && len(m.Subject) <= 1024 {
		subject := m.Subject
		in.Subject = &subject
	}
	details := map[string]any{"guid": m.GUID, "chat_guid": chat, "relay": r.Address, "group": strings.Contains(chat, ";+;")}
	if m.DateCreated > 0 {
		details["date_created"] = time.UnixMilli(m.DateCreated).UTC()
	}
	if m.Handle.Service != "" && len(m.Handle.Service) < 64 {
		details["service"] = m.Handle.Service
	}
	var left []string
	for i, att := range m.Attachments {
		if i >= maxAttachments {
			left = append(left, att.TransferName)
			continue
		}
		got, why := c.download(ctx, r, att, i)
		if why != "" {
			c.opts.stats.LeftOut.Add(1)
			c.opts.Logger.Info("imessage: an attachment was left out of an inbound message", "relay", r.Address, "why", why)
			left = append(left, sanitize(att.TransferName)+": "+why)
			continue
		}
		in.Attachments = append(in.Attachments, got)
	}
	if len(left) > 0 {
		details["attachments_left_out"] = left
	}
	in.Details, _ = json.Marshal(details)
	return in, true
}

// download fetches an attachment's file
// (GET /api/v1/attachment/{guid}/download). A file over MaxAttachment, or
// one the relay cannot give now, is left out with the reason (the relay
// does not send the event again, so the message is kept without it).
func (c *channel) download(ctx context.Context, r *relay, att attachment, i int) (channels.Attachment, string) {
	if att.GUID == "" || len(att.GUID) > maxID {
		return channels.Attachment{}, "no attachment guid"
	}
	if att.TotalBytes > c.opts.MaxAttachment {
		return channels.Attachment{}, fmt.Sprintf("over %d bytes", c.opts.MaxAttachment)
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint("/api/v1/attachment/"+url.PathEscape(att.GUID)+"/download", nil), nil)
	if err != nil {
		return channels.Attachment{}, "bad attachment guid"
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return channels.Attachment{}, netError(ctx, r, "download attachment", err).Error()
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		return channels.Attachment{}, fmt.Sprintf("the relay answered HTTP %d", resp.StatusCode)
	case resp.ContentLength > c.opts.MaxAttachment:
		return channels.Attachment{}, fmt.Sprintf("over %d bytes", c.opts.MaxAttachment)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxAttachment+1))
	if err != nil {
		return channels.Attachment{}, netError(ctx, r, "download attachment", err).Error()
	}
	if int64(len(data)) > c.opts.MaxAttachment {
		return channels.Attachment{}, fmt.Sprintf("over %d bytes", c.opts.MaxAttachment)
	}
	ct := att.MimeType
	if h := resp.Header.Get("Content-Type"); h != "" {
		ct = h
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || len(ct) > 255 {
		ct = "application/octet-stream"
	} else {
		ct = mt
	}
	name := path.Base(strings.ReplaceAll(att.TransferName, "\\", "/"))
	if name == "" || name == "." || name == "/" || len(name) > 255 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 }) {
		name = fmt.Sprintf("attachment-%d", i+1)
	}
	return channels.Attachment{Filename: name, ContentType: ct, Data: data}, ""
}

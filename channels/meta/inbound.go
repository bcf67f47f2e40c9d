package meta

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// SignatureHeader carries the HMAC-SHA256 of the raw body with the app
// secret, as "sha256=<hex>".
const SignatureHeader = "X-Hub-Signature-256"

// Sign returns the X-Hub-Signature-256 of body with secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a webhook request's signature with secret. Its error
// wraps channels.ErrSignature.
func Verify(channel, secret string, h http.Header, body []byte) error {
	if secret == "" {
		return fmt.Errorf("%s: no app secret to verify with: %w", channel, channels.ErrSignature)
	}
	got := h.Get(SignatureHeader)
	if got == "" {
		return fmt.Errorf("%s: the request has no %s: %w", channel, SignatureHeader, channels.ErrSignature)
	}
	if !hmac.Equal([]byte(got), []byte(Sign(secret, body))) {
		return fmt.Errorf("%s: %s does not verify: %w", channel, SignatureHeader, channels.ErrSignature)
	}
	return nil
}

// payload is a webhook POST.
type payload struct {
	Object string  `json:"object"`
	Entry  []entry `json:"entry"`
}

type entry struct {
	ID        string  `json:"id"`
	Time      int64   `json:"time"`
	Messaging []event `json:"messaging"`
}

type party struct {
	ID string `json:"id"`
}

// event is one entry[].messaging[] item.
type event struct {
	Sender    party `json:"sender"`
	Recipient party `json:"recipient"`
	Timestamp int64 `json:"timestamp"`
	Message   *msg  `json:"message"`
	Postback  *struct {
		MID     string `json:"mid"`
		Title   string `json:"title"`
		Payload string `json:"payload"`
	} `json:"postback"`
	Delivery *struct {
		MIDs      []string `json:"mids"`
		Watermark int64    `json:"watermark"`
	} `json:"delivery"`
	Read *struct {
		MID       string `json:"mid"`
		Watermark int64  `json:"watermark"`
	} `json:"read"`
}

type msg struct {
	MID        string `json:"mid"`
	Text       string `json:"text"`
	IsEcho     bool   `json:"is_echo"`
	QuickReply *struct {
		Payload string `json:"payload"`
	} `json:"quick_reply"`
	ReplyTo *struct {
		MID string `json:"mid"`
	} `json:"reply_to"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	Type    string `json:"type"`
	Payload struct {
		URL string `json:"url"`
	} `json:"payload"`
}

// Bounds of one payload.
const (
	maxEntries     = 1000
	maxEvents      = 1000
	maxAttachments = 10
	maxText        = 64 << 10
)

func parsePayload(channel string, body []byte) (payload, error) {
	if len(body) > MaxEvent {
		return payload{}, channels.Permanent("%s: a webhook request over %d bytes", channel, MaxEvent)
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return payload{}, channels.Permanent("%s: malformed webhook request: %v", channel, err)
	}
	if p.Object == "" {
		return payload{}, channels.Permanent("%s: a webhook request without an object", channel)
	}
	if len(p.Entry) > maxEntries {
		return payload{}, channels.Permanent("%s: a webhook request with over %d entries", channel, maxEntries)
	}
	return p, nil
}

// App is the operator app's webhook (/hooks/facebook, /hooks/instagram).
type App struct {
	channel string
	opts    Options
}

// Stats are the counts of what the app-level webhook dropped.
func (p *App) Stats() *Stats { return p.opts.stats }

// Route answers the GET verification with the app's verify token, and
// verifies a POST with the app secret and routes it by its entries' ids.
// A payload of another object is acknowledged and dropped (counted).
func (p *App) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if r.Method == http.MethodGet {
		resp, err := Challenge(p.channel, p.opts.VerifyToken, r)
		return nil, resp, err
	}
	if err := Verify(p.channel, p.opts.AppSecret, r.Header, body); err != nil {
		return nil, nil, err
	}
	pl, err := parsePayload(p.channel, body)
	if err != nil {
		return nil, nil, err
	}
	p.opts.verified.put(r, body, p.opts.AppSecret, pl)
	if pl.Object != object(p.channel) {
		p.opts.stats.UnknownObject.Add(1)
		p.opts.Logger.Info(p.channel+": app webhook of another object dropped", "object", Sanitize(pl.Object))
		return nil, nil, nil
	}
	var keys []string
	seen := map[string]bool{}
	for _, e := range pl.Entry {
		if idRE.MatchString(e.ID) && !seen[e.ID] {
			seen[e.ID] = true
			keys = append(keys, e.ID)
		}
	}
	return keys, nil, nil
}

// Respond answers the GET verification of the connection's own ingress
// (the verify token of a bring-your-own app); a POST whose signature
// verifies goes on to ParseWebhook.
func (a *Adapter) Respond(r *http.Request, body []byte) (*channels.Response, error) {
	if r.Method == http.MethodGet {
		return Challenge(a.channel, a.verifyToken(), r)
	}
	if err := Verify(a.channel, a.secret(), r.Header, body); err != nil {
		return nil, err
	}
	return nil, nil
}

// ParseWebhook verifies and parses a webhook POST: the messages, and the
// delivery and read receipts, of the connection's Page (or Instagram
// account). Entries of other ids give nothing.
func (a *Adapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if len(body) > MaxEvent {
		return nil, channels.Permanent("%s: a webhook request over %d bytes", a.channel, MaxEvent)
	}
	pl, ok := a.opts.verified.get(r, body, a.secret())
	if !ok {
		if err := Verify(a.channel, a.secret(), r.Header, body); err != nil {
			return nil, err
		}
		var err error
		if pl, err = parsePayload(a.channel, body); err != nil {
			return nil, err
		}
	}
	if pl.Object != object(a.channel) || a.NeedsInstall() {
		return nil, nil
	}
	var out []channels.Inbound
	for _, e := range pl.Entry {
		if e.ID != a.routeID() || a.routeID() == "" {
			continue // another Page's events (the app-level route)
		}
		if len(e.Messaging) > maxEvents {
			return nil, channels.Permanent("%s: an entry with over %d events", a.channel, maxEvents)
		}
		for _, ev := range e.Messaging {
			ins, err := a.event(r.Context(), ev)
			if err != nil {
				return nil, err
			}
			out = append(out, ins...)
		}
	}
	return out, nil
}

// event turns one messaging event into what comm stores.
func (a *Adapter) event(ctx context.Context, ev event) ([]channels.Inbound, error) {
	person := ev.Sender.ID
	switch {
	case ev.Message != nil && ev.Message.IsEcho:
		return nil, nil // the Page's own send
	case !idRE.MatchString(person) || person == a.routeID() || person == a.cfg.PageID:
		return nil, nil
	case ev.Message != nil:
		return a.message(ctx, ev)
	case ev.Postback != nil:
		pb := ev.Postback
		id := pb.MID
		if id == "" {
			id = fmt.Sprintf("postback:%s:%d", person, ev.Timestamp)
		}
		if len(id) > 512 || len(pb.Title) > maxText || len(pb.Payload) > maxText {
			return nil, nil
		}
		in := channels.Inbound{ProviderID: id, ThreadKey: person, Sender: person, Text: pb.Title}
		in.Details, _ = json.Marshal(map[string]any{"kind": "postback", "postback_payload": pb.Payload, "timestamp": ev.Timestamp})
		return []channels.Inbound{in}, nil
	case ev.Delivery != nil:
		at := millis(ev.Delivery.Watermark)
		mids := ev.Delivery.MIDs
		if len(mids) == 0 {
			mids = a.sent.before(person, at, false)
		}
		return receipts(person, mids, channels.ReceiptDelivered, at), nil
	case ev.Read != nil:
		at := millis(ev.Read.Watermark)
		if ev.Read.MID != "" {
			return receipts(person, []string{ev.Read.MID}, channels.ReceiptRead, millis(ev.Timestamp)), nil
		}
		mids := a.sent.before(person, at, true)
		if len(mids) == 0 {
			a.opts.stats.UnmatchedReads.Add(1)
			a.opts.Logger.Debug(a.channel+": a read watermark matched no message this process sent", "connection", a.conn.ID)
		}
		return receipts(person, mids, channels.ReceiptRead, at), nil
	}
	return nil, nil // reactions, referrals, opt-ins ...
}

// receipts are Receipt items for mids.
func receipts(person string, mids []string, state string, at time.Time) []channels.Inbound {
	var out []channels.Inbound
	for i, mid := range mids {
		if i >= maxEvents || mid == "" || len(mid) > 512 {
			continue
		}
		out = append(out, channels.Inbound{ProviderID: "receipt:" + state + ":" + mid, Sender: person, ThreadKey: person,
			Receipt: &channels.Receipt{MessageID: mid, State: state, At: at}})
	}
	return out
}

// millis is a Meta timestamp (ms since the epoch); zero when absent.
func millis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// message is a person's message.
func (a *Adapter) message(ctx context.Context, ev event) ([]channels.Inbound, error) {
	m := ev.Message
	if m.MID == "" || len(m.MID) > 512 || len(m.Text) > maxText {
		return nil, nil
	}
	person := ev.Sender.ID
	in := channels.Inbound{ProviderID: m.MID, ThreadKey: person, Sender: person, Text: m.Text}
	if m.ReplyTo != nil && m.ReplyTo.MID != "" && len(m.ReplyTo.MID) <= 512 {
		in.References = []string{m.ReplyTo.MID}
	}
	details := map[string]any{"timestamp": ev.Timestamp, "mid": m.MID}
	if a.channel == Instagram {
		details["ig_id"] = a.cfg.IGID
	} else {
		details["page_id"] = a.cfg.PageID
	}
	if m.QuickReply != nil && len(m.QuickReply.Payload) <= maxText {
		details["quick_reply_payload"] = m.QuickReply.Payload
	}
	var left []string
	for i, att := range m.Attachments {
		if i >= maxAttachments {
			left = append(left, att.Type)
			continue
		}
		got, err := a.download(ctx, att, i)
		if errors.Is(err, errSkip) {
			left = append(left, att.Type)
			continue
		}
		if err != nil {
			return nil, err
		}
		in.Attachments = append(in.Attachments, got)
	}
	if len(left) > 0 {
		details["attachments_left_out"] = left
	}
	in.Details, _ = json.Marshal(details)
	return []channels.Inbound{in}, nil
}

// errSkip is an attachment left out (too big, no file, a URL not Meta's,
// gone).
var errSkip = errors.New("attachment left out")

// download fetches an attachment's file from its (signed, tokenless) CDN
// URL. Files larger than MaxAttachment, of kinds with no file (location,
// template, fallback) and those Meta no longer has are left out; a failure
// to reach Meta is transient, so that Meta redelivers the event.
func (a *Adapter) download(ctx context.Context, att attachment, i int) (channels.Attachment, error) {
	switch att.Type {
	case "image", "video", "audio", "file", "story_mention", "ig_reel", "reel", "share":
	default:
		return channels.Attachment{}, errSkip
	}
	raw := att.Payload.URL
	if !a.fileURLAllowed(raw) {
		a.opts.Logger.Info(a.channel+": an attachment was left out of an inbound message", "connection", a.conn.ID, "type", att.Type)
		return channels.Attachment{}, errSkip
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return channels.Attachment{}, errSkip
	}
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return channels.Attachment{}, netError(ctx, a.channel, "download attachment", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return channels.Attachment{}, channels.Transient(0, "%s: download attachment: HTTP %d %s", a.channel, resp.StatusCode, http.StatusText(resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return channels.Attachment{}, errSkip // expired or gone
	case resp.ContentLength > a.opts.MaxAttachment:
		return channels.Attachment{}, errSkip
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, a.opts.MaxAttachment+1))
	if err != nil {
		return channels.Attachment{}, netError(ctx, a.channel, "download attachment", err)
	}
	if int64(len(data)) > a.opts.MaxAttachment {
		return channels.Attachment{}, errSkip
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || len(ct) > 255 {
		ct = "application/octet-stream"
	} else {
		ct = mt
	}
	name := ""
	if u, err := url.Parse(raw); err == nil {
		name = path.Base(u.Path)
	}
	if name == "" || name == "." || name == "/" || len(name) > 255 {
		name = fmt.Sprintf("%s-%d", att.Type, i+1)
	}
	return channels.Attachment{Filename: name, ContentType: ct, Data: data}, nil
}

// fileURLAllowed reports whether an attachment URL may be fetched.
func (a *Adapter) fileURLAllowed(raw string) bool { return FileURLAllowed(raw, a.opts.APIURL) }

// verifiedSet remembers the app-level requests Route verified and parsed
// while they are in flight: the gateway hands the same request and body
// to the ParseWebhook of every connection Route named, and a batch for
// many Pages is then verified and parsed once, not once per Page. An entry
// is keyed by the request, matched on the very same body bytes and secret,
// and dropped when the request's context ends.
type verifiedSet struct {
	mu sync.Mutex
	m  map[*http.Request]verifiedBody
}

type verifiedBody struct {
	body   []byte
	secret string
	pl     payload
}

// maxVerified bounds the requests remembered at once.
const maxVerified = 4096

func (v *verifiedSet) put(r *http.Request, body []byte, secret string, pl payload) {
	if len(body) == 0 || r.Context().Done() == nil {
		return // a request whose end is never signalled is not remembered
	}
	v.mu.Lock()
	if len(v.m) >= maxVerified {
		v.mu.Unlock()
		return
	}
	v.m[r] = verifiedBody{body: body, secret: secret, pl: pl}
	v.mu.Unlock()
	context.AfterFunc(r.Context(), func() {
		v.mu.Lock()
		delete(v.m, r)
		v.mu.Unlock()
	})
}

func (v *verifiedSet) get(r *http.Request, body []byte, secret string) (payload, bool) {
	if len(body) == 0 {
		return payload{}, false
	}
	v.mu.Lock()
	e, ok := v.m[r]
	v.mu.Unlock()
	// The same request, the same bytes (not a copy that could differ), the
	// same secret.
	if !ok || e.secret != secret || len(e.body) != len(body) || &e.body[0] != &body[0] {
		return payload{}, false
	}
	return e.pl, true
}

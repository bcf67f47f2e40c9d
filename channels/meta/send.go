package meta

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Text limits of one message: Messenger takes 2000 characters (counted
// here in UTF-16 code units), Instagram 1000 (counted in bytes of UTF-8,
// the stricter reading).
const (
	MaxFacebookText  = 2000
	MaxInstagramText = 1000
)

// sent is the Send API's answer.
type sent struct {
	RecipientID string `json:"recipient_id"`
	MessageID   string `json:"message_id"`
}

// recipient is where a message goes: the person of the thread (a PSID or
// IGSID), else To.
func (a *Adapter) recipient(op, thread, to string) (string, error) {
	r := thread
	if r == "" {
		r = to
	}
	if !idRE.MatchString(r) {
		return "", channels.Permanent("%s: %s: %q is not a page-scoped or Instagram-scoped user id", a.channel, op, r)
	}
	return r, nil
}

// Send delivers msg.Text with the Send API (POST /{page}/messages,
// messaging_type RESPONSE). A text over the channel's limit goes out as
// several messages; the provider id is the first's. When a later part
// fails, the error is returned and a retry sends every part again.
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if a.NeedsInstall() {
		return channels.SendResult{}, channels.Permanent("%s: send message: the connection waits for a login with the gateway's Meta app", a.channel)
	}
	to, err := a.recipient("send message", msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("%s: send message: the message has no text", a.channel)
	}
	limit, utf16 := MaxFacebookText, true
	if a.channel == Instagram {
		limit, utf16 = MaxInstagramText, false
	}
	// Meta stamps the message between the request and its answer, and
	// watermarks name that stamp (ms): the log keeps the time the send
	// began, cut to ms, so that a watermark at the message's own stamp
	// covers it (the time of the answer would be after it).
	began := a.opts.Now().Truncate(time.Millisecond)
	var first string
	for i, part := range Split(msg.Text, limit, utf16) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		body := map[string]any{"recipient": map[string]string{"id": to}, "messaging_type": "RESPONSE",
			"message": map[string]string{"text": part}}
		var r sent
		err := a.call(ctx, "send message", http.MethodPost, "/"+a.cfg.PageID+"/messages", a.cfg.PageAccessToken, a.secret(), nil, body, &r)
		if ge, ok := errors.AsType[*graphError](err); ok && ge.window() && a.cfg.HumanAgent {
			// Outside the 24-hour window: a human agent may still answer
			// within 7 days.
			body["messaging_type"], body["tag"] = "MESSAGE_TAG", "HUMAN_AGENT"
			err = a.call(ctx, "send message (HUMAN_AGENT tag)", http.MethodPost, "/"+a.cfg.PageID+"/messages", a.cfg.PageAccessToken, a.secret(), nil, body, &r)
		}
		if err != nil {
			return channels.SendResult{}, err
		}
		if r.MessageID == "" || len(r.MessageID) > 512 {
			return channels.SendResult{}, channels.Transient(0, "%s: send message: the answer has no message_id", a.channel)
		}
		if i == 0 {
			first = r.MessageID
		}
	}
	// Only the first part's mid names the message comm stores; receipts
	// of the others would name nothing.
	a.sent.add(to, first, began)
	return channels.SendResult{ProviderID: first}, nil
}

// Typing shows the typing indicator (sender_action typing_on) to the
// person of the thread. Messenger keeps it up to 20 seconds, longer than
// comm's typing lease, so the adapter is no channels.TypingRefresher.
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	if a.NeedsInstall() {
		return nil
	}
	to, err := a.recipient("typing", t.ThreadKey, t.To)
	if err != nil {
		return err
	}
	body := map[string]any{"recipient": map[string]string{"id": to}, "sender_action": "typing_on"}
	return a.call(ctx, "typing", http.MethodPost, "/"+a.cfg.PageID+"/messages", a.cfg.PageAccessToken, a.secret(), nil, body, nil)
}

// Split cuts s into parts of at most limit UTF-16 code units (utf16 true:
// how Messenger counts characters, an emoji taking two) or bytes of UTF-8
// (utf16 false), never inside a character, at a line break or space in
// the last quarter of a part when there is one; the parts joined are s.
func Split(s string, limit int, utf16 bool) []string {
	if utf16 {
		return channels.Split(s, max(limit, 8), channels.UTF16Units)
	}
	return channels.Split(s, max(limit, 8), channels.Bytes)
}

// sentLog remembers the mids this process sent to each person, so that a
// Messenger delivery or read watermark can name them. Bounded: the
// newest perPerson mids of at most people persons.
type sentLog struct {
	mu     sync.Mutex
	byUser map[string][]sentMID
	order  []string // persons, oldest first (may repeat)
}

type sentMID struct {
	mid string
	at  time.Time
}

const (
	sentPerPerson = 50
	sentPersons   = 5000
)

func newSentLog() *sentLog { return &sentLog{byUser: map[string][]sentMID{}} }

func (l *sentLog) add(person, mid string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byUser[person]; !ok {
		for len(l.byUser) >= sentPersons && len(l.order) > 0 {
			delete(l.byUser, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, person)
		if len(l.order) > 2*sentPersons {
			// Persons forgotten by reads linger in order: compact it.
			kept := l.order[:0:0]
			for _, p := range l.order {
				if _, ok := l.byUser[p]; ok || p == person {
					kept = append(kept, p)
				}
			}
			l.order = kept
		}
	}
	ms := append(l.byUser[person], sentMID{mid: mid, at: at})
	if len(ms) > sentPerPerson {
		ms = append(ms[:0:0], ms[len(ms)-sentPerPerson:]...)
	}
	l.byUser[person] = ms
}

// before returns the mids sent to person at or before watermark (zero:
// none); forget drops them (a read is final).
func (l *sentLog) before(person string, watermark time.Time, forget bool) []string {
	if watermark.IsZero() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	var keep []sentMID
	for _, m := range l.byUser[person] {
		if !m.at.After(watermark) {
			out = append(out, m.mid)
			continue
		}
		keep = append(keep, m)
	}
	if forget && len(out) > 0 {
		if len(keep) == 0 {
			delete(l.byUser, person)
		} else {
			l.byUser[person] = keep
		}
	}
	return out
}

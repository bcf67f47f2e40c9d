package telnyx

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// Segment budgets: Telnyx sends at most 10 segments as one message; a
// concatenated segment holds 153 GSM-7 septets or 67 UCS-2 code units.
const (
	MaxSegments = 10
	MaxGSM7     = MaxSegments * 153 // septets; an escaped character takes 2
	MaxUCS2     = MaxSegments * 67  // UTF-16 code units; an emoji takes 2
)

// sent is the part of a sent message the adapter reads.
type sent struct {
	ID string `json:"id"`
}

// Address is to as conversations key it: an E.164 number.
func (a *Adapter) Address(to string) (string, error) {
	s := strings.TrimSpace(to)
	if !e164RE.MatchString(s) {
		return "", fmt.Errorf("%q is not a phone number in E.164 form (like +15551234567)", clip(to, 40))
	}
	return s, nil
}

// Send delivers msg.Text to msg.To (else the thread, which is the
// counterpart's number): POST /v2/messages from the connection's number,
// or /v2/messages/number_pool with its messaging profile. A text over 10
// segments goes out as several messages (Split); the provider id is the
// first's. When a later part fails, the error is returned and a retry
// sends every part again.
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	to := msg.To
	if to == "" {
		to = msg.ThreadKey
	}
	switch {
	case to == "":
		return channels.SendResult{}, channels.Permanent("telnyx: send message: no recipient (the message has neither a phone number nor a thread)")
	case !e164RE.MatchString(to):
		return channels.SendResult{}, channels.Permanent("telnyx: send message: %q is not a phone number in E.164 form (like +15551234567)", clip(to, 40))
	case strings.TrimSpace(msg.Text) == "":
		return channels.SendResult{}, channels.Permanent("telnyx: send message: the message has no text")
	}
	path := "/messages"
	base := map[string]any{"to": to}
	if a.cfg.From != "" {
		base["from"] = a.cfg.From
	} else {
		path = "/messages/number_pool"
		base["messaging_profile_id"] = a.cfg.MessagingProfileID
	}
	if a.cfg.configure() && a.conn.WebhookURL != "" {
		// The delivery reports of this message come here even when the
		// profile's webhook was changed since.
		base["webhook_url"] = a.conn.WebhookURL
	}
	var first string
	for i, part := range Split(msg.Text) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		body := make(map[string]any, len(base)+1)
		for k, v := range base {
			body[k] = v
		}
		body["text"] = part
		var s sent
		if err := a.call(ctx, "send message", http.MethodPost, path, body, &s); err != nil {
			return channels.SendResult{}, err
		}
		if i == 0 {
			if s.ID == "" {
				return channels.SendResult{}, channels.Transient(0, "telnyx: send message: the answer has no message id")
			}
			first = s.ID
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// gsm7 is the GSM-7 alphabet as Telnyx encodes it (its list of
// widely supported characters), with the cost in septets; a text with any
// other character goes out in UCS-2.
var gsm7 = func() map[rune]int {
	m := map[rune]int{'\n': 1, '\r': 1}
	for r := rune(0x20); r <= 0x7E; r++ {
		if r != '`' {
			m[r] = 1
		}
	}
	for _, r := range "£¥èéùìòØøÅåßÉ¡ÄÖÑÜ¿äöñüà" {
		m[r] = 1
	}
	for _, r := range "~^|\\{}[]" {
		m[r] = 2
	}
	return m
}()

// isGSM7 reports whether s goes out in GSM-7.
func isGSM7(s string) bool {
	for _, r := range s {
		if gsm7[r] == 0 {
			return false
		}
	}
	return true
}

// Split cuts s into parts that each fit in MaxSegments segments: MaxGSM7
// septets when s is all GSM-7, else MaxUCS2 UTF-16 code units. A part ends
// after the last line break, else the last space, of its final quarter
// when there is one, and never inside a character; the parts joined are s.
func Split(s string) []string {
	if isGSM7(s) {
		return channels.Split(s, MaxGSM7, func(r rune) int { return gsm7[r] })
	}
	return channels.Split(s, MaxUCS2, channels.UTF16Units)
}

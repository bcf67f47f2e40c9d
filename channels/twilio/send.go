package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// MaxText is the longest Body of one message, in characters (Twilio's
// limit; counted here in UTF-16 code units, as carriers count).
const MaxText = 1600

// sentMessage is the part of a created Message the adapter reads.
type sentMessage struct {
	SID    string `json:"sid"`
	Status string `json:"status"`
}

// Address is to as conversations key it: the E.164 number, without
// WhatsApp's "whatsapp:" prefix (inbound senders are keyed so too).
func (a *Adapter) Address(to string) (string, error) {
	s := strings.TrimPrefix(strings.TrimSpace(to), "whatsapp:")
	if !e164RE.MatchString(s) {
		return "", fmt.Errorf("%q is not a phone number in E.164 form (+15551234567)", to)
	}
	return s, nil
}

// recipient is the E.164 number a message goes to: the thread's (a
// conversation's counterpart), else To; "whatsapp:" taken off.
func recipient(op, thread, to string) (string, error) {
	s := thread
	if s == "" {
		s = to
	}
	s = strings.TrimPrefix(s, "whatsapp:")
	if !e164RE.MatchString(s) {
		return "", channels.Permanent("twilio: %s: %q is not a phone number in E.164 form (+15551234567)", op, s)
	}
	return s, nil
}

// messageForm is the Messages.json form of a message to number, without
// its content.
func (a *Adapter) messageForm(number string) url.Values {
	form := url.Values{"To": {a.address(number)}}
	if a.cfg.service() {
		form.Set("MessagingServiceSid", a.cfg.From)
	} else {
		form.Set("From", a.address(a.cfg.From))
	}
	if a.conn.WebhookURL != "" {
		form.Set("StatusCallback", a.conn.WebhookURL)
	}
	return form
}

// create POSTs one message and returns its sid.
func (a *Adapter) create(ctx context.Context, form url.Values) (string, error) {
	var m sentMessage
	if err := a.call(ctx, "send message", http.MethodPost, a.accountURL("/Messages.json"), form, &m); err != nil {
		return "", err
	}
	if !messageRE.MatchString(m.SID) {
		return "", channels.Transient(0, "twilio: send message: the answer has no message sid")
	}
	return m.SID, nil
}

// Send delivers msg.Text (Messages.json), asking for status callbacks at
// the connection's ingress. A text longer than MaxText goes out as several
// messages, split at a line break or space near the limit and never inside
// a character; the provider id returned is the first's. When a later part
// fails, the error is returned and a retry sends every part again (Twilio
// takes no idempotency key).
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	to, err := recipient("send message", msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	if msg.Template != nil {
		if a.channel != WhatsApp {
			return channels.SendResult{}, channels.Permanent("twilio: send message: templates are for WhatsApp connections")
		}
		form := a.messageForm(to)
		form.Set("ContentSid", msg.Template.ContentSID)
		if len(msg.Template.Variables) > 0 {
			vars, err := json.Marshal(msg.Template.Variables)
			if err != nil {
				return channels.SendResult{}, channels.Permanent("twilio: send message: template variables: %v", err)
			}
			form.Set("ContentVariables", string(vars))
		}
		sid, err := a.create(ctx, form)
		if err != nil {
			return channels.SendResult{}, err
		}
		return channels.SendResult{ProviderID: sid}, nil
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("twilio: send message: the message has no text")
	}
	var first string
	for i, part := range Split(msg.Text, MaxText) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		form := a.messageForm(to)
		form.Set("Body", part)
		sid, err := a.create(ctx, form)
		if err != nil {
			return channels.SendResult{}, err
		}
		if i == 0 {
			first = sid
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// Typing shows the WhatsApp typing indicator on the message being
// answered (v2 Indicators/Typing.json; it also marks that message read and
// lasts until the reply or 25 s). With no inbound message to show it on,
// it does nothing.
func (a *WhatsAppAdapter) Typing(ctx context.Context, t channels.Typing) error {
	if t.InReplyTo == "" {
		return nil
	}
	if !messageRE.MatchString(t.InReplyTo) {
		return channels.Permanent("twilio: typing: %q is not a Twilio message sid", t.InReplyTo)
	}
	form := url.Values{"messageId": {t.InReplyTo}, "channel": {"whatsapp"}}
	return a.call(ctx, "typing", http.MethodPost, a.opts.MessagingURL+"/v2/Indicators/Typing.json", form, nil)
}

// Split cuts s into parts of at most limit UTF-16 code units, never inside a
// character. A part ends after the last line break, else the last space,
// of its final quarter when there is one; the parts joined are s.
func Split(s string, limit int) []string {
	return channels.Split(s, max(limit, 2), channels.UTF16Units)
}

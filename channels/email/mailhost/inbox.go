package mailhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email/inbound"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entdomain "github.com/comm-gateway/comm/ent/domain"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/tenant"
	"github.com/lib/pq"
)

// inbox finds the live email connection receiving at rcpt. A plus-address
// (inbox+conv_...@domain) reaches its inbox and names the conversation an
// answer belongs to.
func (h *Host) inbox(ctx context.Context, rcpt string) (conn *ent.Connection, conversation string, err error) {
	addr := strings.ToLower(strings.TrimSpace(rcpt))
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || domain == "" {
		return nil, "", fmt.Errorf("%q: %w", rcpt, inbound.ErrUnknownRecipient)
	}
	if base, tag, ok := strings.Cut(local, "+"); ok {
		local = base
		if ident.Check(tag, ident.Conversation) == nil {
			conversation = tag
		}
	}
	c, err := h.read.Connection.Query().
		Where(entconn.InboxKey(messaging.InboxKey("email", local+"@"+domain))).
		Only(tenant.System(ctx))
	if ent.IsNotFound(err) {
		return nil, "", fmt.Errorf("%q: %w", rcpt, inbound.ErrUnknownRecipient)
	}
	if err != nil {
		return nil, "", fmt.Errorf("look up inbox %q: %w", rcpt, err)
	}
	return c, conversation, nil
}

// Backend is the gateway side of the SMTP listener: it accepts mail for
// the inboxes of this gateway and stores it as message.received.
func (h *Host) Backend() inbound.Backend { return mailBackend{h} }

type mailBackend struct{ h *Host }

// Accept knows the inbox addresses of every project.
func (b mailBackend) Accept(ctx context.Context, rcpt string) error {
	_, _, err := b.h.inbox(ctx, rcpt)
	return err
}

// Deliver stores the message once per accepted inbox. A failure answers
// 451 and the sending MTA retries; the Message-ID makes the retry store
// nothing twice.
func (b mailBackend) Deliver(ctx context.Context, rcpts []string, msg *inbound.Message) error {
	in := mailInbound(msg, "")
	for _, rcpt := range rcpts {
		c, conv, err := b.h.inbox(ctx, rcpt)
		if errors.Is(err, inbound.ErrUnknownRecipient) {
			continue // deleted between RCPT and DATA
		}
		if err != nil {
			return fmt.Errorf("%w: %v", inbound.ErrTransient, err)
		}
		in.ConversationID = conv
		if _, _, err := b.h.svc.Receive(ctx, c, in); err != nil {
			var e *messaging.Error
			if errors.As(err, &e) && e.Code == messaging.ErrInvalid.Code || isDataException(err) {
				// A retry would fail the same way: bounce, never 451 forever.
				return fmt.Errorf("%w: %v", inbound.ErrPermanent, err)
			}
			return fmt.Errorf("%w: store message for %s: %v", inbound.ErrTransient, c.ID, err)
		}
	}
	return nil
}

// isDataException reports whether err is the database refusing the values
// themselves (PostgreSQL SQLSTATE class 22: a byte sequence that is not
// UTF-8, a value out of range ...), which no retry fixes.
func isDataException(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code.Class() == "22"
}

// mailDetails is the details object of an email message.
type mailDetails struct {
	MessageID  string     `json:"message_id"`
	FromName   string     `json:"from_name,omitempty"`
	To         []string   `json:"to,omitempty"`
	Cc         []string   `json:"cc,omitempty"`
	InReplyTo  []string   `json:"in_reply_to,omitempty"`
	References []string   `json:"references,omitempty"`
	Date       *time.Time `json:"date,omitempty"`
	MailFrom   string     `json:"mail_from,omitempty"`
	// FullText is the whole text body, quoted history included, when it
	// differs from the message's text.
	FullText string              `json:"full_text,omitempty"`
	Auth     *inbound.AuthResult `json:"auth"`
	Warnings []string            `json:"warnings,omitempty"`
}

// mailInbound normalises a parsed email. The provider id is the Message-ID,
// or a digest of the raw message when it has none, so a redelivery stores
// nothing new. A new mail (no known References, no plus-address) starts a
// conversation of its own, keyed by its id.
func mailInbound(msg *inbound.Message, conversation string) channels.Inbound {
	id := msg.MessageID
	if id == "" {
		id = "sha256-" + msg.Digest + "@comm.invalid"
	}
	d := mailDetails{
		MessageID: id, FromName: msg.FromName, To: msg.To, Cc: msg.Cc, InReplyTo: msg.InReplyTo,
		References: msg.References, MailFrom: msg.MailFrom, Auth: &msg.Auth, Warnings: msg.Warnings,
	}
	if full := strings.TrimRight(lf(msg.FullText), "\n"); full != strings.TrimRight(msg.Text, "\n") {
		d.FullText = full
	}
	if !msg.Date.IsZero() {
		t := msg.Date.UTC()
		d.Date = &t
	}
	details, _ := json.Marshal(d)
	// The nearest reference last: References is oldest first; In-Reply-To
	// names the parent.
	refs := append([]string(nil), msg.References...)
	for _, id := range msg.InReplyTo {
		if !slices.Contains(refs, id) {
			refs = append(refs, id)
		}
	}
	in := channels.Inbound{
		ProviderID: id, ThreadKey: id, Sender: msg.From, Text: msg.Text, HTML: msg.HTML,
		References: refs, ConversationID: conversation, Details: details,
	}
	if in.HTML != nil {
		html := lf(*in.HTML)
		in.HTML = &html
	}
	// The parser made header text one line (inbound.Message.sanitize).
	if subj := msg.Subject; subj != "" {
		in.Subject = &subj
	}
	for _, a := range msg.Attachments {
		in.Attachments = append(in.Attachments, channels.Attachment{
			Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Inline: a.Inline, Data: a.Data,
		})
	}
	return in
}

// DeliverLocal hands mail from an inbox of this gateway to another one
// without a relay: parsed and stored exactly as if it had come over SMTP.
// It reports false for an address on a domain this gateway does not
// receive for.
func (h *Host) DeliverLocal(ctx context.Context, from, rcpt string, raw []byte) (bool, error) {
	c, conv, err := h.inbox(ctx, rcpt)
	if errors.Is(err, inbound.ErrUnknownRecipient) {
		hosted, herr := h.hostsMailDomain(ctx, rcpt)
		if herr != nil {
			return false, fmt.Errorf("%w: %v", channels.ErrTransient, herr)
		}
		if hosted {
			return false, fmt.Errorf("no inbox %s on this gateway: %w", rcpt, channels.ErrPermanent)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %v", channels.ErrTransient, err)
	}
	p := inbound.Parser{MaxBytes: h.mail.MaxMessageBytes, MaxAttachmentBytes: h.mail.MaxAttachmentBytes}
	msg, err := p.Parse(bytes.NewReader(raw))
	if err != nil {
		return false, fmt.Errorf("%v: %w", err, channels.ErrPermanent)
	}
	msg.MailFrom = from
	sum := sha256.Sum256(raw)
	msg.Digest = hex.EncodeToString(sum[:])
	msg.Auth = inbound.AuthResult{SPF: inbound.Pass, DKIM: inbound.None, DMARC: inbound.None,
		Reason: "delivered inside this gateway from its inbox " + from}
	if _, _, err := h.svc.Receive(ctx, c, mailInbound(msg, conv)); err != nil {
		return false, fmt.Errorf("store message for %s: %v: %w", c.ID, err, channels.ErrTransient)
	}
	return true, nil
}

// hostsMailDomain reports whether mail for addr's domain is this gateway's
// to receive: the mail domain, or a verified custom domain.
func (h *Host) hostsMailDomain(ctx context.Context, addr string) (bool, error) {
	_, domain, _ := strings.Cut(strings.ToLower(strings.TrimSpace(addr)), "@")
	switch domain {
	case "":
		return false, nil
	case h.mail.Domain:
		return true, nil
	}
	return h.read.Domain.Query().
		Where(entdomain.InboundDomain(domain), entdomain.StatusEQ(entdomain.StatusVerified)).
		Exist(tenant.System(ctx))
}

// lf turns CRLF line endings into LF, as the message text has them.
func lf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

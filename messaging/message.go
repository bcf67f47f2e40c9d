package messaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entatt "github.com/comm-gateway/comm/ent/attachment"
	entblob "github.com/comm-gateway/comm/ent/blob"
	entconv "github.com/comm-gateway/comm/ent/conversation"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Message is a message as the API shows it.
type Message = api.Message

// AttachmentInfo describes an attachment of a message.
type AttachmentInfo = api.AttachmentInfo

// AttachmentsOf decodes the attachment list a message row keeps; a list
// that does not decode shows none.
func AttachmentsOf(raw json.RawMessage) []AttachmentInfo {
	if len(raw) == 0 {
		return nil
	}
	var out []AttachmentInfo
	_ = json.Unmarshal(raw, &out)
	return out
}

func messageOf(m *ent.Message) *Message {
	out := &Message{
		ID: m.ID, ConversationID: m.ConversationID, ConnectionID: m.ConnectionID, Channel: m.Channel,
		Direction: string(m.Direction), Status: string(m.Status), Sender: m.Sender, Recipient: nonEmpty(m.Recipient),
		Subject: m.Subject, Text: m.Text, HTML: m.HTML, InReplyTo: m.InReplyTo, Error: m.Error,
		Attempts: m.Attempts, CreatedAt: m.CreatedAt.UTC(), Delivery: DeliveryOf(m),
		Attachments: AttachmentsOf(m.Attachments), Details: m.Details, Unbilled: m.Unbilled,
	}
	if m.SentAt != nil {
		t := m.SentAt.UTC()
		out.SentAt = &t
	}
	return out
}

// DefaultEventBodyBytes is the default cap on each of the text, html and
// subject of a message in an event, and on its details.
const DefaultEventBodyBytes = 64 << 10

// envelope bounds what an outsider's message may add to an event: subject,
// text and html are each cut (between characters) so that each takes at
// most s.eventBody bytes of the event's JSON,
// details.full_text (the whole body, quoted history included) is never
// carried, and details larger than the cap are left out. Anything cut or
// left out sets Truncated; the message itself is stored whole.
func (s *Service) envelope(m *api.ReceivedMessage) {
	limit := s.eventBody
	cut := func(v string) string {
		if len(v) <= limit/6 { // fits however it is escaped
			return v
		}
		out, cut := truncateJSON(v, limit)
		m.Truncated = m.Truncated || cut
		return out
	}
	m.Text = cut(m.Text)
	if m.HTML != nil {
		h := cut(*m.HTML)
		m.HTML = &h
	}
	if m.Subject != nil {
		subj := cut(*m.Subject)
		m.Subject = &subj
	}
	if len(m.Details) == 0 {
		return
	}
	if bytes.Contains(m.Details, []byte(`"full_text"`)) {
		var d map[string]json.RawMessage
		if json.Unmarshal(m.Details, &d) == nil {
			delete(d, "full_text")
			if b, err := json.Marshal(d); err == nil {
				m.Details = b
			}
		}
	}
	if len(m.Details) > limit {
		m.Details, m.Truncated = nil, true
	}
}

// truncateJSON cuts v, between characters, to the longest prefix whose
// JSON string encoding (as encoding/json writes it: <, > and & as \u003c
// ..., control characters escaped) takes at most n bytes, and reports
// whether it cut.
func truncateJSON(v string, n int) (string, bool) {
	size := 0
	for i, r := range v {
		var w int
		switch {
		case r == utf8.RuneError:
			w = 6 // \ufffd, for an invalid byte
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			w = 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			w = 6
		default:
			w = utf8.RuneLen(r)
		}
		if size+w > n {
			return v[:i], true
		}
		size += w
	}
	return v, false
}

// messageEvent is the data of message.received, message.sent and
// message.failed: the scope and the message. message.received carries the
// spec's message object; message.sent and message.failed carry the same
// fields plus recipient, in_reply_to, status, sent_at, error and attempts.
type messageEvent struct {
	CustomerID string `json:"customer_id"`
	AgentID    string `json:"agent_id"`
	Message    any    `json:"message"`
}

// Receive stores an inbound message of a connection and appends
// message.received, in one transaction. A repeat of a provider id already
// stored stores nothing and appends nothing; it returns the stored message
// and duplicate=true. The tenant is the connection's, never the payload's.
//
// An item with a Receipt is the provider's report on an outbound message
// instead (Service.Receipt): Receive returns that message when the
// connection has it, with duplicate=true when the report changed nothing.
func (s *Service) Receive(ctx context.Context, c *ent.Connection, in channels.Inbound) (msg *Message, duplicate bool, err error) {
	if in.Receipt != nil {
		res, err := s.Receipt(ctx, c, *in.Receipt)
		return res.Message, res.Outcome != ReceiptApplied, err
	}
	ctx = tenant.WithProject(ctx, c.ProjectID)
	in = normalInbound(in)
	convID, err := s.threadOf(ctx, c, in)
	if err != nil {
		return nil, false, err
	}
	// Messages of different conversations are stored side by side; those
	// of one conversation (the rows they update) one after another.
	key := convID
	if key == "" {
		key = "thread\x00" + c.ID + "\x00" + in.ThreadKey
	}
	var (
		stored *ent.Message
		conv   string
	)
	_, err = s.log.WriteKeyed(ctx, c.ProjectID, key, func(tx *stream.Tx) error {
		var err error
		stored, conv, err = s.storeInbound(tx, c, in, convID)
		return err
	})
	if err == nil && convID == "" {
		s.keepThread(c, in.ThreadKey, conv)
	}
	if err != nil && isRepeat(err) {
		// A repeat delivery (here or on another replica).
		existing, qerr := s.read.Message.Query().
			Where(entmsg.ConnectionID(c.ID), entmsg.ProviderMessageID(in.ProviderID)).Only(ctx)
		if qerr == nil {
			return messageOf(existing), true, nil
		}
	}
	if err != nil {
		return nil, false, err
	}
	return messageOf(stored), false, nil
}

// isRepeat reports whether err is a unique index refusing a row: a
// message stored before (ent's error, or the database's from a bulk
// statement).
func isRepeat(err error) bool {
	return ent.IsConstraintError(err) || sqlgraph.IsUniqueConstraintError(err)
}

// MaxReferences bounds the thread references kept on a message.
const MaxReferences = 20

// normalInbound fills in the thread key (the sender's when the provider
// names none) and bounds the references kept.
func normalInbound(in channels.Inbound) channels.Inbound {
	if in.ThreadKey == "" {
		in.ThreadKey = in.Sender
	}
	if len(in.References) > MaxReferences {
		in.References = append(in.References[:1:1], in.References[len(in.References)-MaxReferences+1:]...)
	}
	return in
}

// ReceiveBatch stores ins in order, each as Receive does, in one
// transaction: a session's backlog costs one commit, not one per message.
// When one of them was stored before (a replay after a resume), the batch
// is undone and each is stored on its own, so the repeats store nothing.
// A message answering one earlier in the batch joins its conversation.
func (s *Service) ReceiveBatch(ctx context.Context, c *ent.Connection, ins []channels.Inbound) error {
	if len(ins) == 0 {
		return nil
	}
	if len(ins) == 1 || slices.ContainsFunc(ins, func(in channels.Inbound) bool { return in.Receipt != nil }) {
		// One, or reports among them: each on its own, in order.
		for _, in := range ins {
			if _, _, err := s.Receive(ctx, c, in); err != nil {
				return err
			}
		}
		return nil
	}
	ctx = tenant.WithProject(ctx, c.ProjectID)
	ins = slices.Clone(ins)
	convs := make([]string, len(ins))
	for i := range ins {
		ins[i] = normalInbound(ins[i])
		var err error
		if convs[i], err = s.threadOf(ctx, c, ins[i]); err != nil {
			return err
		}
	}
	into := make([]string, len(ins)) // the conversation each joined
	_, err := s.log.Write(ctx, c.ProjectID, func(tx *stream.Tx) error {
		convOf := make(map[string]string, len(ins)) // provider id -> conversation, in this batch
		for i, in := range ins {
			conv := convs[i]
			if conv == "" {
				for _, r := range in.References {
					if id, ok := convOf[r]; ok {
						conv = id // the nearest wins, as in threadOf
					}
				}
			}
			_, conv, err := s.storeInbound(tx, c, in, conv)
			if err != nil {
				return err
			}
			convOf[in.ProviderID] = conv
			into[i] = conv
		}
		return nil
	})
	if err == nil {
		for i, in := range ins {
			if convs[i] == "" {
				s.keepThread(c, in.ThreadKey, into[i])
			}
		}
	}
	if err != nil && isRepeat(err) {
		for _, in := range ins {
			if _, _, err := s.Receive(ctx, c, in); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// storeInbound stores one inbound message in tx, in conversation conv (or
// the thread's, started if new, when conv is empty), and appends
// message.received. A provider id stored before fails with a constraint
// error, which undoes the write.
func (s *Service) storeInbound(tx *stream.Tx, c *ent.Connection, in channels.Inbound, conv string) (*ent.Message, string, error) {
	tctx := tx.Context()
	now := s.now()
	var err error
	if conv == "" {
		// A thread seen before: its conversation's id is known here
		// (Receive keeps it once committed; ids never change).
		conv, _ = s.threads.get(threadKey{c.ID, in.ThreadKey})
	}
	if conv != "" {
		err = tx.Bulk(&touchConversationBulk, now, conv, c.ProjectID)
	} else {
		conv, err = s.touchConversation(tctx, tx.Client(), c, in.ThreadKey, in.Sender, in.Subject, now)
	}
	if err != nil {
		return nil, "", err
	}
	msgID := ident.New(ident.Message)
	var atts []AttachmentInfo
	for _, a := range in.Attachments {
		cl := tx.Client()
		blob, err := putBlob(tctx, cl, a.Data, now)
		if err != nil {
			return nil, "", err
		}
		att, err := cl.Attachment.Create().SetID(ident.New(ident.Attachment)).SetMessageID(msgID).
			SetFilename(a.Filename).SetContentType(a.ContentType).SetContentID(a.ContentID).SetInline(a.Inline).
			SetSize(int64(len(a.Data))).SetData([]byte{}).SetBlobID(blob).SetCreatedAt(now).Save(tctx)
		if err != nil {
			return nil, "", err
		}
		atts = append(atts, AttachmentInfo{ID: att.ID, Filename: a.Filename, ContentType: a.ContentType,
			Size: att.Size, Inline: a.Inline, ContentID: nonEmpty(a.ContentID)})
	}
	// A paid channel's message is charged; one the credit does not cover
	// is stored all the same (nothing is lost), marked unbilled.
	billed, err := s.chargeInbound(tx, c, msgID)
	if err != nil {
		return nil, "", err
	}
	stored := &ent.Message{ID: msgID, CreatedAt: now, ProjectID: c.ProjectID, ConversationID: conv,
		ConnectionID: c.ID, Channel: c.Channel, Direction: entmsg.DirectionInbound, Status: entmsg.StatusReceived,
		ProviderMessageID: &in.ProviderID, Sender: in.Sender, Recipient: c.Address, Subject: in.Subject,
		Text: in.Text, HTML: in.HTML, Unbilled: !billed}
	if len(in.References) > 0 {
		stored.References = in.References
	}
	if len(in.Details) > 0 {
		stored.Details = in.Details
	}
	if len(atts) > 0 {
		stored.Attachments, _ = json.Marshal(atts)
	}
	// No look-up first: the unique (connection, provider id) index
	// refuses a repeat, the write is undone, and Receive reads the stored
	// message.
	if err := tx.Bulk(&insertInboundBulk, inboundRow(stored)...); err != nil {
		return nil, "", err
	}
	ev := api.ReceivedMessage{ID: stored.ID, ConversationID: conv, ConnectionID: c.ID, Channel: c.Channel,
		Sender: in.Sender, Subject: in.Subject, Text: in.Text, HTML: in.HTML,
		Attachments: atts, Details: in.Details, Unbilled: !billed}
	s.envelope(&ev)
	return stored, conv, tx.Append(stream.MessageReceived, messageEvent{CustomerID: c.CustomerID, AgentID: c.AgentID, Message: ev})
}

// touchConversationBulk records a conversation's latest message; of
// several in one batch, the latest time wins. (The ANY lets PostgreSQL
// find the rows by primary key: without it, it does not know how few
// rows unnest yields and may scan the table.)
var touchConversationBulk = stream.Bulk{
	Row: "UPDATE conversations SET last_message_at = ? WHERE id = ? AND project_id = ?",
	Rows: `UPDATE conversations AS c SET last_message_at = v.t
		FROM (SELECT id, p, max(t) AS t FROM unnest($1::timestamptz[], $2::text[], $3::text[]) AS u(t, id, p) GROUP BY id, p) AS v
		WHERE c.id = ANY($2::text[]) AND c.id = v.id AND c.project_id = v.p`,
}

// insertInboundBulk stores an inbound message (inboundRow's columns): the
// one row every inbound message writes, so on PostgreSQL a batch's
// messages are inserted in one statement rather than one each.
var insertInboundBulk = stream.Bulk{
	Row: `INSERT INTO messages (id, created_at, project_id, conversation_id, connection_id, channel, direction, status,
		provider_message_id, sender, recipient, subject, text, html, "references", attachments, details, attempts, unbilled)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	Rows: `INSERT INTO messages (id, created_at, project_id, conversation_id, connection_id, channel, direction, status,
		provider_message_id, sender, recipient, subject, text, html, "references", attachments, details, attempts, unbilled)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::jsonb[], $16::jsonb[], $17::jsonb[],
			$18::bigint[], $19::bool[])`,
}

// inboundRow is m's values for insertInboundBulk, as ent would store them
// (JSON marshalled, NULL for what is not set).
func inboundRow(m *ent.Message) []any {
	var refs, atts, details any
	if m.References != nil {
		refs, _ = json.Marshal(m.References)
	}
	if m.Attachments != nil {
		atts = []byte(m.Attachments)
	}
	if m.Details != nil {
		details, _ = json.Marshal(m.Details)
	}
	return []any{m.ID, m.CreatedAt, m.ProjectID, m.ConversationID, m.ConnectionID, m.Channel, string(m.Direction),
		string(m.Status), nilIfNil(m.ProviderMessageID), m.Sender, m.Recipient, nilIfNil(m.Subject), m.Text,
		nilIfNil(m.HTML), refs, atts, details, int64(m.Attempts), m.Unbilled}
}

// nilIfNil is *p, or nil (NULL) when p is nil.
func nilIfNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// threadKey names a thread of a connection, whose conversation is kept
// in Service.threads.
type threadKey struct{ connection, thread string }

// maxKeptThreadKey bounds the thread keys kept in Service.threads, so
// the cache's bytes are bounded as well as its entries; a longer key's
// messages find their conversation with the upsert.
const maxKeptThreadKey = 256

// keepThread remembers conv as the conversation of c's thread, once a
// message joining it committed.
func (s *Service) keepThread(c *ent.Connection, thread, conv string) {
	if len(thread) <= maxKeptThreadKey && conv != "" {
		s.threads.put(threadKey{c.ID, thread}, conv)
	}
}

// threadOf finds the existing conversation an inbound message continues:
// the conversation of the nearest of its references stored on the same
// connection, else the one its provider address named. "" means thread by
// ThreadKey.
func (s *Service) threadOf(ctx context.Context, c *ent.Connection, in channels.Inbound) (string, error) {
	if len(in.References) > 0 {
		refs := in.References
		if len(refs) > 100 {
			refs = refs[len(refs)-100:]
		}
		ms, err := s.read.Message.Query().
			Where(entmsg.ConnectionID(c.ID), entmsg.ProviderMessageIDIn(refs...)).
			Select(entmsg.FieldProviderMessageID, entmsg.FieldConversationID).All(ctx)
		if err != nil {
			return "", err
		}
		best, bestAt := "", -1
		for _, m := range ms {
			for i, r := range refs {
				if m.ProviderMessageID != nil && *m.ProviderMessageID == r && i > bestAt {
					best, bestAt = m.ConversationID, i
				}
			}
		}
		if best != "" {
			return best, nil
		}
	}
	if in.ConversationID != "" && ident.Check(in.ConversationID, ident.Conversation) == nil {
		ok, err := s.read.Conversation.Query().
			Where(entconv.ID(in.ConversationID), entconv.ConnectionID(c.ID)).Exist(ctx)
		if err != nil {
			return "", err
		}
		if ok {
			return in.ConversationID, nil
		}
	}
	return "", nil
}

// touchConversation finds or starts the conversation of a thread and
// records its latest activity, in one statement.
func (s *Service) touchConversation(ctx context.Context, cl *ent.Client, c *ent.Connection, thread, participant string, subject *string, now time.Time) (string, error) {
	return cl.Conversation.Create().SetConnectionID(c.ID).SetThreadKey(thread).SetParticipant(participant).
		SetNillableSubject(subject).SetLastMessageAt(now).SetCreatedAt(now).
		OnConflictColumns(entconv.FieldProjectID, entconv.FieldConnectionID, entconv.FieldThreadKey).
		UpdateLastMessageAt().ID(ctx)
}

// address puts to in the channel's canonical form (channels.Addresser).
// A connection whose adapter cannot be built here keeps to as it is.
func (s *Service) address(ctx context.Context, c *ent.Connection, to string) (string, error) {
	a, err := s.adapter(ctx, c)
	if err != nil {
		return to, nil
	}
	if ad, ok := a.(channels.Addresser); ok {
		canon, err := ad.Address(to)
		if err != nil {
			return "", Invalid("to", "%v", err)
		}
		return canon, nil
	}
	return to, nil
}

// allowSend applies the channel's own rules (channels.SendGate) to an
// outbound message before it is queued. A connection whose adapter cannot
// be built here queues anyway: its delivery reports why.
func (s *Service) allowSend(ctx context.Context, p *Principal, c *ent.Connection, to string) error {
	a, err := s.adapter(ctx, c)
	if err != nil {
		return nil
	}
	if g, ok := a.(channels.SendGate); ok {
		return g.AllowSend(ctx, channels.SendRequest{To: to, SignedIn: p.SignedIn()})
	}
	return nil
}

// Injected is what POST /v1/connections/{id}/inbound did: stored a
// message (Duplicate when its id repeated an earlier delivery), or applied
// a receipt (Receipt set; Message is the outbound message it is about,
// nil while the report waits for the send).
type Injected struct {
	Message   *Message
	Duplicate bool
	Receipt   *ReceiptResult
}

// Inject delivers a message into a connection whose channel takes
// messages from the API caller (channels.Injector: the test channel) as if
// a person had sent it (POST /v1/connections/{id}/inbound), or a receipt
// on one of its outbound messages as if the provider had reported it. A
// receipt naming no message of the connection is not found.
func (s *Service) Inject(ctx context.Context, connID string, body []byte) (*Injected, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	c, err := s.receiving(ctx, connID)
	if err != nil {
		return nil, err
	}
	a, err := s.adapter(ctx, c)
	if err != nil {
		return nil, err
	}
	inj, ok := a.(channels.Injector)
	if !ok {
		return nil, Invalid("connection", "inbound injection works only on test connections; %s is a %s connection", c.ID, c.Channel)
	}
	ins, err := inj.Inject(body)
	if err != nil {
		return nil, injectError(err)
	}
	if len(ins) != 1 {
		return nil, Invalid("body", "one message per request")
	}
	if r := ins[0].Receipt; r != nil {
		res, err := s.Receipt(ctx, c, *r)
		switch {
		case err != nil:
			return nil, err
		case res.Outcome == ReceiptUnknown:
			return nil, fault.NotFoundf("no sent message of connection %s has the provider id %q", c.ID, r.MessageID)
		case res.Outcome == ReceiptFull:
			return nil, fault.RateLimited(PendingReceiptAge,
				"connection %s has %d receipts waiting for their sends already; this one was dropped", c.ID, s.pendingReceipts)
		}
		return &Injected{Message: res.Message, Duplicate: res.Outcome == ReceiptUnchanged, Receipt: &res}, nil
	}
	m, dup, err := s.Receive(ctx, c, ins[0])
	if err != nil {
		return nil, err
	}
	return &Injected{Message: m, Duplicate: dup}, nil
}

// injectError names the field of an injected message that is wrong: the
// adapter's own field errors, and the JSON decoder's wrong types and
// unknown fields.
func injectError(err error) error {
	var (
		fe  *channels.ConfigError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &fe):
		return Invalid(fe.Field, "%s", fe.Msg)
	case errors.As(err, &typ) && typ.Field != "":
		return Invalid(typ.Field, "must be %s, not %s", typ.Type, typ.Value)
	}
	if _, field, ok := strings.Cut(err.Error(), "json: unknown field "); ok {
		field = strings.Trim(field, `"`)
		return Invalid(field, "unknown field %q", field)
	}
	return fault.Invalid("", "%s", err.Error())
}

// Message returns one of the caller's messages.
func (s *Service) Message(ctx context.Context, id string) (*Message, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	m, err := s.message(ctx, id)
	if err != nil {
		return nil, err
	}
	return messageOf(m), nil
}

func (s *Service) message(ctx context.Context, id string) (*ent.Message, error) {
	if ident.Check(id, ident.Message) != nil {
		return nil, NotFound("message", id)
	}
	m, err := s.read.Message.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, NotFound("message", id)
	}
	return m, err
}

// Limits of outbound messages.
const (
	MaxTextBytes    = 64 << 10
	MaxSubjectBytes = 998
	MaxRecipient    = 320
)

// SendInput is an outbound message: the body of POST /v1/messages/{id}/reply
// (where ConnectionID and To come from the message answered) and of
// POST /v1/messages.
type SendInput struct {
	ConnectionID string  `json:"connection_id"`
	To           string  `json:"to"`
	Text         string  `json:"text"`
	HTML         *string `json:"html"`
	Subject      *string `json:"subject"`
	// Template is a provider-approved template sent in place of text
	// (WhatsApp through Twilio: {"content_sid":"HX...","variables":{...}}; hosted
	// WhatsApp: {"name":"...","language":"en_US","variables":{...}}),
	// on connections whose adapter is a channels.TemplateSender.
	Template *channels.Template `json:"template"`
}

func (in *SendInput) validate() error {
	switch {
	case in.Template != nil && (in.Text != "" || in.HTML != nil):
		return Invalid("template", "give text or a template, not both (the template is the message)")
	case in.Template == nil && in.Text == "" && (in.HTML == nil || *in.HTML == ""):
		return Invalid("text", "text or html is required")
	case len(in.Text) > MaxTextBytes:
		return Invalid("text", "at most %d bytes", MaxTextBytes)
	case !utf8.ValidString(in.Text):
		return Invalid("text", "must be valid UTF-8")
	case in.HTML != nil && len(*in.HTML) > MaxTextBytes:
		return Invalid("html", "at most %d bytes", MaxTextBytes)
	case in.Subject != nil && (len(*in.Subject) > MaxSubjectBytes || strings.ContainsFunc(*in.Subject, isControl)):
		return Invalid("subject", "at most %d bytes, one line", MaxSubjectBytes)
	}
	return nil
}

// checkTemplate refuses a template on a connection that takes none, and
// one its adapter finds wrong, naming the field.
func (s *Service) checkTemplate(ctx context.Context, c *ent.Connection, t *channels.Template) error {
	if t == nil {
		return nil
	}
	a, err := s.adapter(ctx, c)
	if err != nil {
		return Invalid("template", "connection %s cannot check templates now: %v", c.ID, err)
	}
	ts, ok := a.(channels.TemplateSender)
	if !ok {
		return Invalid("template", "templates are for WhatsApp connections (through Twilio, or hosted); %s is a %s connection", c.ID, c.Channel)
	}
	if err := ts.CheckTemplate(*t); err != nil {
		var fe *channels.ConfigError
		if errors.As(err, &fe) {
			return Invalid(fe.Field, "%s", fe.Msg)
		}
		return Invalid("template", "%v", err)
	}
	return nil
}

// outboundDetails are the details stored on an outbound message: the
// template it sends, if any (the outbox reads it back).
type outboundDetails struct {
	Template *channels.Template `json:"template,omitempty"`
}

// templateOf returns the template an outbound message's details hold, or
// nil.
func templateOf(details json.RawMessage) *channels.Template {
	if len(details) == 0 {
		return nil
	}
	var d outboundDetails
	if json.Unmarshal(details, &d) != nil {
		return nil
	}
	return d.Template
}

// thread loads a message with its live connection and its conversation. A
// message whose connection was deleted is a conflict: it cannot be
// answered any more.
func (s *Service) thread(ctx context.Context, msgID string) (*ent.Message, *ent.Connection, *ent.Conversation, error) {
	orig, err := s.message(ctx, msgID)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := s.connection(ctx, orig.ConnectionID)
	if err != nil {
		return nil, nil, nil, fault.Conflict("connection %s of message %s was deleted", orig.ConnectionID, orig.ID)
	}
	conv, err := s.read.Conversation.Get(ctx, orig.ConversationID)
	if err != nil {
		return nil, nil, nil, err
	}
	return orig, c, conv, nil
}

// counterpart is the other side of a message: who an answer goes to.
func counterpart(m *ent.Message) string {
	if m.Direction == entmsg.DirectionOutbound {
		return m.Recipient
	}
	return m.Sender
}

// Reply answers a message in its conversation, through its connection. The
// reply is stored as queued and committed before any provider is called; a
// delivery worker sends it.
func (s *Service) Reply(ctx context.Context, msgID string, in SendInput) (*Message, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	orig, c, conv, err := s.thread(ctx, msgID)
	if err != nil {
		return nil, err
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := s.checkTemplate(ctx, c, in.Template); err != nil {
		return nil, err
	}
	to := counterpart(orig)
	if err := s.checkBound(ctx, c, to); err != nil {
		return nil, err
	}
	if err := s.allowSend(ctx, p, c, to); err != nil {
		return nil, err
	}
	if in.Subject == nil && orig.Subject != nil && *orig.Subject != "" {
		subj := *orig.Subject
		if !strings.HasPrefix(strings.ToLower(subj), "re:") {
			subj = "Re: " + subj
		}
		in.Subject = &subj
	}
	var refs []string
	if orig.ProviderMessageID != nil {
		refs = append(append(refs, orig.References...), *orig.ProviderMessageID)
		if len(refs) > MaxReferences {
			refs = append(refs[:1:1], refs[len(refs)-MaxReferences+1:]...)
		}
	}
	return s.enqueue(ctx, p, c, conv, to, orig.ID, refs, in)
}

// Send starts (or continues) a conversation with a recipient proactively.
func (s *Service) Send(ctx context.Context, in SendInput) (*Message, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if in.ConnectionID == "" {
		return nil, Invalid("connection_id", "required")
	}
	c, err := s.connection(ctx, in.ConnectionID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, Invalid("connection_id", "no connection %q", in.ConnectionID)
		}
		return nil, err
	}
	switch {
	case strings.TrimSpace(in.To) == "":
		return nil, Invalid("to", "required")
	case len(in.To) > MaxRecipient || strings.ContainsFunc(in.To, isControl):
		return nil, Invalid("to", "at most %d bytes, no control characters", MaxRecipient)
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := s.checkTemplate(ctx, c, in.Template); err != nil {
		return nil, err
	}
	if in.To, err = s.address(ctx, c, in.To); err != nil {
		return nil, err
	}
	if err := s.checkBound(ctx, c, in.To); err != nil {
		return nil, err
	}
	if err := s.allowSend(ctx, p, c, in.To); err != nil {
		return nil, err
	}
	return s.enqueue(ctx, p, c, nil, in.To, "", nil, in)
}

// enqueue stores an outbound message as queued in conv (nil: the
// conversation with to, started if need be).
func (s *Service) enqueue(ctx context.Context, p *Principal, c *ent.Connection, conv *ent.Conversation, to, inReplyTo string, refs []string, in SendInput) (*Message, error) {
	var stored *ent.Message
	now := s.now()
	sender := c.Address
	if sender == "" {
		sender = c.ID
	}
	msgID := ident.New(ident.Message)
	_, err := s.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		// A paid message is charged first: a balance that does not cover
		// it refuses the send (402) with nothing written.
		if b, ch := s.charge(c, ChargeOut, msgID); b != nil {
			if err := b.Charge(tx, *ch); err != nil {
				return err
			}
		}
		var convID string
		var err error
		if conv != nil {
			convID, err = conv.ID, cl.Conversation.UpdateOneID(conv.ID).SetLastMessageAt(now).Exec(tctx)
		} else {
			convID, err = s.touchConversation(tctx, cl, c, to, to, in.Subject, now)
		}
		if err != nil {
			return err
		}
		create := cl.Message.Create().SetID(msgID).SetConversationID(convID).SetConnectionID(c.ID).SetChannel(c.Channel).
			SetDirection(entmsg.DirectionOutbound).SetStatus(entmsg.StatusQueued).SetNextAttemptAt(now).
			SetSender(sender).SetRecipient(to).SetNillableSubject(in.Subject).SetText(in.Text).SetNillableHTML(in.HTML).
			SetCreatedAt(now)
		if inReplyTo != "" {
			create.SetInReplyTo(inReplyTo)
		}
		if len(refs) > 0 {
			create.SetReferences(refs)
		}
		if in.Template != nil {
			d, err := json.Marshal(outboundDetails{Template: in.Template})
			if err != nil {
				return err
			}
			create.SetDetails(d)
		}
		stored, err = create.Save(tctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wakeOutbox()
	return messageOf(stored), nil
}

// TypingLease is how long one typing call shows the indicator.
const TypingLease = 10 * time.Second

// TypingState is the answer to a typing request.
type TypingState = api.TypingState

// Typing shows a typing indicator in a message's conversation: a lease that
// ends on its own after TypingLease, or when a reply is sent.
func (s *Service) Typing(ctx context.Context, msgID string) (*TypingState, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	orig, c, conv, err := s.thread(ctx, msgID)
	if err != nil {
		return nil, err
	}
	until := s.now().Add(TypingLease)
	_, err = s.write(ctx, func(tx *stream.Tx) error {
		return tx.Client().Conversation.UpdateOneID(conv.ID).SetTypingUntil(until).Exec(tx.Context())
	})
	if err != nil {
		return nil, err
	}
	if a, err := s.adapter(ctx, c); err == nil {
		if t, ok := a.(channels.Typer); ok {
			ty := channels.Typing{ThreadKey: conv.ThreadKey, To: counterpart(orig)}
			if orig.Direction == entmsg.DirectionInbound && orig.ProviderMessageID != nil {
				ty.InReplyTo = *orig.ProviderMessageID
			}
			if err := t.Typing(ctx, ty); err != nil {
				s.logger.Warn("typing indicator", "connection", c.ID, "err", err)
			}
			if r, ok := a.(channels.TypingRefresher); ok {
				s.refreshTyping(ctx, t, ty, conv.ID, r.TypingEvery())
			}
		}
	}
	return &TypingState{ConversationID: conv.ID, TypingUntil: until}, nil
}

// refreshTyping shows the indicator again every so often while the
// conversation's typing lease lasts (a reply ends it), one refresher per
// conversation in this process.
func (s *Service) refreshTyping(ctx context.Context, t channels.Typer, ty channels.Typing, convID string, every time.Duration) {
	if every <= 0 {
		return
	}
	if _, running := s.typing.LoadOrStore(convID, true); running {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer s.typing.Delete(convID)
		for {
			time.Sleep(every)
			conv, err := s.read.Conversation.Get(ctx, convID)
			if err != nil || conv.TypingUntil == nil || !conv.TypingUntil.After(s.now().Add(every/2)) {
				return
			}
			tctx, cancel := context.WithTimeout(ctx, every)
			if err := t.Typing(tctx, ty); err != nil {
				s.logger.Warn("typing indicator", "conversation", convID, "err", err)
			}
			cancel()
		}
	}()
}

// Attachment is a stored attachment with its bytes.
type Attachment struct {
	AttachmentInfo
	Data []byte
}

// Attachment returns an attachment of one of the caller's messages.
func (s *Service) Attachment(ctx context.Context, msgID, id string) (*Attachment, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	if _, err := s.message(ctx, msgID); err != nil {
		return nil, err
	}
	if ident.Check(id, ident.Attachment) != nil {
		return nil, NotFound("attachment", id)
	}
	// The tenant-owned row decides who may download; the blob it names
	// is read only through it.
	a, err := s.read.Attachment.Query().Where(entatt.ID(id), entatt.MessageID(msgID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, NotFound("attachment", id)
	}
	if err != nil {
		return nil, err
	}
	data := a.Data
	if a.BlobID != nil {
		b, err := s.read.Blob.Get(tenant.System(ctx), *a.BlobID)
		if err != nil {
			return nil, fmt.Errorf("attachment %s: blob %s: %w", a.ID, *a.BlobID, err)
		}
		data = b.Data
	}
	return &Attachment{AttachmentInfo: AttachmentInfo{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType,
		Size: a.Size, Inline: a.Inline, ContentID: nonEmpty(a.ContentID)}, Data: data}, nil
}

// putBlob stores data once by its SHA-256 and returns the blob's id; bytes
// already stored (by any message of any project) are not written again.
func putBlob(ctx context.Context, cl *ent.Client, data []byte, now time.Time) (string, error) {
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:])
	err := cl.Blob.Create().SetID(id).SetSize(int64(len(data))).SetData(data).SetCreatedAt(now).
		OnConflictColumns(entblob.FieldID).DoNothing().Exec(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store attachment bytes: %w", err)
	}
	return id, nil
}

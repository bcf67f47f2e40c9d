package messaging

import (
	"context"
	"time"

	"github.com/comm-gateway/comm/ent"
	entconv "github.com/comm-gateway/comm/ent/conversation"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ident"
)

// Conversation is a conversation as the API shows it.
type Conversation struct {
	ID            string     `json:"id"`
	ConnectionID  string     `json:"connection_id"`
	Participant   string     `json:"participant"`
	Subject       *string    `json:"subject"`
	Typing        bool       `json:"typing"`
	TypingUntil   *time.Time `json:"typing_until"`
	LastMessageAt time.Time  `json:"last_message_at"`
	CreatedAt     time.Time  `json:"created_at"`
}

func (s *Service) conversationOf(c *ent.Conversation) *Conversation {
	out := &Conversation{
		ID: c.ID, ConnectionID: c.ConnectionID, Participant: c.ThreadKey, Subject: c.Subject,
		LastMessageAt: c.LastMessageAt.UTC(), CreatedAt: c.CreatedAt.UTC(),
	}
	if c.Participant != "" {
		out.Participant = c.Participant
	}
	if c.TypingUntil != nil && c.TypingUntil.After(s.now()) {
		t := c.TypingUntil.UTC()
		out.Typing, out.TypingUntil = true, &t
	}
	return out
}

// Conversations lists the caller's conversations, oldest first, optionally
// of one connection.
func (s *Service) Conversations(ctx context.Context, p *Principal, connectionID string, pg Page) ([]*Conversation, error) {
	if err := pg.validate(ident.Conversation); err != nil {
		return nil, err
	}
	q := s.read.Conversation.Query().Order(ent.Asc(entconv.FieldID)).Limit(pg.Limit)
	if connectionID != "" {
		if err := ident.Check(connectionID, ident.Connection); err != nil {
			return nil, Invalid("connection_id", "%v", err)
		}
		q = q.Where(entconv.ConnectionID(connectionID))
	}
	if pg.After != "" {
		q = q.Where(entconv.IDGT(pg.After))
	}
	cs, err := q.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Conversation, len(cs))
	for i, c := range cs {
		out[i] = s.conversationOf(c)
	}
	return out, nil
}

// Conversation returns one conversation.
func (s *Service) Conversation(ctx context.Context, p *Principal, id string) (*Conversation, error) {
	c, err := s.conversation(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.conversationOf(c), nil
}

func (s *Service) conversation(ctx context.Context, id string) (*ent.Conversation, error) {
	if ident.Check(id, ident.Conversation) != nil {
		return nil, NotFound("conversation", id)
	}
	c, err := s.read.Conversation.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, NotFound("conversation", id)
	}
	return c, err
}

// ConversationMessages lists a conversation's messages, oldest first.
func (s *Service) ConversationMessages(ctx context.Context, p *Principal, id string, pg Page) ([]*Message, error) {
	if _, err := s.conversation(ctx, id); err != nil {
		return nil, err
	}
	if err := pg.validate(ident.Message); err != nil {
		return nil, err
	}
	q := s.read.Message.Query().Where(entmsg.ConversationID(id)).Order(ent.Asc(entmsg.FieldID)).Limit(pg.Limit)
	if pg.After != "" {
		q = q.Where(entmsg.IDGT(pg.After))
	}
	ms, err := q.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out, nil
}

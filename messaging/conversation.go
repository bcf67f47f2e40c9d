package messaging

import (
	"context"
	"github.com/comm-gateway/comm/api"

	"github.com/comm-gateway/comm/ent"
	entconv "github.com/comm-gateway/comm/ent/conversation"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ident"
)

// Conversation is a conversation as the API shows it.
type Conversation = api.Conversation

func (s *Service) conversationOf(c *ent.Conversation) *Conversation {
	out := &Conversation{
		ID: c.ID, ConnectionID: c.ConnectionID, Participant: c.ThreadKey, Subject: c.Subject,
		LastMessageAt: c.LastMessageAt.UTC(), CreatedAt: c.CreatedAt.UTC(),
	}
	if c.Participant != "" {
		out.Participant = c.Participant
	}
	if t := s.TypingUntil(c); t != nil {
		out.Typing, out.TypingUntil = true, t
	}
	return out
}

// Conversations lists the caller's conversations, oldest first, optionally
// of one connection.
func (s *Service) Conversations(ctx context.Context, connectionID string, pg Page) ([]*Conversation, error) {
	cs, _, err := s.ConversationsPage(ctx, connectionID, pg)
	return cs, err
}

// ConversationsPage is Conversations, also telling whether more
// conversations follow the page. A page holds at most pg.Limit
// conversations and stops before the one that would take its bytes
// (subject, participant, thread) past the page budget, as a page of
// messages does. Only the rows that fit are loaded.
func (s *Service) ConversationsPage(ctx context.Context, connectionID string, pg Page) ([]*Conversation, bool, error) {
	if _, err := principal(ctx); err != nil {
		return nil, false, err
	}
	if err := pg.validate(ident.Conversation); err != nil {
		return nil, false, err
	}
	q := s.read.Conversation.Query().Order(ent.Asc(entconv.FieldID))
	if connectionID != "" {
		if err := ident.Check(connectionID, ident.Connection); err != nil {
			return nil, false, Invalid("connection_id", "%v", err)
		}
		q = q.Where(entconv.ConnectionID(connectionID))
	}
	if pg.After != "" {
		q = q.Where(entconv.IDGT(pg.After))
	}
	// One more than asked tells whether there is a next page; so does a
	// page cut short by the byte budget.
	ids, cut, err := fitConversations(ctx, q.Clone(), pg.Limit+1, s.messagePageBytes, sizedConversationColumns)
	if err != nil {
		return nil, false, err
	}
	more := cut || len(ids) > pg.Limit
	ids = ids[:min(len(ids), pg.Limit)]
	if len(ids) == 0 {
		return []*Conversation{}, false, nil
	}
	cs, err := q.Where(entconv.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, false, err
	}
	out := make([]*Conversation, len(cs))
	for i, c := range cs {
		out[i] = s.conversationOf(c)
	}
	return out, more, nil
}

// Conversation returns one conversation.
func (s *Service) Conversation(ctx context.Context, id string) (*Conversation, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
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
func (s *Service) ConversationMessages(ctx context.Context, id string, pg Page) ([]*Message, error) {
	ms, _, err := s.ConversationMessagesPage(ctx, id, pg)
	return ms, err
}

// ConversationMessagesPage is ConversationMessages, also telling whether
// more messages follow the page. A page holds at most pg.Limit messages
// and stops before the message that would take its bytes past the page
// budget (Options.MessagePageBytes; a larger message comes alone), so a
// page may be shorter than its limit with more to come. Only the rows that
// fit are loaded.
func (s *Service) ConversationMessagesPage(ctx context.Context, id string, pg Page) ([]*Message, bool, error) {
	if _, err := principal(ctx); err != nil {
		return nil, false, err
	}
	if _, err := s.conversation(ctx, id); err != nil {
		return nil, false, err
	}
	if err := pg.validate(ident.Message); err != nil {
		return nil, false, err
	}
	q := s.read.Message.Query().Where(entmsg.ConversationID(id)).Order(ent.Asc(entmsg.FieldID))
	if pg.After != "" {
		q = q.Where(entmsg.IDGT(pg.After))
	}
	// One more than asked tells whether there is a next page; so does a
	// page cut short by the byte budget.
	ids, cut, err := fitMessages(ctx, q.Clone(), pg.Limit+1, s.messagePageBytes, sizedMessageColumns)
	if err != nil {
		return nil, false, err
	}
	more := cut || len(ids) > pg.Limit
	ids = ids[:min(len(ids), pg.Limit)]
	if len(ids) == 0 {
		return []*Message{}, false, nil
	}
	ms, err := q.Where(entmsg.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, false, err
	}
	out := make([]*Message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out, more, nil
}

package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Conversation groups the messages of one thread on one connection.
type Conversation struct{ ent.Schema }

// Mixin of the Conversation.
func (Conversation) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Conversation}, TimeMixin{}, TenantMixin{}}
}

// Annotations of the Conversation.
func (Conversation) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}

// Fields of the Conversation.
func (Conversation) Fields() []ent.Field {
	return []ent.Field{
		field.String("connection_id").Immutable(),
		field.String("thread_key").Immutable().Comment("channel-native thread: chat id, peer address ..."),
		field.String("participant").Optional().Immutable().
			Comment("who the conversation is with, where thread_key is not that (email threads are keyed by Message-ID)"),
		field.String("subject").Optional().Nillable(),
		field.Time("typing_until").Optional().Nillable().Comment("typing indicator lease"),
		field.Time("last_message_at").Default(func() time.Time { return time.Now().UTC() }).
			Annotations(entgql.OrderField("LAST_MESSAGE_AT")),
	}
}

// Indexes of the Conversation.
func (Conversation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("project_id", "connection_id", "thread_key").Unique(),
		// The dashboard lists a project's conversations newest first.
		index.Fields("project_id", "last_message_at"),
	}
}

package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// PendingReceipt is a provider's report on an outbound message that came
// before the send's answer named the message's provider id (a status
// callback can beat the API response): kept, bounded per connection and in
// age, until the outbox records the id and applies it.
type PendingReceipt struct{ ent.Schema }

// Annotations of the PendingReceipt: never in GraphQL.
func (PendingReceipt) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the PendingReceipt.
func (PendingReceipt) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, TenantMixin{}}
}

// Fields of the PendingReceipt.
func (PendingReceipt) Fields() []ent.Field {
	return []ent.Field{
		field.String("connection_id").Immutable(),
		field.String("provider_message_id").Immutable().Comment("the provider's id of the outbound message"),
		field.String("state").Immutable().Comment("sent, delivered, read or failed"),
		field.String("code").Optional().Immutable(),
		field.String("reason").Optional().Immutable(),
		field.Time("at").Immutable().Comment("when the provider saw the change"),
	}
}

// Indexes of the PendingReceipt.
func (PendingReceipt) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("project_id", "connection_id", "provider_message_id"),
		index.Fields("project_id", "connection_id", "created_at"),
	}
}

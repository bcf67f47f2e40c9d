package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Binding ties a person writing to one of the operator's shared lines
// (a hosted WhatsApp number, an iMessage relay's address) to the
// connection they joined with its join code: their messages on that line
// go to that connection, and the connection may write to them. One per
// person and line across the gateway (scope_key): joining another
// connection on the same line moves it.
type Binding struct{ ent.Schema }

// Annotations of the Binding: shown through the connection (graph
// schema.graphqls), not as an ent type.
func (Binding) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Binding.
func (Binding) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Binding}, TimeMixin{}, TenantMixin{}}
}

// Fields of the Binding.
func (Binding) Fields() []ent.Field {
	return []ent.Field{
		field.String("channel").Immutable(),
		field.String("provider").Optional().Immutable(),
		field.String("line").Immutable().Comment("the line's id (Line.ID)"),
		field.String("person").Immutable().MaxLen(1000).Comment("the sender's stable id on the channel"),
		field.String("connection_id").Immutable(),
		field.String("scope_key").Unique().Immutable().
			Comment("hash of (channel, provider, line, person): one binding per person and line across the gateway"),
	}
}

// Indexes of the Binding.
func (Binding) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("project_id", "connection_id", "id"),
		index.Fields("project_id", "connection_id", "person"),
	}
}

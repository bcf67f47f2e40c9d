package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// ProviderState is a small fact a provider's adapter keeps across
// processes and replicas (channels.State): a gateway session's id and
// sequence number, so the replica that takes a session over resumes it;
// the identifies a bot token spent today.
type ProviderState struct{ ent.Schema }

// Annotations of the ProviderState: never in GraphQL.
func (ProviderState) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Fields of the ProviderState.
func (ProviderState) Fields() []ent.Field {
	return []ent.Field{
		field.String("id").Immutable().NotEmpty().MaxLen(300).Comment("<channel>/<the adapter's key>"),
		field.Bytes("value").MaxLen(64 << 10),
		field.Time("updated_at"),
	}
}

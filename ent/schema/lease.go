package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// Lease is a named lease one replica holds at a time, for work that
// belongs to no single connection (the long-lived session of the
// operator's own app, such as its Discord gateway, serving every
// connection the app was installed for). A row named line:<hash> is
// instead the lock of one of the operator's shared lines: connects on the
// line write it first, so they take turns (messaging.checkLineFree).
type Lease struct{ ent.Schema }

// Annotations of the Lease: never in GraphQL.
func (Lease) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Fields of the Lease.
func (Lease) Fields() []ent.Field {
	return []ent.Field{
		field.String("id").Immutable().NotEmpty().MaxLen(200).Comment("what is leased: app-session:<channel>"),
		field.String("owner").Optional().Comment("the replica holding it"),
		field.Time("until").Comment("when it lapses unless renewed"),
	}
}

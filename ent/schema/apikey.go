package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// APIKey is one key of a project. Only the SHA-256 hash of the key is kept;
// the key itself is shown once, when it is made.
type APIKey struct{ ent.Schema }

// Mixin of the APIKey.
func (APIKey) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.APIKey}, TimeMixin{}, TenantMixin{}}
}

// Annotations of the APIKey: not in the GraphQL schema yet.
func (APIKey) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Fields of the APIKey.
func (APIKey) Fields() []ent.Field {
	return []ent.Field{
		field.Bytes("hash").Immutable().Unique().Sensitive().MinLen(32).MaxLen(32),
		field.Enum("kind").Values("sandbox", "signed_in").Immutable().
			Comment("decides the tier; never inferred from the key's prefix"),
		field.String("display").Immutable().Comment("prefix and last four characters"),
		field.String("name").Optional().MaxLen(200).Comment("what the key is for, chosen by its maker"),
		field.Time("last_used_at").Optional().Nillable(),
		field.Time("revoked_at").Optional().Nillable(),
	}
}

// Indexes of the APIKey.
func (APIKey) Indexes() []ent.Index {
	return []ent.Index{index.Fields("hash").Unique()}
}

package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Account is a person signed in through an identity provider: keyed by the
// provider (issuer) and the person's id there (subject). One account owns
// many projects.
type Account struct{ ent.Schema }

// Annotations of the Account: exposed through hand-written GraphQL types.
func (Account) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Account.
func (Account) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Account}, TimeMixin{}}
}

// Fields of the Account.
func (Account) Fields() []ent.Field {
	return []ent.Field{
		field.String("issuer").Immutable().Comment("the OpenID provider's issuer URL, or \"local\""),
		field.String("subject").Immutable().Comment("the person's id at the issuer"),
		field.String("email").Optional().Comment("for display; not an identity"),
		field.String("name").Optional(),
		field.Time("last_sign_in_at").Optional().Nillable(),
		field.Int64("balance_micros").Optional().Nillable().
			Comment("the sum of the ledger, kept with every entry; null on accounts made before it was kept (computed at their first debit)"),
	}
}

// Indexes of the Account.
func (Account) Indexes() []ent.Index {
	return []ent.Index{index.Fields("issuer", "subject").Unique()}
}

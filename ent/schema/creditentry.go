package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// CreditEntry is one line of an account's credit ledger: a grant (positive)
// or a debit (negative), in US cents. The balance is their sum; no mutable
// balance is kept. The key makes an entry idempotent: the sign-up grant is
// "grant:signup", a paid send's debit names its message.
type CreditEntry struct{ ent.Schema }

// Annotations of the CreditEntry: exposed through hand-written GraphQL
// types.
func (CreditEntry) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the CreditEntry.
func (CreditEntry) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.CreditEntry}, TimeMixin{}}
}

// Fields of the CreditEntry.
func (CreditEntry) Fields() []ent.Field {
	return []ent.Field{
		field.String("account_id").Immutable(),
		field.Enum("kind").Values("grant", "debit").Immutable(),
		field.Int64("amount_cents").Immutable().Comment("positive for grants, negative for debits"),
		field.String("key").Immutable().Comment("idempotency key, unique per account"),
		field.String("description").Immutable(),
		field.String("project_id_ref").Optional().Immutable().Comment("the project a debit was for"),
	}
}

// Indexes of the CreditEntry.
func (CreditEntry) Indexes() []ent.Index {
	return []ent.Index{index.Fields("account_id", "key").Unique()}
}

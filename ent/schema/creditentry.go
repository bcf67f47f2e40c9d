package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// CreditEntry is one line of an account's credit ledger: a grant or a
// refund (positive) or a debit (negative), in millionths of a US dollar
// (prices such as 0.005 USD per message are not whole cents). The balance
// is their sum; the account row keeps it too, updated in the same
// transaction as each entry, so that a debit is one conditional update
// that can never overdraw. The key makes an entry idempotent: the sign-up
// grant is "grant:signup", a paid message's debit "debit:<message id>",
// its refund "refund:<message id>".
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
		field.Enum("kind").Values("grant", "debit", "refund").Immutable(),
		field.Int64("amount_cents").Immutable().Comment("the amount rounded toward zero to cents; rows written before amount_micros have only this"),
		field.Int64("amount_micros").Optional().Nillable().Immutable().Comment("positive for grants and refunds, negative for debits"),
		field.String("key").Immutable().Comment("idempotency key, unique per account"),
		field.String("description").Immutable(),
		field.String("project_id_ref").Optional().Immutable().Comment("the project a debit was for"),
	}
}

// Indexes of the CreditEntry.
func (CreditEntry) Indexes() []ent.Index {
	return []ent.Index{index.Fields("account_id", "key").Unique()}
}

package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/comm-gateway/comm/ident"
)

// Project is the tenant: one API key names exactly one project, and every
// other row belongs to one. last_seq is the head of the project's event
// stream; the stream package advances it in the transaction that appends.
type Project struct{ ent.Schema }

// Mixin of the Project.
func (Project) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Project}, TimeMixin{}}
}

// Fields of the Project.
func (Project) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").MaxRuneLen(200),
		field.String("customer_id").Immutable().Comment("default customer scope, cus_..."),
		field.String("agent_id").Immutable().Comment("default agent scope, agt_..."),
		field.Int64("last_seq").Default(0).NonNegative().Comment("head of the event stream"),
		field.String("account_id").Optional().Nillable().Comment("the signed-in account owning it; nil for a sandbox project"),
	}
}

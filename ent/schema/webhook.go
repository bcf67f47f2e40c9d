package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent/schema"
	"time"

	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/comm-gateway/comm/ident"
)

// Webhook is the push endpoint of a project: events are POSTed to url in seq
// order, from cursor (the last acknowledged seq).
type Webhook struct{ ent.Schema }

// Mixin of the Webhook.
func (Webhook) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Webhook}, TimeMixin{}, TenantMixin{}}
}

// Annotations of the Webhook: not in the GraphQL schema yet.
func (Webhook) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Fields of the Webhook.
func (Webhook) Fields() []ent.Field {
	return []ent.Field{
		field.String("url"),
		field.Bytes("secret").Sensitive().Comment("encrypted at rest; never returned"),
		field.Enum("status").Values("active", "failing", "disabled").Default("active"),
		field.Int64("cursor").Default(0).NonNegative(),
		field.String("last_error").Optional().Nillable(),
		field.Time("failing_since").Optional().Nillable(),
		field.Time("updated_at").Default(func() time.Time { return time.Now().UTC() }).
			UpdateDefault(func() time.Time { return time.Now().UTC() }),
	}
}

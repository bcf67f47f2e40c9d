package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Webhook is the push endpoint of a project: events are POSTed to url in seq
// order, from cursor (the last acknowledged seq). One replica at a time
// delivers to it, holding a lease.
type Webhook struct{ ent.Schema }

// Annotations of the Webhook: exposed through hand-written GraphQL types,
// never as an ent type (the secret must not leak).
func (Webhook) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Webhook.
func (Webhook) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Webhook}, TimeMixin{}, TenantMixin{}}
}

// Fields of the Webhook.
func (Webhook) Fields() []ent.Field {
	return []ent.Field{
		field.String("url"),
		field.Bytes("secret").Sensitive().Comment("sealed (AES-GCM) at rest; never returned"),
		field.Enum("status").Values("active", "failing", "disabled").Default("active"),
		field.Int64("cursor").Default(0).NonNegative().Comment("last acknowledged seq"),
		field.String("last_error").Optional().Nillable(),
		field.Time("failing_since").Optional().Nillable(),
		field.Int("failures").Default(0).Comment("consecutive failed attempts"),
		field.Time("next_attempt_at").Optional().Nillable().Comment("backoff: no attempt before"),
		field.String("lease_owner").Optional().Comment("replica delivering to this endpoint"),
		field.Time("lease_until").Optional().Nillable(),
		field.String("disabled_reason").Optional().Nillable(),
		field.Time("updated_at").Default(now).UpdateDefault(now),
	}
}

// Indexes of the Webhook: one endpoint per project.
func (Webhook) Indexes() []ent.Index {
	return []ent.Index{index.Fields("project_id").Unique().StorageKey("webhooks_one_per_project")}
}

// now is the current time at the precision both databases keep.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

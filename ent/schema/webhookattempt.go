package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// WebhookAttempt records one delivery attempt to a project's webhook. The
// history is bounded: older attempts are pruned.
type WebhookAttempt struct{ ent.Schema }

// Annotations of the WebhookAttempt.
func (WebhookAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the WebhookAttempt.
func (WebhookAttempt) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.WebhookAttempt}, TimeMixin{}, TenantMixin{}}
}

// Fields of the WebhookAttempt.
func (WebhookAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.String("webhook_id").Immutable(),
		field.String("url").Immutable(),
		field.Int64("seq").Immutable().Comment("the event delivered"),
		field.Int("status_code").Optional().Immutable().Comment("0 when no response"),
		field.Int("latency_ms").Immutable(),
		field.String("error").Optional().Nillable(),
		field.Bool("ok").Immutable(),
	}
}

// Indexes of the WebhookAttempt.
func (WebhookAttempt) Indexes() []ent.Index {
	return []ent.Index{index.Fields("webhook_id")}
}

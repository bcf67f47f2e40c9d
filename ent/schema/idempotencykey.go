package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// IdempotencyKey is a REST request made with an Idempotency-Key header
// (package idempotency): the first request with a key inserts the row
// "started", and the response is stored once its handler is done, so a
// retry with the same key and the same request gets the first answer
// again on any replica. Rows are kept a day (from created_at) and pruned.
type IdempotencyKey struct{ ent.Schema }

// Annotations of the IdempotencyKey: never in GraphQL.
func (IdempotencyKey) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the IdempotencyKey.
func (IdempotencyKey) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.IdempotencyKey}, TimeMixin{}, TenantMixin{}}
}

// Fields of the IdempotencyKey.
func (IdempotencyKey) Fields() []ent.Field {
	return []ent.Field{
		field.String("key").Immutable().NotEmpty().MaxLen(255).Comment("the Idempotency-Key header"),
		field.Bytes("request_hash").MinLen(32).MaxLen(32).
			Comment("SHA-256 of the request's method, path, query and body"),
		field.Time("started_at").Comment("when the request running under the key started; a started row older than the lease may be taken over"),
		field.Int("status").Optional().Nillable().Comment("the response's HTTP status; nil while the request runs"),
		field.Bytes("response").Optional().Nillable().Sensitive().
			Comment("the response (headers and body), sealed; nil with a status when it was too large to keep"),
		field.Int("response_bytes").Optional().Comment("the size of the response body"),
	}
}

// Indexes of the IdempotencyKey.
func (IdempotencyKey) Indexes() []ent.Index {
	return []ent.Index{index.Fields("project_id", "key").Unique(), index.Fields("created_at")}
}

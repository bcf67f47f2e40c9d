package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// WebSession is a signed-in browser session of the /device page. The
// session cookie is signed and names the session; this row is what makes
// it valid, so signing out (revoked_at) ends it on every replica, and a
// copy of the old cookie no longer works. Only the hash of the cookie's
// session id is kept.
type WebSession struct{ ent.Schema }

// Annotations of the WebSession: never in GraphQL.
func (WebSession) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the WebSession.
func (WebSession) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.WebSession}, TimeMixin{}}
}

// Fields of the WebSession.
func (WebSession) Fields() []ent.Field {
	return []ent.Field{
		field.Bytes("token_hash").Immutable().Unique().Sensitive().MinLen(32).MaxLen(32),
		field.String("account_id").Immutable().NotEmpty(),
		field.Time("expires_at").Immutable(),
		field.Time("revoked_at").Optional().Nillable(),
	}
}

// Indexes of the WebSession.
func (WebSession) Indexes() []ent.Index {
	return []ent.Index{index.Fields("expires_at"), index.Fields("account_id")}
}

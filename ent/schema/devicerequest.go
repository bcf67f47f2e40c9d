package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// DeviceRequest is one device sign-in: a command line asked for a
// signed-in key; a person approves or denies it on the /device page. Only
// hashes of the device code and the user code are kept.
type DeviceRequest struct{ ent.Schema }

// Annotations of the DeviceRequest: never in GraphQL.
func (DeviceRequest) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the DeviceRequest.
func (DeviceRequest) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.DeviceRequest}, TimeMixin{}}
}

// Fields of the DeviceRequest.
func (DeviceRequest) Fields() []ent.Field {
	return []ent.Field{
		field.Bytes("device_hash").Immutable().Unique().Sensitive().MinLen(32).MaxLen(32),
		field.Bytes("user_hash").Immutable().Unique().Sensitive().MinLen(32).MaxLen(32),
		field.Enum("status").Values("pending", "approved", "consumed", "denied").Default("pending").
			Comment("expired is pending or approved past expires_at"),
		field.String("sandbox_project_id").Optional().Immutable().
			Comment("the project of the key the request started with, carried into the account"),
		field.String("client_ip").Optional().Immutable(),
		field.String("user_agent").Optional().Immutable(),
		field.Int("interval").Comment("seconds between polls; raised by slow_down"),
		field.Time("last_poll_at").Optional().Nillable(),
		field.Time("expires_at").Immutable(),
		field.String("account_id").Optional().Nillable().Comment("who approved or denied"),
		field.String("project_id_result").Optional().Nillable().Comment("the project the signed-in key is for"),
		field.Time("decided_at").Optional().Nillable(),
	}
}

// Indexes of the DeviceRequest.
func (DeviceRequest) Indexes() []ent.Index {
	return []ent.Index{index.Fields("expires_at")}
}

package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Connection is one inbox, bot or app of a project on one channel.
type Connection struct{ ent.Schema }

// Mixin of the Connection.
func (Connection) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Connection}, TimeMixin{}, TenantMixin{}}
}

// Annotations of the Connection.
func (Connection) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}

// Fields of the Connection.
func (Connection) Fields() []ent.Field {
	return []ent.Field{
		field.String("channel").Immutable().Comment("the medium: email, telegram, sms, test ..."),
		field.String("provider").Optional().Immutable().Comment("where a medium has several providers"),
		field.String("status").Default("pending").
			Comment("pending, authorized, active, degraded (the provider is failing), revoked (credentials rejected), deleted"),
		field.String("status_reason").Optional().MaxLen(1000).Annotations(entgql.Skip()).
			Comment("why the connection is degraded or revoked"),
		field.String("customer_id").Immutable(),
		field.String("agent_id").Immutable(),
		field.String("name").Optional().MaxLen(200),
		field.Bytes("config").Optional().Sensitive().Comment("provider configuration, encrypted at rest").
			Annotations(entgql.Skip()),
		field.String("address").Optional().Comment("channel-native address of the connection, if any"),
		field.String("inbox_key").Optional().Nillable().Unique().Annotations(entgql.Skip()).
			Comment("channel:address of an inbox this gateway hosts (email); globally unique, cleared on delete"),
		field.String("route_key").Optional().Nillable().Unique().Annotations(entgql.Skip()).
			Comment("channel:key that app-level provider events for this connection carry (a Slack team, a page); globally unique, cleared on delete"),
		field.String("line").Optional().Nillable().Immutable().
			Comment("the operator's line the connection is on, on a channel whose lines projects share (hosted WhatsApp, iMessage)"),
		field.String("join_code").Optional().Nillable().Immutable().
			Comment("the code people send (join <code>) to bind themselves to the connection on its shared line; null on a dedicated line"),
		field.String("join_link").Optional().Nillable().Immutable().
			Comment("a link that opens the join message to the line; null when the channel has none or the line is dedicated"),
		field.String("join_key").Optional().Nillable().Unique().Annotations(entgql.Skip()).
			Comment("channel:line:code of the join code; globally unique, cleared on delete"),
		field.String("authorize_url").Optional().
			Comment("while pending an install of the operator's app: where the person approves it"),
		field.String("oauth_state").Optional().Nillable().Unique().Sensitive().Annotations(entgql.Skip()).
			Comment("the OAuth state of a pending install, bound to this connection; cleared when used"),
		field.String("webhook_url").Optional().
			Comment("the URL the provider sends this connection's events to, when the customer gives it to the provider"),
		field.String("session_owner").Optional().Annotations(entgql.Skip()).
			Comment("the replica running the connection's long-lived inbound session (a lease)"),
		field.Time("session_until").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("when the session lease lapses unless renewed"),
		field.Time("deleted_at").Optional().Nillable().Annotations(entgql.Skip()),
	}
}

// Indexes of the Connection: addresses are looked up across projects (an
// inbox address released recently is quarantined).
func (Connection) Indexes() []ent.Index {
	return []ent.Index{index.Fields("address"), index.Fields("line")}
}

package schema

import (
	"encoding/json"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// InFlight is the condition of an outbound message whose send is not
// recorded yet, as SQL: queries that want the message_in_flight index say
// it in these very words (a partial index is used only for its own
// condition).
const InFlight = "status IN ('queued', 'sending')"

// Message is one inbound or outbound message. Outbound messages are the
// outbox: stored as queued, delivered by a worker, then sent or failed.
type Message struct{ ent.Schema }

// Mixin of the Message.
func (Message) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Message}, TimeMixin{}, TenantMixin{}}
}

// Annotations of the Message.
func (Message) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}

// Fields of the Message.
func (Message) Fields() []ent.Field {
	return []ent.Field{
		field.String("conversation_id").Immutable(),
		field.String("connection_id").Immutable(),
		field.String("channel").Immutable(),
		field.Enum("direction").Values("inbound", "outbound").Immutable(),
		field.Enum("status").Values("received", "queued", "sending", "sent", "failed"),
		field.String("provider_message_id").Optional().Nillable().
			Comment("the provider's id; unique per connection so retries store nothing new"),
		field.String("sender"),
		field.String("recipient").Optional(),
		field.String("subject").Optional().Nillable(),
		field.Text("text").SchemaType(map[string]string{dialect.Postgres: "text"}),
		field.Text("html").Optional().Nillable(),
		field.String("in_reply_to").Optional().Nillable().Comment("msg_ id this one answers"),
		field.Strings("references").Optional().Annotations(entgql.Skip()).
			Comment("provider ids of the earlier messages of the thread, oldest first (email References)"),
		field.JSON("attachments", json.RawMessage{}).Optional().Annotations(entgql.Skip()).
			Comment("what the attachments table holds for this message, without the bytes"),
		field.JSON("details", json.RawMessage{}).Optional().Annotations(entgql.Skip()).
			Comment("channel-specific details (email: headers, full text, sender authentication)"),
		field.String("error").Optional().Nillable().Comment("why delivery failed"),
		field.Int("attempts").Default(0),
		field.Bool("unbilled").Default(false).
			Comment("an inbound message on a paid channel stored while the account's credit did not cover it"),
		field.Time("next_attempt_at").Optional().Nillable(),
		field.Time("sent_at").Optional().Nillable(),
		// What the provider reported after the send (channels.Receipt):
		// shown as the message's delivery object, null until a report.
		field.Enum("delivery_state").Values("sent", "delivered", "read", "failed").Optional().Nillable().
			Annotations(entgql.Skip()).Comment("the provider's latest report; never moves back (read and failed are final)"),
		field.String("delivery_code").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("the provider's error code of a failed delivery"),
		field.String("delivery_reason").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("what the provider said of a failed delivery"),
		field.Time("delivered_at").Optional().Nillable().Annotations(entgql.Skip()),
		field.Time("read_at").Optional().Nillable().Annotations(entgql.Skip()),
	}
}

// Indexes of the Message.
func (Message) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("project_id", "connection_id", "provider_message_id").Unique(),
		index.Fields("conversation_id"),
		index.Fields("status", "next_attempt_at"),
		// The connection's sends in flight, which a provider's report
		// may come before (messaging/receipt.go): a partial index, so it
		// holds only those and inbound messages never touch it.
		index.Fields("project_id", "connection_id").StorageKey("message_in_flight").
			Annotations(entsql.IndexWhere(InFlight)),
		// The outbox's head-of-conversation check (is an earlier message of
		// this conversation still waiting?) reads only the conversation's
		// messages in flight, not all it ever had.
		index.Fields("conversation_id", "id").StorageKey("message_conversation_in_flight").
			Annotations(entsql.IndexWhere(InFlight)),
	}
}

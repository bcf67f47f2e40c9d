package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Attachment is a file that came with an inbound message (an email
// attachment or inline image). Its bytes are a Blob named by blob_id,
// stored once however many messages carry them; rows written before blobs
// existed keep their bytes in data (and no blob_id).
type Attachment struct{ ent.Schema }

// Annotations of the Attachment: exposed through a hand-written GraphQL
// type on Message.
func (Attachment) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Attachment.
func (Attachment) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Attachment}, TimeMixin{}, TenantMixin{}}
}

// Fields of the Attachment.
func (Attachment) Fields() []ent.Field {
	return []ent.Field{
		field.String("message_id").Immutable(),
		field.String("filename").Optional().Immutable(),
		field.String("content_type").Immutable(),
		field.String("content_id").Optional().Immutable().Comment("for inline parts referenced as cid: from the HTML"),
		field.Bool("inline").Default(false).Immutable(),
		field.Int64("size").Immutable(),
		field.Bytes("data").Immutable().
			SchemaType(map[string]string{dialect.Postgres: "bytea", dialect.SQLite: "blob"}).
			Comment("the bytes, on rows from before blob_id; empty when blob_id is set"),
		field.String("blob_id").Optional().Nillable().Immutable().
			Comment("the Blob (SHA-256 of the bytes) holding this attachment's bytes"),
	}
}

// Indexes of the Attachment.
func (Attachment) Indexes() []ent.Index {
	return []ent.Index{index.Fields("message_id"), index.Fields("blob_id")}
}

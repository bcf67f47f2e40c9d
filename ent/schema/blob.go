package schema

import (
	"fmt"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
)

// Blob is the bytes of an attachment, stored once by their SHA-256 however
// many messages (of however many projects) carry them. A blob belongs to no
// project and is never read through a project's key directly: who may
// download it is decided by the per-message attachment row that names it,
// which is tenant-owned.
type Blob struct{ ent.Schema }

// Annotations of the Blob: not exposed through GraphQL.
func (Blob) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Blob.
func (Blob) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}}
}

// Fields of the Blob.
func (Blob) Fields() []ent.Field {
	return []ent.Field{
		field.String("id").Immutable().Comment("lowercase hex SHA-256 of data").
			Validate(func(s string) error {
				if len(s) != 64 {
					return fmt.Errorf("blob id %q is not a hex SHA-256", s)
				}
				for _, c := range s {
					if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
						return fmt.Errorf("blob id %q is not a hex SHA-256", s)
					}
				}
				return nil
			}),
		field.Int64("size").Immutable(),
		field.Bytes("data").Immutable().
			SchemaType(map[string]string{dialect.Postgres: "bytea", dialect.SQLite: "blob"}),
	}
}

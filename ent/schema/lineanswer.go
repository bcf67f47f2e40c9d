package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// LineAnswer remembers that a person who is bound to no connection on one
// of the operator's shared lines was answered (how to join, a join code
// that is not valid), so they are answered at most once an hour. It
// belongs to no project; entries older than a day are pruned, and each
// line keeps a bounded number.
type LineAnswer struct{ ent.Schema }

// Annotations of the LineAnswer: never in GraphQL.
func (LineAnswer) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Fields of the LineAnswer.
func (LineAnswer) Fields() []ent.Field {
	return []ent.Field{
		field.String("id").Immutable().NotEmpty().MaxLen(200).
			Comment("hash of (channel, provider, line, person, kind of answer)"),
		field.String("line").Immutable().Comment("channel:line"),
		field.Time("answered_at"),
	}
}

// Indexes of the LineAnswer.
func (LineAnswer) Indexes() []ent.Index {
	return []ent.Index{index.Fields("line", "answered_at"), index.Fields("answered_at")}
}

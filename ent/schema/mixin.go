package schema

import (
	"context"

	"entgo.io/contrib/entgql"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"entgo.io/ent/schema/mixin"

	"github.com/comm-gateway/comm/ent/intercept"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/tenant"
)

// IDMixin gives an entity a string primary key made of a type prefix and a
// ULID, e.g. "conn_01jd...". The prefix is checked on every create.
type IDMixin struct {
	mixin.Schema
	Prefix string
}

// Fields of the IDMixin.
func (m IDMixin) Fields() []ent.Field {
	prefix := m.Prefix
	return []ent.Field{
		field.String("id").
			Immutable().
			DefaultFunc(func() string { return ident.New(prefix) }).
			Validate(func(s string) error { return ident.Check(s, prefix) }),
	}
}

// TimeMixin records when a row was created.
type TimeMixin struct{ mixin.Schema }

// Fields of the TimeMixin.
func (TimeMixin) Fields() []ent.Field {
	return []ent.Field{
		// Microseconds: the finest time both databases store, so a row
		// reads back exactly as it was created.
		field.Time("created_at").Immutable().Default(func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }).
			Annotations(entgql.OrderField("CREATED_AT")),
	}
}

// ErrNoTenant is returned when a tenant-owned entity is touched with a
// context that names neither a project nor the system.
var ErrNoTenant = errors.New("tenant: context carries no project")

// TenantMixin marks an entity as owned by one project. It is the one place
// tenant isolation is enforced: every query is filtered by the project of
// the context, every update and delete is limited to it, and every create is
// stamped with it (a create that names another project is refused). A
// context made by tenant.System is exempt. A test walks the schema and fails
// when a table with a project_id column lacks this mixin.
//
// Upserts (ON CONFLICT) happen in the database, after this hook: every
// composite unique index of a tenant-owned table therefore leads with
// project_id, so a conflict can only ever match the caller's own rows. A
// test checks that too.
type TenantMixin struct{ mixin.Schema }

// Fields of the TenantMixin.
func (TenantMixin) Fields() []ent.Field {
	return []ent.Field{
		field.String("project_id").Immutable().NotEmpty().Annotations(entgql.Skip()),
	}
}

// Indexes of the TenantMixin.
func (TenantMixin) Indexes() []ent.Index {
	return []ent.Index{index.Fields("project_id")}
}

// Interceptors of the TenantMixin.
func (TenantMixin) Interceptors() []ent.Interceptor {
	return []ent.Interceptor{
		intercept.TraverseFunc(func(ctx context.Context, q intercept.Query) error {
			if tenant.IsSystem(ctx) {
				return nil
			}
			p, ok := tenant.Project(ctx)
			if !ok {
				return ErrNoTenant
			}
			q.WhereP(sql.FieldEQ("project_id", p))
			return nil
		}),
	}
}

// Hooks of the TenantMixin.
func (TenantMixin) Hooks() []ent.Hook {
	return []ent.Hook{
		func(next ent.Mutator) ent.Mutator {
			return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
				if tenant.IsSystem(ctx) {
					return next.Mutate(ctx, m)
				}
				p, ok := tenant.Project(ctx)
				if !ok {
					return nil, ErrNoTenant
				}
				if m.Op().Is(ent.OpCreate) {
					if v, set := m.Field("project_id"); set && v != p {
						return nil, fmt.Errorf("tenant: create names project %v, context is %s", v, p)
					}
					if err := m.SetField("project_id", p); err != nil {
						return nil, err
					}
					return next.Mutate(ctx, m)
				}
				wm, ok := m.(interface{ WhereP(...func(*sql.Selector)) })
				if !ok {
					return nil, fmt.Errorf("tenant: mutation %T cannot be filtered", m)
				}
				wm.WhereP(sql.FieldEQ("project_id", p))
				return next.Mutate(ctx, m)
			})
		},
	}
}

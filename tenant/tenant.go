// Package tenant carries the authenticated project through a context.
//
// Every tenant-owned ent entity filters its queries and guards its mutations
// by the project found here (see ent/schema.TenantMixin); code that must work
// across projects (key lookup, background workers) says so explicitly with
// System.
package tenant

import "context"

type ctxKey int

const (
	projectKey ctxKey = iota
	systemKey
)

// WithProject returns a context scoped to one project.
func WithProject(ctx context.Context, projectID string) context.Context {
	return context.WithValue(ctx, projectKey, projectID)
}

// Project returns the project the context is scoped to.
func Project(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(projectKey).(string)
	return p, ok && p != ""
}

// System returns a context that may read and write every project's rows.
// Use it only where no caller's key is involved.
func System(ctx context.Context) context.Context {
	return context.WithValue(ctx, systemKey, true)
}

// IsSystem reports whether ctx was made by System.
func IsSystem(ctx context.Context) bool {
	v, _ := ctx.Value(systemKey).(bool)
	return v
}

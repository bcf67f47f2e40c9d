package graph

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/fault"
)

// TestPresent: the GraphQL presenter says fault.Present's code, message
// and param, the param by its GraphQL name unless the field resolved has
// an argument of the REST name; gqlgen's own errors keep their codes.
func TestPresent(t *testing.T) {
	t.Parallel()
	field := func(args ...string) context.Context {
		def := &ast.FieldDefinition{Name: "f"}
		for _, a := range args {
			def.Arguments = append(def.Arguments, &ast.ArgumentDefinition{Name: a})
		}
		return graphql.WithFieldContext(context.Background(),
			&graphql.FieldContext{Field: graphql.CollectedField{Field: &ast.Field{Name: "f", Definition: def}}})
	}
	paged := &gqlerror.Error{Message: "bad cursor", Extensions: map[string]any{"code": "INVALID_PAGINATION"}}
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		msg  string
		ext  map[string]any
	}{
		{"renamed", field("afterSeq", "first"), fault.Invalid("after_seq", "must be at least 0"),
			"must be at least 0", map[string]any{"code": "invalid_parameter", "param": "afterSeq"}},
		{"limit is first", field("after", "first"), fault.Invalid("limit", "must be between 1 and %d", 500),
			"must be between 1 and 500", map[string]any{"code": "invalid_parameter", "param": "first"}},
		{"the field's own limit", field("after", "limit"), fault.Invalid("limit", "must be between 1 and %d", 500),
			"must be between 1 and 500", map[string]any{"code": "invalid_parameter", "param": "limit"}},
		{"no field", context.Background(), fault.Invalid("after_seq", "x"),
			"x", map[string]any{"code": "invalid_parameter", "param": "afterSeq"}},
		{"not in the table", field(), fault.Conflict("taken").WithParam("config.address"),
			"taken", map[string]any{"code": "conflict", "param": "config.address"}},
		{"retry", field(), fault.RateLimited(1500*time.Millisecond, "slow down"),
			"slow down", map[string]any{"code": "rate_limited", "retry_after": 2}},
		{"ent not found", field(), &ent.NotFoundError{}, "not found", map[string]any{"code": "not_found"}},
		{"entgql pagination", field(), paged, "bad cursor", map[string]any{"code": "invalid_parameter"}},
		{"gqlgen without a code", field(), &gqlerror.Error{Message: "no such field"},
			"no such field", map[string]any{"code": "invalid_parameter"}},
		{"internal", field(), errors.New("pq: connection reset"), "internal error", map[string]any{"code": "internal_error"}},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := present(c.ctx, c.err, logger)
			if g.Message != c.msg || len(g.Extensions) != len(c.ext) {
				t.Fatalf("present(%v) = %q %v, want %q %v", c.err, g.Message, g.Extensions, c.msg, c.ext)
			}
			for k, v := range c.ext {
				if g.Extensions[k] != v {
					t.Errorf("present(%v): extensions %v, want %v", c.err, g.Extensions, c.ext)
				}
			}
		})
	}
}

// TestPresentRetryAfter: a rate_limited error with a wait gives the
// transport its Retry-After.
func TestPresentRetryAfter(t *testing.T) {
	t.Parallel()
	ctx, h := WithRetryAfter(context.Background())
	present(ctx, fault.RateLimited(3*time.Second, "slow down"), slog.Default())
	if h.Wait() != 3*time.Second {
		t.Errorf("wait %v, want 3s", h.Wait())
	}
}

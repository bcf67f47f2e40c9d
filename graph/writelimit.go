package graph

import (
	"context"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/ratelimit"
)

// writeLimit takes one token of the caller's key per mutation field of a
// mutation operation, over HTTP and websockets alike, before any resolver
// runs; an operation over the budget runs none of its fields.
type writeLimit struct{ b *ratelimit.Bucket }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = writeLimit{}

func (writeLimit) ExtensionName() string                   { return "WriteLimit" }
func (writeLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (l writeLimit) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if l.b == nil || rc.Operation == nil || rc.Operation.Operation != ast.Mutation {
		return nil
	}
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil // the resolvers answer unauthenticated
	}
	n := max(rootFields(rc.Doc, rc.Operation.SelectionSet, 0), 1)
	if ok, wait := l.b.AllowN(p.KeyID, n); !ok {
		if h, ok := ctx.Value(retryKey{}).(*RetryAfter); ok {
			h.set(wait)
		}
		return faultError(fault.RateLimited(wait, "this API key makes writes faster than this gateway allows; retry in %d s",
			int(wait.Seconds())+1))
	}
	return nil
}

type retryKey struct{}

// RetryAfter receives the wait of an operation refused as rate_limited
// (by the write limit, or an error with a RetryAfter),
// for a transport that can say it in a header (HTTP's Retry-After).
type RetryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

// WithRetryAfter returns ctx carrying a fresh RetryAfter.
func WithRetryAfter(ctx context.Context) (context.Context, *RetryAfter) {
	h := &RetryAfter{}
	return context.WithValue(ctx, retryKey{}, h), h
}

func (h *RetryAfter) set(d time.Duration) {
	h.mu.Lock()
	h.d = max(h.d, d)
	h.mu.Unlock()
}

// Wait is the longest wait recorded; 0 if nothing was refused.
func (h *RetryAfter) Wait() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.d
}

// rootFields counts the fields of a selection set, through fragments.
func rootFields(doc *ast.QueryDocument, set ast.SelectionSet, depth int) int {
	if depth > 10 {
		return 0
	}
	n := 0
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			n++
		case *ast.InlineFragment:
			n += rootFields(doc, sel.SelectionSet, depth+1)
		case *ast.FragmentSpread:
			if doc != nil {
				if f := doc.Fragments.ForName(sel.Name); f != nil {
					n += rootFields(doc, f.SelectionSet, depth+1)
				}
			}
		}
	}
	return n
}

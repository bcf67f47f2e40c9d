package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/fault/entfault"
	"github.com/comm-gateway/comm/graph/playground"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/webhook"
)

// Options configure the GraphQL endpoint.
type Options struct {
	// Introspection enables schema introspection queries.
	Introspection bool
	// ComplexityLimit bounds an operation's complexity, in which a list's
	// fields count once per row it may return (default
	// DefaultComplexityLimit; see limits.go).
	ComplexityLimit int
	// MaxResponseBytes is the byte budget of one response: a response
	// that would pass it is answered with a response_too_large error
	// instead (default DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// Logger receives internal errors.
	Logger *slog.Logger
	// Writes, when set, is the write budget of each API key: every
	// mutation field takes a token (the same bucket as REST writes).
	Writes *ratelimit.Bucket
	// Mail serves the custom email domains; without it they answer
	// not_implemented.
	Mail Domains
	// Accounts serves the caller's account; Webhooks the project's
	// webhook. Both are required.
	Accounts *account.Service
	Webhooks *webhook.Hooks
}

// NewHandler returns the GraphQL endpoint (POST, and GET for queries). The
// caller authenticates the request and puts the principal in its context
// (messaging.WithPrincipal).
func NewHandler(svc *messaging.Service, client *ent.Client, opts Options) http.Handler {
	srv := handler.New(schema(svc, client, opts))
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	configure(srv, opts)
	return srv
}

// NewExecutor returns an executor configured like the endpoint, for
// operations arriving over other transports (the websocket in package live).
func NewExecutor(svc *messaging.Service, client *ent.Client, opts Options) *executor.Executor {
	x := executor.New(schema(svc, client, opts))
	configure(x, opts)
	return x
}

func schema(svc *messaging.Service, client *ent.Client, opts Options) graphql.ExecutableSchema {
	return NewExecutableSchema(Config{Resolvers: &Resolver{Service: svc, Ent: client, Mail: opts.Mail, Accounts: opts.Accounts, Webhooks: opts.Webhooks}})
}

// configurable is what handler.Server and executor.Executor share.
type configurable interface {
	Use(graphql.HandlerExtension)
	SetQueryCache(graphql.Cache[*ast.QueryDocument])
	SetErrorPresenter(graphql.ErrorPresenterFunc)
	SetRecoverFunc(graphql.RecoverFunc)
}

// configure applies opts (filling their defaults) to an endpoint or
// executor, so both transports behave alike.
func configure(x configurable, opts Options) {
	if opts.ComplexityLimit <= 0 {
		opts.ComplexityLimit = DefaultComplexityLimit
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	x.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	x.Use(&costLimit{limit: opts.ComplexityLimit})
	x.Use(&pageLimits{})
	x.Use(&responseBudget{limit: opts.MaxResponseBytes})
	x.Use(noNUL{})
	if opts.Writes != nil {
		x.Use(writeLimit{opts.Writes})
	}
	if opts.Introspection {
		x.Use(extension.Introspection{})
	}
	x.SetErrorPresenter(func(ctx context.Context, err error) *gqlerror.Error {
		return present(ctx, err, logger)
	})
	x.SetRecoverFunc(func(ctx context.Context, v any) error {
		logger.Error("graphql: panic", "panic", v)
		return errors.New("internal error")
	})
}

// Present maps an error to a GraphQL error with the REST error code in
// extensions.code.
func Present(ctx context.Context, err error, logger *slog.Logger) *gqlerror.Error {
	return present(ctx, err, logger)
}

// Playground returns GraphiQL for the endpoint at path: the page at
// path + "/playground" and its files (embedded, no CDN) under
// path + "/playground/". The caller routes both to it.
func Playground(path string) http.Handler {
	return playground.Handler(path+"/playground", path)
}

// present maps errors to GraphQL errors with fault.Present: the REST
// error codes in extensions.code, parameters by their GraphQL names.
func present(ctx context.Context, err error, logger *slog.Logger) *gqlerror.Error {
	gerr := graphql.DefaultErrorPresenter(ctx, err)
	p := fault.Present(ctx, entfault.Of(err))
	var gq *gqlerror.Error
	switch {
	case !p.Internal:
		p.Param = graphParam(ctx, p.Param)
		if h, ok := ctx.Value(retryKey{}).(*RetryAfter); ok && p.RetryAfter > 0 {
			h.set(p.RetryAfter)
		}
		g := gqlError(p)
		gerr.Message, gerr.Extensions = g.Message, g.Extensions
	case errors.As(err, &gq) && gq.Extensions != nil:
		// gqlgen's own errors (parse, validation, complexity) keep their
		// codes; entgql's pagination errors are invalid parameters.
		switch gq.Extensions["code"] {
		case "INVALID_PAGINATION":
			gerr.Extensions["code"] = fault.ErrInvalid.Code
		case "NOT_FOUND": // entgql's unresolved ids in nodes
			gerr.Extensions["code"] = fault.ErrNotFound.Code
		}
	case errors.As(err, &gq):
		gerr.Extensions = map[string]any{"code": fault.ErrInvalid.Code}
	default:
		logger.Error("graphql: resolver failed", "path", fmt.Sprint(gerr.Path), "err", err)
		gerr.Message = p.Message
		gerr.Extensions = map[string]any{"code": p.Code}
	}
	return gerr
}

// gqlError is a problem as GraphQL says it: its message, and its code,
// param, retry_after (seconds) and earliest_seq in extensions.
func gqlError(p fault.Problem) *gqlerror.Error {
	ext := map[string]any{"code": p.Code}
	if p.Param != "" {
		ext["param"] = p.Param
	}
	if secs := p.RetrySeconds(); secs > 0 {
		ext["retry_after"] = secs
	}
	if p.EarliestSeq > 0 {
		ext["earliest_seq"] = p.EarliestSeq
	}
	return &gqlerror.Error{Message: p.Message, Extensions: ext}
}

// faultError is e as GraphQL says it, for the errors raised before any
// resolver runs (its Param already a GraphQL name).
func faultError(e *fault.Error) *gqlerror.Error {
	return gqlError(fault.Present(context.Background(), e))
}

// graphParams are the GraphQL names of the REST parameters whose names
// differ: the domain names parameters as REST does.
var graphParams = map[string]string{
	"after_seq": "afterSeq", "limit": "first",
	"connection_id": "connectionID", "customer_id": "customerID", "agent_id": "agentID",
	"from_seq": "fromSeq",
}

// graphParam is the GraphQL name of the REST parameter param of an error
// raised under ctx: param itself when the field being resolved has an
// argument of that name (domains(limit:)), else its name in graphParams.
func graphParam(ctx context.Context, param string) string {
	name, ok := graphParams[param]
	if !ok {
		return param
	}
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Field.Field != nil && fc.Field.Definition != nil &&
		fc.Field.Definition.Arguments.ForName(param) != nil {
		return param
	}
	return name
}

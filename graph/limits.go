package graph

// What one GraphQL operation may cost the gateway. Three bounds, applied by
// the extensions configure installs on the HTTP endpoint and on the
// websocket's executor alike:
//
//   - cost: a list's fields count once per row it may return (its page size),
//     so an operation's complexity grows with the rows it asks for, not just
//     with the fields it names (costLimit, costModel);
//   - pages: every field taking a page size (first, last, limit, max) gets
//     the REST default when it is omitted and refuses more than the REST
//     maximum, naming the argument (pageLimits);
//   - bytes: a response stops being built once it would pass the byte budget
//     and is answered with one error instead (responseBudget).

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
)

// Defaults of Options.
const (
	// DefaultComplexityLimit admits one full page of any list with every
	// field selected (500 messages cost about 10,500, 1000 events about
	// 7,000), or several dashboard-sized pages, and refuses what asks for
	// many full pages at once.
	DefaultComplexityLimit = 20_000
	// DefaultMaxResponseBytes is the response byte budget: 8 MiB.
	DefaultMaxResponseBytes = 8 << 20
)

// unpagedRows is the rows a list without a page-size argument is costed at
// (apiKeys, an account's ledger and projects, a message's attachments, a
// domain's records), unless an argument lists its items (nodes(ids:)).
const unpagedRows = 10

// CodeComplexityLimit is extensions.code of an operation refused for its
// cost (gqlgen's code, kept).
const CodeComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED"

// CodeResponseTooLarge is extensions.code of an operation whose response
// would pass the byte budget (fault.ErrResponseTooLarge's code).
const CodeResponseTooLarge = "response_too_large"

// pageArgs are the arguments that size a page of a list, in the order a
// default is given to the first one a field has.
var pageArgs = [...]string{"first", "last", "limit", "max"}

// pageSize is a paged field's default and largest page.
type pageSize struct{ def, max int }

// pageSizes are the fields whose pages differ from REST's entity lists
// (messaging.DefaultPageLimit, messaging.MaxPageLimit): events, as
// GET /v1/events.
var pageSizes = map[string]pageSize{
	"Query.events":              {messaging.DefaultEventLimit, messaging.MaxEventLimit},
	"Subscription.eventBatches": {500, messaging.MaxEventLimit},
}

func pageSizeOf(object, field string) pageSize {
	if p, ok := pageSizes[object+"."+field]; ok {
		return p
	}
	return pageSize{messaging.DefaultPageLimit, messaging.MaxPageLimit}
}

// fieldKey names a field of an object type.
type fieldKey struct{ object, field string }

// pagedField is what costModel knows of a field taking a page size.
type pagedField struct {
	size pageSize
	// args are the page-size arguments the field has.
	args []string
}

// costModel derives from the schema which fields return many rows and how
// many: every field returning a list or a Relay connection, present or
// future, is covered by the rules in rows.
type costModel struct {
	schema *ast.Schema
	paged  map[fieldKey]pagedField
	leaf   map[string]bool // scalar and enum type names
}

func newCostModel(s *ast.Schema) *costModel {
	m := &costModel{schema: s, paged: map[fieldKey]pagedField{}, leaf: map[string]bool{}}
	for name, def := range s.Types {
		if def.Kind == ast.Scalar || def.Kind == ast.Enum {
			m.leaf[name] = true
		}
		for _, f := range def.Fields {
			if !m.many(f) {
				continue
			}
			var args []string
			for _, a := range pageArgs {
				if f.Arguments.ForName(a) != nil {
					args = append(args, a)
				}
			}
			if len(args) > 0 {
				m.paged[fieldKey{name, f.Name}] = pagedField{size: pageSizeOf(name, f.Name), args: args}
			}
		}
	}
	return m
}

// many reports whether f returns many rows: a list, or a Relay connection.
func (m *costModel) many(f *ast.FieldDefinition) bool {
	return f.Type.Elem != nil || m.connection(m.schema.Types[f.Type.Name()])
}

// connection reports whether def is a page type: edges and pageInfo.
func (m *costModel) connection(def *ast.Definition) bool {
	if def == nil || def.Kind != ast.Object {
		return false
	}
	edges := def.Fields.ForName("edges")
	return edges != nil && edges.Type.Elem != nil && def.Fields.ForName("pageInfo") != nil
}

// rows returns how many rows field f of object may return given its
// arguments (with the schema's defaults applied), for fields returning
// many; ok is false for the others.
//
//   - A paged field: the page size asked (the largest of first, last,
//     limit and max given), or its default; at most its maximum (a larger
//     value is refused with an error naming it when the field runs).
//   - The edges of a connection: 1, their rows are the connection's.
//   - Another list: the length of a list argument (nodes(ids:)), else
//     unpagedRows.
func (m *costModel) rows(object string, f *ast.FieldDefinition, args map[string]any) (n int, ok bool) {
	if p, ok := m.paged[fieldKey{object, f.Name}]; ok {
		given := false
		for _, a := range p.args {
			if v, ok := intValue(args[a]); ok {
				n, given = max(n, v), true
			}
		}
		if !given {
			n = p.size.def
		}
		return min(max(n, 0), p.size.max), true
	}
	if f.Type.Elem == nil {
		return 0, false
	}
	if f.Name == "edges" && m.connection(m.schema.Types[object]) {
		return 1, true
	}
	for _, a := range f.Arguments {
		if a.Type.Elem == nil {
			continue
		}
		if v := reflect.ValueOf(args[a.Name]); v.Kind() == reflect.Slice {
			return v.Len(), true
		}
	}
	return unpagedRows, true
}

// cost is the complexity of field f of object: 1, plus its selection's
// complexity once per row it may return.
func (m *costModel) cost(object string, f *ast.FieldDefinition, child int, args map[string]any) (int, bool) {
	n, ok := m.rows(object, f, args)
	if !ok {
		return 0, false
	}
	if n > 0 && child > (maxInt-1)/n {
		return maxInt, true
	}
	return 1 + n*child, true
}

const maxInt = int(^uint(0) >> 1)

// intValue reads an integer argument as the parser or the variables give
// it.
func intValue(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return clampInt(v), true
	case int32:
		return int(v), true
	case float64:
		return clampInt(int64(v)), true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return clampInt(n), true
		}
		if f, err := v.Float64(); err == nil {
			return clampInt(int64(f)), true
		}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return intValue(rv.Elem().Interface())
	}
	return 0, false
}

func clampInt(n int64) int {
	if n > int64(maxInt) {
		return maxInt
	}
	if n < -int64(maxInt) {
		return -maxInt
	}
	return int(n)
}

// costedSchema is the executable schema as the complexity walker sees it:
// the cost model first, the generated ComplexityRoot (empty today) for the
// fields that return one row.
type costedSchema struct {
	graphql.ExecutableSchema
	model *costModel
}

func (s costedSchema) Complexity(ctx context.Context, typeName, field string, child int, args map[string]any) (int, bool) {
	if def := s.model.schema.Types[typeName]; def != nil {
		if f := def.Fields.ForName(field); f != nil {
			if c, ok := s.model.cost(typeName, f, child, args); ok {
				return c, true
			}
		}
	}
	return s.ExecutableSchema.Complexity(ctx, typeName, field, child, args)
}

// costLimit refuses an operation whose complexity (by costModel) passes
// the limit before anything runs.
type costLimit struct {
	limit int
	es    graphql.ExecutableSchema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &costLimit{}

func (c *costLimit) ExtensionName() string { return "CostLimit" }

func (c *costLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = costedSchema{ExecutableSchema: es, model: newCostModel(es.Schema())}
	return nil
}

func (c *costLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	n := complexity.Calculate(ctx, c.es, oc.Operation, oc.Variables)
	if n <= c.limit {
		return nil
	}
	err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d: a list counts its fields once "+
		"per row it may return (its first, last, limit or max, or its default page when omitted), so ask for smaller "+
		"pages, fewer fields or fewer lists at once", n, c.limit)
	errcode.Set(err, CodeComplexityLimit)
	return err
}

// pageLimits gives a paged field the default page size when the caller
// gave none, and refuses a page larger than the field's maximum with an
// invalid_parameter error naming the argument, before the resolver runs.
type pageLimits struct{ model *costModel }

var _ interface {
	graphql.HandlerExtension
	graphql.FieldInterceptor
} = &pageLimits{}

func (p *pageLimits) ExtensionName() string { return "PageLimits" }

func (p *pageLimits) Validate(es graphql.ExecutableSchema) error {
	p.model = newCostModel(es.Schema())
	return nil
}

func (p *pageLimits) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || len(fc.Args) == 0 {
		return next(ctx)
	}
	pf, ok := p.model.paged[fieldKey{fc.Object, fc.Field.Name}]
	if !ok {
		return next(ctx)
	}
	given := false
	for _, a := range pf.args {
		n, ok := intValue(fc.Args[a])
		if !ok {
			continue
		}
		given = true
		if n > pf.size.max {
			return nil, fault.Invalid(a, "must be at most %d (a page holds %d when it is omitted)", pf.size.max, pf.size.def)
		}
	}
	if !given {
		name := pf.args[0]
		// A Relay page before a cursor, and not after one, is the last
		// rows before it.
		if name == "first" && !isNil(fc.Args["before"]) && isNil(fc.Args["after"]) && slices.Contains(pf.args, "last") {
			name = "last"
		}
		if v, ok := withInt(fc.Args[name], pf.size.def); ok {
			fc.Args[name] = v
		}
	}
	return next(ctx)
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return rv.IsNil()
	}
	return false
}

// withInt returns n as a value of the type of old, an absent optional
// integer argument (a nil *int).
func withInt(old any, n int) (any, bool) {
	rv := reflect.ValueOf(old)
	if rv.Kind() != reflect.Pointer || !rv.IsNil() {
		return nil, false
	}
	v := reflect.New(rv.Type().Elem())
	switch v.Elem().Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.Elem().SetInt(int64(n))
		return v.Interface(), true
	}
	return nil, false
}

// responseBudget bounds the bytes of a response while it is built. Each
// resolved field adds an estimate of what it writes (its name, and a leaf
// value's JSON); the field that passes the budget fails, every field after
// it resolves to null without running its resolver, and the response is
// replaced by one response_too_large error. The root fields of a query run
// one after another, so the rows of one page at a time are in memory, and
// none are read once the budget is spent. The finished data is checked
// against the budget exactly as well.
type responseBudget struct {
	limit int64
	model *costModel
}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
	graphql.RootFieldInterceptor
	graphql.FieldInterceptor
} = &responseBudget{}

// budget is one response's account.
type budget struct {
	limit int64
	used  atomic.Int64
	over  atomic.Bool
	// root runs a query's root fields one at a time.
	root sync.Mutex
}

type budgetKey struct{}

func (b *responseBudget) ExtensionName() string { return "ResponseBudget" }

func (b *responseBudget) Validate(es graphql.ExecutableSchema) error {
	b.model = newCostModel(es.Schema())
	return nil
}

func (b *responseBudget) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	acct := &budget{limit: b.limit}
	resp := next(context.WithValue(ctx, budgetKey{}, acct))
	if resp == nil {
		return nil
	}
	if acct.over.Load() || int64(len(resp.Data)) > b.limit {
		return &graphql.Response{Errors: gqlerror.List{faultError(b.tooLarge())}, Extensions: resp.Extensions}
	}
	return resp
}

func (b *responseBudget) tooLarge() *fault.Error {
	return fault.ResponseTooLarge("the response would exceed %d bytes: ask for smaller pages or fewer fields", b.limit)
}

func (b *responseBudget) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	acct, _ := ctx.Value(budgetKey{}).(*budget)
	if acct == nil {
		return next(ctx)
	}
	acct.root.Lock()
	defer acct.root.Unlock()
	if acct.over.Load() {
		return graphql.Null
	}
	return next(ctx)
}

func (b *responseBudget) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	acct, _ := ctx.Value(budgetKey{}).(*budget)
	if acct == nil {
		return next(ctx)
	}
	if acct.over.Load() {
		return graphql.Null, nil
	}
	res, err := next(ctx)
	if err != nil {
		return res, err
	}
	fc := graphql.GetFieldContext(ctx)
	n := int64(len(fc.Field.Alias)) + 4 // "alias":value,
	if fc.Field.Definition != nil && b.model.leaf[fc.Field.Definition.Type.Name()] {
		n += jsonSize(reflect.ValueOf(res))
	} else {
		n += 2 // {} or []
	}
	if acct.used.Add(n) > acct.limit {
		acct.over.Store(true)
		return nil, b.tooLarge()
	}
	return res, nil
}

var timeType = reflect.TypeFor[time.Time]()

// jsonSize is the length of a leaf value (a scalar, an enum or a list of
// them) as gqlgen writes it.
func jsonSize(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.Invalid:
		return 4
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 4
		}
		return jsonSize(v.Elem())
	case reflect.String:
		return quotedSize(v.String())
	case reflect.Slice:
		if v.IsNil() {
			return 4
		}
		if v.Type().Elem().Kind() == reflect.Uint8 { // raw JSON
			return int64(v.Len())
		}
		n := int64(2)
		for i := range v.Len() {
			n += jsonSize(v.Index(i)) + 1
		}
		return n
	case reflect.Bool:
		return 5
	case reflect.Struct:
		if v.Type() == timeType {
			return 32
		}
		return 64
	}
	return 20 // numbers
}

// quotedSize is the length of s as a JSON string, escaped as gqlgen's
// MarshalString escapes it.
func quotedSize(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\t' || c == '\r' || c == '\n':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

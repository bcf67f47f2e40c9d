package graph

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// TestEveryListCostsItsRows walks the schema: every field returning a list
// or a Relay connection, present or future, costs its selection once per
// row it may return, growing with the page size asked and bounded by the
// maximum; a page-size argument's schema default is the page default the
// resolvers are given; and no connection is nested below Query, where
// entgql would load it from the raw arguments, past the page limits.
func TestEveryListCostsItsRows(t *testing.T) {
	es := NewExecutableSchema(Config{Resolvers: &Resolver{}})
	s := es.Schema()
	m := newCostModel(s)
	costed := costedSchema{ExecutableSchema: es, model: m}
	const child = 10
	cost := func(object string, f *ast.FieldDefinition, args map[string]any) int {
		t.Helper()
		// As the complexity walker passes them: the schema's defaults
		// applied.
		full := map[string]any{}
		for _, a := range f.Arguments {
			if a.DefaultValue != nil {
				v, err := a.DefaultValue.Value(nil)
				if err != nil {
					t.Fatal(err)
				}
				full[a.Name] = v
			}
		}
		for k, v := range args {
			full[k] = v
		}
		c, ok := costed.Complexity(context.Background(), object, f.Name, child, full)
		if !ok {
			t.Fatalf("%s.%s returns many rows but has no cost", object, f.Name)
		}
		return c
	}

	names := make([]string, 0, len(s.Types))
	for name := range s.Types {
		names = append(names, name)
	}
	slices.Sort(names)
	var lists, paged int
	for _, object := range names {
		def := s.Types[object]
		if strings.HasPrefix(object, "__") || (def.Kind != ast.Object && def.Kind != ast.Interface) {
			continue
		}
		for _, f := range def.Fields {
			name := object + "." + f.Name
			var args []string
			for _, a := range pageArgs {
				if f.Arguments.ForName(a) != nil {
					args = append(args, a)
				}
			}
			if !m.many(f) {
				if len(args) > 0 {
					t.Errorf("%s takes a page size (%v) but returns one row", name, args)
				}
				if _, ok := m.rows(object, f, nil); ok {
					t.Errorf("%s returns one row but is costed as many", name)
				}
				continue
			}
			lists++
			if m.connection(s.Types[f.Type.Name()]) && object != "Query" {
				t.Errorf("%s is a connection below Query: entgql eager-loads it from the raw arguments, so pageLimits' "+
					"default and maximum would not apply; bound it before adding it", name)
			}
			if len(args) == 0 {
				want := 1 + unpagedRows*child
				if f.Name == "edges" && m.connection(def) {
					want = 1 + child // the connection's page counts the rows
				}
				if c := cost(object, f, nil); c != want {
					t.Errorf("%s (a list without a page size) costs %d for a selection of %d, want %d", name, c, child, want)
				}
				if want == 1+child {
					continue
				}
				// A list argument sizes it (nodes(ids:)).
				for _, a := range f.Arguments {
					if a.Type.Elem != nil {
						if c := cost(object, f, map[string]any{a.Name: []any{1, 2, 3}}); c != 1+3*child {
							t.Errorf("%s(%s: 3 items) costs %d, want %d", name, a.Name, c, 1+3*child)
						}
					}
				}
				continue
			}
			paged++
			size := pageSizeOf(object, f.Name)
			if size.def < 1 || size.max < size.def {
				t.Errorf("%s: page size %+v", name, size)
			}
			for _, a := range args {
				if d := f.Arguments.ForName(a).DefaultValue; d != nil {
					if v, _ := d.Value(nil); v != int64(size.def) {
						t.Errorf("%s(%s) defaults to %v in the schema but to %d in pageSizes", name, a, v, size.def)
					}
				}
				small, large := cost(object, f, map[string]any{a: int64(2)}), cost(object, f, map[string]any{a: json.Number("20")})
				if small != 1+2*child || large != 1+20*child {
					t.Errorf("%s(%s: 2) costs %d and (%s: 20) %d for a selection of %d; want %d and %d",
						name, a, small, a, large, child, 1+2*child, 1+20*child)
				}
				if c := cost(object, f, map[string]any{a: int64(size.max) * 100}); c != 1+size.max*child {
					t.Errorf("%s(%s: %d) costs %d, want the maximum page's %d", name, a, size.max*100, c, 1+size.max*child)
				}
			}
			var none map[string]any
			if f.Arguments.ForName("first") != nil {
				none = map[string]any{"first": nil} // first: null
			}
			if c := cost(object, f, none); c != 1+size.def*child {
				t.Errorf("%s without a page size costs %d, want the default page's %d", name, c, 1+size.def*child)
			}
		}
	}
	// The schema has these today: the walk must see them.
	if lists < 15 || paged < 7 {
		t.Errorf("the walk found %d lists, %d of them paged", lists, paged)
	}
}

// TestComplexityOfADocument: the executor's complexity check (the one the
// HTTP endpoint and the websocket share) multiplies by the page size given
// literally, by a variable, or by default, and states the figure.
func TestComplexityOfADocument(t *testing.T) {
	x := NewExecutor(nil, nil, Options{ComplexityLimit: 1})
	for _, c := range []struct {
		query string
		vars  map[string]any
		want  string
	}{
		{`{ messages(first: 10) { edges { node { id } } } }`, nil, "complexity 31,"},
		{`query($n: Int) { messages(first: $n) { edges { node { id } } } }`, map[string]any{"n": json.Number("20")}, "complexity 61,"},
		{`{ messages { edges { node { id text } } pageInfo { hasNextPage } } }`, nil, "complexity 301,"}, // 1 + 50 × (edges 4 + pageInfo 2)
		{`{ events(first: 1000) { edges { node { data } } } }`, nil, "complexity 3001,"},
		{`{ events { edges { node { data } } } }`, nil, "complexity 301,"},
		{`{ nodes(ids: ["a", "b"]) { id } }`, nil, "complexity 3,"},
		{`{ apiKeys { id name } }`, nil, "complexity 21,"},
	} {
		ctx := graphql.StartOperationTrace(context.Background())
		_, errs := x.CreateOperationContext(ctx, &graphql.RawParams{Query: c.query, Variables: c.vars})
		if len(errs) != 1 || !strings.Contains(errs[0].Message, c.want) || errs[0].Extensions["code"] != CodeComplexityLimit {
			t.Errorf("%s: %v, want %q", c.query, errs, c.want)
		}
	}
}

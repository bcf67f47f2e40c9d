package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
)

// noNUL refuses an operation with U+0000 in any string it passes, as a
// variable or a literal argument: PostgreSQL cannot store it in text, and
// no field of the API has a use for it. The error names the argument or
// variable (with the path inside it).
type noNUL struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = noNUL{}

func (noNUL) ExtensionName() string                   { return "NoNUL" }
func (noNUL) Validate(graphql.ExecutableSchema) error { return nil }

func (noNUL) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	for name, v := range rc.Variables {
		if path, ok := messaging.NULPath(v, name); ok {
			return nulError(path)
		}
	}
	if rc.Operation == nil {
		return nil
	}
	if path, ok := nulInSelections(rc.Doc, rc.Operation.SelectionSet, 0); ok {
		return nulError(path)
	}
	return nil
}

func nulError(path string) *gqlerror.Error {
	return faultError(fault.Invalid(path, "must not contain NUL (U+0000) characters"))
}

func nulInSelections(doc *ast.QueryDocument, set ast.SelectionSet, depth int) (string, bool) {
	if depth > 50 {
		return "", false
	}
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			for _, a := range sel.Arguments {
				if p, ok := nulInValue(a.Value, a.Name); ok {
					return p, true
				}
			}
			if p, ok := nulInSelections(doc, sel.SelectionSet, depth+1); ok {
				return p, true
			}
		case *ast.InlineFragment:
			if p, ok := nulInSelections(doc, sel.SelectionSet, depth+1); ok {
				return p, true
			}
		case *ast.FragmentSpread:
			if doc != nil {
				if f := doc.Fragments.ForName(sel.Name); f != nil {
					if p, ok := nulInSelections(doc, f.SelectionSet, depth+1); ok {
						return p, true
					}
				}
			}
		}
	}
	return "", false
}

func nulInValue(v *ast.Value, path string) (string, bool) {
	if v == nil {
		return "", false
	}
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		return path, strings.ContainsRune(v.Raw, 0)
	case ast.ObjectValue:
		for _, c := range v.Children {
			if p, ok := nulInValue(c.Value, path+"."+c.Name); ok {
				return p, true
			}
		}
	case ast.ListValue:
		for i, c := range v.Children {
			if p, ok := nulInValue(c.Value, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

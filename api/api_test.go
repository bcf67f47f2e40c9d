package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/api"
)

// TestFieldsHaveJSONTags checks every struct type declared in the package:
// each field carries an explicit json tag, so its name on the wire is
// written down where it is declared and a Go rename cannot change the
// JSON. An embedded field may go without one (its fields are promoted, as
// NewKey's Key), provided it is a type of this package.
func TestFieldsHaveJSONTags(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	types := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			types++
			if !ts.Name.IsExported() {
				t.Errorf("%s: unexported type in the wire package", ts.Name)
			}
			for _, fld := range st.Fields.List {
				checkField(t, ts.Name.Name, fld)
			}
			return false
		})
	}
	if types < 15 {
		t.Fatalf("found %d struct types; the parse missed the package", types)
	}
}

func checkField(t *testing.T, typ string, fld *ast.Field) {
	t.Helper()
	name := typ + ".(embedded)"
	if len(fld.Names) > 0 {
		name = typ + "." + fld.Names[0].Name
	}
	if _, ok := fld.Type.(*ast.StructType); ok {
		t.Errorf("%s: anonymous struct; declare a named type", name)
	}
	tag := ""
	if fld.Tag != nil {
		s, err := strconv.Unquote(fld.Tag.Value)
		if err != nil {
			t.Errorf("%s: tag %s: %v", name, fld.Tag.Value, err)
			return
		}
		tag = reflect.StructTag(s).Get("json")
	}
	if len(fld.Names) == 0 {
		if id, ok := fld.Type.(*ast.Ident); !ok || !id.IsExported() {
			t.Errorf("%s: embeds a type of another package", name)
		}
		return
	}
	if tag == "" || strings.HasPrefix(tag, ",") {
		t.Errorf("%s: no json name in its tag", name)
	}
	if tag == "-" {
		t.Errorf("%s: a field the wire never carries does not belong in package api", name)
	}
}

// TestEventMessageCoversWrittenMessages checks that readers' EventMessage
// has every field the gateway writes in message events (ReceivedMessage,
// SentMessage), under the same JSON name and of the same type (or a
// pointer to it, where the reader tells absent from zero).
func TestEventMessageCoversWrittenMessages(t *testing.T) {
	t.Parallel()
	reader := jsonFields(reflect.TypeFor[api.EventMessage]())
	for _, typ := range []reflect.Type{reflect.TypeFor[api.ReceivedMessage](), reflect.TypeFor[api.SentMessage]()} {
		for name, ft := range jsonFields(typ) {
			rt, ok := reader[name]
			if !ok {
				t.Errorf("%s writes %q, which EventMessage lacks", typ.Name(), name)
				continue
			}
			if rt != ft && !(rt.Kind() == reflect.Pointer && rt.Elem() == ft) {
				t.Errorf("%q: %s writes %s, EventMessage reads %s", name, typ.Name(), ft, rt)
			}
		}
	}
}

// jsonFields maps the JSON names of t's fields (embedded structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = f.Type
	}
	return out
}

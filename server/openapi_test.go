package server_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// The OpenAPI document (api/openapi.yaml, served at /v1/openapi.json) is
// kept true by:
//   - TestOpenAPIDocument: a valid OpenAPI 3.1 document (kin-openapi) that
//     has every route the server registers, and no other;
//   - TestOpenAPIMatchesWireTypes: its schemas are package api's types;
//   - TestOpenAPIErrorCodes and TestOpenAPIEvents: it lists every error
//     code and every event type, and real events match TypedEvent;
//   - g.do, which checks every /v1 answer of every test that calls it
//     (checkOpenAPI): status, content type and body as documented, and a
//     request the server accepted valid per the document.

// undocumented are the prefixes of the routes the document leaves out on
// purpose: GraphQL (its own schema, schema.graphqls), and the HTML pages of
// device sign-in and the dashboard. Every other route the server registers
// must be in the document.
var undocumented = []string{"/graphql", "/device", "/dashboard"}

// validated are the prefixes of the paths whose answers g.do checks.
var validated = []string{"/v1/"}

// openAPISpec is the document, loaded and checked once, with what checks
// answers against it: a ServeMux of its operations (the server's own
// routing rules) and a JSON Schema 2020-12 compiler over the whole
// document, whose compiled schemas are kept by location.
type openAPISpec struct {
	doc      *openapi3.T
	ops      *http.ServeMux
	compiler *jsonschema.Compiler

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

const specURL = "mem://openapi.json"

var loadSpec = sync.OnceValues(func() (*openAPISpec, error) {
	raw, err := server.OpenAPI()
	if err != nil {
		return nil, fmt.Errorf("convert api/openapi.yaml: %w", err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("not a valid OpenAPI document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	whole, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(specURL, whole); err != nil {
		return nil, err
	}
	sp := &openAPISpec{doc: doc, ops: http.NewServeMux(), compiler: c, schemas: map[string]*jsonschema.Schema{}}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			sp.ops.Handle(method+" "+path, http.NotFoundHandler())
		}
	}
	return sp, nil
})

// spec is the loaded document; a document that does not load fails the
// test.
func spec(t testing.TB) *openAPISpec {
	t.Helper()
	sp, err := loadSpec()
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	return sp
}

// pointer is the JSON pointer of the path of tokens, as a URL fragment.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		tok = strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
		b.WriteString("/" + url.PathEscape(tok))
	}
	return b.String()
}

// schemaAt compiles (once) the schema at the document's JSON pointer ptr.
func (sp *openAPISpec) schemaAt(ptr string) (*jsonschema.Schema, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if s, ok := sp.schemas[ptr]; ok {
		return s, nil
	}
	s, err := sp.compiler.Compile(specURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	sp.schemas[ptr] = s
	return s, nil
}

// operation finds the documented operation serving method and path, as the
// server's mux would route it: its path template, or "" when the document
// has none.
func (sp *openAPISpec) operation(method, path string) (string, *openapi3.Operation) {
	r := &http.Request{Method: method, URL: &url.URL{Path: path}, Host: "comm.test"}
	_, pattern := sp.ops.Handler(r)
	if pattern == "" {
		return "", nil
	}
	m, p, _ := strings.Cut(pattern, " ")
	return p, sp.doc.Paths.Value(p).GetOperation(m)
}

// check reports how an answer to req disagrees with the document: an
// undocumented route answered other than 404 or 405, an undocumented
// status, a content type the status does not list, or a body its schema
// refuses. A request the server accepted (2xx) must be one the document
// allows too: its query parameters documented, its body valid.
func (sp *openAPISpec) check(req request, resp response) error {
	method := cmp.Or(req.Method, http.MethodGet)
	if method == http.MethodHead {
		return nil // GET's answer without the body; the document lists GET
	}
	u, err := url.Parse(req.Path)
	if err != nil {
		return err
	}
	tmpl, op := sp.operation(method, u.Path)
	if op == nil {
		if resp.Status != http.StatusNotFound && resp.Status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s is not in the document, yet answered %d", method, u.Path, resp.Status)
		}
		return sp.checkBody(pointer("components", "schemas", "Error"), resp.Body)
	}
	if resp.Status/100 == 2 {
		if err := sp.checkRequest(method, tmpl, op, u.Query(), req.Body); err != nil {
			return fmt.Errorf("%s %s was accepted (%d), but %w", method, tmpl, resp.Status, err)
		}
	}
	code := strconv.Itoa(resp.Status)
	ref := op.Responses.Status(resp.Status)
	if ref == nil {
		return fmt.Errorf("%s %s answered %d, which the document does not list; body %.300s", method, tmpl, resp.Status, resp.Body)
	}
	base := pointer("paths", tmpl, strings.ToLower(method), "responses", code)
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/responses/"); ok {
		base = pointer("components", "responses", name)
	}
	content := ref.Value.Content
	if len(content) == 0 {
		if len(resp.Body) != 0 {
			return fmt.Errorf("%s %s answered %d with a body, documented without one: %.300s", method, tmpl, resp.Status, resp.Body)
		}
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	key, mt := mediaType(content, ct)
	if mt == nil {
		return fmt.Errorf("%s %s answered %d as %q, not a documented content type", method, tmpl, resp.Status, ct)
	}
	if mt.Schema == nil {
		return nil
	}
	if err := sp.checkBody(base+pointer("content", key, "schema"), resp.Body); err != nil {
		return fmt.Errorf("%s %s answered %d: %w", method, tmpl, resp.Status, err)
	}
	return nil
}

// mediaType is the entry of content that serves the content type ct, and
// its key.
func mediaType(content openapi3.Content, ct string) (string, *openapi3.MediaType) {
	mt := content.Get(ct)
	for k, v := range content {
		if v == mt {
			return k, mt
		}
	}
	return "", nil
}

// checkRequest checks an accepted request against its operation: every
// query parameter is documented, and the body is one the document takes.
func (sp *openAPISpec) checkRequest(method, tmpl string, op *openapi3.Operation, q url.Values, body string) error {
	for name, values := range q {
		ptr, p := sp.queryParam(method, tmpl, op, name)
		if p == nil {
			return fmt.Errorf("query parameter %q is not documented", name)
		}
		// The value as the schema's type: the server took it, so the
		// document must take it too (bounds, enums).
		for _, v := range values {
			if v == "" {
				continue // the server takes an empty value as none
			}
			b := []byte(strconv.Quote(v))
			if p.Schema.Value.Type.Is(openapi3.TypeInteger) {
				b = []byte(v)
			}
			if err := sp.checkBody(ptr, b); err != nil {
				return fmt.Errorf("query parameter %s=%s: %w", name, v, err)
			}
		}
	}
	rb := op.RequestBody
	switch {
	case body == "" && rb != nil && rb.Value.Required:
		return fmt.Errorf("it had no body, which the document requires")
	case body == "":
		return nil
	case rb == nil:
		return fmt.Errorf("it had a body, which the document does not take")
	}
	key, mt := mediaType(rb.Value.Content, "application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	base := pointer("paths", tmpl, strings.ToLower(method), "requestBody")
	if name, ok := strings.CutPrefix(rb.Ref, "#/components/requestBodies/"); ok {
		base = pointer("components", "requestBodies", name)
	}
	if err := sp.checkBody(base+pointer("content", key, "schema"), []byte(body)); err != nil {
		return fmt.Errorf("its body: %w", err)
	}
	return nil
}

// queryParam finds the query parameter name of an operation (or of its
// path) and the JSON pointer of its schema.
func (sp *openAPISpec) queryParam(method, tmpl string, op *openapi3.Operation, name string) (string, *openapi3.Parameter) {
	lists := []struct {
		base   string
		params openapi3.Parameters
	}{
		{pointer("paths", tmpl, strings.ToLower(method), "parameters"), op.Parameters},
		{pointer("paths", tmpl, "parameters"), sp.doc.Paths.Value(tmpl).Parameters},
	}
	for _, l := range lists {
		for i, ref := range l.params {
			if p := ref.Value; p.In == openapi3.ParameterInQuery && p.Name == name {
				if c, ok := strings.CutPrefix(ref.Ref, "#/components/parameters/"); ok {
					return pointer("components", "parameters", c, "schema"), p
				}
				return l.base + pointer(strconv.Itoa(i), "schema"), p
			}
		}
	}
	return "", nil
}

// checkBody validates a JSON body against the schema at ptr.
func (sp *openAPISpec) checkBody(ptr string, body []byte) error {
	s, err := sp.schemaAt(ptr)
	if err != nil {
		return fmt.Errorf("compile %s: %w", ptr, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %v: %.300s", err, body)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("body does not match %s: %v\nbody: %.2000s", ptr, err, body)
	}
	return nil
}

// checkOpenAPI checks an answer g.do got against the document, when its
// path is one the document's test validates.
func checkOpenAPI(t testing.TB, req request, resp response) {
	t.Helper()
	path, _, _ := strings.Cut(req.Path, "?")
	if !slices.ContainsFunc(validated, func(p string) bool { return strings.HasPrefix(path, p) }) {
		return
	}
	sp := spec(t)
	if err := sp.check(req, resp); err != nil {
		t.Errorf("OpenAPI: %v", err)
	}
	sp.record(req, resp)
}

// record appends "METHOD /template status" to the file named by
// COMM_OPENAPI_SEEN, if set: which operations and answers the tests
// exercised (sort -u it).
func (sp *openAPISpec) record(req request, resp response) {
	name := os.Getenv("COMM_OPENAPI_SEEN")
	if name == "" {
		return
	}
	method := cmp.Or(req.Method, http.MethodGet)
	path, _, _ := strings.Cut(req.Path, "?")
	tmpl, op := sp.operation(method, path)
	if op == nil {
		tmpl = "(undocumented) " + path
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s %d\n", method, tmpl, resp.Status)
	f.Close()
}

// TestOpenAPIDocument: the gateway serves the document without a key, it
// is a valid OpenAPI 3.1 document (kin-openapi's validator), and it
// documents exactly the routes the server registers, but those left out on
// purpose (undocumented).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), server.Options{})
	resp := g.do(t, request{Path: "/v1/openapi.json"})
	if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: status %d, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	want, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Body, want) {
		t.Errorf("served document differs from server.OpenAPI()")
	}
	sp := spec(t)
	if sp.doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", sp.doc.OpenAPI)
	}

	registered := map[string]bool{}
	for _, route := range g.Front.Routes() {
		method, path, ok := strings.Cut(route, " ")
		if !ok || !strings.HasPrefix(path, "/") {
			t.Errorf("route %q: want METHOD /path", route)
			continue
		}
		registered[route] = true
		if slices.ContainsFunc(undocumented, func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") }) {
			continue
		}
		item := sp.doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s is not in the document (api/openapi.yaml)", route)
		}
	}
	if !registered["GET /v1/openapi.json"] || !registered["POST /v1/messages"] {
		t.Fatalf("Routes() misses routes: %v", g.Front.Routes())
	}
	for path, item := range sp.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !registered[method+" "+path] {
				t.Errorf("the document has %s %s (%s), which the server does not serve", method, path, op.OperationID)
			}
			if strings.HasPrefix(path, "/v1/") && op.Responses.Status(http.StatusInternalServerError) == nil {
				t.Errorf("%s %s: no 500 answer documented", method, path)
			}
			for code, r := range op.Responses.Map() {
				if code[0] != '4' && code[0] != '5' || !strings.HasPrefix(path, "/v1/") {
					continue
				}
				if mt := r.Value.Content.Get("application/json"); mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Error" {
					t.Errorf("%s %s answers %s without the Error schema", method, path, code)
				}
			}
		}
	}
}

// TestOpenAPIErrorCodes: every code of package fault, and so every code an
// error answer can carry, is listed with its status in ErrorDetail.code.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	desc := spec(t).doc.Components.Schemas["ErrorDetail"].Value.Properties["code"].Value.Description
	for _, code := range faultCodes(t) {
		p := fault.Present(context.Background(), &fault.Error{Code: code})
		if !strings.Contains(desc, code+" "+strconv.Itoa(p.Status)) {
			t.Errorf("ErrorDetail.code does not list %q with its status %d", code, p.Status)
		}
	}
}

// faultCodes are the codes package fault declares (its Err* sentinels,
// &Error{Code: "..."}), read from its source so that a new one is not
// missed.
func faultCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../fault/fault.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Code" {
			if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, code)
			}
		}
		return true
	})
	if len(codes) < 15 {
		t.Fatalf("found %d codes in fault/fault.go; the parse missed them", len(codes))
	}
	return codes
}

// wireTypes are the component schemas that mirror a Go type of the wire,
// by name. In a response type's schema a property is required unless its
// field is omitempty; request types are read leniently, so only their
// property names and types are compared.
var wireTypes = map[string]struct {
	typ     reflect.Type
	request bool
}{
	"Error":           {typ: reflect.TypeFor[api.ErrorBody]()},
	"ErrorDetail":     {typ: reflect.TypeFor[api.ErrorDetail]()},
	"Sandbox":         {typ: reflect.TypeFor[api.Sandbox]()},
	"Project":         {typ: reflect.TypeFor[api.Project]()},
	"Event":           {typ: reflect.TypeFor[api.Event]()},
	"ChannelInfo":     {typ: reflect.TypeFor[api.ChannelInfo]()},
	"ChannelField":    {typ: reflect.TypeFor[api.ChannelField]()},
	"Connection":      {typ: reflect.TypeFor[api.Connection]()},
	"Binding":         {typ: reflect.TypeFor[api.Binding]()},
	"Conversation":    {typ: reflect.TypeFor[api.Conversation]()},
	"Message":         {typ: reflect.TypeFor[api.Message]()},
	"Delivery":        {typ: reflect.TypeFor[api.Delivery]()},
	"AttachmentInfo":  {typ: reflect.TypeFor[api.AttachmentInfo]()},
	"PendingReceipt":  {typ: reflect.TypeFor[api.PendingReceipt]()},
	"TypingState":     {typ: reflect.TypeFor[api.TypingState]()},
	"Webhook":         {typ: reflect.TypeFor[api.Webhook]()},
	"WebhookAttempt":  {typ: reflect.TypeFor[api.WebhookAttempt]()},
	"DeviceStart":     {typ: reflect.TypeFor[api.DeviceStart]()},
	"DeviceToken":     {typ: reflect.TypeFor[api.DeviceToken]()},
	"Account":         {typ: reflect.TypeFor[api.Account]()},
	"AccountView":     {typ: reflect.TypeFor[api.AccountView]()},
	"CreditEntry":     {typ: reflect.TypeFor[api.CreditEntry]()},
	"ProjectSummary":  {typ: reflect.TypeFor[api.ProjectSummary]()},
	"Key":             {typ: reflect.TypeFor[api.Key]()},
	"NewKey":          {typ: reflect.TypeFor[api.NewKey]()},
	"Domain":          {typ: reflect.TypeFor[api.Domain]()},
	"DomainRecord":    {typ: reflect.TypeFor[api.DomainRecord]()},
	"MessageEvent":    {typ: reflect.TypeFor[api.MessageEvent]()},
	"EventMessage":    {typ: reflect.TypeFor[api.EventMessage]()},
	"ConnectionEvent": {typ: reflect.TypeFor[api.ConnectionEvent]()},
	"DomainEvent":     {typ: reflect.TypeFor[api.DomainEvent]()},
	"WebhookEvent":    {typ: reflect.TypeFor[api.WebhookEvent]()},
	"BalanceLowEvent": {typ: reflect.TypeFor[api.BalanceLowEvent]()},

	"ConnectRequest":     {typ: reflect.TypeFor[messaging.ConnectInput](), request: true},
	"SendRequest":        {typ: reflect.TypeFor[messaging.SendInput](), request: true},
	"Template":           {typ: reflect.TypeFor[channels.Template](), request: true},
	"WebhookRequest":     {typ: reflect.TypeFor[api.WebhookRequest](), request: true},
	"DeviceStartRequest": {typ: reflect.TypeFor[api.DeviceStartRequest](), request: true},
	"DeviceTokenRequest": {typ: reflect.TypeFor[api.DeviceTokenRequest](), request: true},
}

// TestOpenAPIMatchesWireTypes: each component schema that mirrors a wire
// type has its fields under their JSON names, no others, with matching
// types; null allowed exactly where the field is a pointer; required
// exactly where it is not omitempty (response types).
func TestOpenAPIMatchesWireTypes(t *testing.T) {
	t.Parallel()
	sp := spec(t)
	byType := map[reflect.Type]string{}
	for name, w := range wireTypes {
		byType[w.typ] = name
	}
	for name, w := range wireTypes {
		ref := sp.doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("no component schema %s (for %s)", name, w.typ)
			continue
		}
		s := ref.Value
		if !w.request && (s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has) {
			t.Errorf("%s: additionalProperties is not false", name)
		}
		fields := jsonFieldsOf(w.typ)
		for prop := range s.Properties {
			if _, ok := fields[prop]; !ok {
				t.Errorf("%s.%s: %s has no such field", name, prop, w.typ)
			}
		}
		for jname, f := range fields {
			p := s.Properties[jname]
			if p == nil {
				t.Errorf("%s: property %q (%s.%s) is missing", name, jname, w.typ, f.name)
				continue
			}
			if !w.request && slices.Contains(s.Required, jname) == f.omitempty {
				t.Errorf("%s.%s: required is %v, but the field's omitempty is %v", name, jname, !f.omitempty, f.omitempty)
			}
			if err := matchType(p, f.typ, byType); err != nil {
				t.Errorf("%s.%s: %v", name, jname, err)
			}
		}
	}
}

type jsonField struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

// jsonFieldsOf maps the JSON names of t's fields (embedded structs
// flattened) to them.
func jsonFieldsOf(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFieldsOf(f.Type) {
				out[k] = v
			}
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{name: f.Name, typ: f.Type, omitempty: strings.Contains(opts, "omitempty")}
	}
	return out
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// matchType checks a property's schema against a field's Go type.
func matchType(p *openapi3.SchemaRef, t reflect.Type, byType map[reflect.Type]string) error {
	nullable := false
	if p.Ref == "" && p.Value.Type != nil && p.Value.Type.Includes(openapi3.TypeNull) {
		nullable = true
	}
	// A nullable reference: anyOf [$ref, {type: null}].
	if len(p.Value.AnyOf) == 2 && p.Value.AnyOf[1].Value.Type.Is(openapi3.TypeNull) {
		nullable, p = true, p.Value.AnyOf[0]
	}
	if t.Kind() == reflect.Pointer {
		if !nullable {
			return fmt.Errorf("a pointer (%s), but null is not allowed", t)
		}
		t = t.Elem()
	} else if nullable && t.Kind() != reflect.Slice && t.Kind() != reflect.Map {
		return fmt.Errorf("null is allowed, but %s is not a pointer", t)
	}
	want := ""
	switch {
	case t == rawType:
		return nil // any JSON
	case t == timeType:
		if p.Value.Format != "date-time" {
			return fmt.Errorf("a time, but format is %q", p.Value.Format)
		}
		want = openapi3.TypeString
	case t.Kind() == reflect.Struct:
		if name := byType[t]; p.Ref != "#/components/schemas/"+name {
			return fmt.Errorf("%s, but the schema is %q, not a reference to %s", t, p.Ref, name)
		}
		return nil
	case t.Kind() == reflect.String:
		want = openapi3.TypeString
	case t.Kind() == reflect.Bool:
		want = openapi3.TypeBoolean
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		want = openapi3.TypeInteger
	case t.Kind() == reflect.Slice:
		if !p.Value.Type.Includes(openapi3.TypeArray) {
			return fmt.Errorf("a slice, but type %v", p.Value.Type)
		}
		return matchType(p.Value.Items, t.Elem(), byType)
	case t.Kind() == reflect.Map:
		want = openapi3.TypeObject
	default:
		return fmt.Errorf("no rule for %s", t)
	}
	if p.Value.Const != nil {
		return nil
	}
	if !p.Value.Type.Includes(want) {
		return fmt.Errorf("%s, but type %v", t, p.Value.Type)
	}
	return nil
}

// TestOpenAPIWebhookAnswers walks the webhook endpoints, which the other
// tests of this package do not call (package delivery's do), so that g.do
// checks their answers against the document too. No delivery worker runs:
// nothing is sent to the registered URL.
func TestOpenAPIWebhookAnswers(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), server.Options{})
	key := g.newSandbox(t, "webhook answers").APIKey
	call := func(method, path, body string, want int) response {
		t.Helper()
		req := request{Method: method, Path: path, Key: key}
		if body != "" {
			req.ContentType, req.Body = "application/json", body
		}
		resp := g.do(t, req)
		if resp.Status != want {
			t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.Status, want, resp.Body)
		}
		return resp
	}
	wantError(t, call(http.MethodGet, "/v1/webhook", "", http.StatusNotFound), http.StatusNotFound, "not_found", "")
	wantError(t, call(http.MethodPut, "/v1/webhook", `{"url":"http://plain.invalid/hook"}`, http.StatusBadRequest),
		http.StatusBadRequest, "invalid_parameter", "url")
	call(http.MethodPut, "/v1/webhook", `{"url":"https://hooks.invalid/comm"}`, http.StatusOK)
	call(http.MethodPut, "/v1/webhook", `{"url":"https://hooks.invalid/comm","secret":"whsec_AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcY","from_seq":null}`, http.StatusOK)
	call(http.MethodGet, "/v1/webhook", "", http.StatusOK)
	call(http.MethodPost, "/v1/webhook/replay", `{"from_seq":0}`, http.StatusOK)
	wantError(t, call(http.MethodPost, "/v1/webhook/replay", `{}`, http.StatusBadRequest), http.StatusBadRequest, "invalid_parameter", "from_seq")
	call(http.MethodGet, "/v1/webhook/attempts?limit=10", "", http.StatusOK)
	call(http.MethodDelete, "/v1/webhook", "", http.StatusNoContent)
	call(http.MethodDelete, "/v1/webhook", "", http.StatusNotFound)
	call(http.MethodGet, "/v1/account/ledger", "", http.StatusForbidden)
}

// TestOpenAPIEvents: TypedEvent and GET /v1/events' type parameter name
// every event type of the stream, and real events, read back from
// GET /v1/events, match TypedEvent.
func TestOpenAPIEvents(t *testing.T) {
	t.Parallel()
	sp := spec(t)
	var types []string
	for _, env := range sp.doc.Components.Schemas["TypedEvent"].Value.OneOf {
		for _, v := range env.Value.Properties["type"].Value.Enum {
			types = append(types, v.(string))
		}
	}
	slices.Sort(types)
	if !slices.Equal(types, stream.Types) {
		t.Errorf("TypedEvent's types %v, the stream's %v", types, stream.Types)
	}
	var param []string
	for _, v := range sp.doc.Paths.Value("/v1/events").Get.Parameters.GetByInAndName(openapi3.ParameterInQuery, "type").Schema.Value.Enum {
		param = append(param, v.(string))
	}
	slices.Sort(param)
	if !slices.Equal(param, stream.Types) {
		t.Errorf("GET /v1/events?type= takes %v, the stream has %v", param, stream.Types)
	}

	g := start(t, storetest.SQLite(t), server.Options{})
	key := g.newSandbox(t, "typed events").APIKey
	c := g.connectTest(t, key)
	in := g.inject(t, key, c.ID, `{"sender":"alice","text":"hi","subject":"hello"}`)
	g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"hello back"}`)
	var evs []event
	waitFor(t, "message.sent", func() bool {
		evs = g.events(t, key, "")
		return slices.ContainsFunc(evs, func(e event) bool { return e.Type == api.EventMessageSent })
	})
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.checkBody(pointer("components", "schemas", "TypedEvent"), b); err != nil {
			t.Errorf("event %d (%s): %v", e.Seq, e.Type, err)
		}
	}
	if len(evs) < 3 {
		t.Errorf("%d events, want connection.active, message.received and message.sent", len(evs))
	}
}

package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
)

// decode reads a JSON object body into v: the content type must be JSON,
// unknown fields and trailing data are refused, and every failure names
// what is wrong.
func decode(r *http.Request, v any) error {
	if err := checkJSON(r); err != nil {
		return err
	}
	// encoding/json would quietly turn invalid UTF-8 into U+FFFD.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if !utf8.Valid(body) {
		return fault.MalformedJSON("body is not valid UTF-8")
	}
	// PostgreSQL cannot store U+0000 in text, and no field has a use for
	// it: refuse it anywhere in the body, naming where. It can only come
	// as the escape \u0000 (raw control characters are not JSON).
	if bytes.Contains(body, []byte(`\u0000`)) {
		if path, ok := nulPath(body); ok {
			return fault.Invalid(path, "must not contain NUL (U+0000) characters")
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return decodeError(err)
		}
		return fault.MalformedJSON("body has data after the JSON object")
	}
	return nil
}

// nulPath returns the path ("name", "config.to[2]") of the first string of
// a JSON body, or key, that contains U+0000. A body that is not JSON has
// none (decoding reports it).
func nulPath(body []byte) (string, bool) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "", false
	}
	return messaging.NULPath(v, "")
}

// checkJSON refuses a body that is not declared as JSON.
func checkJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return fault.UnsupportedMedia("missing Content-Type: send application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fault.UnsupportedMedia("Content-Type %q is not JSON: send application/json", ct)
	}
	return nil
}

func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return fault.TooLarge("body is larger than %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return fault.MalformedJSON("body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fault.MalformedJSON("body ends in the middle of the JSON")
	case errors.As(err, &syntax):
		return fault.MalformedJSON("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fault.MalformedJSON("body must be a JSON object, not %s", typ.Value)
		}
		return fault.Invalid(typ.Field, "must be %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return fault.Invalid(field, "unknown field %q", field)
	}
	return fault.MalformedJSON("%s", err.Error())
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return goKind
}

// query reads URL query parameters, refusing unknown and repeated ones.
type query struct {
	v    url.Values
	used map[string]bool
	err  error
}

func newQuery(r *http.Request) *query {
	v, err := url.ParseQuery(r.URL.RawQuery)
	q := &query{v: v, used: map[string]bool{}}
	if err != nil {
		q.err = fault.Invalid("query", "malformed query string: %v", err)
	}
	return q
}

func (q *query) str(name string) string {
	q.used[name] = true
	vs := q.v[name]
	if len(vs) > 1 && q.err == nil {
		q.err = fault.Invalid(name, "given %d times; give it once", len(vs))
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func (q *query) int(name string, def int64) int64 {
	s := q.str(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && q.err == nil {
		q.err = fault.Invalid(name, "must be an integer, not %q", s)
	}
	return n
}

// done reports the first problem, or an unknown parameter.
func (q *query) done() error {
	if q.err != nil {
		return q.err
	}
	for name := range q.v {
		if !q.used[name] {
			known := make([]string, 0, len(q.used))
			for k := range q.used {
				known = append(known, k)
			}
			return fault.Invalid(name, "unknown query parameter %q; known: %s", name, strings.Join(sorted(known), ", "))
		}
	}
	return nil
}

package playground_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/graph/playground"
)

// refs are the src and href attributes of a page.
var refs = regexp.MustCompile(`(?:src|href)="([^"]*)"`)

func get(t *testing.T, h http.Handler, target string, header http.Header) *http.Response {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var rd io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		rd = zr
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPageAndAssets: the page and every file it references are served
// with their content types, gzipped when the client accepts it, and
// nothing comes from another origin.
func TestPageAndAssets(t *testing.T) {
	h := playground.Handler("/graphql/playground", "/graphql")
	gz := http.Header{"Accept-Encoding": {"gzip, deflate, br"}}

	var page []byte
	for _, target := range []string{"/graphql/playground", "/graphql/playground/"} {
		resp := get(t, h, target, gz)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
			resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: %d %s %q", target, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"))
		}
		page = body(t, resp)
		// The page's nonce is in its policy, for styles only, and new
		// each time.
		nonce := regexp.MustCompile(`nonce="([^"]+)"`).FindSubmatch(page)
		csp := resp.Header.Get("Content-Security-Policy")
		if nonce == nil || !strings.Contains(csp, "style-src 'self' 'nonce-"+string(nonce[1])+"';") ||
			!strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "default-src 'none';") ||
			strings.Contains(csp, "unsafe-") {
			t.Errorf("%s: CSP %q, page nonce %q", target, csp, nonce)
		}
		if again := body(t, get(t, h, target, nil)); bytes.Equal(again, page) {
			t.Errorf("%s: the same nonce twice", target)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", target, resp.Header)
		}
	}
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9]`).Find(page); m != nil {
		t.Errorf("the page references another origin (%s):\n%s", m, page)
	}
	if bytes.Contains(page, []byte("<script>")) || regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]`).Match(page) {
		t.Errorf("the page has an inline script:\n%s", page)
	}
	if !bytes.Contains(page, []byte(`data-endpoint="/graphql"`)) {
		t.Errorf("the page does not name the endpoint:\n%s", page)
	}

	want := map[string]string{
		"graphiql.min.js":             "text/javascript; charset=utf-8",
		"graphiql.min.css":            "text/css; charset=utf-8",
		"react.production.min.js":     "text/javascript; charset=utf-8",
		"react-dom.production.min.js": "text/javascript; charset=utf-8",
		"playground.js":               "text/javascript; charset=utf-8",
		"playground.css":              "text/css; charset=utf-8",
	}
	var raw, zipped int
	seen := map[string]bool{}
	for _, m := range refs.FindAllSubmatch(page, -1) {
		ref := string(m[1])
		if strings.HasPrefix(ref, "data:") {
			continue
		}
		u, err := url.Parse(ref)
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(u.Path, "/graphql/playground/") {
			t.Errorf("reference %q is not a file of the playground", ref)
			continue
		}
		name := strings.TrimPrefix(u.Path, "/graphql/playground/")
		seen[name] = true
		ctype, ok := want[name]
		if !ok {
			t.Errorf("unexpected reference %q", ref)
			continue
		}
		plain := get(t, h, ref, nil)
		if plain.StatusCode != 200 || plain.Header.Get("Content-Type") != ctype || plain.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %q %q", ref, plain.StatusCode, plain.Header.Get("Content-Type"), plain.Header.Get("Content-Encoding"))
		}
		if cc := plain.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q", ref, cc)
		}
		rawBody := body(t, plain)
		disk, err := os.ReadFile("static/" + name)
		if err != nil || !bytes.Equal(rawBody, disk) {
			t.Errorf("%s: not static/%s (%v)", ref, name, err)
		}
		packed := get(t, h, ref, gz)
		if packed.StatusCode != 200 || packed.Header.Get("Content-Type") != ctype ||
			packed.Header.Get("Content-Encoding") != "gzip" || packed.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s with gzip: %d %q %q vary %q", ref, packed.StatusCode, packed.Header.Get("Content-Type"),
				packed.Header.Get("Content-Encoding"), packed.Header.Get("Vary"))
		}
		n := packed.ContentLength
		if !bytes.Equal(body(t, packed), disk) {
			t.Errorf("%s: the gzipped body is not the file", ref)
		}
		raw, zipped = raw+len(disk), zipped+int(n)

		// Revalidation answers 304; a stale version is not cached for good.
		if nm := get(t, h, ref, http.Header{"If-None-Match": {plain.Header.Get("Etag")}}); nm.StatusCode != 304 {
			t.Errorf("%s: If-None-Match answered %d", ref, nm.StatusCode)
		}
		stale := get(t, h, "/graphql/playground/"+name+"?v=old", nil)
		if stale.StatusCode != 200 || stale.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s?v=old: %d %q", name, stale.StatusCode, stale.Header.Get("Cache-Control"))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the page does not reference %s", name)
		}
	}
	t.Logf("the page's files: %d bytes, %d gzipped (page %d bytes)", raw, zipped, len(page))

	for _, target := range []string{"/graphql/playground/nope.js", "/graphql/playground/static/graphiql.min.js", "/graphql/playground/../handler.go"} {
		if resp := get(t, h, target, nil); resp.StatusCode != 404 {
			t.Errorf("%s: %d", target, resp.StatusCode)
		}
	}
	if resp := get(t, h, "/graphql/playground/LICENSE.graphiql", nil); resp.StatusCode != 200 ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("LICENSE.graphiql: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// gzip refused by weight.
	if resp := get(t, h, "/graphql/playground/graphiql.min.js", http.Header{"Accept-Encoding": {"gzip;q=0, *"}}); resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 got %q", resp.Header.Get("Content-Encoding"))
	}
}

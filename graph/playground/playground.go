// Package playground serves GraphiQL, the in-browser GraphQL IDE, from files
// embedded in the binary: the page works offline and loads nothing from
// another origin.
//
// static/ holds GraphiQL's prebuilt browser bundle and React's, exactly as
// npm publishes them (fetch.sh fetches them; VERSIONS names the packages
// and the files' sha256), their licenses, and the page's own index.html,
// playground.js and playground.css.
package playground

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// CSP is the page's Content-Security-Policy: scripts, styles and requests
// only to the gateway itself. The fonts are data: URLs inside GraphiQL's
// stylesheet. style-src needs 'unsafe-inline': GraphiQL's dialogs and
// tooltips (radix-ui) position themselves with style attributes and
// react-remove-scroll adds a <style> element, which 'self' alone refuses.
// Styles cannot run code; scripts stay 'self' only, without 'unsafe-eval'
// (nothing in the bundles evaluates strings). connect-src 'self' covers
// the websocket at the same host (ws: under http:, wss: under https:).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// file is one response, ready to write.
type file struct {
	ctype string
	raw   []byte
	gz    []byte // nil when gzip does not make it smaller
	etag  string // of raw; the gzip variant's ends in -gz
	// cache is the Cache-Control of a request with the right ?v=.
	cache string
}

var (
	loadOnce sync.Once
	assets   map[string]*file // by name
	page     *template.Template
)

// load reads and compresses the embedded files, once per process (when
// the first handler is made, so a gateway without the playground pays
// nothing).
func load() {
	assets = map[string]*file{}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(static, "static/"+e.Name())
		if err != nil {
			panic(err)
		}
		if e.Name() == "index.html" {
			page = template.Must(template.New("index.html").Funcs(template.FuncMap{
				"asset": func(string) string { return "" },
			}).Parse(string(b)))
			continue
		}
		f := newFile(contentType(e.Name()), b)
		f.cache = "public, max-age=31536000, immutable"
		assets[e.Name()] = f
	}
}

func newFile(ctype string, b []byte) *file {
	sum := sha256.Sum256(b)
	f := &file{ctype: ctype, raw: b, etag: hex.EncodeToString(sum[:8])}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	if buf.Len() < len(b) {
		f.gz = buf.Bytes()
	}
	return f
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "text/plain; charset=utf-8" // LICENSE.*, THIRD_PARTY.*
}

// Handler serves the GraphiQL page at pagePath (and pagePath + "/") and
// its files under pagePath + "/", for the GraphQL endpoint at endpoint (a
// path on the same origin, which also takes the websockets of
// subscriptions). The caller routes GET pagePath and pagePath + "/..." to
// it.
func Handler(pagePath, endpoint string) http.Handler {
	loadOnce.Do(load)
	pagePath = strings.TrimSuffix(pagePath, "/")
	t := template.Must(page.Clone())
	t.Funcs(template.FuncMap{"asset": func(name string) (string, error) {
		f, ok := assets[name]
		if !ok {
			return "", fs.ErrNotExist
		}
		return pagePath + "/" + name + "?v=" + f.etag, nil
	}})
	var buf bytes.Buffer
	if err := t.Execute(&buf, struct{ Endpoint string }{endpoint}); err != nil {
		panic("playground: " + err.Error())
	}
	index := newFile("text/html; charset=utf-8", buf.Bytes())
	index.cache = "no-cache"
	return &handler{prefix: pagePath + "/", index: index}
}

type handler struct {
	prefix string
	index  *file
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, sub := strings.CutPrefix(r.URL.Path, h.prefix)
	var f *file
	switch {
	case !sub || name == "" || name == "index.html":
		f = h.index
	default:
		f = assets[name]
	}
	if f == nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", "no-cache")
	if f == h.index || r.URL.Query().Get("v") == f.etag {
		hd.Set("Cache-Control", f.cache)
	}
	body, etag := f.raw, f.etag
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = f.gz, f.etag+"-gz"
			hd.Set("Content-Encoding", "gzip")
		}
	}
	etag = `"` + etag + `"`
	hd.Set("ETag", etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip with
// a non-zero weight: by name, else by *.
func acceptsGzip(header string) bool {
	named, star := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			named = max(named, q)
		case "*":
			star = max(star, q)
		}
	}
	if named >= 0 {
		return named > 0
	}
	return star > 0
}

// etagMatch reports whether If-None-Match lists etag (weakly) or is *.
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

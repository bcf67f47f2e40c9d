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
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"html/template"
	"io"
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

// csp is the Content-Security-Policy of the page (with the page's nonce)
// and of its files: scripts, styles and requests only to the gateway
// itself, no 'unsafe-eval' (nothing in the bundles evaluates strings), no
// 'unsafe-inline'. GraphiQL sets its inline styles through the CSSOM,
// which the policy allows; the one <style> element it adds (the scroll
// lock of its dialogs, react-remove-scroll) carries the page's nonce,
// which playground.js hands to it as __webpack_nonce__. The fonts are
// data: URLs inside graphiql.min.css. connect-src 'self' covers the
// websocket on the same host (ws: under http:, wss: under https:).
func csp(nonce string) string {
	style := "'self'"
	if nonce != "" {
		style += " 'nonce-" + nonce + "'"
	}
	return "default-src 'none'; script-src 'self'; style-src " + style + "; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; " +
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
}

// file is one response, ready to write.
type file struct {
	ctype string
	raw   []byte
	gz    []byte // nil when gzip does not make it smaller
	etag  string // of raw; the gzip variant's ends in -gz
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
		assets[e.Name()] = newFile(contentType(e.Name()), b)
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
	if err := t.Execute(io.Discard, pageData{Endpoint: endpoint}); err != nil {
		panic("playground: " + err.Error())
	}
	return &handler{prefix: pagePath + "/", page: t, endpoint: endpoint}
}

type handler struct {
	prefix   string
	page     *template.Template
	endpoint string
}

type pageData struct{ Endpoint, Nonce string }

// servePage writes the page, with a nonce of its own for GraphiQL's
// <style> element (so the page, 1.5 KB, is made and gzipped per request).
func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	var b [18]byte
	rand.Read(b[:])
	nonce := base64.RawURLEncoding.EncodeToString(b[:])
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, pageData{Endpoint: h.endpoint, Nonce: nonce}); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	setCommon(hd, csp(nonce))
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Vary", "Accept-Encoding")
	body := buf.Bytes()
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		var zbuf bytes.Buffer
		zw := gzip.NewWriter(&zbuf)
		zw.Write(body)
		zw.Close()
		body = zbuf.Bytes()
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func setCommon(hd http.Header, policy string) {
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", policy)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, sub := strings.CutPrefix(r.URL.Path, h.prefix)
	if !sub || name == "" || name == "index.html" {
		h.servePage(w, r)
		return
	}
	f := assets[name]
	if f == nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	setCommon(hd, csp(""))
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", "no-cache")
	if r.URL.Query().Get("v") == f.etag {
		// The page names each file with its version: that URL never
		// changes content.
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
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

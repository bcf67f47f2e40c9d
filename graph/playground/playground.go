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
	"crypto/rand"
	"embed"
	"encoding/base64"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"github.com/comm-gateway/comm/webasset"
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

var (
	loadOnce sync.Once
	assets   map[string]*webasset.File // by name
	page     *template.Template
)

// load reads and compresses the embedded files, once per process (when
// the first handler is made, so a gateway without the playground pays
// nothing).
func load() {
	assets = map[string]*webasset.File{}
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
		assets[e.Name()] = webasset.NewFile(e.Name(), b)
	}
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
		return pagePath + "/" + name + "?v=" + f.Version(), nil
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
	webasset.Write(w, r, http.StatusOK, buf.Bytes())
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
	setCommon(w.Header(), csp(""))
	// The page names each file with its version: that URL never changes
	// content.
	f.Serve(w, r, r.URL.Query().Get("v") == f.Version())
}

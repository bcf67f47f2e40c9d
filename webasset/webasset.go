// Package webasset serves files embedded in the binary to browsers:
// compressed once with gzip, with ETags, and cacheable for good at URLs
// that name their version. The dashboard and the GraphiQL page use it.
package webasset

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// File is one file, ready to write.
type File struct {
	ctype string
	raw   []byte
	gz    []byte // nil when gzip does not make it smaller
	etag  string // of raw; the gzip variant's ends in -gz
}

// NewFile prepares the file named name (its extension gives its content
// type) with content b.
func NewFile(name string, b []byte) *File {
	sum := sha256.Sum256(b)
	f := &File{ctype: ContentType(name), raw: b, etag: hex.EncodeToString(sum[:8])}
	if gz := compress(b, gzip.BestCompression); len(gz) < len(b) {
		f.gz = gz
	}
	return f
}

// Version names the file's content (a hash), for URLs that never change
// content.
func (f *File) Version() string { return f.etag }

// Serve writes the file: immutable says the URL names this version, so
// the browser may keep it for good; otherwise it revalidates by ETag.
// The caller sets its own security headers first.
func (f *File) Serve(w http.ResponseWriter, r *http.Request, immutable bool) {
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("X-Content-Type-Options", "nosniff")
	if immutable {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	body, etag := f.raw, f.etag
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if AcceptsGzip(r.Header.Get("Accept-Encoding")) {
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
	write(w, r, http.StatusOK, body)
}

// Write writes a page made for this request, compressed when the browser
// takes gzip.
func Write(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if AcceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = compress(body, gzip.DefaultCompression)
		w.Header().Set("Content-Encoding", "gzip")
	}
	write(w, r, status, body)
}

func write(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func compress(b []byte, level int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, level)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// ContentType is the content type of a file by its name's extension;
// text for names without a known one (LICENSE files).
func ContentType(name string) string {
	switch path.Ext(name) {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "text/plain; charset=utf-8"
}

// AcceptsGzip reports whether an Accept-Encoding header admits gzip with
// a non-zero weight: by name, else by *.
func AcceptsGzip(header string) bool {
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

package server

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// The access log: one line per request, at INFO with the message "http",
// written when the handler returns (or, for a websocket, when the
// connection is hijacked at the upgrade, status 101). It carries the
// request id, the method, the route pattern the request matched (not its
// path or query, which may carry codes and tokens), the status, the bytes
// of the body written, the duration, the client IP and, once the request
// authenticated, the project. Never a header's value or a body.

// access is what the front door records of a request while it runs; the
// outermost handler (ServeHTTP) puts it in the request's context, and
// authed fills in the project.
type access struct {
	project string
}

type accessKey struct{}

// noteProject records the authenticated project of the request in ctx
// for its access line.
func noteProject(ctx context.Context, project string) {
	if a, _ := ctx.Value(accessKey{}).(*access); a != nil {
		a.project = project
	}
}

// accessWriter counts what a handler writes, for the access line. It
// keeps the writer's optional interfaces: Unwrap for
// http.ResponseController, and Flush and Hijack directly for code that
// asserts them (the websocket upgrader).
type accessWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	done   func() // writes the access line; on Hijack, at once
}

func (w *accessWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *accessWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush() //nolint:errcheck // as http.Flusher, which has no error
}

func (w *accessWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.status = http.StatusSwitchingProtocols
		w.done()
	}
	return c, rw, err
}

// logAccess returns the writer to hand the handlers and the function
// that writes r's access line (once) when they return; route is the
// pattern r matched, empty for none.
func (s *Server) logAccess(w http.ResponseWriter, r *http.Request, id, route string, a *access) (*accessWriter, func()) {
	start := time.Now()
	aw := &accessWriter{ResponseWriter: w}
	var logged bool
	line := func() {
		if logged {
			return
		}
		logged = true
		status := aw.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		if s.obs != nil {
			s.obs.ObserveHTTP(route, status, time.Since(start))
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Int64("bytes", aw.bytes),
			slog.Duration("duration", time.Since(start)),
			slog.String("client_ip", s.clientIP(r)),
		}
		if a.project != "" {
			attrs = append(attrs, slog.String("project", a.project))
		}
		s.access.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelInfo, "http", attrs...)
	}
	aw.done = line
	return aw, line
}

// Package gatewaytest runs a whole comm gateway inside a test: a real
// database, the event log, the gateway wired by gateway.New, its workers
// and the HTTP front door on a loopback port, stopped when the test ends
// in the order the binary stops. Every package's black-box tests start
// their gateway here, so the harnesses cannot drift from `comm serve`.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
)

// Options configure Start.
type Options struct {
	// Config is what gateway.New is given. Logger defaults to Logger(t)
	// and Server.BaseURL to the gateway's real address (sign-in links
	// and OIDC redirect URLs work).
	Config gateway.Config
	// Stream configures the event log; its Logger defaults to
	// Config.Logger.
	Stream stream.Options
	// Workers are the background workers to run (gateway.StartWorkers);
	// nil runs the outbox alone, &gateway.Workers{} none.
	Workers *gateway.Workers
}

// Gateway is a running gateway: the wired parts (Log, Svc, Mail, Front
// ...), its database and its address.
type Gateway struct {
	*gateway.Gateway
	// URL is the base URL the HTTP server listens on.
	URL string
	// DB is the open database.
	DB *store.DB

	srv         *httptest.Server
	stopWorkers func()
	once        sync.Once
}

// Start opens cfg and serves a gateway on it until the test ends (or Stop
// is called).
func Start(t testing.TB, cfg store.Config, opts Options) *Gateway {
	t.Helper()
	// The port is known before the front door is made, so BaseURL is
	// real.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("store.Open: %v", err)
	}
	c := opts.Config
	if c.Logger == nil {
		c.Logger = Logger(t)
	}
	if c.Server.BaseURL == "" {
		c.Server.BaseURL = "http://" + ln.Addr().String()
	}
	so := opts.Stream
	if so.Logger == nil {
		so.Logger = c.Logger
	}
	if so.Observer == nil && c.Metrics != nil {
		so.Observer = c.Metrics
	}
	log, err := stream.Open(db, so)
	if err != nil {
		ln.Close()
		db.Close()
		t.Fatalf("stream.Open: %v", err)
	}
	wired, err := gateway.New(log, c)
	if err != nil {
		ln.Close()
		log.Close()
		db.Close()
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewUnstartedServer(wired.Front)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = slog.NewLogLogger(c.Logger.Handler(), slog.LevelWarn)
	srv.Start()
	w := gateway.Workers{Outbox: &delivery.Outbox{}}
	if opts.Workers != nil {
		w = *opts.Workers
	}
	g := &Gateway{Gateway: wired, URL: srv.URL, DB: db, srv: srv, stopWorkers: wired.StartWorkers(w)}
	t.Cleanup(g.Stop)
	return g
}

// Stop shuts the gateway down like the binary does: HTTP first (open
// websockets closed), then the workers, the domain, the log (letting
// queued writes finish) and the database. It may be called more than
// once; the test's end calls it too.
func (g *Gateway) Stop() {
	g.once.Do(func() {
		g.Front.Close()
		g.srv.Close()
		g.stopWorkers()
		g.Close()
		g.Log.Close()
		g.DB.Close()
	})
}

// Logger collects a server's log and shows it only if the test fails, so
// an internal error's cause is visible without cluttering green runs.
func Logger(t testing.TB) *slog.Logger {
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && buf.Len() > 0 {
			t.Logf("server log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Request is one HTTP call to the gateway; zero fields are left out.
type Request struct {
	Method      string // GET when empty
	Path        string // path and query
	Key         string // sent as "Authorization: Bearer <Key>"
	Auth        string // sent as the Authorization header as it is
	ContentType string
	Body        string
	RequestID   string // sent as X-Request-Id
	// Header holds more request headers (a provider's signature).
	Header map[string]string
}

// Response is an HTTP answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Client is the HTTP client of Do.
var Client = &http.Client{Timeout: 30 * time.Second}

// Do sends req to the gateway and reads the whole answer; a transport
// error fails the test.
func (g *Gateway) Do(t testing.TB, req Request) Response {
	t.Helper()
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	r, err := http.NewRequest(req.Method, g.URL+req.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Key != "" {
		r.Header.Set("Authorization", "Bearer "+req.Key)
	}
	if req.Auth != "" {
		r.Header.Set("Authorization", req.Auth)
	}
	if req.RequestID != "" {
		r.Header.Set("X-Request-Id", req.RequestID)
	}
	if req.ContentType != "" {
		r.Header.Set("Content-Type", req.ContentType)
	}
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	resp, err := Client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.Path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// DecodeStrict decodes the JSON b into v, failing the test on a field v
// does not have.
func DecodeStrict(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// WaitFor polls cond every 20 ms until it holds, failing the test when d
// passes first.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

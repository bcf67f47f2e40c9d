package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/email/mailhost"
	gw "github.com/comm-gateway/comm/gateway"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/delivery"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// gateway is one running comm server over a real database, wired the way
// cmd/comm/serve.go wires it.
type gateway struct {
	URL string
	Log *stream.Log
	DB  *store.DB

	Svc *messaging.Service
	// Mail is the email side of the gateway.
	Mail *mailhost.Host
	// Front is the gateway's HTTP handler (its websockets: Front.Live()).
	Front *server.Server

	srv        *httptest.Server
	stopOutbox context.CancelFunc
	outboxDone chan struct{}
	closeOnce  sync.Once
}

// start opens cfg and serves the REST API on a local port until the test
// ends (or until stop is called), with the outbox worker delivering.
func start(t *testing.T, cfg store.Config, opts server.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts, outbox: true})
}

// startNoOutbox is start without the outbox worker: outbound messages stay
// queued until a gateway with the worker runs on the same database.
func startNoOutbox(t *testing.T, cfg store.Config, opts server.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts})
}

// startWith is start with the messaging options given (a clock, say);
// Channels and Logger are filled in.
func startWith(t *testing.T, cfg store.Config, opts server.Options, svcOpts messaging.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts, svc: svcOpts, outbox: true})
}

// setup says how startGateway wires a gateway.
type setup struct {
	server server.Options
	// svc are the messaging options; Channels and Logger are filled in.
	svc messaging.Options
	// mail are the options of the email side (custom domains, budgets).
	mail   mailhost.Options
	outbox bool
	// email adds the email channel on the mail domain "mail.test", bound
	// to the service, as main does.
	email bool
	// relay is the email channel's SMTP relay, if any.
	relay email.Submitter
}

// startGateway serves the gateway on a port known before the server is
// made, so BaseURL (when the test leaves it empty) is its real address:
// sign-in links and the OIDC redirect URL work.
func startGateway(t *testing.T, cfg store.Config, su setup) *gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("store.Open: %v", err)
	}
	log, err := stream.Open(db, stream.Options{})
	if err != nil {
		ln.Close()
		db.Close()
		t.Fatalf("stream.Open: %v", err)
	}
	logger := testLogger(t)
	opts := su.server
	opts.Logger = logger
	if opts.BaseURL == "" {
		opts.BaseURL = "http://" + ln.Addr().String()
	}
	mailOpts := email.Options{MailDomain: "mail.test", Relay: su.relay, Logger: logger}
	if !su.email {
		mailOpts.MailDomain = ""
	}
	wired, err := gw.New(log, gw.Config{Logger: logger, Service: su.svc, Email: mailOpts, Mail: su.mail, Server: opts})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	svc, front := wired.Svc, wired.Front
	srv := httptest.NewUnstartedServer(front)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	g := &gateway{Log: log, DB: db, Svc: svc, Mail: wired.Mail, Front: front, srv: srv, outboxDone: make(chan struct{})}
	var octx context.Context
	octx, g.stopOutbox = context.WithCancel(context.Background())
	if su.outbox {
		go func() {
			(&delivery.Outbox{Service: svc, Logger: logger}).Run(octx)
			close(g.outboxDone)
		}()
	} else {
		close(g.outboxDone)
	}
	g.URL = g.srv.URL
	t.Cleanup(g.stop)
	return g
}

// stop shuts the gateway down like the binary does: HTTP first, then the
// log (letting queued writes finish), then the database.
func (g *gateway) stop() {
	g.closeOnce.Do(func() {
		g.srv.Close()
		g.stopOutbox()
		<-g.outboxDone
		g.Log.Close()
		g.DB.Close()
	})
}

// testLogger collects the server's log and prints it if the test fails,
// so an internal error's cause is visible without cluttering green runs.
func testLogger(t *testing.T) *slog.Logger {
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
	return slog.New(slog.NewTextHandler(lockedWriter{mu: &mu, w: &buf}, nil))
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

// response is an HTTP answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// request describes one call; zero fields are left out.
type request struct {
	Method      string
	Path        string // path and query
	Key         string // sent as "Authorization: Bearer <Key>"
	Auth        string // sent as the Authorization header as it is
	ContentType string
	Body        string
	RequestID   string // sent as X-Request-Id
}

var client = &http.Client{Timeout: 30 * time.Second}

// do sends req to the gateway and reads the whole answer.
func (g *gateway) do(t *testing.T, req request) response {
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
	resp, err := client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.Path, err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// sandbox is the body of a 201 from POST /v1/projects/sandbox.
type sandbox = api.Sandbox

// newSandbox creates a project through the API.
func (g *gateway) newSandbox(t *testing.T, name string) sandbox {
	t.Helper()
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		t.Fatal(err)
	}
	resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
		ContentType: "application/json", Body: string(body)})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create sandbox: status %d, body %s", resp.Status, resp.Body)
	}
	var sb sandbox
	decodeJSON(t, resp.Body, &sb)
	return sb
}

// event is one element of GET /v1/events.
type event = api.Event

// events calls GET /v1/events with query (without the "?") and fails the
// test unless it answers 200.
func (g *gateway) events(t *testing.T, key, query string) []event {
	t.Helper()
	path := "/v1/events"
	if query != "" {
		path += "?" + query
	}
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", path, resp.Status, resp.Body)
	}
	var evs []event
	decodeJSON(t, resp.Body, &evs)
	if evs == nil {
		t.Fatalf("GET %s: body %q is not a JSON array", path, resp.Body)
	}
	return evs
}

// project is the body of GET /v1/project.
type project = api.Project

func (g *gateway) project(t *testing.T, key string) project {
	t.Helper()
	resp := g.do(t, request{Path: "/v1/project", Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/project: status %d, body %s", resp.Status, resp.Body)
	}
	var p project
	decodeJSON(t, resp.Body, &p)
	return p
}

// apiError is the one JSON error shape.
type apiError = api.ErrorBody

// wantError checks status, the JSON error shape, its code and (if not
// empty) its param, and returns the decoded error.
func wantError(t *testing.T, resp response, status int, code, param string) apiError {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d; body %s", resp.Status, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e apiError
	decodeJSON(t, resp.Body, &e)
	if e.Error.Code != code {
		t.Errorf("error code %q, want %q; body %s", e.Error.Code, code, resp.Body)
	}
	if e.Error.Message == "" {
		t.Errorf("error without a message: %s", resp.Body)
	}
	if param != "" && e.Error.Param != param {
		t.Errorf("error param %q, want %q; body %s", e.Error.Param, param, resp.Body)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
		t.Errorf("error request_id %q, X-Request-Id header %q", e.Error.RequestID, resp.Header.Get("X-Request-Id"))
	}
	return e
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	wireRoundTrip(t, b, v)
}

// appendN appends n message.received events to project and returns their
// payloads by seq.
func appendN(t *testing.T, log *stream.Log, projectID string, n int) map[int64]json.RawMessage {
	t.Helper()
	out := make(map[int64]json.RawMessage, n)
	for i := range n {
		data := json.RawMessage(`{"n":` + strconv.Itoa(i) + `,"project":"` + projectID + `"}`)
		seq, err := log.Append(context.Background(), projectID, stream.MessageReceived, data)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		out[seq] = data
	}
	return out
}

// count runs a COUNT(*) query through the read pool.
func count(t *testing.T, db *store.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.R.QueryRow(db.Rebind(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// revokeKeys revokes every key of a project through the log's write path,
// as an operator tool would.
func revokeKeys(t *testing.T, log *stream.Log, projectID string) {
	t.Helper()
	ctx := tenant.System(context.Background())
	_, err := log.Write(ctx, projectID, func(tx *stream.Tx) error {
		n, err := tx.Client().APIKey.Update().
			Where(entapikey.ProjectID(projectID), entapikey.RevokedAtIsNil()).
			SetRevokedAt(time.Now().UTC()).Save(tx.Context())
		if err == nil && n == 0 {
			err = errors.New("no live key")
		}
		return err
	})
	if err != nil {
		t.Fatalf("revoke keys of %s: %v", projectID, err)
	}
}

// Package server is comm's HTTP front door: the REST API under /v1, health
// checks, and (in later work) provider webhook ingress and the sign-in page.
// Handlers decode, call messaging, and encode; errors are mapped to HTTP in
// one place (errors.go).
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/account"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/idempotency"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/webhook"
)

// Options configure the HTTP front door.
type Options struct {
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// Logger receives errors; slog.Default if nil.
	Logger *slog.Logger
	// AccessLog receives one line per request (accesslog.go), at INFO;
	// Logger if nil. A logger of slog.DiscardHandler writes none.
	AccessLog *slog.Logger
	// GraphQL configures /graphql.
	GraphQL graph.Options
	// Playground serves a GraphiQL page at GET /graphql/playground (its
	// files, embedded in the binary, under /graphql/playground/).
	Playground bool
	// Live configures GraphQL over websockets at /graphql.
	Live live.Options
	// BaseURL is the gateway's public address, for the sign-in links it
	// hands out ("http://127.0.0.1:8080" when empty).
	BaseURL string
	// StartsPerMinute limits device sign-ins started per client IP
	// (default 10).
	StartsPerMinute int
	// SignIn configures sign-in on the /device page (device.go).
	SignIn SignInOptions
	// SandboxesPerHour limits sandbox projects created per client IP: a
	// token bucket of that many, refilled at that rate per hour (default
	// 100; negative: no limit).
	SandboxesPerHour int
	// WritesPerSecond and WriteBurst limit the writes of one API key:
	// every mutating REST request and every GraphQL mutation field (over
	// HTTP or a websocket) takes a token from a bucket of WriteBurst
	// refilled at WritesPerSecond (defaults 50 and 500; negative
	// WritesPerSecond: no limit).
	WritesPerSecond, WriteBurst int
	// TrustedProxies are the peers whose X-Forwarded-For is believed:
	// the client IP of a request from one of them is the rightmost
	// forwarded address not in these ranges. None by default: the client
	// IP is the peer's.
	TrustedProxies []netip.Prefix
	// Mail serves custom email domains (/v1/domains, and GraphQL's); they
	// answer not_implemented without it.
	Mail graph.Domains
	// Accounts serves accounts, sign-in and the device page (REST and
	// GraphQL); account.New(svc, account.Options{}) when nil.
	Accounts *account.Service
	// Webhooks serves /v1/webhook (and GraphQL's); webhook.New(svc) with
	// no private targets when nil. Give the delivery worker the same one,
	// so registrations wake it.
	Webhooks *webhook.Hooks
	// Idempotency bounds the answers kept for POSTs made with an
	// Idempotency-Key header (idempotency.go); Logger is filled in.
	Idempotency idempotency.Options
	// Observer, if not nil, is told about every request (metrics).
	Observer Observer
	// Ready are the checks of GET /readyz beside the database ping
	// (gateway.New gives its own: migrations, workers, encryption key).
	Ready []ReadyCheck
}

// ReadyCheck is one check of GET /readyz: Check returns nil when ready,
// else an error whose message says what is wrong in words an operator
// may see (the endpoint is public: no addresses, no secrets).
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// RefusalObserver is an Observer also told about every request a rate
// limit refused, by the limit's name (key_writes, sandboxes,
// device_starts, device_codes, local_signin).
type RefusalObserver interface {
	Refused(bucket string)
}

// Observer is told about every request the server answers, for metrics:
// the route pattern that served it ("GET /v1/messages/{id}"; "" when no
// route matched), the status code (101 for a websocket, once upgraded) and
// the time to the handler's return (for a websocket, to the upgrade).
type Observer interface {
	ObserveHTTP(pattern string, status int, d time.Duration)
}

// Defaults of the abuse limits (Options).
const (
	DefaultSandboxesPerHour = 100
	DefaultWritesPerSecond  = 50
	DefaultWriteBurst       = 500
)

// Server routes HTTP requests to the domain.
type Server struct {
	svc     *messaging.Service
	mail    graph.Domains
	acct    *account.Service
	hooks   *webhook.Hooks
	idem    *idempotency.Keys
	mux     *routeMux
	logger  *slog.Logger
	access  *slog.Logger
	maxBody int64
	live    *live.Server
	baseURL string

	startLimit   *ratelimit.Bucket // device sign-ins started, per client IP
	sandboxLimit *ratelimit.Bucket // sandboxes created, per client IP
	writeLimit   *ratelimit.Bucket // writes, per API key id
	trusted      []netip.Prefix
	signin       *signIn
	graphql      handlerFunc // the GraphQL endpoint, for the principal in the request's context
	obs          Observer
	ready        []ReadyCheck
}

// Close closes the websockets (hijacked connections, which
// http.Server.Shutdown does not track).
func (s *Server) Close() { s.live.Close() }

// Live returns the websocket endpoint.
func (s *Server) Live() *live.Server { return s.live }

// New returns the HTTP handler of the gateway.
func New(svc *messaging.Service, opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.AccessLog == nil {
		opts.AccessLog = opts.Logger
	}
	if opts.BaseURL == "" {
		opts.BaseURL = "http://127.0.0.1:8080"
	}
	if opts.StartsPerMinute <= 0 {
		opts.StartsPerMinute = 10
	}
	if opts.SandboxesPerHour == 0 {
		opts.SandboxesPerHour = DefaultSandboxesPerHour
	}
	if opts.WritesPerSecond == 0 {
		opts.WritesPerSecond = DefaultWritesPerSecond
	}
	if opts.WriteBurst <= 0 {
		opts.WriteBurst = max(DefaultWriteBurst, opts.WritesPerSecond)
	}
	s := &Server{svc: svc, mux: &routeMux{ServeMux: http.NewServeMux()}, logger: opts.Logger, maxBody: opts.MaxBodyBytes,
		baseURL:      strings.TrimRight(opts.BaseURL, "/"),
		startLimit:   ratelimit.New(opts.StartsPerMinute, time.Minute, opts.StartsPerMinute),
		sandboxLimit: ratelimit.New(opts.SandboxesPerHour, time.Hour, opts.SandboxesPerHour),
		writeLimit:   ratelimit.New(opts.WritesPerSecond, time.Second, opts.WriteBurst),
		trusted:      opts.TrustedProxies,
		obs:          opts.Observer,
		ready:        opts.Ready,
		access:       opts.AccessLog,
	}
	opts.GraphQL.Writes = s.writeLimit
	if opts.Accounts == nil {
		opts.Accounts = account.New(svc, account.Options{})
	}
	if opts.Webhooks == nil {
		opts.Webhooks = webhook.New(svc, webhook.Options{})
	}
	opts.GraphQL.Mail, opts.GraphQL.Accounts, opts.GraphQL.Webhooks = opts.Mail, opts.Accounts, opts.Webhooks
	if opts.Idempotency.Logger == nil {
		opts.Idempotency.Logger = opts.Logger
	}
	s.mail, s.acct, s.hooks = opts.Mail, opts.Accounts, opts.Webhooks
	s.idem = idempotency.New(svc, opts.Idempotency)
	s.routes()
	s.signInRoutes(opts.SignIn)
	if o, ok := opts.Observer.(RefusalObserver); ok {
		for name, b := range s.limits() {
			b.OnRefusal(func() { o.Refused(name) })
		}
	}
	if opts.GraphQL.Logger == nil {
		opts.GraphQL.Logger = opts.Logger
	}
	gql := graph.NewHandler(svc, svc.Ent(), opts.GraphQL)
	s.graphql = func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodPost {
			// Read the body here: gqlgen would answer a body over the
			// limit with a GraphQL error and 200, not 413.
			body, err := io.ReadAll(r.Body)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return decodeError(err)
			}
			if err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// An operation refused as rate_limited says when to retry in
		// the header too.
		ctx, wait := graph.WithRetryAfter(r.Context())
		gql.ServeHTTP(&retryAfterWriter{ResponseWriter: w, wait: wait}, r.WithContext(ctx))
		return nil
	}
	serveGQL := s.authed(s.graphql)
	// Websockets authenticate in connection_init, inside the protocol.
	if opts.Live.ClientIP == nil {
		opts.Live.ClientIP = s.clientIP
	}
	if opts.Live.Logger == nil {
		opts.Live.Logger = opts.Logger
	}
	s.live = live.NewServer(svc, graph.NewExecutor(svc, svc.Ent(), opts.GraphQL), opts.Live)
	s.mux.Handle("POST /graphql", serveGQL)
	s.mux.Handle("GET /graphql", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if live.IsUpgrade(r) {
			s.live.ServeHTTP(w, r)
			return
		}
		serveGQL.ServeHTTP(w, r)
	}))
	s.dashboardRoutes()
	if opts.Playground {
		playground := graph.Playground("/graphql")
		s.mux.Handle("GET /graphql/playground", playground)
		s.mux.Handle("GET /graphql/playground/", playground)
	}
	return s
}

// limits are the server's rate limits by name (the metrics' label, and
// the name they are shared under).
func (s *Server) limits() map[string]*ratelimit.Bucket {
	return map[string]*ratelimit.Bucket{"device_starts": s.startLimit, "sandboxes": s.sandboxLimit,
		"key_writes": s.writeLimit, "device_codes": s.signin.codeLimit, "local_signin": s.signin.localLimit}
}

// ShareLimits shares the server's rate limits with the other replicas
// through sh (nil: each keeps its own). Call it before serving.
func (s *Server) ShareLimits(sh *ratelimit.Shared) {
	for name, b := range s.limits() {
		sh.Add(name, b)
	}
}

func (s *Server) routes() {
	s.mux.Handle("GET /healthz", s.public(s.healthz))
	s.mux.Handle("GET /readyz", s.public(s.readyz))
	s.mux.Handle("POST /v1/projects/sandbox", s.public(s.createSandbox))
	s.mux.Handle("GET /v1/openapi.json", s.public(s.openAPI))
	s.mux.Handle("GET /v1/project", s.authed(s.getProject))
	s.mux.Handle("GET /v1/events", s.authed(s.listEvents))

	s.mux.Handle("GET /v1/channels", s.authed(s.listChannels))
	s.mux.Handle("POST /v1/connections", s.creating(s.connect))
	s.mux.Handle("GET /v1/connections", s.authed(s.listConnections))
	s.mux.Handle("GET /v1/connections/{id}", s.authed(s.getConnection))
	s.mux.Handle("DELETE /v1/connections/{id}", s.writing(s.deleteConnection))
	s.mux.Handle("POST /v1/connections/{id}/inbound", s.creating(s.inject))
	s.mux.Handle("GET /v1/connections/{id}/bindings", s.authed(s.listBindings))
	s.mux.Handle("DELETE /v1/connections/{id}/bindings/{person}", s.writing(s.unbind))
	s.mux.Handle("POST /hooks/{channel}/{id}", s.public(s.hook))
	s.mux.Handle("GET /hooks/{channel}/{id}", s.public(s.hook))
	s.mux.Handle("POST /hooks/{channel}", s.public(s.appHook))
	s.mux.Handle("GET /oauth/{channel}/callback", s.public(s.oauthCallback))
	s.mux.Handle("GET /hooks/{channel}", s.public(s.appHook))

	s.mux.Handle("GET /v1/conversations", s.authed(s.listConversations))
	s.mux.Handle("GET /v1/conversations/{id}", s.authed(s.getConversation))
	s.mux.Handle("GET /v1/conversations/{id}/messages", s.authed(s.conversationMessages))

	s.mux.Handle("PUT /v1/webhook", s.writing(s.setWebhook))
	s.mux.Handle("GET /v1/webhook", s.authed(s.getWebhook))
	s.mux.Handle("DELETE /v1/webhook", s.writing(s.deleteWebhook))
	s.mux.Handle("POST /v1/webhook/replay", s.creating(s.replayWebhook))
	s.mux.Handle("GET /v1/webhook/attempts", s.authed(s.webhookAttempts))

	s.mux.Handle("POST /v1/messages", s.creating(s.send))
	s.mux.Handle("GET /v1/messages/{id}", s.authed(s.getMessage))
	s.mux.Handle("POST /v1/messages/{id}/reply", s.creating(s.reply))
	s.mux.Handle("POST /v1/messages/{id}/typing", s.creating(s.typing))
	s.mux.Handle("GET /v1/messages/{id}/attachments/{attachment}", s.authed(s.getAttachment))

	s.mux.Handle("POST /v1/auth/device/start", s.public(s.deviceStart))
	s.mux.Handle("POST /v1/auth/device/token", s.public(s.deviceToken))
	s.mux.Handle("POST /oauth/device/code", s.public(s.oauthDeviceCode))
	s.mux.Handle("POST /oauth/token", s.public(s.oauthToken))
	s.mux.Handle("GET /v1/account", s.authed(s.getAccount))
	s.mux.Handle("GET /v1/account/ledger", s.authed(s.listLedger))
	s.mux.Handle("GET /v1/keys", s.authed(s.listKeys))
	s.mux.Handle("POST /v1/keys", s.creating(s.createKey))
	s.mux.Handle("DELETE /v1/keys/{id}", s.writing(s.revokeKey))

	s.mux.Handle("POST /v1/domains", s.creating(s.createDomain))
	s.mux.Handle("GET /v1/domains", s.authed(s.listDomains))
	s.mux.Handle("GET /v1/domains/{id}", s.authed(s.getDomain))
	s.mux.Handle("POST /v1/domains/{id}/verify", s.writing(s.verifyDomain))
	s.mux.Handle("DELETE /v1/domains/{id}", s.writing(s.deleteDomain))
}

// routeMux is the server's http.ServeMux, keeping the patterns registered
// on it, in order, for Routes.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Routes returns the patterns ("GET /v1/messages/{id}") of every route the
// server serves, in the order they were registered: what the OpenAPI
// document's test checks the document against.
func (s *Server) Routes() []string { return slices.Clone(s.mux.patterns) }

type ctxKey int

const requestIDKey ctxKey = iota

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// ServeHTTP adds a request id, recovers panics, and answers unknown routes
// and wrong methods in the JSON error shape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 64 {
		var b [8]byte
		rand.Read(b[:])
		id = "req_" + hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	a := &access{}
	r = r.WithContext(context.WithValue(context.WithValue(r.Context(), requestIDKey, id), accessKey{}, a))
	h, pattern := s.mux.Handler(r)
	aw, logAccess := s.logAccess(w, r, id, pattern, a)
	defer logAccess() // after the recovery below has answered
	w = aw
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.writeError(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
	}()
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values Handler does not
		return
	}
	// No route matched: let the mux decide between 404, 405 and a
	// redirect, then answer 404 and 405 in our own shape.
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		s.writeError(w, r, fault.RouteNotFound("no route %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		s.writeError(w, r, fault.MethodNotAllowed(
			"%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body.Bytes())
	}
}

type statusRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// retryAfterWriter sets Retry-After before the answer is written when the
// GraphQL operation was refused as rate_limited with a known wait.
type retryAfterWriter struct {
	http.ResponseWriter
	wait    *graph.RetryAfter
	written bool
}

func (w *retryAfterWriter) header() {
	if !w.written {
		w.written = true
		if d := w.wait.Wait(); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(d.Seconds())+1))
		}
	}
}

func (w *retryAfterWriter) WriteHeader(code int) { w.header(); w.ResponseWriter.WriteHeader(code) }
func (w *retryAfterWriter) Write(b []byte) (int, error) {
	w.header()
	return w.ResponseWriter.Write(b)
}
func (w *retryAfterWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) public(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authed resolves the bearer key before the handler runs and sets the
// caller in the request's context (messaging.WithPrincipal), which scopes
// it to the key's project; handlers and the domain read it from there.
func (s *Server) authed(h handlerFunc) http.Handler {
	return s.public(func(w http.ResponseWriter, r *http.Request) error {
		key, err := bearer(r)
		if err != nil {
			return err
		}
		p, err := s.svc.Authenticate(r.Context(), key)
		if err != nil {
			return err
		}
		noteProject(r.Context(), p.ProjectID)
		return h(w, r.WithContext(messaging.WithPrincipal(r.Context(), p)))
	})
}

// writing is authed for a request that changes state: it takes one token
// of the key's write budget first.
func (s *Server) writing(h handlerFunc) http.Handler {
	return s.authed(func(w http.ResponseWriter, r *http.Request) error {
		p, err := messaging.PrincipalFrom(r.Context())
		if err != nil {
			return err
		}
		if ok, wait := s.writeLimit.Allow(p.KeyID); !ok {
			return fault.RateLimited(wait, "this API key makes writes faster than this gateway allows; retry in %d s", int(wait.Seconds())+1)
		}
		return h(w, r)
	})
}

func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", fault.Unauthenticated("missing API key: send Authorization: Bearer <key>")
	}
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return "", fault.Unauthenticated("malformed Authorization header: want Bearer <key>")
	}
	return strings.TrimSpace(key), nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":{"code":"internal_error","message":"encoding the response failed"}}`, http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, buf.Bytes())
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

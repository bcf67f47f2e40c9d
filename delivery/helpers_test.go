package delivery_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/netguard"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
	hook "github.com/comm-gateway/comm/webhook"
)

// gateway is one comm replica over a real database, wired the way
// cmd/comm/serve.go wires it (package gatewaytest), minus the workers (see
// startWorker).
type gateway struct{ *gatewaytest.Gateway }

// gwOptions configure startGateway.
type gwOptions struct {
	// AllowPrivate is --webhook-allow-private.
	AllowPrivate bool
	// Box seals webhook secrets; a gateway restarted on the same database
	// needs the same box to open them (the binary loads its key from a
	// file). A fresh one if nil.
	Box *sealed.Box
}

func newBox(t testing.TB) *sealed.Box {
	t.Helper()
	key := make([]byte, sealed.KeySize)
	rand.Read(key)
	b, err := sealed.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startGateway opens cfg and serves the REST API until Stop or the end of
// the test; a test stopping it stops its workers first.
func startGateway(t *testing.T, cfg store.Config, opts gwOptions) *gateway {
	t.Helper()
	if opts.Box == nil {
		opts.Box = newBox(t)
	}
	return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config:  gw.Config{Service: messaging.Options{Box: opts.Box}, Webhook: hook.Options{AllowPrivate: opts.AllowPrivate}},
		Workers: &gw.Workers{},
	})}
}

// worker is a running delivery.Webhooks.
type worker struct {
	W      *delivery.Webhooks
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startWorker runs w (Service and Client set by the caller) until stop or
// the end of the test. Zero knobs get test-sized values.
func startWorker(t *testing.T, w *delivery.Webhooks) *worker {
	t.Helper()
	if w.PollInterval == 0 {
		w.PollInterval = 50 * time.Millisecond
	}
	if w.Logger == nil {
		w.Logger = gatewaytest.Logger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wk := &worker{W: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(wk.done)
		w.Run(ctx)
	}()
	t.Cleanup(wk.stop)
	return wk
}

// stop cancels the worker and waits until Run has returned.
func (w *worker) stop() {
	w.once.Do(func() {
		w.cancel()
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			panic("delivery.Webhooks.Run did not return 20 s after its context ended")
		}
	})
}

type response = gatewaytest.Response

// do calls the gateway's REST API with key; a non-empty body is sent as
// application/json.
func (g *gateway) do(t *testing.T, method, path, key, body string) response {
	t.Helper()
	req := gatewaytest.Request{Method: method, Path: path, Key: key, Body: body}
	if body != "" {
		req.ContentType = "application/json"
	}
	return g.Do(t, req)
}

// project is a sandbox project: its id and key.
type project struct {
	ID  string `json:"project_id"`
	Key string `json:"api_key"`
}

func (g *gateway) newProject(t *testing.T) project {
	t.Helper()
	resp := g.do(t, http.MethodPost, "/v1/projects/sandbox", "", `{"name":"webhooks"}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create sandbox: %d %s", resp.Status, resp.Body)
	}
	var p project
	if err := json.Unmarshal(resp.Body, &p); err != nil || p.ID == "" || p.Key == "" {
		t.Fatalf("create sandbox: %s (%v)", resp.Body, err)
	}
	return p
}

// webhook is the API's view of a registration.
type webhook struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Status         string     `json:"status"`
	Cursor         int64      `json:"cursor"`
	LastError      *string    `json:"last_error"`
	FailingSince   *time.Time `json:"failing_since"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	DisabledReason *string    `json:"disabled_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Secret         *string    `json:"secret"`
}

var decodeStrict = gatewaytest.DecodeStrict

// putWebhook registers a webhook and fails the test unless it is accepted.
func (g *gateway) putWebhook(t *testing.T, key string, in map[string]any) webhook {
	t.Helper()
	b, _ := json.Marshal(in)
	resp := g.do(t, http.MethodPut, "/v1/webhook", key, string(b))
	if resp.Status != http.StatusOK {
		t.Fatalf("PUT /v1/webhook %s: %d %s", b, resp.Status, resp.Body)
	}
	var w webhook
	decodeStrict(t, resp.Body, &w)
	return w
}

func (g *gateway) getWebhook(t *testing.T, key string) webhook {
	t.Helper()
	resp := g.do(t, http.MethodGet, "/v1/webhook", key, "")
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/webhook: %d %s", resp.Status, resp.Body)
	}
	var w webhook
	decodeStrict(t, resp.Body, &w)
	if w.Secret != nil {
		t.Fatalf("GET /v1/webhook shows the secret: %s", resp.Body)
	}
	return w
}

func (g *gateway) replay(t *testing.T, key string, fromSeq int64) webhook {
	t.Helper()
	resp := g.do(t, http.MethodPost, "/v1/webhook/replay", key, fmt.Sprintf(`{"from_seq":%d}`, fromSeq))
	if resp.Status != http.StatusOK {
		t.Fatalf("POST /v1/webhook/replay: %d %s", resp.Status, resp.Body)
	}
	var w webhook
	decodeStrict(t, resp.Body, &w)
	return w
}

// attempt is one element of GET /v1/webhook/attempts.
type attempt struct {
	ID         string    `json:"id"`
	URL        string    `json:"url"`
	Seq        int64     `json:"seq"`
	OK         bool      `json:"ok"`
	StatusCode int       `json:"status_code"`
	LatencyMS  int       `json:"latency_ms"`
	Error      *string   `json:"error"`
	At         time.Time `json:"at"`
}

func (g *gateway) attempts(t *testing.T, key, query string) []attempt {
	t.Helper()
	path := "/v1/webhook/attempts"
	if query != "" {
		path += "?" + query
	}
	resp := g.do(t, http.MethodGet, path, key, "")
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.Status, resp.Body)
	}
	var as []attempt
	decodeStrict(t, resp.Body, &as)
	return as
}

// events returns GET /v1/events?after_seq=after as raw items, byte for
// byte as the API serves them.
func (g *gateway) events(t *testing.T, key string, after int64) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for {
		resp := g.do(t, http.MethodGet, fmt.Sprintf("/v1/events?after_seq=%d&limit=100", after), key, "")
		if resp.Status != http.StatusOK {
			t.Fatalf("GET /v1/events: %d %s", resp.Status, resp.Body)
		}
		var page []json.RawMessage
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			t.Fatalf("GET /v1/events: %v in %s", err, resp.Body)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = eventOf(t, page[len(page)-1]).Seq
	}
}

// event is a delivery body or an element of GET /v1/events.
type event struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func eventOf(t *testing.T, b []byte) event {
	t.Helper()
	var e event
	decodeStrict(t, b, &e)
	return e
}

// eventsOfType returns the events of type typ after seq 0.
func (g *gateway) eventsOfType(t *testing.T, key, typ string) []event {
	t.Helper()
	var out []event
	for _, raw := range g.events(t, key, 0) {
		if e := eventOf(t, raw); e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (g *gateway) head(t *testing.T, projectID string) int64 {
	t.Helper()
	h, err := g.Log.Head(context.Background(), projectID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// appendN appends n events to the project's stream and returns the last seq.
func appendN(t *testing.T, log *stream.Log, projectID string, n int) int64 {
	t.Helper()
	var seq int64
	for i := range n {
		data := json.RawMessage(`{"n":` + strconv.Itoa(i) + `,"text":"hello \u00e9 <&>"}`)
		var err error
		if seq, err = log.Append(context.Background(), projectID, stream.MessageSent, data); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	return seq
}

// apiError is the API's error shape.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
}

func wantError(t *testing.T, what string, resp response, status int, param string) apiError {
	t.Helper()
	var e apiError
	if resp.Status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, resp.Status, status, resp.Body)
		return e
	}
	if err := json.Unmarshal(resp.Body, &e); err != nil || e.Error.Message == "" {
		t.Errorf("%s: body %s is not the error shape (%v)", what, resp.Body, err)
	}
	if param != "" && e.Error.Param != param {
		t.Errorf("%s: param %q, want %q; body %s", what, e.Error.Param, param, resp.Body)
	}
	return e
}

// waitFor polls cond until it holds or the deadline passes.
var waitFor = gatewaytest.WaitFor

// ---- receiver ----

// hit is one request a receiver got.
type hit struct {
	Path       string
	Header     http.Header
	Body       []byte
	Seq        int64
	Start, End time.Time
	Status     int // what the receiver answered; 0 if the client went away first
}

// answerFunc decides a receiver's answer to a hit: it returns the status
// to write, or 0 when it wrote the answer itself. n counts hits from 1.
type answerFunc func(w http.ResponseWriter, r *http.Request, h *hit, n int) int

// receiver is an HTTPS webhook endpoint that records every request and
// checks that no two requests overlap in time.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	hits     []*hit
	answer   answerFunc
	inflight int
	overlaps int
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{t: t}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// newReceiverOn is newReceiver on a given listener.
func newReceiverOn(t *testing.T, ln net.Listener) *receiver {
	t.Helper()
	r := &receiver{t: t}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Listener.Close()
	r.srv.Listener = ln
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL.
func (r *receiver) URL() string { return r.srv.URL }

// client returns a webhook client that trusts the receiver's certificate.
func (r *receiver) client(allowPrivate bool, timeout time.Duration) *http.Client {
	return netguard.NewClient(netguard.Options{AllowPrivate: allowPrivate, Timeout: timeout,
		TLSConfig: r.srv.Client().Transport.(*http.Transport).TLSClientConfig})
}

func (r *receiver) setAnswer(a answerFunc) {
	r.mu.Lock()
	r.answer = a
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h := &hit{Path: req.URL.Path, Header: req.Header.Clone(), Body: body, Start: time.Now()}
	var e struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(body, &e) == nil {
		h.Seq = e.Seq
	}
	r.mu.Lock()
	r.inflight++
	if r.inflight > 1 {
		r.overlaps++
	}
	r.hits = append(r.hits, h)
	n, answer := len(r.hits), r.answer
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		h.End = time.Now()
		r.mu.Unlock()
	}()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(w, req, h, n)
	}
	if status != 0 {
		w.WriteHeader(status)
	}
	r.mu.Lock()
	if req.Context().Err() == nil {
		if status == 0 {
			status = http.StatusOK
		}
		h.Status = status
	}
	r.mu.Unlock()
}

// snapshot returns a copy of the hits so far.
func (r *receiver) snapshot() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]hit, len(r.hits))
	for i, h := range r.hits {
		out[i] = *h
	}
	return out
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hits)
}

func (r *receiver) overlapCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overlaps
}

// sleepOrGone waits d, or less if the client goes away.
func sleepOrGone(req *http.Request, d time.Duration) {
	select {
	case <-time.After(d):
	case <-req.Context().Done():
	}
}

// ---- Standard Webhooks, written from the specification ----

// verifyStandard checks one delivery the way a receiver following the
// Standard Webhooks specification does: the key is the base64 after
// "whsec_" (or the secret's bytes otherwise), the signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", the signature is HMAC-SHA256
// in base64 with a "v1," prefix, several may be given space-separated, and
// the timestamp must be within five minutes.
func verifyStandard(secret string, h http.Header, body []byte) error {
	var key []byte
	if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return fmt.Errorf("bad secret: %v", err)
		}
	} else {
		key = []byte(secret)
	}
	id, ts, sigs := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not an integer", ts)
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %q is %s off", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Split(sigs, " ") {
		version, b64, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q matches", sigs)
}

// ---- leases ----

// leaseOwner reads which replica holds the project's webhook.
func (g *gateway) leaseOwner(t *testing.T) string {
	t.Helper()
	w, err := g.DB.Ent.Webhook.Query().Only(tenant.System(context.Background()))
	if err != nil {
		t.Fatalf("read webhook: %v", err)
	}
	return w.LeaseOwner
}

// stealLease hands the project's webhook to a replica named owner that
// holds it for lease and then never renews it: what a replica that died
// while delivering leaves behind.
func (g *gateway) stealLease(t *testing.T, projectID, owner string, lease time.Duration) {
	t.Helper()
	_, err := g.Log.Write(tenant.WithProject(context.Background(), projectID), projectID, func(tx *stream.Tx) error {
		return tx.Client().Webhook.Update().SetLeaseOwner(owner).
			SetLeaseUntil(time.Now().UTC().Add(lease)).Exec(tx.Context())
	})
	if err != nil {
		t.Fatalf("steal lease: %v", err)
	}
}

// tlsClient is a webhook client trusting httptest's TLS certificate (the
// same for every httptest TLS server), for receivers started later.
func tlsClient(t *testing.T, allowPrivate bool, timeout time.Duration) *http.Client {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return netguard.NewClient(netguard.Options{AllowPrivate: allowPrivate, Timeout: timeout,
		TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig})
}

// newHTTPServer serves h over plain HTTP on loopback until the test ends
// and returns its URL.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func systemCtx() context.Context { return tenant.System(context.Background()) }

// plainSecret is a raw webhook secret strong enough to be accepted.
const plainSecret = "test-secret-0123456789abcdef"

func ptrText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

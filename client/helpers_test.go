package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/delivery"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
	"github.com/comm-gateway/comm/webhook"
)

// gateway is one running comm server over a real database, wired the way
// cmd/comm/serve.go wires it (package gatewaytest): the REST API, GraphQL
// and its websocket, the outbox worker delivering replies, and
// (optionally) the webhook worker.
type gateway = gatewaytest.Gateway

// gwOptions configure start.
type gwOptions struct {
	// Webhooks runs the push worker, allowed to reach loopback receivers.
	Webhooks bool
}

func start(t *testing.T, cfg store.Config, opts gwOptions) *gateway {
	t.Helper()
	w := &gw.Workers{Outbox: &delivery.Outbox{PollInterval: 100 * time.Millisecond}}
	if opts.Webhooks {
		w.Webhooks = &delivery.Webhooks{PollInterval: 50 * time.Millisecond}
	}
	return gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config:  gw.Config{Webhook: webhook.Options{AllowPrivate: opts.Webhooks}},
		Workers: w,
	})
}

// project is a sandbox project with a client on it.
type project struct {
	*client.Client
	Sandbox *client.Sandbox
}

// newProject creates a sandbox project through the API and a client for
// it (through baseURL, the gateway's or a proxy's).
func newProject(t *testing.T, g *gateway, baseURL string, opts ...client.Option) project {
	t.Helper()
	sb, err := client.CreateSandbox(context.Background(), g.URL, t.Name())
	if err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if baseURL == "" {
		baseURL = g.URL
	}
	opts = append([]client.Option{client.WithAPIKey(sb.APIKey), client.WithBaseURL(baseURL),
		client.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)
	c, err := client.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return project{Client: c, Sandbox: sb}
}

// newProjectClient is a client of an existing project through baseURL.
func newProjectClient(t *testing.T, baseURL, key string) project {
	t.Helper()
	c, err := client.New(client.WithAPIKey(key), client.WithBaseURL(baseURL))
	if err != nil {
		t.Fatal(err)
	}
	return project{Client: c}
}

// connectTest connects the test channel.
func (p project) connectTest(t *testing.T) *client.Connection {
	t.Helper()
	conn, err := p.Connect(context.Background(), client.ConnectRequest{Channel: "test"})
	if err != nil {
		t.Fatalf("connect test channel: %v", err)
	}
	return conn
}

// inject makes sender write text on conn.
func (p project) inject(t testing.TB, connID, sender, text string) *client.Message {
	t.Helper()
	m, err := p.Inject(context.Background(), connID, client.InjectRequest{Sender: sender, Text: text})
	if err != nil {
		t.Errorf("inject %q from %s: %v", text, sender, err)
	}
	return m
}

// signedInKey gives a project a signed-in key, as the device flow does.
func signedInKey(t *testing.T, g *gateway, projectID string) string {
	t.Helper()
	key := apikey.New(apikey.SignedInPrefix)
	hash, err := apikey.Parse(key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenant.WithProject(context.Background(), projectID)
	_, err = g.Log.Write(ctx, projectID, func(tx *stream.Tx) error {
		return tx.Client().APIKey.Create().SetHash(hash[:]).SetKind(entapikey.KindSignedIn).
			SetDisplay(apikey.Display(key)).Exec(tx.Context())
	})
	if err != nil {
		t.Fatalf("signed-in key: %v", err)
	}
	return key
}

// eventually polls cond until it holds or 15 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	gatewaytest.WaitFor(t, what, 15*time.Second, cond)
}

// proxy is a reverse proxy in front of a gateway that a test can cut:
// Cut closes every connection to the gateway (the websocket included),
// RefuseSockets answers websocket upgrades with 503, and Rewrite changes
// requests on their way. It counts requests by path.
type proxy struct {
	URL string

	refuse atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	counts map[string]int
	// rewrite, if set, may change a request before it is forwarded.
	rewrite func(r *http.Request)
	// intercept, if set, may answer a request itself (return true).
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{conns: map[net.Conn]struct{}{}, counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	rp.Transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			p.mu.Unlock()
			return &trackedConn{Conn: c, p: p}, nil
		},
	}
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		if r.Header.Get("Upgrade") != "" {
			key = "UPGRADE " + r.URL.Path
		}
		p.mu.Lock()
		p.counts[key]++
		rewrite, intercept := p.rewrite, p.intercept
		p.mu.Unlock()
		if key == "UPGRADE /graphql" && p.refuse.Load() {
			http.Error(w, "sockets refused", http.StatusServiceUnavailable)
			return
		}
		if intercept != nil && intercept(w, r) {
			return
		}
		if rewrite != nil {
			rewrite(r)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { p.Cut(); hs.Close() })
	p.URL = hs.URL
	return p
}

// Cut closes every open connection to the gateway.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Count returns how many requests of "METHOD /path" (or "UPGRADE /path")
// passed.
func (p *proxy) Count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[key]
}

func (p *proxy) set(rewrite func(*http.Request), intercept func(http.ResponseWriter, *http.Request) bool) {
	p.mu.Lock()
	p.rewrite, p.intercept = rewrite, intercept
	p.mu.Unlock()
}

type trackedConn struct {
	net.Conn
	p    *proxy
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.p.mu.Lock()
		delete(c.p.conns, c.Conn)
		c.p.mu.Unlock()
	})
	return c.Conn.Close()
}

// ids is a concurrency-safe multiset of handled ids.
type ids struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *ids) add(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[id]++
	return s.n[id]
}

func (s *ids) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.n)
}

// repeats lists the ids seen more than once.
func (s *ids) repeats() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, n := range s.n {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, n))
		}
	}
	return out
}

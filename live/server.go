package live

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

// Subprotocols, in order of preference.
const (
	ProtocolTransportWS = "graphql-transport-ws"
	ProtocolLegacy      = "graphql-ws"
)

// Options tune the websocket endpoint.
type Options struct {
	// InitTimeout is how long a client has to send connection_init
	// (default 10 s).
	InitTimeout time.Duration
	// PingInterval is how often the server pings; a peer silent for two
	// intervals is dropped (default 20 s).
	PingInterval time.Duration
	// MaxSubscriptions bounds the operations running on one connection
	// (default 100).
	MaxSubscriptions int
	// ReadLimit bounds one client message (default 64 KiB).
	ReadLimit int64
	// MaxQueueBytes bounds what waits to be written to one socket; a
	// subscriber that would pass it pages from the database instead
	// (default 4 MiB).
	MaxQueueBytes int
	// AllowedOrigins lists browser origins (scheme://host[:port]) allowed
	// besides the gateway's own host. Requests without Origin (non-browser
	// clients) are always allowed.
	AllowedOrigins []string
	// Logger receives warnings.
	Logger *slog.Logger
}

// Server is the websocket endpoint for GraphQL operations.
type Server struct {
	log      *stream.Log
	svc      *messaging.Service
	exec     *executor.Executor
	broker   *Broker
	logger   *slog.Logger
	opts     Options
	upgrader websocket.Upgrader

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// NewServer returns the endpoint. exec runs queries and mutations sent
// over a socket (graph.NewExecutor); subscriptions are served natively.
func NewServer(svc *messaging.Service, exec *executor.Executor, opts Options) *Server {
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 10 * time.Second
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 20 * time.Second
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = 100
	}
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = 64 << 10
	}
	if opts.MaxQueueBytes <= 0 {
		opts.MaxQueueBytes = 4 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		log: svc.Log(), svc: svc, exec: exec, logger: opts.Logger, opts: opts,
		broker: NewBroker(svc.Log(), opts.Logger),
		conns:  map[*conn]struct{}{}, stop: make(chan struct{}),
	}
	s.upgrader = websocket.Upgrader{
		Subprotocols:     []string{ProtocolTransportWS, ProtocolLegacy},
		ReadBufferSize:   1024,
		WriteBufferSize:  4096,
		WriteBufferPool:  &sync.Pool{},
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      s.checkOrigin,
	}
	s.wg.Add(1)
	go s.keepAlive()
	return s
}

// IsUpgrade reports whether r asks for a websocket.
func IsUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// ServeHTTP upgrades the request and serves the socket until it closes.
// The request's goroutine becomes the socket's reader: an idle connection
// holds one goroutine.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c := newConn(s, ws, r)
	if !s.track(c) {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
		return
	}
	defer s.untrack(c)
	c.read()
}

func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return slices.ContainsFunc(s.opts.AllowedOrigins, func(a string) bool { return strings.EqualFold(a, origin) })
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// snapshot returns the open sockets.
func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Conns returns the number of open sockets.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Broker returns the feeds.
func (s *Server) Broker() *Broker { return s.broker }

// keepAlive pings every socket; legacy graphql-ws clients also get the
// protocol's "ka" message.
func (s *Server) keepAlive() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for _, c := range s.snapshot() {
			c.ping()
		}
	}
}

// Close closes every socket (going away) and stops the feeds' users.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	for _, c := range s.snapshot() {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
	}
	s.wg.Wait()
}

package live

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/fault"
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
	// MaxQueueBytes bounds the data frames (subscription events, query and
	// mutation results) waiting to be written to one socket: a subscriber
	// that would pass it pages from the database instead, a result waits
	// for room, and a replay page holds no more than the room left. A
	// single frame larger than the bound is written alone (default 4 MiB).
	MaxQueueBytes int
	// TotalQueueBytes bounds the data frames waiting to be written to all
	// sockets together: a subscriber that would pass it pages from the
	// database later, when there is room; a query or mutation result waits
	// for room for BusyTimeout, then fails with a rate_limited error
	// (default 256 MiB).
	TotalQueueBytes int64
	// BusyTimeout: see TotalQueueBytes (default WriteTimeout).
	BusyTimeout time.Duration
	// StallTimeout: while more than three quarters of TotalQueueBytes are
	// used, a socket that has held a large share of it (more than half its
	// MaxQueueBytes or 1/64 of TotalQueueBytes, whichever is less) for this
	// long without draining below it, or that has had data queued and no
	// frame written for this long, is closed with 1008, the largest first
	// (default WriteTimeout).
	StallTimeout time.Duration
	// WriteTimeout bounds one write to a socket; a peer that reads nothing
	// for that long, while the server has something to send, is closed
	// (default 10 s).
	WriteTimeout time.Duration
	// ControlQueueFrames and ControlQueueBytes bound the control messages
	// (pong, ka, connection_ack, complete, error) waiting to be written to
	// one socket; a socket passing either (a client sending pings but not
	// reading the pongs) is closed with 1008 (defaults 256 and 512 KiB,
	// raised to fit the replies to MaxSubscriptions operations and one
	// message of ReadLimit).
	ControlQueueFrames int
	ControlQueueBytes  int
	// MaxPerKey and MaxPerIP cap the open sockets of one API key (refused
	// at connection_init with 4429) and of one client IP (refused at the
	// upgrade with 429), on this replica (defaults 50 and 200).
	MaxPerKey, MaxPerIP int
	// KeyCheckInterval is how often the keys of open sockets are checked
	// against the database, in one query, so that a revoked key's sockets
	// close on every replica (default 5 s). A revocation on this replica,
	// or announced by another one over PostgreSQL NOTIFY, closes them at
	// once.
	KeyCheckInterval time.Duration
	// ClientIP returns a request's client address, for MaxPerIP (default:
	// the peer's address).
	ClientIP func(*http.Request) string
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
	budget   *budget
	hogBytes int // a socket holding more, without draining, holds a large share of the budget
	epoch    time.Time

	mu     sync.Mutex
	conns  map[*conn]struct{}
	slots  int // sockets tracked so far: each is pinged in slot (number % pingSlots)
	byIP   map[string]int
	byKey  map[string]map[*conn]struct{} // authenticated sockets by key id
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup

	stopSignals func()
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
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.TotalQueueBytes <= 0 {
		opts.TotalQueueBytes = 256 << 20
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = opts.WriteTimeout
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = opts.WriteTimeout
	}
	if opts.ControlQueueFrames <= 0 {
		opts.ControlQueueFrames = 256
	}
	if opts.ControlQueueBytes <= 0 {
		opts.ControlQueueBytes = 512 << 10
	}
	// Every running operation may owe an error and a complete.
	opts.ControlQueueFrames = max(opts.ControlQueueFrames, 2*opts.MaxSubscriptions+16)
	opts.ControlQueueBytes = max(opts.ControlQueueBytes, int(opts.ReadLimit)+1024)
	if opts.MaxPerKey <= 0 {
		opts.MaxPerKey = 50
	}
	if opts.MaxPerIP <= 0 {
		opts.MaxPerIP = 200
	}
	if opts.KeyCheckInterval <= 0 {
		opts.KeyCheckInterval = 5 * time.Second
	}
	if opts.ClientIP == nil {
		opts.ClientIP = peerIP
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		log: svc.Log(), svc: svc, exec: exec, logger: opts.Logger, opts: opts,
		broker: NewBroker(svc.Log(), opts.Logger),
		conns:  map[*conn]struct{}{}, byIP: map[string]int{}, byKey: map[string]map[*conn]struct{}{},
		stop: make(chan struct{}), budget: newBudget(opts.TotalQueueBytes),
		hogBytes: int(max(min(int64(opts.MaxQueueBytes/2), opts.TotalQueueBytes/64), 1)),
		epoch:    time.Now(),
	}
	s.upgrader = websocket.Upgrader{
		Subprotocols:     []string{ProtocolTransportWS, ProtocolLegacy},
		ReadBufferSize:   1024,
		WriteBufferSize:  4096,
		WriteBufferPool:  &sync.Pool{},
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin:      s.checkOrigin,
	}
	s.wg.Add(3)
	go s.watchdog()
	go s.keepAlive()
	go s.keyChecker()
	s.stopSignals = svc.Log().Hub().OnSignal(messaging.KeyRevokedSignal, s.keyRevoked)
	return s
}

// IsUpgrade reports whether r asks for a websocket.
func IsUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// ServeHTTP upgrades the request and serves the socket until it closes.
// The request's goroutine becomes the socket's reader: an idle connection
// holds one goroutine.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, nil)
}

// Authenticator decides who a socket's caller is from its connection_init
// payload, instead of an API key.
type Authenticator func(ctx context.Context, payload json.RawMessage) (*messaging.Principal, error)

// ServeWith serves a socket whose caller authn names at connection_init
// (the dashboard: a browser's session cookie, with the project and the
// CSRF token in the payload); an Authorization header is ignored. The
// principal's KeyID is the credential LiveKeys re-checks. authn runs
// under the socket's context: the upgrade request's has ended by then.
func (s *Server) ServeWith(w http.ResponseWriter, r *http.Request, authn Authenticator) {
	s.serve(w, r, authn)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, authn Authenticator) {
	ip := s.opts.ClientIP(r)
	if !s.admitIP(ip) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusTooManyRequests)
		msg := fmt.Sprintf("too many websockets from this address (at most %d open); close one first", s.opts.MaxPerIP)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": fault.ErrRateLimited.Code, "message": msg}}) //nolint:errcheck // the client is gone
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.releaseIP(ip)
		return // the upgrader answered
	}
	c := newConn(s, ws, r, ip, authn)
	if !s.track(c) {
		s.releaseIP(ip)
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
		return
	}
	// The socket is read on a goroutine of its own, and the handler
	// returns: the HTTP server's state for the connection (its 4 KiB
	// read and write buffers, the request) is not kept for the socket's
	// life. That is a third of an idle subscription's memory.
	go func() {
		defer s.untrack(c) // releases ip too
		c.read()
	}()
}

// peerIP is the address of the request's peer.
func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// admitIP counts a socket of ip, unless ip is at its cap.
func (s *Server) admitIP(ip string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byIP[ip] >= s.opts.MaxPerIP {
		return false
	}
	s.byIP[ip]++
	return true
}

func (s *Server) releaseIP(ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseIPLocked(ip)
}

func (s *Server) releaseIPLocked(ip string) {
	if s.byIP[ip]--; s.byIP[ip] <= 0 {
		delete(s.byIP, ip)
	}
}

// admitKey records c as authenticated with key, unless the key is at its
// cap.
func (s *Server) admitKey(c *conn, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.byKey[key]
	if len(set) >= s.opts.MaxPerKey {
		return false
	}
	if set == nil {
		set = map[*conn]struct{}{}
		s.byKey[key] = set
	}
	set[c] = struct{}{}
	c.keyID = key
	return true
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
	c.slot = s.slots % pingSlots
	s.slots++
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.releaseIPLocked(c.ip)
	if set := s.byKey[c.keyID]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(s.byKey, c.keyID)
		}
	}
	s.mu.Unlock()
}

// keyRevoked closes the sockets of a key announced revoked (a hint sent
// after the revocation committed, by this replica or another one).
func (s *Server) keyRevoked(key string) {
	s.closeKeys(map[string]bool{key: true})
}

// closeKeys closes the sockets authenticated with the keys: nothing more is
// delivered on them.
func (s *Server) closeKeys(keys map[string]bool) {
	var victims []*conn
	s.mu.Lock()
	for key := range keys {
		for c := range s.byKey[key] {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		s.logger.Info("live: closing a socket of a revoked key", "key", c.keyID, "ip", c.ip)
		c.kill(closeForbidden, "Forbidden: API key revoked")
	}
}

// keyChecker checks the keys of the open sockets against the database
// every KeyCheckInterval and closes the sockets of keys
// that no longer work: the database decides, whatever hints were missed.
func (s *Server) keyChecker() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.KeyCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.checkOpenKeys()
	}
}

func (s *Server) checkOpenKeys() {
	s.mu.Lock()
	keys := make([]string, 0, len(s.byKey))
	for k := range s.byKey {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live, err := s.svc.LiveKeys(ctx, keys)
	if err != nil {
		s.logger.Warn("live: check keys", "err", err)
		return
	}
	dead := map[string]bool{}
	for _, k := range keys {
		if !live[k] {
			dead[k] = true
		}
	}
	if len(dead) > 0 {
		s.closeKeys(dead)
	}
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

// Subscriptions returns the subscriptions open on all sockets (queries and
// mutations in progress on them are not counted). It locks each socket in
// turn: for metrics, not for a hot path.
func (s *Server) Subscriptions() int {
	n := 0
	for _, c := range s.snapshot() {
		c.mu.Lock()
		for _, sub := range c.subs {
			if sub != nil {
				n++
			}
		}
		c.mu.Unlock()
	}
	return n
}

// QueuedBytes returns the bytes of data frames waiting to be written to
// all sockets (bounded by Options.TotalQueueBytes).
func (s *Server) QueuedBytes() int64 { return s.budget.used.Load() }

// Broker returns the feeds.
func (s *Server) Broker() *Broker { return s.broker }

// pingSlots is how many groups the sockets are pinged in, one group after
// another over PingInterval: each socket is pinged once per interval, and
// a server with many sockets never writes to all of them at once (10,000
// pings at once held up live deliveries by over 100 ms).
const pingSlots = 64

// keepAlive pings every socket once per PingInterval, a slot of them at a
// time; legacy graphql-ws clients also get the protocol's "ka" message.
func (s *Server) keepAlive() {
	defer s.wg.Done()
	// Ticks no closer than 10 ms (tests ping often): then some slots are
	// pinged together.
	slots := min(pingSlots, max(1, int(s.opts.PingInterval/(10*time.Millisecond))))
	t := time.NewTicker(s.opts.PingInterval / time.Duration(slots))
	defer t.Stop()
	var due []*conn
	for tick := 0; ; tick++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		due = due[:0]
		s.mu.Lock()
		for c := range s.conns {
			if c.slot%slots == tick%slots {
				due = append(due, c)
			}
		}
		s.mu.Unlock()
		for _, c := range due {
			c.ping()
		}
		clear(due)
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
	s.stopSignals()
	close(s.stop)
	for _, c := range s.snapshot() {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
	}
	s.wg.Wait()
}

// Package messaging is comm's domain: projects, keys, connections,
// conversations and messages. It is the only writer of state: REST
// handlers, GraphQL resolvers, provider webhooks and workers all call it,
// and it writes through stream.Log so every change commits with its events.
package messaging

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
)

// Service is the domain API.
type Service struct {
	db     *store.DB
	log    *stream.Log
	read   *ent.Client
	logger *slog.Logger
	now    func() time.Time

	keyByHash *sql.Stmt
	// keys holds the principals of live keys by hash, so most requests
	// read nothing to authenticate; a revocation (KeyRevokedSignal, here
	// or from another replica) removes its key at once.
	keys *cache[apikey.Hash, Principal]
	// conns holds connections messages are received on (receiving).
	conns *cache[string, *ent.Connection]
	// threads holds the conversation ids of threads messages were
	// received in, so a message continuing one writes no statement of its
	// own to find it (ids never change, so entries never expire).
	threads   *cache[threadKey, string]
	stopCache []func()
	channels  *channels.Registry
	adapters  adapterSet
	outbox    chan struct{}
	box       *sealed.Box

	baseURL            string
	sandboxConnections int
	eventBody          int

	typing sync.Map // conversation id -> refresher running

	touchMu sync.Mutex
	touched map[string]time.Time // key id -> last recorded use

	messagePageBytes int
	pendingReceipts  int

	// unrouted counts app-level webhook events for routing keys no live
	// connection holds (UnroutedEvents).
	unrouted atomic.Int64

	billing billingBox
}

// UnroutedEvents is how many app-level webhook routing keys (a Page, a
// workspace) came for which no live connection is registered, and how
// many messages came to a shared line from people bound to no connection
// there (or receipts naming no message of the line): taken, acknowledged
// to the provider, and dropped.
func (s *Service) UnroutedEvents() int64 { return s.unrouted.Load() }

// Options configure the service.
type Options struct {
	// Channels is the registry of channels; channels.Known() if nil.
	Channels *channels.Registry
	// Logger receives warnings; slog.Default() if nil.
	Logger *slog.Logger
	// Box seals secrets at rest; a box with a random key (secrets lost at
	// exit) if nil, which suits tests.
	Box *sealed.Box
	// BaseURL is the gateway's public URL (scheme, host, optional path
	// prefix, no trailing slash); connections' provider ingress URLs are
	// built from it. Empty: no provider can reach the gateway, and
	// adapters that can poll do.
	BaseURL string
	// Now is the clock (tests move it to expire sign-ins); time.Now if nil.
	Now func() time.Time
	// MessagePageBytes is the byte budget of a page of messages or of
	// conversations (REST and GraphQL): a page stops before the row that
	// would pass it, and a larger row comes alone.
	// DefaultMessagePageBytes if not positive.
	MessagePageBytes int
	// SandboxConnections bounds the live connections of a project that
	// belongs to no account (default DefaultSandboxConnections; negative:
	// no bound).
	SandboxConnections int
	// EventBodyBytes caps each of a message's text, html and subject (and
	// its details) in message events; DefaultEventBodyBytes if 0. The
	// message is stored whole and read whole through GET /v1/messages/{id}.
	EventBodyBytes int
	// PendingReceipts bounds the provider reports a connection keeps for
	// messages whose send is not recorded yet (receipt.go);
	// DefaultPendingReceipts if not positive.
	PendingReceipts int
}

// DefaultSandboxConnections is the default of Options.SandboxConnections.
const DefaultSandboxConnections = 100

// New returns the service over an open log.
func New(log *stream.Log, opts Options) (*Service, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	reg := opts.Channels
	if reg == nil {
		reg = channels.NewRegistry(channels.Known()...)
	}
	box := opts.Box
	if box == nil {
		key := make([]byte, sealed.KeySize)
		rand.Read(key)
		box, _ = sealed.New(key)
	}
	if opts.MessagePageBytes <= 0 {
		opts.MessagePageBytes = DefaultMessagePageBytes
	}
	if opts.SandboxConnections == 0 {
		opts.SandboxConnections = DefaultSandboxConnections
	}
	if opts.PendingReceipts <= 0 {
		opts.PendingReceipts = DefaultPendingReceipts
	}
	if opts.EventBodyBytes <= 0 {
		opts.EventBodyBytes = DefaultEventBodyBytes
	}
	clock := opts.Now
	if clock == nil {
		clock = time.Now
	}
	db := log.DB()
	keyByHash, err := db.R.Prepare(db.Rebind(
		"SELECT id, project_id, kind, revoked_at IS NOT NULL FROM api_keys WHERE hash = ?"))
	if err != nil {
		return nil, fmt.Errorf("messaging: prepare: %w", err)
	}
	s := &Service{
		db: db, log: log, read: db.Ent, logger: logger, keyByHash: keyByHash,
		channels: reg, outbox: make(chan struct{}, 1),
		box: box, baseURL: strings.TrimRight(opts.BaseURL, "/"), eventBody: opts.EventBodyBytes,
		sandboxConnections: opts.SandboxConnections,
		// Microseconds: the finest time both databases store, so a
		// resource shows the same times when created as when read back.
		now:              func() time.Time { return clock().UTC().Truncate(time.Microsecond) },
		touched:          map[string]time.Time{},
		messagePageBytes: opts.MessagePageBytes,
		pendingReceipts:  opts.PendingReceipts,
	}
	s.keys = newCache[apikey.Hash, Principal](MaxCachedKeys, keyTTL)
	s.conns = newCache[string, *ent.Connection](MaxCachedConnections, connectionTTL)
	s.threads = newCache[threadKey, string](MaxCachedThreads, 0)
	s.stopCache = []func(){
		log.Hub().OnSignal(KeyRevokedSignal, func(id string) {
			s.keys.forgetIf(func(p Principal) bool { return p.KeyID == id })
		}),
		log.Hub().OnSignal(ConnectionDeletedSignal, s.conns.forget),
	}
	// Reads of message and conversation pages under BoundPage load only
	// the rows within the page budget; other queries pass through.
	s.read.Message.Intercept(s.pageInterceptor())
	s.read.Conversation.Intercept(s.pageInterceptor())
	// Deleted connections are gone from reads (reads.go).
	s.read.Connection.Intercept(liveOnly())
	return s, nil
}

// Close releases the service's prepared statements.
func (s *Service) Close() error {
	for _, stop := range s.stopCache {
		stop()
	}
	return s.keyByHash.Close()
}

// MaxCachedKeys bounds the live keys a replica keeps in memory (a few
// hundred bytes each); keyTTL is how long one is trusted there without
// reading it again, should another replica's revocation signal be lost.
// MaxCachedConnections and connectionTTL do the same for connections
// messages are received on.
const (
	MaxCachedKeys        = 10000
	keyTTL               = 2 * time.Second
	MaxCachedConnections = 10000
	connectionTTL        = 2 * time.Second
	// MaxCachedThreads bounds the threads whose conversation ids a
	// replica keeps (at most some 400 bytes each: thread keys past
	// maxKeptThreadKey are not kept).
	MaxCachedThreads = 20000
)

// Ent returns the ent client for reads; queries are scoped by the tenant
// in their context and follow the domain's read rules (reads.go): deleted
// connections are gone unless the context asks for them (IncludeDeleted).
func (s *Service) Ent() *ent.Client { return s.read }

// Now is the service's clock, as it stamps resources (UTC, microseconds).
func (s *Service) Now() time.Time { return s.now() }

// PageBytes is the byte budget of a page of messages, conversations or
// other rows whose size outsiders set (Options.MessagePageBytes).
func (s *Service) PageBytes() int { return s.messagePageBytes }

// Box seals secrets at rest.
func (s *Service) Box() *sealed.Box { return s.box }

// Log returns the event log.
func (s *Service) Log() *stream.Log { return s.log }

// write runs fn in a write transaction of the caller's project.
func (s *Service) write(ctx context.Context, fn func(tx *stream.Tx) error) ([]stream.Event, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	return s.log.Write(ctx, p.ProjectID, fn)
}

// Ping checks that the database answers.
func (s *Service) Ping(ctx context.Context) error { return s.db.R.PingContext(ctx) }

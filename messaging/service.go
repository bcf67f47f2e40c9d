// Package messaging is comm's domain: projects, keys, connections,
// conversations and messages. It is the only writer of state: REST
// handlers, GraphQL resolvers, provider webhooks and workers all call it,
// and it writes through stream.Log so every change commits with its events.
package messaging

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/comm-gateway/comm/ent"
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

	touchMu sync.Mutex
	touched map[string]time.Time // key id -> last recorded use
}

// New returns the service over an open log.
func New(log *stream.Log, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{
		db: log.DB(), log: log, read: log.DB().Ent, logger: logger,
		now:     func() time.Time { return time.Now().UTC() },
		touched: map[string]time.Time{},
	}
}

// Log returns the event log.
func (s *Service) Log() *stream.Log { return s.log }

// Ping checks that the database answers.
func (s *Service) Ping(ctx context.Context) error { return s.db.R.PingContext(ctx) }

package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/comm-gateway/comm/server"
)

// workerState is what /readyz knows of the background workers: whether
// StartWorkers ran, and which of its workers returned before being
// stopped.
type workerState struct {
	mu      sync.Mutex
	started bool
	stopped bool     // stop was called
	exited  []string // workers that returned on their own
}

func (w *workerState) check(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.started:
		return errors.New("not started")
	case w.stopped:
		return errors.New("stopped")
	case len(w.exited) > 0:
		return fmt.Errorf("not running: %s", strings.Join(w.exited, ", "))
	}
	return nil
}

// readyChecks are the gateway's checks of /readyz beside the server's
// database ping: migrations done, workers running, and the encryption key
// the one the database's secrets are sealed with.
func (g *Gateway) readyChecks() []server.ReadyCheck {
	return []server.ReadyCheck{
		{Name: "migrations", Check: func(context.Context) error {
			if !g.Log.DB().Migrated() {
				return errors.New("not done")
			}
			return nil
		}},
		{Name: "workers", Check: g.workers.check},
		{Name: "encryption_key", Check: func(ctx context.Context) error {
			if g.box == nil {
				return nil // a key of this process alone (tests)
			}
			err := verifyKey(ctx, g.Log, g.box)
			if errors.Is(err, ErrKeyMismatch) {
				return errors.New("does not match the key the database's secrets are sealed with: set --encryption-key (COMM_ENCRYPTION_KEY) to the other replicas' key")
			}
			if err != nil {
				g.logger.Warn("readiness: encryption key check", "err", err)
				return errors.New("not checked: the database did not answer")
			}
			return nil
		}},
	}
}

package telegram

import (
	"context"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Poll runs a getUpdates session until ctx ends (it returns nil then) or
// the session fails. Each update's message is handed to emit; the offset
// moves past an update only once emit accepted its message, and Telegram
// drops updates only when a later getUpdates names a higher offset, so
// whatever emit did not accept is fetched again by the next session (of
// this adapter or of another process). A failed emit ends the session
// with a transient error. Telegram answers 409 while a webhook is set or
// another client polls the same bot (transient: the gateway retries with a
// backoff); a rejected token is channels.ErrRevoked.
func (a *PollingAdapter) Poll(ctx context.Context, emit channels.Emit) error {
	select {
	case a.sessionLock() <- struct{}{}:
		defer func() { <-a.session }()
	default:
		return channels.Transient(0, "telegram: poll: a session of this connection is already running in this process")
	}
	for {
		if ctx.Err() != nil || a.closed.Err() != nil {
			return nil
		}
		updates, err := a.getUpdates(ctx)
		if err != nil {
			if ctx.Err() != nil || a.closed.Err() != nil {
				return nil
			}
			return err
		}
		// The page's messages are stored together (one commit), then
		// the offset moves past all of them.
		var page []channels.Inbound
		for _, u := range updates {
			ins, err := a.inbound(ctx, u)
			if err != nil {
				if ctx.Err() != nil || a.closed.Err() != nil {
					return nil
				}
				return toTransient(err)
			}
			page = append(page, ins...)
		}
		if len(updates) == 0 {
			continue
		}
		if err := emit(page...); err != nil {
			return channels.Transient(0, "telegram: poll: storing updates %d to %d failed; they will be fetched again: %v", updates[0].UpdateID, updates[len(updates)-1].UpdateID, err)
		}
		a.setOffset(updates[len(updates)-1].UpdateID + 1)
	}
}

// sessionLock returns the channel that admits one session.
func (a *PollingAdapter) sessionLock() chan struct{} {
	a.once.Do(func() { a.session = make(chan struct{}, 1) })
	return a.session
}

func (a *PollingAdapter) setOffset(n int64) {
	a.mu.Lock()
	if n > a.offset {
		a.offset = n
	}
	a.mu.Unlock()
}

// getUpdates long-polls once.
func (a *PollingAdapter) getUpdates(ctx context.Context) ([]update, error) {
	a.mu.Lock()
	offset := a.offset
	a.mu.Unlock()
	// Telegram holds the request up to PollTimeout; give it a margin.
	ctx, cancel := a.bound(ctx, a.opts.PollTimeout+15*time.Second)
	defer cancel()
	params := map[string]any{
		"timeout":         max(1, int((a.opts.PollTimeout+time.Second-1)/time.Second)),
		"allowed_updates": allowedUpdates,
	}
	if offset > 0 {
		params["offset"] = offset
	}
	var updates []update
	if err := a.do(ctx, "poll", "getUpdates", params, &updates); err != nil {
		return nil, err
	}
	if len(updates) > 100 {
		return nil, channels.Transient(0, "telegram: poll: getUpdates returned more than 100 updates")
	}
	return updates, nil
}

// Package delivery runs comm's background workers. Outbox delivers queued
// outbound messages through their channel adapters.
package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/comm-gateway/comm/messaging"
)

// Outbox delivers queued outbound messages: woken right after a message
// commits, and every PollInterval as a safety net (retries, other
// replicas, lost wake-ups).
type Outbox struct {
	Service *messaging.Service
	Logger  *slog.Logger
	// Concurrency bounds provider calls in flight (default 16).
	Concurrency int
	// PollInterval is the safety-net poll (default 1 s).
	PollInterval time.Duration
	// Observer, if not nil, is told about every send attempt (metrics).
	Observer SendObserver
}

// SendObserver is told about every attempt to hand an outbound message to
// its provider, for metrics: the channel and the outcome ("sent", "retry",
// "failed"; see messaging.Claim.Outcome).
type SendObserver interface {
	Sent(channel, outcome string)
	// ProviderError is told the class of a provider's error
	// (messaging.Claim.ErrorClass).
	ProviderError(channel, class string)
}

// Run delivers until ctx ends, then waits for the sends in flight.
func (o *Outbox) Run(ctx context.Context) {
	conc := o.Concurrency
	if conc <= 0 {
		conc = 16
	}
	poll := o.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		claims, err := o.Service.ClaimDue(ctx, conc)
		if err != nil && ctx.Err() == nil {
			logger.Warn("outbox: claim", "err", err)
		}
		for _, c := range claims {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				// Finish a send already started even while shutting down.
				if err := o.Service.Deliver(context.WithoutCancel(ctx), c); err != nil {
					logger.Warn("outbox: deliver", "err", err)
				}
				if o.Observer != nil && c.Outcome() != "" {
					o.Observer.Sent(c.Channel(), c.Outcome())
					if class := c.ErrorClass(); class != "" {
						o.Observer.ProviderError(c.Channel(), class)
					}
				}
			}()
		}
		if len(claims) == conc {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-o.Service.OutboxWake():
		case <-tick.C:
		}
	}
}

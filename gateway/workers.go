package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/netguard"
	"github.com/comm-gateway/comm/stream"
)

// Workers are the background workers of a gateway. A nil worker does not
// run; a worker's Service (the webhook worker's Hooks) and Logger are
// filled in when unset, and the webhook worker's Client too (a netguard
// client allowing private targets exactly when Config.Webhook.AllowPrivate
// does).
type Workers struct {
	// Outbox delivers queued outbound messages.
	Outbox *delivery.Outbox
	// Webhooks pushes each project's events to its webhook endpoint.
	Webhooks *delivery.Webhooks
	// Sessions runs the long-lived provider sessions (pollers) under
	// leases.
	Sessions *delivery.Sessions
	// VerifyDomains is how often pending custom domains are checked
	// again; 0 runs no domain verifier.
	VerifyDomains time.Duration
	// Retention deletes events older than its Keep from every project's
	// log (COMM_EVENT_RETENTION); its Log is the gateway's when unset.
	Retention *stream.Retention
}

// StartWorkers runs w in the background. stop ends them and waits until
// every one has returned (the outbox its sends in flight, the webhook
// and session workers their leases released). The workers given are the
// ones that run (a caller may keep a pointer to one), so each gateway
// needs its own.
func (g *Gateway) StartWorkers(w Workers) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	st := &g.workers
	st.mu.Lock()
	st.started, st.stopped, st.exited = true, false, nil
	st.mu.Unlock()
	run := func(name string, f func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx)
			if ctx.Err() == nil {
				// Returned before being stopped: /readyz says so.
				st.mu.Lock()
				st.exited = append(st.exited, name)
				st.mu.Unlock()
				g.logger.Error("worker stopped", "worker", name)
			}
		}()
	}
	if o := w.Outbox; o != nil {
		if o.Service == nil {
			o.Service = g.Svc
		}
		if o.Logger == nil {
			o.Logger = g.logger
		}
		if o.Observer == nil && g.metrics != nil {
			o.Observer = g.metrics
		}
		run("outbox", o.Run)
	}
	if h := w.Webhooks; h != nil {
		if h.Hooks == nil {
			h.Hooks = g.Hooks
		}
		if h.Logger == nil {
			h.Logger = g.logger
		}
		if h.Client == nil {
			h.Client = netguard.NewClient(netguard.Options{AllowPrivate: g.Hooks.AllowPrivate()})
		}
		if h.Observer == nil && g.metrics != nil {
			h.Observer = g.metrics
		}
		run("webhooks", h.Run)
	}
	if s := w.Sessions; s != nil {
		if s.Service == nil {
			s.Service = g.Svc
		}
		if s.Logger == nil {
			s.Logger = g.logger
		}
		run("sessions", s.Run)
	}
	if r := w.Retention; r != nil {
		if r.Log == nil {
			r.Log = g.Log
		}
		if r.Logger == nil {
			r.Logger = g.logger
		}
		if r.Observer == nil && g.metrics != nil {
			r.Observer = g.metrics
		}
		run("event retention", r.Run)
	}
	if every := w.VerifyDomains; every > 0 {
		run("domain verifier", func(ctx context.Context) { verifyDomains(ctx, g.Mail, every, g.logger) })
	}
	return func() {
		st.mu.Lock()
		st.stopped = true
		st.mu.Unlock()
		cancel()
		wg.Wait()
	}
}

// verifyDomains checks pending custom domains again every so often, until
// ctx ends.
func verifyDomains(ctx context.Context, mail *mailhost.Host, every time.Duration, logger *slog.Logger) {
	tick := time.NewTicker(min(every, time.Minute))
	defer tick.Stop()
	for {
		if _, err := mail.VerifyPending(ctx, every, 20); err != nil && ctx.Err() == nil {
			logger.Warn("domain verification", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

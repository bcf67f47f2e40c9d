package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/tenant"
)

// Hook takes a provider's request to a connection's ingress
// (/hooks/{channel}/{connection_id}): the tenant is the connection's, and
// the adapter verifies the request before anything is read from it. A
// handshake gets the adapter's answer; a message is stored once
// (idempotent by the provider's message id), then the request is answered
// with an empty 200, or with what the adapter's Ack says (Twilio's empty
// TwiML). An unknown connection, one of another channel, one
// that was deleted, and one whose messages come from the API only (the
// test channel) are not found. A request that does not verify is
// unauthenticated and stores nothing.
func (s *Service) Hook(ctx context.Context, channel, connID string, r *http.Request, body []byte) (*channels.Response, error) {
	if ident.Check(connID, ident.Connection) != nil {
		return nil, NotFound("connection", connID)
	}
	c, err := s.read.Connection.Query().Where(entconn.ID(connID), entconn.Channel(channel)).
		Only(tenant.System(ctx))
	if ent.IsNotFound(err) {
		return nil, NotFound("connection", connID)
	}
	if err != nil {
		return nil, err
	}
	if d, err := s.channels.Lookup(c.Channel, c.Provider); err == nil && d.App != nil && (c.RouteKey != nil || c.Line != nil) {
		// A connection of the operator's app: its events come to the
		// app-level URL, verified with the app's secret; nothing reaches
		// its adapter by another way. (A connection of the customer's own
		// app, with no routing key, takes its events here.)
		return nil, fault.NotFoundf("channel %s takes its events at /hooks/%s", c.Channel, c.Channel)
	}
	a, err := s.adapter(ctx, c)
	if err != nil {
		return nil, err
	}
	if _, ok := a.(channels.Injector); ok {
		return nil, NotFound("connection", connID)
	}
	if rs, ok := a.(channels.Responder); ok {
		resp, err := rs.Respond(r, body)
		if err != nil {
			return nil, hookError(c, err)
		}
		if resp != nil {
			return resp, nil
		}
	}
	wr, ok := a.(channels.WebhookReceiver)
	if !ok {
		return nil, NotFound("connection", connID)
	}
	if r.Method != http.MethodPost {
		return nil, fault.Invalid("", "%s takes POST here, not %s", c.Channel, r.Method)
	}
	ins, err := wr.ParseWebhook(r, body)
	if s.revokedByProvider(ctx, c, err) {
		return &channels.Response{Status: http.StatusOK}, nil
	}
	if err != nil {
		return nil, hookError(c, err)
	}
	// The request's messages are stored together (one commit), and
	// reports on outbound messages (Receipt) recorded on them.
	if err := s.ReceiveBatch(ctx, c, ins); err != nil {
		return nil, fmt.Errorf("hook %s: store %d message(s): %w", c.ID, len(ins), err)
	}
	if ak, ok := a.(channels.Acknowledger); ok {
		return ak.Ack(), nil
	}
	return &channels.Response{Status: http.StatusOK}, nil
}

// hookError is what a provider hears when its request is refused: a bad
// signature is unauthenticated (401), a failure the adapter calls
// transient (a media download that failed) is unavailable, so the provider
// retries, and the rest are invalid (400).
func hookError(c *ent.Connection, err error) error {
	switch {
	case errors.Is(err, channels.ErrSignature):
		// The adapter's reason (a stale timestamp, a missing header) helps
		// whoever sets the webhook up; it names nothing secret.
		return fault.Unauthenticated("the request does not carry %s's valid signature for this connection (%v)", c.Channel, err)
	case errors.Is(err, channels.ErrTransient):
		return fault.ProviderUnavailable("could not take the request now; retry: %v", err)
	}
	return fault.Invalid("", "%s", err.Error())
}

// AppHook takes a provider's request to its channel's app-level webhook
// (/hooks/{channel}): the channel's AppWebhook verifies it with the app's
// secret and names the routing keys it is for; each live connection that
// registered one of them gets the request (its WebhookReceiver returns the
// messages that are its own), which stores them once, as Hook does. Keys
// no connection holds (an app uninstalled from a workspace, a Page whose
// connection was deleted) are logged, counted (UnroutedEvents) and
// ignored: the provider gets 200 and does not retry.
func (s *Service) AppHook(ctx context.Context, channel string, r *http.Request, body []byte) (*channels.Response, error) {
	d, ok := s.appDescriptor(channel, func(d channels.Descriptor) bool { return d.App != nil })
	if !ok {
		return nil, fault.NotFoundf("no app-level webhook for channel %q", channel)
	}
	keys, resp, err := d.App.Route(r, body)
	if err != nil {
		return nil, hookError(&ent.Connection{Channel: channel}, err)
	}
	if resp != nil {
		return resp, nil
	}
	if r.Method != http.MethodPost {
		return nil, fault.Invalid("", "%s takes POST here, not %s", channel, r.Method)
	}
	if d.Shared != nil {
		// The operator's shared lines: routed by line and sender, not
		// by the App's keys.
		items, err := d.Shared.Receive(r, body)
		if err != nil {
			return nil, hookError(&ent.Connection{Channel: channel}, err)
		}
		if err := s.routeLines(ctx, d, items); err != nil {
			return nil, fmt.Errorf("app hook %s: %w", channel, err)
		}
		return &channels.Response{Status: http.StatusOK}, nil
	}
	for _, key := range keys {
		c, err := s.read.Connection.Query().Where(entconn.RouteKey(RouteKey(channel, key))).Only(tenant.System(ctx))
		if ent.IsNotFound(err) {
			s.unrouted.Add(1)
			s.logger.Info("app hook: no connection holds the routing key; its events are dropped", "channel", channel, "key", key)
			continue
		}
		if err != nil {
			return nil, err
		}
		a, err := s.adapter(ctx, c)
		if err != nil {
			return nil, err
		}
		wr, ok := a.(channels.WebhookReceiver)
		if !ok {
			continue
		}
		ins, err := wr.ParseWebhook(r, body)
		if s.revokedByProvider(ctx, c, err) {
			continue
		}
		if err != nil {
			return nil, hookError(c, err)
		}
		if err := s.ReceiveBatch(ctx, c, ins); err != nil {
			return nil, fmt.Errorf("app hook %s: store %d message(s): %w", c.ID, len(ins), err)
		}
	}
	return &channels.Response{Status: http.StatusOK}, nil
}

// revokedByProvider handles a verified provider event saying the
// connection's credentials are gone (Slack's app_uninstalled and
// tokens_revoked: ParseWebhook returns an error of class ErrRevoked): the
// connection is revoked (connection.revoked, once) and the provider gets
// 200, as the event was taken.
func (s *Service) revokedByProvider(ctx context.Context, c *ent.Connection, err error) bool {
	if err == nil || !errors.Is(err, channels.ErrRevoked) || errors.Is(err, channels.ErrSignature) {
		return false
	}
	if serr := s.SetConnectionStatus(ctx, c, StatusRevoked, err.Error()); serr != nil {
		s.logger.Warn("connection status", "connection", c.ID, "err", serr)
	}
	return true
}

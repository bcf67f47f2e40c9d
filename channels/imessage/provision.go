package imessage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// Events are the webhook events comm registers for.
var Events = []string{"new-message", "updated-message"}

// webhook is a registration as GET /api/v1/webhook lists it.
type webhook struct {
	ID     int64    `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// maxWebhooks bounds the registrations looked at.
const maxWebhooks = 1000

// Provision checks the relay (GET /api/v1/ping and /api/v1/server/info
// with the password) and, unless the gateway follows the relays or has no
// public URL, registers comm's webhook on it. The relay is the operator's:
// one that refuses the password or cannot be reached is a transient
// provider failure (the gateway answers that the provider is unavailable),
// not a fault of the caller's configuration.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	r := a.relay
	var pong string
	if err := a.ch.call(ctx, r, "ping", http.MethodGet, "/api/v1/ping", nil, nil, &pong); err != nil {
		return channels.Provisioned{}, operatorError(r, err)
	}
	if pong != "pong" {
		return channels.Provisioned{}, channels.Transient(0, "imessage: relay %s: ping: the answer is not BlueBubbles' pong", r.Address)
	}
	if _, err := a.ch.serverInfo(ctx, r, true); err != nil {
		return channels.Provisioned{}, operatorError(r, err)
	}
	if hook := a.hookURL(); hook != "" {
		if err := a.ch.register(ctx, r, hook); err != nil {
			return channels.Provisioned{}, operatorError(r, err)
		}
	}
	return channels.Provisioned{Address: r.Address}, nil
}

// operatorError makes a relay's failure at set-up a transient one: the
// relay and its password are the operator's, so the caller hears that the
// provider is unavailable (and the operator's log says why).
func operatorError(r *relay, err error) error {
	var pe *passwordError
	if errors.As(err, &pe) {
		return channels.Transient(0, "imessage: the relay %s refused the password; the operator must fix COMM_IMESSAGE_RELAYS", r.Address)
	}
	if errors.Is(err, channels.ErrTransient) {
		return err
	}
	return channels.Transient(0, "%v", err)
}

// hookURL is the app-level webhook URL of the adapter's relay, or ""
// when the gateway follows the relays or has no public URL.
func (a *Adapter) hookURL() string {
	if a.ch.opts.Follow || a.conn.WebhookURL == "" {
		return ""
	}
	base, ok := strings.CutSuffix(a.conn.WebhookURL, "/"+a.conn.ID)
	if !ok || a.conn.ID == "" {
		i := strings.LastIndexByte(a.conn.WebhookURL, '/')
		if i < 0 {
			return ""
		}
		base = a.conn.WebhookURL[:i]
	}
	return HookURL(base, a.relay.id, a.relay.secret)
}

// HookURL is the webhook URL of a relay: the channel's app-level ingress
// (https://<base>/hooks/imessage) with the relay's id and secret.
func HookURL(appURL, relayID, secret string) string {
	return appURL + "?" + url.Values{"relay": {relayID}, "secret": {secret}}.Encode()
}

// register puts hook on the relay unless it is there already; comm's
// registrations of the same relay with another secret (an older
// password) or twice are deleted. Once a process registered a relay it
// does not ask again.
func (c *channel) register(ctx context.Context, r *relay, hook string) error {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	if r.hookURL == hook {
		return nil
	}
	var list []webhook
	if err := c.call(ctx, r, "list webhooks", http.MethodGet, "/api/v1/webhook", nil, nil, &list); err != nil {
		return err
	}
	if len(list) > maxWebhooks {
		list = list[:maxWebhooks]
	}
	prefix, _, _ := strings.Cut(hook, "?")
	found := false
	for _, w := range list {
		mine := w.URL == hook && !found && hasAll(w.Events, Events)
		if mine {
			found = true
			continue
		}
		if w.URL == hook || ours(w.URL, prefix, r.id) {
			err := c.call(ctx, r, "delete a stale webhook", http.MethodDelete, "/api/v1/webhook/"+strconv.FormatInt(w.ID, 10), nil, nil, nil)
			if err != nil && !errors.Is(err, channels.ErrPermanent) {
				return err
			}
		}
	}
	if !found {
		body := map[string]any{"url": hook, "events": Events}
		var w webhook
		if err := c.call(ctx, r, "register the webhook", http.MethodPost, "/api/v1/webhook", nil, body, &w); err != nil {
			return err
		}
		if w.URL != "" && w.URL != hook {
			return channels.Transient(0, "imessage: relay %s: register the webhook: the relay answered with another URL", r.Address)
		}
		c.opts.Logger.Info("imessage: webhook registered on the relay", "relay", r.Address)
	}
	r.hookURL = hook
	return nil
}

// ours reports whether u is comm's webhook of the relay id at prefix
// (whatever its secret).
func ours(u, prefix, id string) bool {
	p, q, ok := strings.Cut(u, "?")
	if !ok || p != prefix {
		return false
	}
	v, err := url.ParseQuery(q)
	return err == nil && v.Get("relay") == id
}

// hasAll reports whether have includes every one of want (or "*").
func hasAll(have, want []string) bool {
	if slices.Contains(have, "*") {
		return true
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// String names the relay in logs (never its password).
func (r *relay) String() string { return fmt.Sprintf("relay %s (%s)", r.Address, r.base) }

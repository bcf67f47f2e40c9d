package x

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Provision checks the access token (GET /2/users/me) and records the
// account; in webhook mode it registers the app's webhook (or reuses it)
// and subscribes the account to dm.received. It registers the user id as
// the routing key. A token X rejects is a *channels.ConfigError on
// "access_token".
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	if a.NeedsInstall() {
		return channels.Provisioned{}, &channels.ConfigError{Field: "access_token", Msg: "x: the connection waits for the install of the gateway's X app"}
	}
	var me user
	err := a.withToken(ctx, func(token string) error {
		var err error
		me, err = a.me(ctx, token)
		return err
	})
	if errors.Is(err, channels.ErrRevoked) {
		return channels.Provisioned{}, &channels.ConfigError{Field: "access_token", Msg: "X " + strings.TrimPrefix(err.Error(), "x: read the account: ")}
	}
	if err != nil {
		return channels.Provisioned{}, err
	}
	cfg := a.config()
	if cfg.UserID != "" && cfg.UserID != me.ID {
		return channels.Provisioned{}, &channels.ConfigError{Field: "access_token", Msg: "x: the access token belongs to another account than the install's"}
	}
	cfg.UserID, cfg.Username = me.ID, me.Username
	if a.webhookMode() && cfg.SubscriptionID == "" {
		hook, err := a.webhook(ctx)
		if err != nil {
			return channels.Provisioned{}, err
		}
		sub, err := a.subscribe(ctx, cfg.AccessToken, me.ID, hook)
		if err != nil {
			return channels.Provisioned{}, err
		}
		cfg.WebhookID, cfg.SubscriptionID = hook, sub
	}
	a.mu.Lock()
	a.cfg.UserID, a.cfg.Username, a.cfg.WebhookID, a.cfg.SubscriptionID = cfg.UserID, cfg.Username, cfg.WebhookID, cfg.SubscriptionID
	a.mu.Unlock()
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, errorf("provision: %v", err)
	}
	return channels.Provisioned{Config: raw, Address: "@" + me.Username, RouteKey: me.ID}, nil
}

// webhookInfo is a registered webhook.
type webhookInfo struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	Valid bool   `json:"valid"`
}

// webhook returns the id of the app's webhook at <base>/hooks/x: the
// registered one (revalidated with a CRC when X marked it invalid), or a
// new registration (X checks it with a CRC the gateway answers).
func (a *Adapter) webhook(ctx context.Context) (string, error) {
	target := a.appURL()
	var list struct {
		Data []webhookInfo `json:"data"`
	}
	if err := a.call(ctx, "list webhooks", http.MethodGet, "/2/webhooks", a.opts.BearerToken, nil, nil, &list); err != nil {
		return "", appError(err)
	}
	for _, w := range list.Data {
		if w.URL != target || !idRE.MatchString(w.ID) {
			continue
		}
		if !w.Valid {
			if err := a.call(ctx, "revalidate the webhook", http.MethodPut, "/2/webhooks/"+w.ID, a.opts.BearerToken, nil, nil, nil); err != nil {
				return "", appError(err)
			}
		}
		return w.ID, nil
	}
	var made struct {
		Data webhookInfo `json:"data"`
	}
	if err := a.call(ctx, "register the webhook "+target, http.MethodPost, "/2/webhooks", a.opts.BearerToken, nil,
		map[string]string{"url": target}, &made); err != nil {
		return "", appError(err)
	}
	if !idRE.MatchString(made.Data.ID) {
		return "", channels.Transient(0, "x: register the webhook: the answer has no webhook id")
	}
	return made.Data.ID, nil
}

// healthEvery is how often a process checks that X still holds the
// app's webhook valid (X marks it invalid after failed hourly CRCs and
// then stops delivering).
const healthEvery = time.Hour

// checked is when this process last checked each app webhook URL.
var checked sync.Map // app URL -> time.Time

// checkWebhook revalidates the app's webhook when X marked it invalid
// (PUT /2/webhooks/{id} makes X run a CRC again), at most once per
// healthEvery per process for all connections of the app.
func (a *Adapter) checkWebhook(ctx context.Context) error {
	now := a.opts.Now()
	if last, ok := checked.Load(a.appURL()); ok && now.Sub(last.(time.Time)) < healthEvery {
		return nil
	}
	checked.Store(a.appURL(), now)
	_, err := a.webhook(ctx)
	return err
}

// appError says that a failure with the app's bearer token is the
// operator's to fix, not the person's: it is never a revoked connection.
func appError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusUnauthorized {
		return channels.Permanent("x: X rejected the app's bearer token (COMM_X_BEARER_TOKEN): %s", ae.detail)
	}
	return err
}

// subscription is an X Activity API subscription; create answers carry it
// in data, data.subscription or data[0].
type subscription struct {
	SubscriptionID string        `json:"subscription_id"`
	Subscription   *subscription `json:"subscription"`
}

// subscribe subscribes the account to dm.received, delivered to the
// webhook, with the account's own token (a private event).
func (a *Adapter) subscribe(ctx context.Context, token, userID, webhookID string) (string, error) {
	body := map[string]any{"event_type": "dm.received", "filter": map[string]string{"user_id": userID},
		"webhook_id": webhookID, "tag": "comm " + a.conn.ID}
	var r struct {
		Data json.RawMessage `json:"data"`
	}
	if err := a.call(ctx, "subscribe to dm.received", http.MethodPost, "/2/activity/subscriptions", token, nil, body, &r); err != nil {
		return "", err
	}
	var one subscription
	var many []subscription
	switch {
	case json.Unmarshal(r.Data, &one) == nil && one.SubscriptionID != "":
	case one.Subscription != nil:
		one = *one.Subscription
	case json.Unmarshal(r.Data, &many) == nil && len(many) > 0:
		one = many[0]
	}
	if !idRE.MatchString(one.SubscriptionID) {
		return "", channels.Transient(0, "x: subscribe to dm.received: the answer has no subscription id")
	}
	return one.SubscriptionID, nil
}

// Deprovision deletes the account's dm.received subscription (the app's
// webhook stays for the other connections). A subscription X no longer
// has is gone already.
func (a *Adapter) Deprovision(ctx context.Context) error {
	a.mu.Lock()
	sub := a.cfg.SubscriptionID
	a.mu.Unlock()
	if sub == "" || a.opts.BearerToken == "" {
		return nil
	}
	err := a.call(ctx, "delete the dm.received subscription", http.MethodDelete, "/2/activity/subscriptions/"+url.PathEscape(sub),
		a.opts.BearerToken, nil, nil, nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		err = nil
	}
	if err != nil {
		return appError(err)
	}
	a.mu.Lock()
	a.cfg.SubscriptionID = ""
	a.mu.Unlock()
	return nil
}

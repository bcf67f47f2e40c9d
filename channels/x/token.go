package x

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// refreshDue reports whether the access token should be refreshed now,
// and otherwise how long until it should.
func (a *Adapter) refreshDue() (bool, time.Duration) {
	cfg := a.config()
	if cfg.RefreshToken == "" || cfg.ExpiresAt.IsZero() {
		return false, -1 // nothing to refresh with, or no expiry known
	}
	wait := cfg.ExpiresAt.Add(-a.opts.RefreshMargin).Sub(a.opts.Now())
	return wait <= 0, wait
}

// refresh trades the refresh token for new tokens (X rotates the refresh
// token: the old one stops working) and saves them in the connection's
// configuration before using them. A refresh X refuses is a
// channels.ErrRevoked error.
func (a *Adapter) refresh(ctx context.Context) error {
	cfg := a.config()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {cfg.RefreshToken}, "client_id": {a.opts.ClientID}}
	tok, err := a.token(ctx, "refresh the access token", form)
	if err != nil {
		return err
	}
	a.mu.Lock()
	if a.cfg.RefreshToken == cfg.RefreshToken {
		tok.apply(&a.cfg, a.opts.Now())
	}
	a.mu.Unlock()
	// The old refresh token is spent: the new one must be stored, or the
	// connection is lost at the next restart. A failed save is retried
	// by the session (the tokens stay in memory meanwhile).
	if err := a.save(ctx); err != nil {
		return channels.Transient(0, "x: save the refreshed tokens: %v", err)
	}
	return nil
}

// save stores the configuration (tokens, cursor) when the gateway gave
// the adapter its credentials store.
func (a *Adapter) save(ctx context.Context) error {
	if a.conn.Credentials == nil {
		return nil
	}
	raw, err := json.Marshal(a.config())
	if err != nil {
		return err
	}
	return a.conn.Credentials.Save(context.WithoutCancel(ctx), raw)
}

// reload reads the stored configuration (another process may have
// refreshed the tokens) and reports whether the access token changed.
func (a *Adapter) reload(ctx context.Context) (bool, error) {
	if a.conn.Credentials == nil {
		return false, nil
	}
	raw, err := a.conn.Credentials.Load(ctx)
	if err != nil {
		return false, err
	}
	stored, err := ParseConfig(raw)
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := stored.AccessToken != a.cfg.AccessToken
	if stored.AccessToken != "" {
		a.cfg = stored
	}
	return changed, nil
}

// withToken runs f with the current access token; when X answers 401 it
// loads the stored credentials and, when another process refreshed them,
// runs f once more with the new token. A token still refused is
// channels.ErrRevoked.
func (a *Adapter) withToken(ctx context.Context, f func(token string) error) error {
	err := f(a.config().AccessToken)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != 401 {
		return err
	}
	changed, lerr := a.reload(ctx)
	if lerr != nil || !changed {
		return err
	}
	return f(a.config().AccessToken)
}

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
	tok.apply(&a.cfg, a.opts.Now()) // the newest tokens: the old refresh token is spent
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

// withToken runs f with the current access token. When X answers 401 it
// loads the stored credentials and, when another process refreshed them,
// runs f once more with the new token. A token that merely expired (the
// session has not refreshed it yet) is a transient failure; one X refuses
// while the stored credentials stay the same (after a short wait for a
// refresh another replica may be saving) is channels.ErrRevoked.
func (a *Adapter) withToken(ctx context.Context, f func(token string) error) error {
	err := f(a.config().AccessToken)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != 401 {
		return err
	}
	changed, lerr := a.reload(ctx)
	if lerr != nil {
		return channels.Transient(0, "x: load the stored tokens after a 401: %v", lerr)
	}
	if !changed {
		if exp := a.config().ExpiresAt; !exp.IsZero() && !a.opts.Now().Before(exp) {
			return channels.Transient(0, "x: the access token expired and is not refreshed yet (the connection's session refreshes it)")
		}
		changed = a.awaitRefresh(ctx)
	}
	if !changed {
		return err
	}
	return f(a.config().AccessToken)
}

// refreshWait is how long a 401 waits for a refresh another replica may
// be saving before the token counts as revoked.
const refreshWait = 2 * time.Second

// awaitRefresh loads the stored credentials a few times within
// refreshWait and reports whether the access token changed.
func (a *Adapter) awaitRefresh(ctx context.Context) bool {
	if a.conn.Credentials == nil {
		return false
	}
	t := time.NewTicker(refreshWait / 5)
	defer t.Stop()
	for range 5 {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if changed, err := a.reload(ctx); err == nil && changed {
			return true
		}
	}
	return false
}

package client

import (
	"context"
	"net/http"
	"net/url"
)

// Account returns the account that owns the key's project, with its
// balance, ledger and projects (GET /v1/account). Only a signed-in key has
// an account: a sandbox key fails with ErrForbidden (sign in with
// `comm login`, or Login, and use the signed-in key).
func (c *Client) Account(ctx context.Context) (*AccountView, error) {
	var v AccountView
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/account", out: &v}); err != nil {
		return nil, err
	}
	return &v, nil
}

// Ledger pages through the credit ledger of the key's account, oldest
// first (GET /v1/account/ledger): entries after the entry id after, at
// most limit (0: the server's default).
func (c *Client) Ledger(ctx context.Context, after string, limit int) ([]CreditEntry, error) {
	out := []CreditEntry{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/account/ledger", query: page(url.Values{}, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Keys lists the API keys of the project, oldest first, revoked ones
// included (GET /v1/keys). The listing never holds the keys themselves;
// Current marks the client's own key.
func (c *Client) Keys(ctx context.Context) ([]Key, error) {
	out := []Key{}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/keys", out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateKey makes another API key for the project (POST /v1/keys), of the
// client's key's kind: a sandbox key makes sandbox keys, a signed-in key
// signed-in ones. name (optional, one line) says what the key is for. The
// answer holds the key itself, shown only this once: store it. A project
// has at most 50 live keys; one more fails with ErrConflict. Once the
// project belongs to an account (after comm login carried it over), keys
// are managed only with a signed-in key: a sandbox key fails with
// ErrForbidden here, in Keys and in RevokeKey. Like every POST, it is not
// retried.
func (c *Client) CreateKey(ctx context.Context, name string) (*NewKey, error) {
	body := map[string]string{}
	if name != "" {
		body["name"] = name
	}
	var k NewKey
	if err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/keys", body: body, out: &k}); err != nil {
		return nil, err
	}
	return &k, nil
}

// RevokeKey revokes one of the project's keys (DELETE /v1/keys/{id}): it
// stops working at once. Revoking a revoked key changes nothing and
// returns it; an unknown id, or another project's, fails with ErrNotFound
// (an empty one with ErrInvalid, before any request).
// Revoking the client's own key works, after which its calls fail with
// ErrUnauthenticated, unless it is the project's last working key (the
// last signed-in one, for a project in an account): that fails with
// ErrConflict and changes nothing.
func (c *Client) RevokeKey(ctx context.Context, id string) (*Key, error) {
	if id == "" {
		return nil, &Error{Code: ErrInvalid.Code, Param: "id", Message: "a key id is required"}
	}
	var k Key
	if err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/keys/" + url.PathEscape(id), out: &k}); err != nil {
		return nil, err
	}
	if k.ID == "" {
		// do counts a not_found after an attempt that may have gone
		// through as done; revoking never removes a key, so the id was
		// never the project's.
		return nil, &Error{Status: http.StatusNotFound, Code: ErrNotFound.Code, Message: "no key " + id}
	}
	return &k, nil
}

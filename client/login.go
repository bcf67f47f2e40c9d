package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/comm-gateway/comm/api"
)

// Login errors.
var (
	// ErrLoginDenied: the user denied the sign-in request.
	ErrLoginDenied = errors.New("comm: sign-in was denied")
	// ErrLoginExpired: the code expired before the user approved it.
	ErrLoginExpired = errors.New("comm: sign-in code expired; start again")
)

// LoginPrompt is what the user must see to sign in: open URL (which
// carries the code) and check that the page shows Code.
type LoginPrompt struct {
	Code     string
	URL      string
	Interval time.Duration
}

// LoginResult is the signed-in key, delivered once.
type LoginResult struct {
	APIKey  string `json:"api_key"`
	BaseURL string `json:"base_url"`
}

// Login runs the device sign-in flow of the spec: POST
// /v1/auth/device/start (with sandboxKey, if any, so that sandbox project
// carries over into the account), show the prompt, then poll POST
// /v1/auth/device/token every interval (slower when told slow_down) until
// the user approves, denies, the code expires, or ctx ends. An empty
// baseURL is configured as in New.
func Login(ctx context.Context, baseURL, sandboxKey string, show func(LoginPrompt)) (*LoginResult, error) {
	c, err := keyless(baseURL)
	if err != nil {
		return nil, err
	}
	var st api.DeviceStart
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/auth/device/start",
		body: api.DeviceStartRequest{APIKey: sandboxKey}, out: &st, noAuth: true}); err != nil {
		return nil, fmt.Errorf("comm: start sign-in: %w", err)
	}
	interval := time.Duration(max(st.Interval, 1)) * time.Second
	show(LoginPrompt{Code: st.UserCode, URL: st.VerificationURIComplete, Interval: interval})
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(interval):
		}
		var tok api.DeviceToken
		err := c.do(ctx, request{method: http.MethodPost, path: "/v1/auth/device/token",
			body: api.DeviceTokenRequest{DeviceCode: st.DeviceCode}, out: &tok, noAuth: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("comm: sign-in: %w", err)
		}
		switch tok.Status {
		case "pending":
		case "slow_down":
			interval += 5 * time.Second
			if tok.Interval > 0 {
				interval = max(interval, time.Duration(tok.Interval)*time.Second)
			}
		case "approved":
			if tok.APIKey == "" {
				return nil, errors.New("comm: sign-in approved without a key")
			}
			if tok.BaseURL == "" {
				tok.BaseURL = c.baseURL
			}
			return &LoginResult{APIKey: tok.APIKey, BaseURL: tok.BaseURL}, nil
		case "denied":
			return nil, ErrLoginDenied
		case "expired":
			return nil, ErrLoginExpired
		default:
			return nil, fmt.Errorf("comm: sign-in: unexpected status %q", tok.Status)
		}
	}
}

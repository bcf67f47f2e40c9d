package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// rest is a bot token's REST client with per-route rate limit buckets.
type rest struct {
	opts   Options
	token  string
	closed context.Context

	mu      sync.Mutex
	waits   map[string]time.Time // route -> no call before
	dmCache map[string]string    // user id -> DM channel id
}

// maxRoutes bounds the buckets and DM channels remembered.
const maxRoutes = 10000

func newREST(opts Options, token string, closed context.Context) *rest {
	return &rest{opts: opts, token: token, closed: closed, waits: map[string]time.Time{}, dmCache: map[string]string{}}
}

var errClosed = errors.New("the discord adapter was closed")

// bound returns ctx ended also by Close and by CallTimeout when ctx has no
// deadline.
func (c *rest) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, c.closed, errClosed, c.opts.CallTimeout)
}

// apiError is Discord's error body.
type apiError struct {
	Message    string  `json:"message"`
	Code       int     `json:"code"`
	RetryAfter float64 `json:"retry_after"`
	Global     bool    `json:"global"`
}

// wait blocks until the route's bucket allows a call.
func (c *rest) wait(ctx context.Context, route string) error {
	c.mu.Lock()
	until := c.waits[route]
	c.mu.Unlock()
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// note records the route's bucket from the answer's headers.
func (c *rest) note(route string, h http.Header) {
	if h.Get("X-RateLimit-Remaining") != "0" {
		return
	}
	after, err := strconv.ParseFloat(h.Get("X-RateLimit-Reset-After"), 64)
	if err != nil || after <= 0 || after > 3600 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) >= maxRoutes {
		now := time.Now()
		for k, v := range c.waits {
			if v.Before(now) {
				delete(c.waits, k)
			}
		}
		if len(c.waits) >= maxRoutes {
			clear(c.waits)
		}
	}
	until := time.Now().Add(time.Duration(after * float64(time.Second)))
	if until.After(c.waits[route]) {
		c.waits[route] = until
	}
}

// call makes a REST call with the bot token. route names the rate limit
// bucket ("" for none); op names the operation in errors. Failures are
// *channels.Error values.
func (c *rest) call(ctx context.Context, op, method, path, route string, body, out any) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if route != "" {
		if err := c.wait(ctx, route); err != nil {
			return channels.Transient(0, "discord: %s: waiting for the rate limit: %v", op, err)
		}
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return channels.Permanent("discord: %s: %v", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.opts.APIURL+path, rd)
	if err != nil {
		return channels.Permanent("discord: %s: %v", op, err)
	}
	req.Header.Set("Authorization", "Bot "+c.token)
	req.Header.Set("User-Agent", "DiscordBot (https://github.com/comm-gateway/comm, 1)")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return netError(ctx, op, err)
	}
	defer resp.Body.Close()
	if route != "" {
		c.note(route, resp.Header)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return netError(ctx, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "discord: %s: the answer exceeds %d bytes", op, maxResponse)
	}
	if resp.StatusCode >= 300 {
		return classify(op, resp, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return channels.Transient(0, "discord: %s: malformed answer: %v", op, err)
	}
	return nil
}

// classify turns an error answer into a *channels.Error.
func classify(op string, resp *http.Response, data []byte) error {
	var e apiError
	_ = json.Unmarshal(data, &e)
	desc := strings.TrimSpace(e.Message)
	if desc == "" {
		desc = http.StatusText(resp.StatusCode)
	}
	if e.Code != 0 {
		desc += " (code " + strconv.Itoa(e.Code) + ")"
	}
	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests:
		after := time.Duration(e.RetryAfter * float64(time.Second))
		if after <= 0 {
			if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && s > 0 {
				after = time.Duration(s * float64(time.Second))
			}
		}
		scope := resp.Header.Get("X-RateLimit-Scope")
		if e.Global {
			scope = "global"
		}
		return channels.Transient(after, "discord: %s: rate limited (429 %s; scope %q)", op, desc, scope)
	case code >= 500:
		return channels.Transient(0, "discord: %s: Discord failed (%d %s)", op, code, desc)
	case code == http.StatusUnauthorized:
		return channels.Revoked("discord: %s: the bot token was rejected (401 %s); copy the current token from the developer portal", op, desc)
	case code == http.StatusForbidden:
		return channels.Permanent("discord: %s: the bot may not do this here (403 %s)", op, desc)
	case code == http.StatusNotFound:
		return channels.Permanent("discord: %s: not found (404 %s)", op, desc)
	}
	return channels.Permanent("discord: %s: %d %s", op, code, desc)
}

func netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "discord: %s: %v", op, err)
}

// user is a Discord user.
type user struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot"`
}

func (c *rest) me(ctx context.Context) (user, error) {
	var u user
	if err := c.call(ctx, "check token", http.MethodGet, "/users/@me", "", nil, &u); err != nil {
		return user{}, err
	}
	if !snowflake(u.ID) || u.Username == "" {
		return user{}, channels.Transient(0, "discord: check token: /users/@me answered without the bot's id and username")
	}
	return u, nil
}

// gatewayURL asks GET /gateway/bot where to connect, and refuses when
// Discord's session_start_limit has no identify left.
func (c *rest) gatewayURL(ctx context.Context) (string, error) {
	var g struct {
		URL   string `json:"url"`
		Limit *struct {
			Remaining  int   `json:"remaining"`
			ResetAfter int64 `json:"reset_after"` // ms
		} `json:"session_start_limit"`
	}
	if err := c.call(ctx, "get gateway", http.MethodGet, "/gateway/bot", "", nil, &g); err != nil {
		return "", err
	}
	if g.Limit != nil && g.Limit.Remaining <= 0 {
		return "", channels.Transient(time.Duration(g.Limit.ResetAfter)*time.Millisecond,
			"discord: get gateway: Discord says this bot token has no session starts left (session_start_limit); identifying now would get the token reset")
	}
	if u, err := url.Parse(g.URL); err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return "", channels.Transient(0, "discord: get gateway: no usable url")
	}
	return g.URL, nil
}

// oauthToken POSTs the code grant to /oauth2/token. It returns the HTTP
// status with the error.
func (c *rest) oauthToken(ctx context.Context, id, secret string, form url.Values, out any) (int, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.APIURL+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, channels.Permanent("discord: install: %v", err)
	}
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, netError(ctx, "install", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, netError(ctx, "install", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(data, &e)
		switch {
		case resp.StatusCode == http.StatusBadRequest:
			return resp.StatusCode, channels.Permanent("discord: install: %s %s", e.Error, e.Description)
		case resp.StatusCode == http.StatusUnauthorized:
			return resp.StatusCode, channels.Permanent("discord: install: the operator's client id or secret was rejected (%s)", e.Error)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return resp.StatusCode, channels.Transient(0, "discord: install: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		return resp.StatusCode, channels.Permanent("discord: install: %d %s", resp.StatusCode, e.Error)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, channels.Transient(0, "discord: install: malformed answer: %v", err)
	}
	return resp.StatusCode, nil
}

// dmChannel opens (or recalls) the DM channel with a user.
func (c *rest) dmChannel(ctx context.Context, userID string) (string, error) {
	c.mu.Lock()
	ch, ok := c.dmCache[userID]
	c.mu.Unlock()
	if ok {
		return ch, nil
	}
	var res struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, "open DM", http.MethodPost, "/users/@me/channels", "POST /users/@me/channels", map[string]string{"recipient_id": userID}, &res); err != nil {
		return "", err
	}
	if !snowflake(res.ID) {
		return "", channels.Transient(0, "discord: open DM: no channel id in the answer")
	}
	c.mu.Lock()
	if len(c.dmCache) >= maxRoutes {
		clear(c.dmCache)
	}
	c.dmCache[userID] = res.ID
	c.mu.Unlock()
	return res.ID, nil
}

// download fetches an attachment from the CDN, at most limit bytes;
// errTooBig past it.
func (c *rest) download(ctx context.Context, u string, limit int64) ([]byte, string, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") {
		return nil, "", channels.Permanent("discord: download attachment: not an http(s) url")
	}
	if !c.cdnHost(pu) {
		return nil, "", channels.Permanent("discord: download attachment: %q is not a Discord CDN host", pu.Host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", channels.Permanent("discord: download attachment: %v", err)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, "", netError(ctx, "download attachment", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden {
		return nil, "", channels.Permanent("discord: download attachment: %d", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", channels.Transient(0, "discord: download attachment: %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", netError(ctx, "download attachment", err)
	}
	if int64(len(data)) > limit {
		return nil, "", errTooBig
	}
	return data, resp.Header.Get("Content-Type"), nil
}

var errTooBig = errors.New("file too big")

// cdnHost reports whether an attachment URL points at Discord's CDN
// (https cdn.discordapp.com, media.discordapp.net) or at the API's own
// host (a self-hosted API proxy or the fake): the adapter fetches nothing
// else.
func (c *rest) cdnHost(u *url.URL) bool {
	if api, err := url.Parse(c.opts.APIURL); err == nil && u.Host == api.Host && u.Scheme == api.Scheme {
		return true
	}
	h := strings.ToLower(u.Hostname())
	return u.Scheme == "https" && (h == "cdn.discordapp.com" || h == "media.discordapp.net")
}

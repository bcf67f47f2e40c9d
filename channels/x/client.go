package x

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// errClosed is why calls of a closed adapter end.
var errClosed = errors.New("the x adapter was closed")

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// the call timeout.
func (a *Adapter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, a.closed, errClosed, a.opts.CallTimeout)
}

// apiError is an X API answer other than 2xx: its status, X's detail and
// the failure's class.
type apiError struct {
	status int
	detail string
	err    *channels.Error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// problem is the error body of the X API v2 (RFC 7807 problem details,
// or a list of errors).
type problem struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Type   string `json:"type"`
	Errors []struct {
		Message string `json:"message"`
		Detail  string `json:"detail"`
	} `json:"errors"`
}

// describe is what an error answer says, short and printable.
func describe(data []byte, status int) string {
	var p problem
	_ = json.Unmarshal(data, &p)
	s := p.Detail
	if s == "" && len(p.Errors) > 0 {
		s = p.Errors[0].Message
		if s == "" {
			s = p.Errors[0].Detail
		}
	}
	if s == "" {
		s = p.Title
	}
	if s == "" {
		s = http.StatusText(status)
	}
	return clean(s)
}

// clean keeps provider text printable and short.
func clean(s string) string {
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// call makes an X API request with the bearer token and decodes a 2xx
// answer into out (when not nil). body, when not nil, goes as JSON.
// Failures are *apiError values (classified) or transient network errors.
func (a *Adapter) call(ctx context.Context, op, method, path, bearer string, query url.Values, body, out any) error {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return channels.Permanent("x: %s: %v", op, err)
		}
		rd = bytes.NewReader(b)
	}
	u := a.opts.APIURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return channels.Permanent("x: %s: %v", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return netError(ctx, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return netError(ctx, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "x: %s: the answer exceeds %d bytes", op, maxResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return classify(op, resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return channels.Transient(0, "x: %s: malformed answer: %v", op, err)
	}
	return nil
}

// classify makes a non-2xx answer an error of its class: 429 and 5xx
// transient (with X's reset time), 401 revoked, the rest permanent with
// X's detail.
func classify(op string, resp *http.Response, data []byte) error {
	st := resp.StatusCode
	detail := describe(data, st)
	var e *channels.Error
	switch {
	case st == http.StatusTooManyRequests:
		e = channels.Transient(retryAfter(resp.Header, time.Now()), "x: %s: rate limited (429 %s)", op, detail)
	case st >= 500:
		e = channels.Transient(0, "x: %s: X failed (%d %s)", op, st, detail)
	case st == http.StatusUnauthorized:
		e = channels.Revoked("x: %s: X rejected the access token (401 %s); connect the account again", op, detail)
	default:
		e = channels.Permanent("x: %s: %d %s", op, st, detail)
	}
	return &apiError{status: st, detail: detail, err: e}
}

// retryAfter reads X's x-rate-limit-reset (Unix seconds) or a Retry-After
// (seconds), capped at an hour.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if n, err := strconv.ParseInt(strings.TrimSpace(h.Get("x-rate-limit-reset")), 10, 64); err == nil && n > 0 {
		d = time.Unix(n, 0).Sub(now)
		if d < time.Second {
			d = time.Second
		}
	} else if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	}
	return min(d, time.Hour)
}

// netError classifies a failure to reach X.
func netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "x: %s: %v", op, err)
}

// user is a user object of the X API.
type user struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Username string `json:"username"`
}

// me reads the account of an access token (GET /2/users/me).
func (a *Adapter) me(ctx context.Context, accessToken string) (user, error) {
	var r struct {
		Data user `json:"data"`
	}
	if err := a.call(ctx, "read the account", http.MethodGet, "/2/users/me", accessToken, nil, nil, &r); err != nil {
		return user{}, err
	}
	if !idRE.MatchString(r.Data.ID) || !nameRE.MatchString(r.Data.Username) {
		return user{}, channels.Transient(0, "x: read the account: /2/users/me answered without an id and username")
	}
	return r.Data, nil
}

// tokens is the token endpoint's answer.
type tokens struct {
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// apply puts the tokens in cfg; a refresh token X did not rotate is kept.
func (t tokens) apply(cfg *Config, now time.Time) {
	cfg.AccessToken = t.AccessToken
	if t.RefreshToken != "" {
		cfg.RefreshToken = t.RefreshToken
	}
	cfg.ExpiresAt = time.Time{}
	if t.ExpiresIn > 0 {
		cfg.ExpiresAt = now.Add(time.Duration(t.ExpiresIn) * time.Second).UTC().Truncate(time.Second)
	}
}

// tokenError is a refusal of the token endpoint.
type tokenError struct {
	status int
	code   string // OAuth error code
	desc   string
	err    *channels.Error
}

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

func (e *tokenError) reason() string {
	if e.desc != "" {
		return e.code + ": " + e.desc
	}
	return e.code
}

// token calls POST /2/oauth2/token with the app's client credentials
// (HTTP Basic) and form.
func (a *Adapter) token(ctx context.Context, op string, form url.Values) (tokens, error) {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.opts.APIURL+"/2/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return tokens{}, channels.Permanent("x: %s: %v", op, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(a.opts.ClientID, a.opts.ClientSecret)
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return tokens{}, netError(ctx, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return tokens{}, netError(ctx, op, err)
	}
	if resp.StatusCode != http.StatusOK {
		var r struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(data, &r)
		te := &tokenError{status: resp.StatusCode, code: clean(r.Error), desc: clean(r.Description)}
		if te.code == "" {
			te.code = strconv.Itoa(resp.StatusCode)
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			te.err = channels.Transient(retryAfter(resp.Header, time.Now()), "x: %s: rate limited (429)", op)
		case resp.StatusCode >= 500:
			te.err = channels.Transient(0, "x: %s: X failed (%d)", op, resp.StatusCode)
		case te.code == "invalid_client" || te.code == "unauthorized_client":
			// The operator's app credentials, not the person's grant: no
			// connection is revoked for it.
			te.err = channels.Permanent("x: %s: X refused the gateway's app credentials (%s); check COMM_X_CLIENT_ID and COMM_X_CLIENT_SECRET", op, te.reason())
		default:
			te.err = channels.Revoked("x: %s: X refused (%d %s); connect the account again", op, resp.StatusCode, te.reason())
		}
		return tokens{}, te
	}
	var t tokens
	if err := json.Unmarshal(data, &t); err != nil || !tokenRE.MatchString(t.AccessToken) ||
		(t.RefreshToken != "" && !tokenRE.MatchString(t.RefreshToken)) {
		return tokens{}, channels.Transient(0, "x: %s: the token endpoint answered without an access token", op)
	}
	return t, nil
}

// errorf names the channel in a plain error.
func errorf(format string, args ...any) error { return fmt.Errorf("x: "+format, args...) }

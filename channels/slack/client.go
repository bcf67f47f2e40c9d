package slack

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
	"time"

	"github.com/comm-gateway/comm/channels"
)

// errClosed is why calls of a closed adapter end.
var errClosed = errors.New("the slack adapter was closed")

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// the call timeout.
func (a *Adapter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, a.closed, errClosed, a.opts.CallTimeout)
}

// apiError is an {"ok":false} answer: the provider's error code and its
// class.
type apiError struct {
	code string
	err  *channels.Error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// reply is the envelope of every Web API answer.
type reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// call POSTs params to the Web API method (a url.Values as a form, else
// JSON) with token as bearer (none when empty) and decodes the answer into
// out (when not nil). Failures are *channels.Error values (an *apiError
// for ok:false).
func (a *Adapter) call(ctx context.Context, op, method, token string, params, out any) error {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var body []byte
	ctype := "application/json; charset=utf-8"
	if form, ok := params.(url.Values); ok {
		body, ctype = []byte(form.Encode()), "application/x-www-form-urlencoded"
	} else {
		var err error
		if body, err = json.Marshal(params); err != nil {
			return channels.Permanent("slack: %s: %v", op, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.opts.APIURL+"/"+method, bytes.NewReader(body))
	if err != nil {
		return channels.Permanent("slack: %s: %v", op, err)
	}
	req.Header.Set("Content-Type", ctype)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
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
		return channels.Transient(0, "slack: %s: the Web API answer exceeds %d bytes", op, maxResponse)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return &apiError{code: "ratelimited", err: channels.Transient(retryAfter(resp.Header),
			"slack: %s: rate limited (429 ratelimited)", op)}
	}
	if resp.StatusCode >= 500 {
		return channels.Transient(0, "slack: %s: Slack failed (%d %s)", op, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		return channels.Transient(0, "slack: %s: malformed Web API answer (HTTP %d)", op, resp.StatusCode)
	}
	if !r.OK {
		return classify(op, r.Error, resp)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return channels.Transient(0, "slack: %s: malformed Web API answer: %v", op, err)
	}
	return nil
}

// retryAfter reads a Retry-After header in seconds.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// Error codes by class (docs.slack.dev method pages, "Errors").
var (
	revokedCodes = map[string]bool{"invalid_auth": true, "not_authed": true, "token_revoked": true, "token_expired": true,
		"account_inactive": true, "no_permission": true, "org_login_required": true, "ekm_access_denied": true,
		"team_access_not_granted": true, "missing_scope": true, "not_allowed_token_type": true}
	transientCodes = map[string]bool{"ratelimited": true, "rate_limited": true, "internal_error": true, "fatal_error": true,
		"service_unavailable": true, "request_timeout": true, "team_added_to_org": true}
)

// classify makes an ok:false answer an error of its class: rate limits
// and Slack's own failures are transient, a rejected token revoked, the
// rest (channel_not_found, not_in_channel, is_archived, msg_too_long,
// invalid_code ...) permanent.
func classify(op, code string, resp *http.Response) error {
	if code == "" {
		code = "unknown_error"
	}
	code = sanitize(code)
	var e *channels.Error
	switch {
	case transientCodes[code]:
		e = channels.Transient(retryAfter(resp.Header), "slack: %s: Slack failed (%s)", op, code)
	case revokedCodes[code]:
		e = channels.Revoked("slack: %s: the bot token was rejected (%s); install the app again or give a current token", op, code)
	default:
		e = channels.Permanent("slack: %s: %s", op, code)
	}
	return &apiError{code: code, err: e}
}

// sanitize keeps an error code printable and short.
func sanitize(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
			return r
		}
		return '?'
	}, s)
}

// netError classifies a failure to reach Slack.
func netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "slack: %s: %v", op, err)
}

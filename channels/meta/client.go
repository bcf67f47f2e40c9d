package meta

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
var errClosed = errors.New("the meta adapter was closed")

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// the call timeout.
func (a *Adapter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, a.closed, errClosed, a.opts.CallTimeout)
}

// graphError is a Graph API error answer: Meta's code and subcode, and the
// failure of its class.
type graphError struct {
	code, subcode int
	err           *channels.Error
}

func (e *graphError) Error() string { return e.err.Error() }
func (e *graphError) Unwrap() error { return e.err }

// window reports whether Meta refused a message for the 24-hour window.
func (e *graphError) window() bool {
	return e.code == codeOutsideWindow && (e.subcode == subcodeOutsideWindow || e.subcode == 0) || e.code == codeUnavailable
}

// errorBody is the Graph API's error envelope.
type errorBody struct {
	Error *struct {
		Message      string `json:"message"`
		Type         string `json:"type"`
		Code         int    `json:"code"`
		ErrorSubcode int    `json:"error_subcode"`
		FBTraceID    string `json:"fbtrace_id"`
	} `json:"error"`
}

// call makes a Graph API request: method to path (under the API URL) with
// query parameters q (the token, when not empty, and its appsecret_proof
// with secret are added) and a JSON body (when not nil), decoding the
// answer into out (when not nil). Failures are *channels.Error values (a
// *graphError for an error answer).
func (a *Adapter) call(ctx context.Context, op, method, path, token, secret string, q url.Values, body, out any) error {
	return graphCall(ctx, a.opts, a.channel, op, method, a.opts.APIURL+path, token, secret, q, body, out, a.closed)
}

func graphCall(ctx context.Context, opts Options, channel, op, method, target, token, secret string, q url.Values, body, out any, closed context.Context) error {
	ctx, cancel := channels.Bound(ctx, closed, errClosed, opts.CallTimeout)
	defer cancel()
	if q == nil {
		q = url.Values{}
	}
	if token != "" {
		q.Set("access_token", token)
		if p := proof(secret, token); p != "" {
			q.Set("appsecret_proof", p)
		}
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return channels.Permanent("%s: %s: %v", channel, op, err)
		}
		rd = bytes.NewReader(b)
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return channels.Permanent("%s: %s: bad request", channel, op)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := opts.HTTPClient.Do(req)
	if err != nil {
		return netError(ctx, channel, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return netError(ctx, channel, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "%s: %s: the Graph API answer exceeds %d bytes", channel, op, maxResponse)
	}
	var eb errorBody
	if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"error"`)) {
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			return classify(channel, op, resp, eb)
		}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return channels.Transient(usageDelay(resp.Header), "%s: %s: Meta failed (HTTP %d %s)", channel, op, resp.StatusCode, http.StatusText(resp.StatusCode))
	case resp.StatusCode == http.StatusUnauthorized:
		return channels.Revoked("%s: %s: the token was rejected (HTTP 401)", channel, op)
	case resp.StatusCode != http.StatusOK:
		return channels.Permanent("%s: %s: HTTP %d %s", channel, op, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return channels.Transient(0, "%s: %s: malformed Graph API answer: %v", channel, op, err)
	}
	return nil
}

// Error codes (developers.facebook.com/docs/graph-api/guides/error-handling,
// Messenger Platform error codes).
const (
	codeOutsideWindow    = 10
	subcodeOutsideWindow = 2018278
	codeUnavailable      = 551
	codeToken            = 190
)

// rateCodes are Meta's rate limits, sent with HTTP 400: application (4),
// user (17), Page (32), custom (613) and messaging (130429).
var rateCodes = map[int]bool{4: true, 17: true, 32: true, 613: true, 130429: true, 80001: true, 80006: true}

// classify makes a Graph error answer an error of its class.
func classify(channel, op string, resp *http.Response, eb errorBody) error {
	e := eb.Error
	msg := sanitize(e.Message)
	code := fmt.Sprintf("code %d", e.Code)
	if e.ErrorSubcode != 0 {
		code += fmt.Sprintf("/%d", e.ErrorSubcode)
	}
	var ce *channels.Error
	switch {
	case rateCodes[e.Code]:
		delay := usageDelay(resp.Header)
		if delay == 0 {
			delay = 30 * time.Second
		}
		ce = channels.Transient(delay, "%s: %s: rate limited by Meta (%s: %s)", channel, op, code, msg)
	case e.Code == 1 || e.Code == 2 || resp.StatusCode >= 500:
		ce = channels.Transient(0, "%s: %s: Meta failed (%s: %s)", channel, op, code, msg)
	case e.Code == codeToken || e.Code == 102:
		ce = channels.Revoked("%s: %s: the Page token was rejected (%s: %s); log in again or give a current token", channel, op, code, msg)
	case (&graphError{code: e.Code, subcode: e.ErrorSubcode}).window():
		ce = channels.Permanent("%s: %s: outside the 24-hour messaging window: Meta only lets a Page answer within 24 hours of the person's last message (%s: %s)", channel, op, code, msg)
	default:
		ce = channels.Permanent("%s: %s: %s (%s)", channel, op, msg, code)
	}
	return &graphError{code: e.Code, subcode: e.ErrorSubcode, err: ce}
}

// usageDelay reads Meta's estimate of when a throttled app, Page or
// business regains access (X-Business-Use-Case-Usage,
// X-App-Usage: estimated_time_to_regain_access, in minutes); 0 when none.
func usageDelay(h http.Header) time.Duration {
	best := 0
	if v := h.Get("X-Business-Use-Case-Usage"); v != "" && len(v) < 8192 {
		var m map[string][]struct {
			Estimated int `json:"estimated_time_to_regain_access"`
		}
		if json.Unmarshal([]byte(v), &m) == nil {
			for _, us := range m {
				for _, u := range us {
					best = max(best, u.Estimated)
				}
			}
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return time.Duration(min(n, 3600)) * time.Second
		}
	}
	return time.Duration(min(best, 60)) * time.Minute
}

// sanitize keeps an error message printable and short.
func sanitize(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// netError classifies a failure to reach Meta. The request's URL, which
// carries the token, is left out.
func netError(ctx context.Context, channel, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "%s: %s: %v", channel, op, err)
}

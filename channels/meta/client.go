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
	ans, err := Exchange(opts.HTTPClient, req, channel, op, maxResponse)
	switch {
	case err != nil:
		return err
	case ans.TooLarge:
		return channels.Transient(0, "%s: %s: the Graph API answer exceeds %d bytes", channel, op, maxResponse)
	case ans.Error != nil:
		return classify(channel, op, ans.Status, ans.Header, ans.Error)
	case ans.Status == http.StatusTooManyRequests || ans.Status >= 500:
		return channels.Transient(UsageDelay(ans.Header), "%s: %s: Meta failed (HTTP %d %s)", channel, op, ans.Status, http.StatusText(ans.Status))
	case ans.Status == http.StatusUnauthorized:
		return channels.Revoked("%s: %s: the token was rejected (HTTP 401)", channel, op)
	case ans.Status != http.StatusOK:
		return channels.Permanent("%s: %s: HTTP %d %s", channel, op, ans.Status, http.StatusText(ans.Status))
	}
	data := ans.Body
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
func classify(channel, op string, status int, header http.Header, e *APIError) error {
	msg := Sanitize(e.Message)
	code := fmt.Sprintf("code %d", e.Code)
	if e.Subcode != 0 {
		code += fmt.Sprintf("/%d", e.Subcode)
	}
	var ce *channels.Error
	switch {
	case rateCodes[e.Code]:
		delay := UsageDelay(header)
		if delay == 0 {
			delay = 30 * time.Second
		}
		ce = channels.Transient(delay, "%s: %s: rate limited by Meta (%s: %s)", channel, op, code, msg)
	case e.Code == 1 || e.Code == 2 || status >= 500:
		ce = channels.Transient(0, "%s: %s: Meta failed (%s: %s)", channel, op, code, msg)
	case e.Code == codeToken || e.Code == 102:
		ce = channels.Revoked("%s: %s: the Page token was rejected (%s: %s); log in again or give a current token", channel, op, code, msg)
	case (&graphError{code: e.Code, subcode: e.Subcode}).window():
		ce = channels.Permanent("%s: %s: outside the 24-hour messaging window: Meta only lets a Page answer within 24 hours of the person's last message (%s: %s)", channel, op, code, msg)
	default:
		ce = channels.Permanent("%s: %s: %s (%s)", channel, op, msg, code)
	}
	return &graphError{code: e.Code, subcode: e.Subcode, err: ce}
}

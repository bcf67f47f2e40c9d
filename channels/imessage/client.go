package imessage

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

// envelope is every BlueBubbles JSON answer:
// {"status","message","data","error":{"type","message"}}.
type envelope struct {
	Status  int             `json:"status"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Error   *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// reason is what the relay said went wrong.
func (e envelope) reason() string {
	msg := e.Message
	if e.Error != nil && e.Error.Message != "" {
		if msg != "" {
			msg += ": "
		}
		msg += e.Error.Message
	}
	return sanitize(msg)
}

// bound gives ctx the call timeout when it has no deadline.
func (c *channel) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.CallTimeout)
}

// endpoint is the URL of path on r with the password (and q).
func (r *relay) endpoint(path string, q url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Set("password", r.Password)
	return r.base + path + "?" + v.Encode()
}

// call makes one API call to r and decodes the answer's data into out
// (nil: ignored). op names the call in errors. Failures are classified:
// unreachable, timeouts, 429 and 5xx transient; 401 a permanent failure
// saying the relay refused the password; other 4xx permanent with the
// relay's message.
func (c *channel) call(ctx context.Context, r *relay, op, method, path string, q url.Values, body, out any) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("imessage: %s: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.endpoint(path, q), rd)
	if err != nil {
		return channels.Permanent("imessage: relay %s: %s: %v", r.Address, op, strings.ReplaceAll(err.Error(), r.Password, "…"))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return netError(ctx, r, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return netError(ctx, r, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "imessage: relay %s: %s: the answer exceeds %d bytes", r.Address, op, maxResponse)
	}
	var env envelope
	jsonErr := json.Unmarshal(data, &env)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return statusError(r, op, resp, env)
	}
	if jsonErr != nil {
		return channels.Transient(0, "imessage: relay %s: %s: malformed answer (not BlueBubbles JSON): %v", r.Address, op, jsonErr)
	}
	if out == nil || len(env.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return channels.Transient(0, "imessage: relay %s: %s: malformed answer data: %v", r.Address, op, err)
	}
	return nil
}

// alreadyQueued is BlueBubbles' answer to a send whose tempGuid is still
// being sent (an earlier attempt the outbox gave up waiting for).
const alreadyQueued = "already queued"

// statusError classifies a non-2xx answer.
func statusError(r *relay, op string, resp *http.Response, env envelope) error {
	why := env.reason()
	if why == "" {
		why = http.StatusText(resp.StatusCode)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return channels.Transient(retryAfter(resp.Header), "imessage: relay %s: %s: the relay failed (HTTP %d: %s)", r.Address, op, resp.StatusCode, why)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &passwordError{err: channels.Permanent("imessage: relay %s: %s: the relay refused the password (HTTP %d: %s); the operator's COMM_IMESSAGE_RELAYS needs its current server password", r.Address, op, resp.StatusCode, why)}
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(why), alreadyQueued):
		return channels.Transient(10*time.Second, "imessage: relay %s: %s: an earlier attempt of this message is still being sent (HTTP 400: %s)", r.Address, op, why)
	}
	return channels.Permanent("imessage: relay %s: %s: HTTP %d: %s", r.Address, op, resp.StatusCode, why)
}

// passwordError is a relay refusing the operator's password.
type passwordError struct{ err *channels.Error }

func (e *passwordError) Error() string { return e.err.Error() }
func (e *passwordError) Unwrap() error { return e.err }

// retryAfter reads a Retry-After in seconds; 0 when absent.
func retryAfter(h http.Header) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && n > 0 {
		return time.Duration(min(n, 3600)) * time.Second
	}
	return 0
}

// netError classifies a failure to reach a relay. The request's URL,
// which carries the password, is left out.
func netError(ctx context.Context, r *relay, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "imessage: relay %s: %s: the relay did not answer: %v", r.Address, op, err)
}

// sanitize keeps a relay's message printable and short.
func sanitize(s string) string {
	if len(s) > 300 {
		s = s[:300]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// serverInfo returns the relay's server/info, asking when the last answer
// is older than infoTTL (or fresh is set).
func (c *channel) serverInfo(ctx context.Context, r *relay, fresh bool) (serverInfo, error) {
	now := c.opts.Now()
	r.mu.Lock()
	info, at := r.info, r.infoAt
	r.mu.Unlock()
	if !fresh && !at.IsZero() && now.Sub(at) < infoTTL {
		return info, nil
	}
	if err := c.call(ctx, r, "server info", http.MethodGet, "/api/v1/server/info", nil, nil, &info); err != nil {
		return serverInfo{}, err
	}
	r.mu.Lock()
	r.info, r.infoAt = info, now
	r.mu.Unlock()
	return info, nil
}

package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"
)

// userAgent identifies the client to the gateway.
const userAgent = "comm-go-client/1"

// backoff is an exponential backoff with jitter.
type backoff struct {
	first, limit time.Duration
}

var defaultBackoff = backoff{first: 250 * time.Millisecond, limit: 8 * time.Second}

// delay returns the jittered delay before retry n (0-based): between half
// and all of first*2^n, capped at limit.
func (b backoff) delay(n int) time.Duration {
	d := b.first
	for i := 0; i < n && d < b.limit; i++ {
		d *= 2
	}
	d = min(d, b.limit)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// request is one API call.
type request struct {
	method string
	path   string // under the base URL, e.g. "/v1/events"
	query  url.Values
	body   any // JSON-encoded when not nil
	out    any // decoded from a 2xx answer when not nil
	// raw, when not nil, receives a 2xx answer's body and header as they
	// are, instead of out (downloads).
	raw *rawAnswer
	// wait lengthens the attempt's timeout (long polls).
	wait time.Duration
	// noAuth leaves the Authorization header out.
	noAuth bool
	// keyed sends an Idempotency-Key, one per call and the same on each
	// of its attempts, so a POST that creates or sends can be retried
	// like an idempotent method: the gateway answers a retry of a request
	// it has seen with the first answer.
	keyed bool
}

// rawAnswer is a 2xx answer kept as it came.
type rawAnswer struct {
	header http.Header
	body   []byte
}

// idempotent reports whether a method may be repeated safely.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// newIdempotencyKey returns a random Idempotency-Key.
func newIdempotencyKey() string {
	var b [16]byte
	crand.Read(b[:])
	return "go_" + hex.EncodeToString(b[:])
}

// do runs a call, retrying idempotent ones (and keyed POSTs) after 429,
// 5xx (not 501) and connection errors with exponential backoff and
// jitter, honouring Retry-After; a keyed POST is also retried after the
// 409 that says its first attempt is still running. A DELETE whose
// earlier attempt may have gone through and that now answers not_found
// counts as done.
func (c *Client) do(ctx context.Context, r request) error {
	idemKey := ""
	if r.keyed {
		idemKey = newIdempotencyKey()
	}
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("comm: %s %s: encode body: %w", r.method, r.path, err)
		}
	}
	uncertain := false
	for attempt := 0; ; attempt++ {
		retry, err := c.once(ctx, r, payload, idemKey)
		if err == nil {
			return nil
		}
		if r.method == http.MethodDelete && uncertain && errors.Is(err, ErrNotFound) {
			return nil
		}
		if !retry || !(idempotent(r.method) || idemKey != "") || attempt >= c.retries || ctx.Err() != nil {
			return err
		}
		wait := c.backoff.delay(attempt)
		var apiErr *Error
		if errors.As(err, &apiErr) {
			if apiErr.RetryAfter > MaxRetryAfter {
				return err
			}
			if apiErr.RetryAfter > 0 {
				wait = apiErr.RetryAfter
			}
			if apiErr.Status != http.StatusTooManyRequests {
				uncertain = true
			}
		} else {
			uncertain = true
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// once makes one attempt; retry reports whether another may succeed.
func (c *Client) once(ctx context.Context, r request, payload []byte, idemKey string) (retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout+r.wait)
	defer cancel()
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, r.method, u, body)
	if err != nil {
		return false, fmt.Errorf("comm: %s %s: %w", r.method, r.path, err)
	}
	if r.raw != nil {
		req.Header.Set("Accept", "*/*")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !r.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A connection error, or this attempt's timeout; not the caller's
		// cancellation.
		return ctx.Err() == nil, fmt.Errorf("comm: %s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := errorOf(resp, b)
		s := resp.StatusCode
		// A keyed request's earlier attempt still running: 409 with
		// Retry-After (other conflicts have none).
		running := s == http.StatusConflict && idemKey != "" && resp.Header.Get("Retry-After") != ""
		return running || s == http.StatusTooManyRequests || (s >= 500 && s != http.StatusNotImplemented && s != http.StatusHTTPVersionNotSupported), e
	}
	if r.raw != nil {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return ctx.Err() == nil, fmt.Errorf("comm: %s %s: read answer: %w", r.method, r.path, err)
		}
		r.raw.header, r.raw.body = resp.Header, b
		return false, nil
	}
	if r.out == nil || resp.StatusCode == http.StatusNoContent {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return false, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("comm: %s %s: read answer: %w", r.method, r.path, err)
	}
	if err := json.Unmarshal(b, r.out); err != nil {
		return false, fmt.Errorf("comm: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return false, nil
}

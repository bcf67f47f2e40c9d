package telnyx

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
var errClosed = errors.New("the telnyx adapter was closed")

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// the call timeout.
func (a *Adapter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, a.closed, errClosed, a.opts.CallTimeout)
}

// code is an error code as Telnyx spells it: a string ("10011"), at times
// a number.
type code string

func (c *code) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = code(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*c = code(n.String())
	return nil
}

// apiErr is one entry of an error answer's "errors".
type apiErr struct {
	Code   code   `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Source *struct {
		Pointer string `json:"pointer"`
	} `json:"source"`
}

// apiError is a non-2xx answer: the HTTP status, Telnyx's errors, and the
// class.
type apiError struct {
	status int
	errs   []apiErr
	err    *channels.Error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// has reports whether Telnyx named error code c.
func (e *apiError) has(c string) bool {
	for _, x := range e.errs {
		if string(x.Code) == c {
			return true
		}
	}
	return false
}

// reason is Telnyx's errors as one line: "40310 Invalid 'to' address: ...".
func (e *apiError) reason() string {
	var parts []string
	for _, x := range e.errs {
		s := strings.TrimSpace(string(x.Code) + " " + x.Title)
		if x.Detail != "" && x.Detail != x.Title {
			s += ": " + x.Detail
		}
		if x.Source != nil && x.Source.Pointer != "" {
			s += " (" + x.Source.Pointer + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return http.StatusText(e.status)
	}
	return clip(strings.Join(parts, "; "), 500)
}

// call sends a request to the API (JSON body when in is not nil) with the
// connection's key and decodes the answer's "data" into out (when not
// nil). op names the operation in errors ("send message"). Failures are
// *channels.Error values (an *apiError for a non-2xx answer).
func (a *Adapter) call(ctx context.Context, op, method, path string, in, out any) error {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return channels.Permanent("telnyx: %s: %v", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.opts.APIURL+path, body)
	if err != nil {
		return channels.Permanent("telnyx: %s: %v", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return a.netError(ctx, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return a.netError(ctx, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "telnyx: %s: the API answer exceeds %d bytes", op, maxResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return a.statusError(op, resp, data)
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &env); err != nil || len(env.Data) == 0 || string(env.Data) == "null" {
		return channels.Transient(0, "telnyx: %s: malformed API answer (HTTP %d)", op, resp.StatusCode)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return channels.Transient(0, "telnyx: %s: malformed API answer: %v", op, err)
	}
	return nil
}

// statusError classifies a non-2xx answer: 429 and 5xx are transient (with
// the delay Telnyx asks for), 401 and 403 a rejected key, the rest
// permanent with Telnyx's reason.
func (a *Adapter) statusError(op string, resp *http.Response, data []byte) error {
	e := &apiError{status: resp.StatusCode}
	var env struct {
		Errors []apiErr `json:"errors"`
	}
	if json.Unmarshal(data, &env) == nil {
		e.errs = env.Errors
	}
	st := resp.StatusCode
	why := a.scrub(e.reason())
	switch {
	case st == http.StatusTooManyRequests:
		e.err = channels.Transient(retryAfter(resp.Header, time.Now()), "telnyx: %s: rate limited (%d %s)", op, st, why)
	case st >= 500:
		e.err = channels.Transient(retryAfter(resp.Header, time.Now()), "telnyx: %s: Telnyx failed (%d %s)", op, st, why)
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		e.err = channels.Revoked("telnyx: %s: Telnyx rejected the API key (%d %s); create a key in the Telnyx portal and connect again", op, st, why)
	case e.has("40300"):
		e.err = channels.Permanent("telnyx: %s: the recipient opted out of messages from this number (replied STOP) (%d %s)", op, st, why)
	case e.has("40310") || e.has("10002") || e.has("10016"):
		e.err = channels.Permanent("telnyx: %s: not a number Telnyx can send to (%d %s)", op, st, why)
	default:
		e.err = channels.Permanent("telnyx: %s: %d %s", op, st, why)
	}
	return e
}

// maxRetryAfter caps the delay a provider can ask for.
const maxRetryAfter = time.Hour

// retryAfter is the delay a 429 or 5xx answer asks for: Retry-After
// (seconds or a date), else Telnyx's x-ratelimit-reset (seconds until the
// window resets); 0 when neither says.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
			d = time.Duration(n * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	} else if v := strings.TrimSpace(h.Get("X-Ratelimit-Reset")); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
			d = time.Duration(n * float64(time.Second))
		}
	}
	return min(max(d, 0), maxRetryAfter)
}

// netError classifies a failure to reach the API.
func (a *Adapter) netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "telnyx: %s: %s", op, a.scrub(err.Error()))
}

// scrub is s without the API key.
func (a *Adapter) scrub(s string) string {
	if a.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, a.cfg.APIKey, "<api key>")
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// numberSettings is a phone number's messaging settings.
type numberSettings struct {
	PhoneNumber        string `json:"phone_number"`
	MessagingProfileID string `json:"messaging_profile_id"`
}

// messagingProfile is the part of a messaging profile comm reads.
type messagingProfile struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	WebhookURL        string `json:"webhook_url"`
	WebhookAPIVersion string `json:"webhook_api_version"`
}

// number reads from's messaging settings; a key or number Telnyx refuses
// is a *channels.ConfigError.
func (a *Adapter) number(ctx context.Context, from string) (numberSettings, error) {
	var n numberSettings
	err := a.call(ctx, "check number", http.MethodGet, "/messaging_phone_numbers/"+url.PathEscape(from), nil, &n)
	if ce := configError(err, "from", fmt.Sprintf("%s is not a messaging number of this Telnyx account", from)); ce != nil {
		return n, ce
	}
	return n, err
}

// profile reads the messaging profile; a key or profile Telnyx refuses is
// a *channels.ConfigError.
func (a *Adapter) profile(ctx context.Context, id string) (messagingProfile, error) {
	p, err := a.getProfile(ctx, id)
	if ce := configError(err, "messaging_profile_id", fmt.Sprintf("Telnyx knows no messaging profile %s in this account", id)); ce != nil {
		return p, ce
	}
	return p, err
}

func (a *Adapter) getProfile(ctx context.Context, id string) (messagingProfile, error) {
	var p messagingProfile
	err := a.call(ctx, "get messaging profile", http.MethodGet, "/messaging_profiles/"+url.PathEscape(id), nil, &p)
	return p, err
}

// setWebhook sets (or, with nil, clears) the profile's webhook_url, with
// webhook API version 2 (Ed25519-signed events).
func (a *Adapter) setWebhook(ctx context.Context, id string, hook *string) error {
	body := map[string]any{"webhook_url": hook}
	if hook != nil {
		body["webhook_api_version"] = "2"
	}
	var p messagingProfile
	return a.call(ctx, "set webhook", http.MethodPatch, "/messaging_profiles/"+url.PathEscape(id), body, &p)
}

// configError turns a provisioning call's rejection into the field to fix:
// a rejected key is api_key, a 404 (or 422) is field.
func configError(err error, field, notFound string) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return nil
	}
	switch {
	case errors.Is(err, channels.ErrRevoked):
		return &channels.ConfigError{Field: "api_key", Msg: fmt.Sprintf("telnyx: Telnyx rejected the API key (%d %s)", ae.status, ae.reason())}
	case ae.status == http.StatusNotFound || ae.status == http.StatusUnprocessableEntity:
		return &channels.ConfigError{Field: field, Msg: fmt.Sprintf("telnyx: %s (%d %s)", notFound, ae.status, ae.reason())}
	}
	return nil
}

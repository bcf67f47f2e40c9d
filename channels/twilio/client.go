package twilio

import (
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
var errClosed = errors.New("the twilio adapter was closed")

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// the call timeout.
func (a *Adapter) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return channels.Bound(ctx, a.closed, errClosed, a.opts.CallTimeout)
}

// apiError is a Twilio REST error: its error code and class.
type apiError struct {
	Code   int
	Status int
	err    *channels.Error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// restError is the body of a Twilio error answer.
type restError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

// credentials are the user and password of the REST calls: the API key
// when there is one, else the account and its Auth Token.
func (a *Adapter) credentials() (string, string) {
	if a.cfg.APIKeySID != "" {
		return a.cfg.APIKeySID, a.cfg.APIKeySecret
	}
	return a.cfg.AccountSID, a.cfg.AuthToken
}

// accountURL is the REST URL of path under the account
// (/2010-04-01/Accounts/{sid}<path>).
func (a *Adapter) accountURL(path string) string {
	return a.opts.APIURL + "/2010-04-01/Accounts/" + a.cfg.AccountSID + path
}

// call makes a REST request (form is the POST body; nil for a GET) and
// decodes the JSON answer into out (when not nil). op names the operation
// in errors ("send message"). Failures are *channels.Error values (an
// *apiError when Twilio answered with an error code).
func (a *Adapter) call(ctx context.Context, op, method, u string, form url.Values, out any) error {
	ctx, cancel := a.bound(ctx)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return channels.Permanent("twilio: %s: %v", op, err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(a.credentials())
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
		return channels.Transient(0, "twilio: %s: the answer exceeds %d bytes", op, maxResponse)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var re restError
		_ = json.Unmarshal(data, &re)
		return classify(op, resp, re)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return channels.Transient(0, "twilio: %s: malformed answer (HTTP %d): %v", op, resp.StatusCode, err)
	}
	return nil
}

// Error codes with a class of their own
// (https://www.twilio.com/docs/api/errors).
const (
	CodeAuthentication = 20003 // authentication failed: the credentials are wrong or revoked
	CodeNotFound       = 20404
	CodeTooMany        = 20429 // too many requests
	CodeInvalidTo      = 21211 // invalid 'To' phone number
	CodeRegion         = 21408 // permission to send to this region is not enabled
	CodeOptedOut       = 21610 // the recipient replied STOP
	CodeWindow         = 63016 // WhatsApp free-form message outside the 24-hour window
)

// WindowReason is what a WhatsApp send outside the customer care window
// fails with.
const WindowReason = "WhatsApp allows free-form messages only within 24 hours of the person's last message; " +
	"outside that window send an approved template: {\"template\":{\"content_sid\":\"HX...\",\"variables\":{...}}}"

// reasons explains the error codes a person can act on.
var reasons = map[int]string{
	CodeInvalidTo: "the recipient is not a valid phone number",
	CodeRegion:    "the account may not send to this region (enable it in the console's geo permissions)",
	CodeOptedOut:  "the recipient opted out (replied STOP); they must reply START before you can write again",
	CodeWindow:    WindowReason,
	21614:         "the recipient is not a mobile number",
	21606:         "the sender is not a number of this account that can send messages",
	21608:         "a trial account can send only to verified numbers",
	30003:         "the recipient's handset is unreachable",
	30004:         "the message was blocked (the recipient or their carrier blocks it)",
	30005:         "the recipient's number is unknown or no longer in service",
	30006:         "the recipient is a landline or an unreachable carrier",
	30007:         "the carrier filtered the message (spam or unregistered 10DLC traffic)",
	30008:         "the carrier reported an unknown error",
	30034:         "the sender number is not registered for US A2P 10DLC",
	63003:         "the recipient is not a WhatsApp user",
	63024:         "the recipient is not a valid WhatsApp user",
	63032:         "the recipient's WhatsApp account cannot receive this message",
	CodeTooMany:   "too many requests",
	CodeNotFound:  "not found",
	CodeAuthentication: "authentication failed: the Account SID, Auth Token or API key was " +
		"rejected (changed or revoked)",
}

// Reason is a short explanation of a Twilio error code ("" when there is
// none).
func Reason(code int) string { return reasons[code] }

// classify makes a Twilio error answer an error of its class.
func classify(op string, resp *http.Response, re restError) error {
	status := resp.StatusCode
	msg := clean(re.Message)
	if msg == "" {
		msg = http.StatusText(status)
	}
	detail := fmt.Sprintf("%d %s", status, msg)
	if re.Code != 0 {
		detail = fmt.Sprintf("error %d: %s", re.Code, msg)
		if r := reasons[re.Code]; r != "" && !strings.Contains(strings.ToLower(msg), strings.ToLower(r)) {
			detail += " (" + r + ")"
		}
		if status >= 500 || status == http.StatusTooManyRequests {
			detail += fmt.Sprintf(", HTTP %d", status)
		}
	}
	var e *channels.Error
	switch {
	case re.Code == CodeTooMany || status == http.StatusTooManyRequests:
		e = channels.Transient(retryAfter(resp.Header), "twilio: %s: rate limited (%s)", op, detail)
	case status >= 500:
		e = channels.Transient(retryAfter(resp.Header), "twilio: %s: Twilio failed (%s)", op, detail)
	case re.Code == CodeAuthentication || status == http.StatusUnauthorized:
		e = channels.Revoked("twilio: %s: the credentials were rejected (%s); connect again with the current Auth Token or API key", op, detail)
	default:
		e = channels.Permanent("twilio: %s: %s", op, detail)
	}
	return &apiError{Code: re.Code, Status: status, err: e}
}

// clean keeps a provider message printable and short.
func clean(s string) string {
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

// retryAfter reads a Retry-After header in seconds.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// netError classifies a failure to reach Twilio. A *url.Error names the
// URL; only its cause is kept.
func netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "twilio: %s: %v", op, err)
}

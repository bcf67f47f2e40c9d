package meta

import (
	"bytes"
	"context"
	"crypto/subtle"
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

// This file holds what every channel on Meta's Graph API shares: the
// Messenger and Instagram channels here, and hosted WhatsApp
// (channels/wacloud). Webhook signatures are Sign and Verify.

// Challenge answers Meta's GET webhook verification: hub.mode=subscribe
// with the verify token token, answered with hub.challenge as the whole
// body. Another GET, or a wrong token, is an error wrapping
// channels.ErrSignature; channel names the channel in it.
func Challenge(channel, token string, r *http.Request) (*channels.Response, error) {
	q := r.URL.Query()
	got, ch := q.Get("hub.verify_token"), q.Get("hub.challenge")
	switch {
	case q.Get("hub.mode") != "subscribe":
		return nil, fmt.Errorf("%s: a GET that is no webhook verification (hub.mode=subscribe): %w", channel, channels.ErrSignature)
	case token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
		return nil, fmt.Errorf("%s: the webhook verification carries a wrong hub.verify_token: %w", channel, channels.ErrSignature)
	case ch == "" || len(ch) > 256 || !verifyRE.MatchString(ch):
		return nil, fmt.Errorf("%s: the webhook verification has no usable hub.challenge: %w", channel, channels.ErrSignature)
	}
	return &channels.Response{Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte(ch)}, nil
}

// APIError is the error object of a Graph API error answer
// ({"error":{...}}).
type APIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Subcode int    `json:"error_subcode"`
	// UserTitle and UserMsg are the explanation Meta writes for people
	// (WhatsApp's error_user_title and error_user_msg).
	UserTitle string `json:"error_user_title"`
	UserMsg   string `json:"error_user_msg"`
	// Data.Details is the WhatsApp Cloud API's detailed reason.
	Data struct {
		Details string `json:"details"`
	} `json:"error_data"`
	FBTraceID string `json:"fbtrace_id"`
}

// Answer is what the Graph API answered a request.
type Answer struct {
	Status int
	Header http.Header
	// Body is the answer's body; nil when it was over the limit.
	Body []byte
	// TooLarge says the body was over the limit Exchange was given.
	TooLarge bool
	// Error is the Graph API error the answer carries, if any.
	Error *APIError
}

// Exchange makes req with client and reads at most limit bytes of the
// answer, decoding the Graph API error object an answer carries. A
// failure to reach Meta is a transient *channels.Error naming channel and
// op, never the request's URL (it may carry a token).
func Exchange(client *http.Client, req *http.Request, channel, op string, limit int64) (Answer, error) {
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, netError(req.Context(), channel, op, err)
	}
	defer resp.Body.Close()
	ans := Answer{Status: resp.StatusCode, Header: resp.Header}
	if resp.ContentLength > limit {
		ans.TooLarge = true
		return ans, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Answer{}, netError(req.Context(), channel, op, err)
	}
	if int64(len(data)) > limit {
		ans.TooLarge = true
		return ans, nil
	}
	ans.Body = data
	if resp.StatusCode != http.StatusOK || bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && bytes.Contains(data, []byte(`"error"`)) {
		var eb struct {
			Error *APIError `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			ans.Error = eb.Error
		}
	}
	return ans, nil
}

// UsageDelay reads when a throttled caller may try again: Retry-After
// (seconds, at most an hour), else Meta's estimate in
// X-Business-Use-Case-Usage (estimated_time_to_regain_access, minutes,
// at most an hour); 0 when neither says.
func UsageDelay(h http.Header) time.Duration {
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

// Sanitize keeps a provider's text (an error message, a name) printable
// and at most 200 bytes.
func Sanitize(s string) string {
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

// FileURLAllowed reports whether a media URL may be fetched: one of
// Meta's CDNs (fbcdn.net, fbsbx.com, facebook.com, Instagram's) over
// https, or the Graph API's own host apiURL (a fake in tests).
func FileURLAllowed(raw, apiURL string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || len(raw) > 4096 {
		return false
	}
	if api, err := url.Parse(apiURL); err == nil && u.Scheme == api.Scheme && u.Host == api.Host {
		return true
	}
	h := strings.ToLower(u.Hostname())
	if u.Scheme != "https" {
		return false
	}
	for _, d := range []string{"fbcdn.net", "fbsbx.com", "facebook.com", "cdninstagram.com", "instagram.com"} {
		if h == d || strings.HasSuffix(h, "."+d) {
			return true
		}
	}
	return false
}

// netError classifies a failure to reach Meta. The request's URL, which
// may carry the token, is left out.
func netError(ctx context.Context, channel, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "%s: %s: %v", channel, op, err)
}

package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ratelimit"
)

// The device sign-in endpoints: the spec's JSON pair under /v1/auth/device
// and the RFC 8628 pair under /oauth for standard OAuth device clients.
// Accounts and keys: GET /v1/account, /v1/keys.

func (s *Server) verificationURI() string { return s.baseURL + "/device" }

func (s *Server) verificationURIComplete(code string) string {
	return s.baseURL + "/device?code=" + url.QueryEscape(code)
}

// limited answers 429 with Retry-After when key has used up its budget.
// what says what there were too many of ("sign-in attempts").
func limited(l *ratelimit.Bucket, key, what string) error {
	if ok, wait := l.Allow(key); !ok {
		return fault.RateLimited(wait, "too many %s from here; try again in %d s", what, int(wait.Seconds())+1)
	}
	return nil
}

func (s *Server) startDevice(r *http.Request, apiKey string) (*api.DeviceStart, error) {
	if err := limited(s.startLimit, limitKey(s.clientIP(r)), "sign-in attempts"); err != nil {
		return nil, err
	}
	st, err := s.acct.StartDevice(r.Context(), account.DeviceStartInput{
		APIKey: apiKey, ClientIP: s.clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return nil, err
	}
	return &api.DeviceStart{UserCode: st.UserCode, DeviceCode: st.DeviceCode,
		VerificationURI: s.verificationURI(), VerificationURIComplete: s.verificationURIComplete(st.UserCode),
		Interval: st.Interval, ExpiresIn: st.ExpiresIn}, nil
}

// deviceStart is POST /v1/auth/device/start {api_key?}.
func (s *Server) deviceStart(w http.ResponseWriter, r *http.Request) error {
	var in api.DeviceStartRequest
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			return err
		}
	}
	out, err := s.startDevice(r, in.APIKey)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deviceToken is POST /v1/auth/device/token {device_code}.
func (s *Server) deviceToken(w http.ResponseWriter, r *http.Request) error {
	var in api.DeviceTokenRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.DeviceCode == "" {
		return fault.Invalid("device_code", "required")
	}
	tok, err := s.acct.PollDevice(r.Context(), in.DeviceCode)
	if err != nil {
		return err
	}
	out := api.DeviceToken{Status: tok.Status, APIKey: tok.APIKey}
	if tok.Status == account.DeviceApproved {
		out.BaseURL = s.baseURL
	}
	if tok.Status == account.DeviceSlowDown || tok.Status == account.DevicePending {
		out.Interval = tok.Interval
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// oauthError is an RFC 6749 error answer.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	Interval    int    `json:"interval,omitempty"`
}

func writeOAuthError(w http.ResponseWriter, status int, e oauthError) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, e)
}

// oauthDeviceCode is the RFC 8628 device authorization endpoint
// (POST /oauth/device/code, form-encoded: client_id, scope; comm also
// takes api_key, the sandbox key to carry over).
func (s *Server) oauthDeviceCode(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "invalid_request", Description: err.Error()})
		return nil
	}
	out, err := s.startDevice(r, r.PostForm.Get("api_key"))
	if err != nil {
		if errors.Is(err, fault.ErrRateLimited) {
			return err
		}
		var e *fault.Error
		if errors.As(err, &e) {
			writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "invalid_request", Description: e.Message})
			return nil
		}
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
	return nil
}

// DeviceGrantType is RFC 8628's grant type.
const DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// oauthToken is the RFC 8628 token endpoint (POST /oauth/token,
// grant_type=urn:ietf:params:oauth:grant-type:device_code): the access
// token is the signed-in API key.
func (s *Server) oauthToken(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "invalid_request", Description: err.Error()})
		return nil
	}
	if gt := r.PostForm.Get("grant_type"); gt != DeviceGrantType {
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "unsupported_grant_type",
			Description: fmt.Sprintf("grant_type %q is not supported; use %s", gt, DeviceGrantType)})
		return nil
	}
	tok, err := s.acct.PollDevice(r.Context(), r.PostForm.Get("device_code"))
	if err != nil {
		var e *fault.Error
		if errors.As(err, &e) {
			writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "invalid_grant", Description: e.Message})
			return nil
		}
		return err
	}
	switch tok.Status {
	case account.DeviceApproved:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tok.APIKey, "token_type": "Bearer", "base_url": s.baseURL})
	case account.DevicePending:
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "authorization_pending"})
	case account.DeviceSlowDown:
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "slow_down", Interval: tok.Interval})
	case account.DeviceDenied:
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "access_denied", Description: "the sign-in was denied"})
	case account.DeviceExpired:
		writeOAuthError(w, http.StatusBadRequest, oauthError{Error: "expired_token", Description: "the sign-in expired; start a new one"})
	default:
		return fmt.Errorf("device token: unexpected status %q", tok.Status)
	}
	return nil
}

func (s *Server) getAccount(w http.ResponseWriter, r *http.Request) error {
	v, err := s.acct.AccountOf(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) listLedger(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	lines, more, err := s.acct.Ledger(r.Context(), pg)
	if err != nil {
		return err
	}
	if more && len(lines) > 0 {
		setNextLink(w, r, lines[len(lines)-1].ID, pg.Limit)
	}
	writeJSON(w, http.StatusOK, lines)
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := s.svc.Keys(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ks)
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			return err
		}
	}
	k, err := s.svc.CreateKey(r.Context(), in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, k)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.svc.RevokeKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

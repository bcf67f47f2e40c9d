package api

// DeviceStartRequest is the body of POST /v1/auth/device/start; the body
// may be left out.
type DeviceStartRequest struct {
	// APIKey is the sandbox key whose project the sign-in carries into the
	// account; empty for a new project.
	APIKey string `json:"api_key,omitempty"`
}

// DeviceStart is the answer of POST /v1/auth/device/start: the code a
// person confirms in a browser, and the code the client polls with.
type DeviceStart struct {
	UserCode                string `json:"user_code"`
	DeviceCode              string `json:"device_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	// Interval is the polling interval in seconds; ExpiresIn the seconds
	// until the codes expire.
	Interval  int `json:"interval"`
	ExpiresIn int `json:"expires_in"`
}

// DeviceTokenRequest is the body of POST /v1/auth/device/token.
type DeviceTokenRequest struct {
	DeviceCode string `json:"device_code"`
}

// DeviceToken is the answer of POST /v1/auth/device/token.
type DeviceToken struct {
	// Status is pending, slow_down, approved, denied or expired.
	Status string `json:"status"`
	// APIKey and BaseURL are set once approved: the signed-in key and
	// where to use it.
	APIKey  string `json:"api_key,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	// Interval is the polling interval in seconds now in force, while
	// pending or slow_down.
	Interval int `json:"interval,omitempty"`
}

package client

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/joho/godotenv"
)

// Configuration variables, read from the environment and from .env files.
const (
	EnvAPIKey  = "COMM_API_KEY"
	EnvBaseURL = "COMM_BASE_URL"
)

// DefaultBaseURL is the gateway's address when none is configured: where
// `comm serve` listens by default.
const DefaultBaseURL = "http://127.0.0.1:8080"

// Defaults of the HTTP layer.
const (
	// DefaultTimeout bounds one HTTP attempt (a long poll gets its wait on
	// top).
	DefaultTimeout = 30 * time.Second
	// DefaultRetries is how many times an idempotent call is retried.
	DefaultRetries = 3
	// MaxRetryAfter is the longest Retry-After the client waits for; a
	// longer one ends the retries and the error (with its RetryAfter) is
	// returned.
	MaxRetryAfter = time.Minute
)

// Client calls one gateway with one API key (one project). It is safe for
// concurrent use.
type Client struct {
	baseURL string
	key     string
	hc      *http.Client
	timeout time.Duration
	retries int
	backoff backoff
}

// settings collect the options of New.
type settings struct {
	key, baseURL string
	hc           *http.Client
	dotenv       []string
	timeout      time.Duration
	retries      int
	backoff      backoff
}

// Option configures New.
type Option func(*settings)

// WithAPIKey sets the API key, over any configured elsewhere.
func WithAPIKey(key string) Option { return func(s *settings) { s.key = key } }

// WithBaseURL sets the gateway's address (e.g. "https://comm.example.com"),
// over any configured elsewhere.
func WithBaseURL(u string) Option { return func(s *settings) { s.baseURL = u } }

// WithHTTPClient sets the HTTP client (its Transport is used; each attempt
// is bounded by WithTimeout through its context). Default: a client with
// its own transport.
func WithHTTPClient(hc *http.Client) Option { return func(s *settings) { s.hc = hc } }

// WithDotEnv reads COMM_API_KEY and COMM_BASE_URL from the file at path
// (KEY=VALUE lines). Its values take precedence over the environment; a
// missing or malformed file is an error of New. Given more than once, the
// first file that sets a variable wins. The process environment is never
// modified.
func WithDotEnv(path string) Option { return func(s *settings) { s.dotenv = append(s.dotenv, path) } }

// WithTimeout bounds each HTTP attempt (default DefaultTimeout); a long
// poll (EventsWait, Listen) gets its wait on top.
func WithTimeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// WithRetries sets how many times an idempotent call (GET, PUT, DELETE) is
// retried after a 429, a 5xx other than 501, or a connection error
// (default DefaultRetries; 0 disables retries). So are the POST calls that
// create or send (Send, Reply, Typing, Connect, Inject, CreateKey,
// AddDomain, ReplayWebhook ...): each sends an Idempotency-Key, the same
// on every attempt, so the gateway runs it once and answers a retry with
// the first answer. Other POST calls (CreateSandbox, sign-in, VerifyDomain)
// are never retried.
func WithRetries(n int) Option { return func(s *settings) { s.retries = max(n, 0) } }

// WithBackoff sets the delay before the first retry and the cap of the
// exponential backoff (defaults 250 ms and 8 s). Each delay is jittered
// between half and all of its value; a Retry-After header replaces it.
func WithBackoff(first, limit time.Duration) Option {
	return func(s *settings) {
		if first > 0 {
			s.backoff.first = first
		}
		if limit > 0 {
			s.backoff.limit = limit
		}
	}
}

// New returns a client. The API key and the base URL are each taken from,
// in order: WithAPIKey / WithBaseURL; files given with WithDotEnv; the
// environment (COMM_API_KEY, COMM_BASE_URL); a .env file in the working
// directory; a .env file in the executable's directory. The base URL
// defaults to DefaultBaseURL. Without a key anywhere, New fails with
// ErrNoAPIKey.
func New(opts ...Option) (*Client, error) {
	s := settings{timeout: DefaultTimeout, retries: DefaultRetries, backoff: defaultBackoff}
	for _, o := range opts {
		o(&s)
	}
	cfg, err := resolve(s.dotenv, map[string]string{EnvAPIKey: s.key, EnvBaseURL: s.baseURL})
	if err != nil {
		return nil, err
	}
	if cfg[EnvAPIKey] == "" {
		return nil, ErrNoAPIKey
	}
	base, err := parseBaseURL(cfg[EnvBaseURL])
	if err != nil {
		return nil, err
	}
	hc := s.hc
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16 // Listen's handlers call in parallel
		hc = &http.Client{Transport: tr}
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	return &Client{baseURL: base, key: strings.TrimSpace(cfg[EnvAPIKey]), hc: hc,
		timeout: s.timeout, retries: s.retries, backoff: s.backoff}, nil
}

// BaseURL returns the gateway's address the client calls, without a
// trailing slash.
func (c *Client) BaseURL() string { return c.baseURL }

// resolve fills the empty values of vars from the sources after the
// options, in order of precedence.
func resolve(dotenv []string, vars map[string]string) (map[string]string, error) {
	missing := func() bool {
		for _, v := range vars {
			if v == "" {
				return true
			}
		}
		return false
	}
	fill := func(get func(string) string) {
		for k, v := range vars {
			if v == "" {
				vars[k] = strings.TrimSpace(get(k))
			}
		}
	}
	for _, path := range dotenv {
		m, err := godotenv.Read(path)
		if err != nil {
			return nil, fmt.Errorf("comm: read %s: %w", path, err)
		}
		fill(func(k string) string { return m[k] })
	}
	fill(os.Getenv)
	if !missing() {
		return vars, nil
	}
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		if d := filepath.Dir(exe); len(dirs) == 0 || d != dirs[0] {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if !missing() {
			break
		}
		path := filepath.Join(d, ".env")
		m, err := godotenv.Read(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("comm: read %s: %w", path, err)
		}
		fill(func(k string) string { return m[k] })
	}
	return vars, nil
}

// parseBaseURL checks a base URL and strips its trailing slash; empty
// means DefaultBaseURL.
func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return DefaultBaseURL, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("comm: base URL %q: want http(s)://host[:port][/path], without query or credentials", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Default relay ports per URL scheme.
const (
	SubmissionPort = "587"
	SMTPSPort      = "465"
)

// DefaultTimeout bounds a Send whose context has no deadline.
const DefaultTimeout = 5 * time.Minute

// Relay submits mail to one SMTP relay. It is safe for concurrent use: each
// Send opens its own connection.
type Relay struct {
	// Addr is the relay's host:port.
	Addr string
	// Username and Password authenticate with AUTH PLAIN (or LOGIN when that
	// is all the relay offers); empty Username sends without AUTH.
	Username string
	Password string
	// ImplicitTLS connects with TLS from the first byte (smtps://). Without
	// it the connection is upgraded with STARTTLS when the relay offers it.
	ImplicitTLS bool
	// AllowInsecureAuth permits AUTH over a connection that is not
	// encrypted. It is implied for loopback hosts. URL: ?insecure=true.
	AllowInsecureAuth bool
	// TLSConfig is used for implicit TLS and STARTTLS; nil means the system
	// roots and ServerName from Addr.
	TLSConfig *tls.Config
	// LocalName is the EHLO name; empty means "localhost".
	LocalName string
	// Dial opens the TCP connection; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ParseRelay reads a relay URL: smtp://user:pass@host[:587] (STARTTLS when
// offered) or smtps://user:pass@host[:465] (implicit TLS). The query
// parameter insecure=true allows AUTH without TLS on non-loopback hosts.
func ParseRelay(rawURL string) (*Relay, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("email: parse relay url: %w", redactURLError(err))
	}
	r := &Relay{}
	var port string
	switch u.Scheme {
	case "smtp":
		port = SubmissionPort
	case "smtps":
		port, r.ImplicitTLS = SMTPSPort, true
	default:
		return nil, fmt.Errorf("email: parse relay url: scheme %q is not smtp or smtps", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return nil, errors.New("email: parse relay url: no host")
	}
	if p := u.Port(); p != "" {
		port = p
	}
	r.Addr = net.JoinHostPort(host, port)
	if u.User != nil {
		r.Username = u.User.Username()
		r.Password, _ = u.User.Password()
	}
	if v := u.Query().Get("insecure"); v != "" {
		if r.AllowInsecureAuth, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("email: parse relay url: insecure=%q: %w", v, err)
		}
	}
	return r, nil
}

// String describes the relay without its password.
func (r *Relay) String() string {
	scheme := "smtp"
	if r.ImplicitTLS {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: r.Addr}
	if r.Username != "" {
		u.User = url.User(r.Username)
	}
	return u.String()
}

// Send submits msg from the envelope sender to the envelope recipients.
// Failures wrap channels.ErrTransient (4xx replies, network errors,
// timeouts) or channels.ErrPermanent (5xx replies, a refused plaintext
// AUTH, an untrusted certificate); the text carries the relay's reply.
// ctx bounds the whole conversation (DefaultTimeout when it has no
// deadline).
func (r *Relay) Send(ctx context.Context, from string, to []string, msg []byte) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	if err := checkEnvelope(from, to); err != nil {
		return fmt.Errorf("email: relay: %w: %w", channels.ErrPermanent, err)
	}
	c, err := r.connect(ctx)
	if err != nil {
		return r.classify(ctx, "connect", err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer func() {
		stop()
		c.Close()
	}()
	if opErr := r.transact(c, from, to, msg); opErr != nil {
		return r.classify(ctx, opErr.op, opErr.err)
	}
	_ = c.Quit() // the relay has accepted the message; a failed QUIT changes nothing
	return nil
}

// opError names the SMTP step that failed.
type opError struct {
	op  string
	err error
}

func (r *Relay) connect(ctx context.Context) (*smtp.Client, error) {
	host, _, err := net.SplitHostPort(r.Addr)
	if err != nil {
		return nil, err
	}
	dial := r.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	conn, err := dial(ctx, "tcp", r.Addr)
	if err != nil {
		return nil, err
	}
	// Until Send arms its own, cancellation (and the deadline) is watched
	// here: closing the connection ends any blocked read or write.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	tlsConfig := r.tlsConfig(host)
	if r.ImplicitTLS {
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.Hello(r.localName()); err != nil {
		c.Close()
		return nil, err
	}
	if !r.ImplicitTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConfig); err != nil {
				c.Close()
				return nil, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (r *Relay) transact(c *smtp.Client, from string, to []string, msg []byte) *opError {
	if r.Username != "" {
		if err := r.auth(c); err != nil {
			return &opError{"auth", err}
		}
	}
	if err := c.Mail(from); err != nil {
		return &opError{"mail from", err}
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return &opError{"rcpt to " + rcpt, err}
		}
	}
	w, err := c.Data()
	if err != nil {
		return &opError{"data", err}
	}
	if _, err := w.Write(msg); err != nil {
		w.Close()
		return &opError{"data", err}
	}
	if err := w.Close(); err != nil {
		return &opError{"data end", err}
	}
	return nil
}

// errInsecureAuth refuses to send credentials in the clear.
var errInsecureAuth = errors.New("relay offers no TLS; refusing AUTH in plaintext (use smtps://, a relay with STARTTLS, or ?insecure=true)")

func (r *Relay) auth(c *smtp.Client) error {
	if _, tlsOn := c.TLSConnectionState(); !tlsOn && !r.AllowInsecureAuth && !r.loopback() {
		return errInsecureAuth
	}
	ok, mechs := c.Extension("AUTH")
	if !ok {
		return errors.New("relay offers no AUTH")
	}
	for _, m := range strings.Fields(strings.ToUpper(mechs)) {
		if m == "PLAIN" {
			return c.Auth(plainAuth{r.Username, r.Password})
		}
	}
	for _, m := range strings.Fields(strings.ToUpper(mechs)) {
		if m == "LOGIN" {
			return c.Auth(&loginAuth{user: r.Username, pass: r.Password})
		}
	}
	return fmt.Errorf("relay offers AUTH %s, not PLAIN or LOGIN", mechs)
}

func (r *Relay) localName() string {
	if r.LocalName != "" {
		return r.LocalName
	}
	return "localhost"
}

func (r *Relay) loopback() bool {
	host, _, _ := net.SplitHostPort(r.Addr)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (r *Relay) tlsConfig(host string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.TLSConfig != nil {
		cfg = r.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}

// classify wraps err with the failure class and the relay's reply.
func (r *Relay) classify(ctx context.Context, op string, err error) error {
	var protoErr *textproto.Error
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &protoErr):
		class := channels.ErrPermanent
		if protoErr.Code >= 400 && protoErr.Code < 500 {
			class = channels.ErrTransient
		}
		return fmt.Errorf("email: relay %s: %s replied %d %s: %w", op, r.Addr, protoErr.Code, protoErr.Msg, class)
	case ctx.Err() != nil:
		return fmt.Errorf("email: relay %s: %s: %w: %w", op, r.Addr, channels.ErrTransient, context.Cause(ctx))
	case errors.Is(err, errInsecureAuth), errors.As(err, &certErr):
		return fmt.Errorf("email: relay %s: %s: %w: %w", op, r.Addr, channels.ErrPermanent, err)
	default:
		return fmt.Errorf("email: relay %s: %s: %w: %w", op, r.Addr, channels.ErrTransient, err)
	}
}

func checkEnvelope(from string, to []string) error {
	if len(to) == 0 {
		return errors.New("no recipient")
	}
	for _, a := range append([]string{from}, to...) {
		if strings.ContainsAny(a, "\r\n<> ") {
			return fmt.Errorf("invalid envelope address %q", a)
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// redactURLError drops the URL (and any password in it) from a parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

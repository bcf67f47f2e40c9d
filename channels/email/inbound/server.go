package inbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Defaults for the zero fields of Server.
const (
	DefaultAddr           = "127.0.0.1:2525"
	DefaultDomain         = "localhost"
	DefaultMaxRecipients  = 100 // the minimum RFC 5321 asks servers to accept
	DefaultReadTimeout    = 5 * time.Minute
	DefaultWriteTimeout   = 5 * time.Minute
	DefaultBackendTimeout = 30 * time.Second
	// DefaultMaxSessions and DefaultMaxSessionsPerIP bound concurrent
	// SMTP connections, overall and from one client address.
	DefaultMaxSessions      = 100
	DefaultMaxSessionsPerIP = 10
)

// maxLineLength is the longest line go-smtp reads (its default); RFC 5321
// allows 1000 octets. A longer line in DATA refuses the message with 554
// 5.6.0.
const maxLineLength = 2000

// ErrServerClosed is returned by Serve and ListenAndServe after Close.
var ErrServerClosed = smtp.ErrServerClosed

// Backend is the gateway side of the SMTP listener.
type Backend interface {
	// Accept is called at RCPT TO time for each recipient address. It
	// returns nil for a known inbox, an error wrapping ErrUnknownRecipient
	// for an unknown one (550 5.1.1), ErrPermanent for a refused one
	// (550 5.7.1); any other error answers 451 4.3.0 (try again later).
	Accept(ctx context.Context, rcpt string) error
	// Deliver is called after DATA with the accepted recipients and the
	// fully parsed message (Message.Digest identifies the raw bytes, for
	// messages without a Message-ID). It returns nil once the
	// message is stored (250), an error wrapping ErrPermanent when it must
	// bounce (554 5.3.0); any other error answers 451 4.3.0 and the sending
	// MTA retries, so Deliver must be idempotent on Message.MessageID.
	Deliver(ctx context.Context, rcpts []string, msg *Message) error
}

// Server is the inbound SMTP listener (the MX of the mail domain). Set the
// fields, then call ListenAndServe or Serve; Close stops it. Fields must not
// change after serving starts.
type Server struct {
	// Addr is the TCP address ListenAndServe listens on; DefaultAddr when
	// empty.
	Addr string
	// Domain is the host name in the greeting and EHLO reply;
	// DefaultDomain when empty.
	Domain string
	// Backend accepts recipients and stores messages. Required.
	Backend Backend
	// MaxMessageBytes caps a message; larger ones are refused with 552
	// 5.3.4, announced through the SIZE extension. DefaultMaxBytes when 0.
	// A message is held in memory up to this size while it is parsed.
	MaxMessageBytes int64
	// MaxAttachmentBytes caps one decoded attachment (552 5.3.4 beyond);
	// MaxMessageBytes when 0.
	MaxAttachmentBytes int64
	// MaxParts caps the MIME parts of a message (552 5.3.4 beyond) and
	// MaxDepth how deep its multiparts nest (554 5.6.0 beyond), both
	// checked before the message is parsed; DefaultMaxParts and
	// DefaultMaxDepth when 0.
	MaxParts int
	MaxDepth int
	// MaxBase64Errors caps the bytes outside the base64 alphabet in the
	// base64 parts of a message (554 5.6.0 beyond; fewer are dropped with
	// a warning); DefaultMaxBase64Errors when 0, none when negative.
	MaxBase64Errors int
	// MaxHeaderBytes caps each header section of a message (its own and
	// each MIME part's) and MaxHeaderFieldBytes one header field, with its
	// continuation lines (552 5.3.4 beyond), checked before any header
	// parser or sender check reads them; DefaultMaxHeaderBytes and
	// DefaultMaxHeaderFieldBytes when 0. The DKIM check is bounded as well
	// and stops reading after ParseTimeout.
	MaxHeaderBytes      int
	MaxHeaderFieldBytes int
	// ParseTimeout bounds the parsing of one message (451 4.3.0 beyond,
	// logged); DefaultParseTimeout when 0.
	ParseTimeout time.Duration
	// MaxSessions caps concurrent SMTP connections and MaxSessionsPerIP
	// those from one client IP address; a connection over either is
	// answered 421 4.7.0 and closed before the greeting.
	// DefaultMaxSessions and DefaultMaxSessionsPerIP when 0; a negative
	// value sets no limit.
	MaxSessions      int
	MaxSessionsPerIP int
	// MaxRecipients caps RCPT TO per message (452 4.5.3 beyond);
	// DefaultMaxRecipients when 0.
	MaxRecipients int
	// ReadTimeout and WriteTimeout bound each network read and write;
	// DefaultReadTimeout and DefaultWriteTimeout when 0.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// BackendTimeout bounds each Accept and Deliver call and the DNS
	// lookups of the sender checks; DefaultBackendTimeout when 0.
	BackendTimeout time.Duration
	// Resolver answers the SPF, DKIM and DMARC lookups of inbound mail
	// (a *net.Resolver in production). When nil no sender check runs and
	// Message.Auth says so; SPF runs only when it also has the lookups of
	// spf.DNSResolver (see Resolver).
	Resolver Resolver
	// SpoolDir holds the temporary files of messages larger than 1 MB
	// while they are received; os.TempDir() when empty.
	SpoolDir string
	// TLSConfig, when set, enables STARTTLS.
	TLSConfig *tls.Config
	// Logger receives a line for each message refused or failed after
	// DATA, with its Message-ID and the reason; slog.Default() when nil.
	Logger *slog.Logger
	// Observer, if not nil, is told about sessions and refusals
	// (metrics).
	Observer Observer

	mu     sync.Mutex
	srv    *smtp.Server
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

// Observer is told about the listener's sessions and refusals, for
// metrics. The reasons are few: session_limit (421 at accept, over
// MaxSessions or MaxSessionsPerIP), recipient (RCPT refused: unknown or
// refused address), read (DATA could not be read: too large, a line too
// long, a broken connection), parse (the message broke a limit or did not
// parse), gateway (the backend refused it, 554) and temporary (the
// backend failed, 451).
type Observer interface {
	SMTPSession()
	SMTPRefused(reason string)
}

func (s *Server) refused(reason string) {
	if s != nil && s.Observer != nil {
		s.Observer.SMTPRefused(reason)
	}
}

// ListenAndServe listens on Addr and serves until Close.
func (s *Server) ListenAndServe() error {
	addr := s.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("email: listen %s: %w", addr, err)
	}
	return s.Serve(l)
}

// Serve accepts SMTP connections on l until Close; it closes l when it
// returns. After Close it returns ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	srv, err := s.server()
	if err != nil {
		_ = l.Close()
		return err
	}
	l = &limitListener{Listener: l, max: limit(s.MaxSessions, DefaultMaxSessions),
		perIP: limit(s.MaxSessionsPerIP, DefaultMaxSessionsPerIP), byIP: map[string]int{}, log: s.log(), srv: s}
	if err := srv.Serve(l); err != nil {
		return fmt.Errorf("email: serve: %w", err)
	}
	return ErrServerClosed // go-smtp returns nil once closed
}

// Close stops the listeners and closes every open connection; messages not
// yet delivered are lost to the sender's retry, never half stored.
func (s *Server) Close() error {
	srv := s.stop(true)
	if srv == nil {
		return nil
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("email: close: %w", err)
	}
	return nil
}

// Shutdown stops the listeners and waits for open sessions to end, or for
// ctx to be done.
func (s *Server) Shutdown(ctx context.Context) error {
	srv := s.stop(false)
	if srv == nil {
		return nil
	}
	defer s.cancel() // only after the sessions ended or ctx is done
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("email: shutdown: %w", err)
	}
	return nil
}

// stop marks the server closed and returns the go-smtp server to stop, nil
// when there is none or it was stopped already. With cancel, backend calls
// in flight see their context cancelled.
func (s *Server) stop(cancel bool) *smtp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if cancel && s.cancel != nil {
		s.cancel()
	}
	return s.srv
}

// server builds the go-smtp server on first use.
func (s *Server) server() (*smtp.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServerClosed
	}
	if s.Backend == nil {
		return nil, errors.New("email: inbound server: no backend")
	}
	if s.srv != nil {
		return s.srv, nil
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = or(s.Domain, DefaultDomain)
	srv.MaxMessageBytes = s.maxBytes()
	srv.MaxLineLength = maxLineLength
	srv.MaxRecipients = s.MaxRecipients
	if srv.MaxRecipients <= 0 {
		srv.MaxRecipients = DefaultMaxRecipients
	}
	srv.ReadTimeout = orDur(s.ReadTimeout, DefaultReadTimeout)
	srv.WriteTimeout = orDur(s.WriteTimeout, DefaultWriteTimeout)
	srv.TLSConfig = s.TLSConfig
	s.srv = srv
	return srv, nil
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	if s.Observer != nil {
		s.Observer.SMTPSession()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sess := &session{srv: s, conn: c, ctx: ctx, cancel: cancel}
	if addr := c.Conn().RemoteAddr(); addr != nil {
		sess.remote = addr.String()
		if tcp, ok := addr.(*net.TCPAddr); ok {
			sess.remoteIP = tcp.IP
		}
	}
	return sess, nil
}

func (s *Server) maxBytes() int64 {
	if s.MaxMessageBytes > 0 {
		return s.MaxMessageBytes
	}
	return DefaultMaxBytes
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDur(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

func orInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// limit is v, def when v is 0, or no limit (0) when v is negative.
func limit(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// log is the server's logger.
func (s *Server) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

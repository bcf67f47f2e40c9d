// Package smtptest runs real SMTP servers for tests: a relay that captures
// what it accepts (the far side of comm's outbound mail).
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Relay is a real go-smtp server on 127.0.0.1 that captures what it
// accepts. Recipients steer its answers at RCPT: busy@ gets 451, down@ 421,
// nobody@ 550, unauthorized@ 530, and slow@ no answer until the client
// gives up (at most a minute).
type Relay struct {
	// Addr is the relay's host:port.
	Addr string
	opts RelayOptions

	done chan struct{}
	mu   sync.Mutex
	msgs []Captured
}

// Captured is one message the relay accepted.
type Captured struct {
	From string
	To   []string
	Data []byte
	TLS  bool
	User string
}

// RelayOptions configure a Relay.
type RelayOptions struct {
	// TLS enables STARTTLS (or implicit TLS with Implicit) with this config.
	TLS      *tls.Config
	Implicit bool
	// Users, when set, makes AUTH PLAIN required.
	Users map[string]string
}

// StartRelay starts a relay, stopped by t.Cleanup.
func StartRelay(t testing.TB, opts RelayOptions) *Relay {
	t.Helper()
	fr := &Relay{opts: opts, done: make(chan struct{})}
	s := smtp.NewServer(fr)
	s.Domain = "relay.test"
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.MaxMessageBytes = 1 << 20
	s.ErrorLog = testLogger{t}
	var l net.Listener
	var err error
	switch {
	case opts.Implicit:
		l, err = tls.Listen("tcp", "127.0.0.1:0", opts.TLS)
	default:
		s.TLSConfig = opts.TLS
		s.AllowInsecureAuth = opts.TLS == nil
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	fr.Addr = l.Addr().String()
	go s.Serve(l)
	t.Cleanup(func() { close(fr.done); s.Close() })
	return fr
}

// Messages returns the accepted messages, in order.
func (fr *Relay) Messages() []Captured {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return append([]Captured(nil), fr.msgs...)
}

// NewSession implements smtp.Backend.
func (fr *Relay) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &relaySession{relay: fr, conn: c}, nil
}

type relaySession struct {
	relay *Relay
	conn  *smtp.Conn
	user  string
	cur   Captured
}

func (s *relaySession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *relaySession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := s.relay.opts.Users[user]; ok && want == pass {
			s.user = user
			return nil
		}
		return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
	}), nil
}

func (s *relaySession) Mail(from string, _ *smtp.MailOptions) error {
	if s.relay.opts.Users != nil && s.user == "" {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.cur = Captured{From: from, TLS: isTLS, User: s.user}
	return nil
}

func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	switch {
	case strings.HasPrefix(to, "busy@"):
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "mailbox busy, try later"}
	case strings.HasPrefix(to, "down@"):
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "service not available"}
	case strings.HasPrefix(to, "nobody@"):
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	case strings.HasPrefix(to, "unauthorized@"):
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	case strings.HasPrefix(to, "slow@"):
		select {
		case <-s.relay.done:
		case <-time.After(time.Minute):
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "timed out"}
	}
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *relaySession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.Data = b
	s.relay.mu.Lock()
	s.relay.msgs = append(s.relay.msgs, s.cur)
	s.relay.mu.Unlock()
	return nil
}

func (s *relaySession) Reset()        { s.cur = Captured{} }
func (s *relaySession) Logout() error { return nil }

type testLogger struct{ t testing.TB }

func (l testLogger) Printf(format string, v ...any) { l.t.Logf(format, v...) }
func (l testLogger) Println(v ...any)               { l.t.Log(v...) }

// SelfSigned returns a server config with a fresh self-signed certificate
// for 127.0.0.1 and relay.example.test, and a client config trusting it.
func SelfSigned(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "relay.example.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"relay.example.test", "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return server, &tls.Config{RootCAs: pool}
}

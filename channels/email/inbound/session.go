package inbound

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/emersion/go-smtp"
)

// session is one SMTP connection; go-smtp calls it from one goroutine.
type session struct {
	srv      *Server
	conn     *smtp.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	remote   string
	remoteIP net.IP // nil when the connection is not over IP

	from  string
	helo  string // the HELO/EHLO name in effect at MAIL FROM
	size  int64  // SIZE announced at MAIL FROM, if any
	rcpts []string
}

var _ smtp.Session = (*session)(nil)

// SMTP replies.
var (
	replyUnknownRcpt = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such mailbox here"}
	replyRefusedRcpt = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Recipient refused"}
	replyTransient   = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure, try again later"}
	replyPermanent   = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 3, 0}, Message: "Message refused"}
)

func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	s.from = from
	s.helo = s.conn.Hostname()
	s.size = 0
	if opts != nil {
		s.size = opts.Size
	}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ctx, cancel := context.WithTimeout(s.ctx, orDur(s.srv.BackendTimeout, DefaultBackendTimeout))
	defer cancel()
	switch err := s.srv.Backend.Accept(ctx, to); {
	case err == nil:
		s.rcpts = append(s.rcpts, to)
		return nil
	case errors.Is(err, ErrUnknownRecipient):
		return replyUnknownRcpt
	case errors.Is(err, ErrPermanent):
		return replyRefusedRcpt
	default:
		return replyTransient
	}
}

// Data reads the message (bounded by MaxMessageBytes through go-smtp),
// parses it, checks the sender and hands it to the backend. Any failure
// before Deliver answers with an error and stores nothing.
func (s *session) Data(r io.Reader) error {
	limit := s.srv.maxBytes()
	sp := newSpool(s.srv.SpoolDir)
	defer sp.close()
	if _, err := io.Copy(sp, r); err != nil {
		var smtpErr *smtp.SMTPError
		if errors.As(err, &smtpErr) {
			return smtpErr // 552 from the size limit
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Error reading message"}
	}

	p := Parser{MaxBytes: limit, MaxAttachmentBytes: s.srv.MaxAttachmentBytes}
	msg, err := p.Parse(sp.reader())
	switch {
	case errors.Is(err, ErrTooLarge):
		return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: oneLine(err.Error())}
	case err != nil:
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: oneLine(err.Error())}
	}
	msg.MailFrom = s.from
	msg.RemoteAddr = s.remote
	msg.Digest = sp.digest()

	ctx, cancel := context.WithTimeout(s.ctx, orDur(s.srv.BackendTimeout, DefaultBackendTimeout))
	defer cancel()
	env := Envelope{ClientIP: s.remoteIP, Helo: s.helo, MailFrom: s.from}
	msg.Auth = Authenticator{Resolver: s.srv.Resolver}.Check(ctx, sp.reader(), msg.From, env)

	rcpts := append([]string(nil), s.rcpts...)
	switch err := s.srv.Backend.Deliver(ctx, rcpts, msg); {
	case err == nil:
		return nil
	case errors.Is(err, ErrPermanent):
		return replyPermanent
	default:
		return replyTransient
	}
}

func (s *session) Reset() {
	s.from, s.helo, s.size, s.rcpts = "", "", 0, nil
}

func (s *session) Logout() error {
	s.cancel()
	return nil
}

// oneLine keeps an error text fit for a single SMTP reply line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 400 {
		s = s[:400]
	}
	return s
}

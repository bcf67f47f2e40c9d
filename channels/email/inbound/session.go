package inbound

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/textproto"
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
		s.srv.refused("recipient")
		return replyUnknownRcpt
	case errors.Is(err, ErrPermanent):
		s.srv.refused("recipient")
		return replyRefusedRcpt
	default:
		s.srv.refused("temporary")
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
		reply := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Error reading message"}
		switch {
		case errors.As(err, &smtpErr):
			reply = smtpErr // 552 from the size limit
		case errors.Is(err, smtp.ErrTooLongLine):
			// The same message would fail again: a permanent refusal,
			// not the 451 it used to get.
			reply = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
				Message: fmt.Sprintf("Message refused: a line is longer than %d bytes (RFC 5321 allows 1000)", maxLineLength)}
		}
		s.log().Info("smtp: message refused while reading it", "code", reply.Code, "reason", err.Error(),
			"message_id", headerMessageID(sp.reader()), "remote", s.remote, "mail_from", s.from)
		s.srv.refused("read")
		return reply
	}

	p := Parser{MaxBytes: limit, MaxAttachmentBytes: s.srv.MaxAttachmentBytes,
		MaxParts: s.srv.MaxParts, MaxDepth: s.srv.MaxDepth, MaxBase64Errors: s.srv.MaxBase64Errors, Timeout: s.srv.ParseTimeout,
		MaxHeaderBytes: s.srv.MaxHeaderBytes, MaxHeaderFieldBytes: s.srv.MaxHeaderFieldBytes}
	msg, err := p.Parse(sp.reader())
	if err != nil {
		reply := parseReply(err)
		level := slog.LevelInfo
		if reply.Code < 500 {
			level = slog.LevelWarn
		}
		s.log().Log(s.ctx, level, "smtp: message refused", "code", reply.Code, "reason", err.Error(),
			"message_id", headerMessageID(sp.reader()), "digest", sp.digest(), "remote", s.remote, "mail_from", s.from)
		s.srv.refused("parse")
		return reply
	}
	msg.MailFrom, _ = cleanText(s.from)
	msg.RemoteAddr = s.remote
	msg.Digest = sp.digest()

	ctx, cancel := context.WithTimeout(s.ctx, orDur(s.srv.BackendTimeout, DefaultBackendTimeout))
	defer cancel()
	env := Envelope{ClientIP: s.remoteIP, Helo: s.helo, MailFrom: s.from}
	msg.Auth = Authenticator{Resolver: s.srv.Resolver, Timeout: s.srv.ParseTimeout}.Check(ctx, sp.reader(), msg.From, env)

	rcpts := append([]string(nil), s.rcpts...)
	err = s.srv.Backend.Deliver(ctx, rcpts, msg)
	if err == nil {
		if len(msg.Warnings) > 0 {
			s.log().Info("smtp: stored a message with problems", "message_id", msg.MessageID, "digest", msg.Digest,
				"remote", s.remote, "warnings", msg.Warnings)
		}
		return nil
	}
	if errors.Is(err, ErrPermanent) {
		s.log().Warn("smtp: message refused by the gateway (554)", "message_id", msg.MessageID, "digest", msg.Digest,
			"remote", s.remote, "err", err)
		s.srv.refused("gateway")
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 3, 0}, Message: "Message refused: " + oneLine(err.Error())}
	}
	s.log().Error("smtp: storing a message failed (451, the sender retries)", "message_id", msg.MessageID, "digest", msg.Digest,
		"remote", s.remote, "err", err)
	s.srv.refused("temporary")
	return replyTransient
}

// log is the server's logger.
func (s *session) log() *slog.Logger { return s.srv.log() }

func (s *session) Reset() {
	s.from, s.helo, s.size, s.rcpts = "", "", 0, nil
}

func (s *session) Logout() error {
	s.cancel()
	return nil
}

// parseReply is the SMTP reply to a message Parse refused.
func parseReply(err error) *smtp.SMTPError {
	switch {
	case errors.Is(err, ErrTooManyParts), errors.Is(err, ErrTooLarge), errors.Is(err, ErrHeaderTooLarge):
		return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: oneLine(err.Error())}
	case errors.Is(err, ErrParseTimeout):
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: oneLine(err.Error()) + "; try again later"}
	default: // ErrMalformed, ErrTooDeep
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: oneLine(err.Error())}
	}
}

// headerMessageID is the Message-ID in the header section of a raw
// message, for the log of a message that could not be parsed; it reads at
// most 64 KB.
func headerMessageID(r io.Reader) string {
	tp := textproto.NewReader(bufio.NewReader(io.LimitReader(r, 64<<10)))
	h, _ := tp.ReadMIMEHeader()
	id := strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")
	id, _ = cleanText(id)
	if len(id) > 200 {
		id = id[:200]
	}
	return id
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

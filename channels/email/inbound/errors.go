package inbound

import (
	"errors"
	"fmt"

	"github.com/comm-gateway/comm/channels"
)

// Parse errors.
var (
	// ErrMalformed marks a message that cannot be parsed: broken header
	// section, missing or unparseable From, undecodable MIME structure.
	ErrMalformed = errors.New("email: malformed message")
	// ErrTooLarge marks a message, or an attachment of it, above a size
	// limit.
	ErrTooLarge = errors.New("email: message too large")
)

// Backend errors. A Backend wraps them so the server answers with the
// matching SMTP reply.
var (
	// ErrUnknownRecipient is returned by Backend.Accept for an address that
	// is no inbox; the server answers 550 5.1.1.
	ErrUnknownRecipient = errors.New("email: unknown recipient")
	// ErrTransient is a failure worth retrying (the database is down); the
	// server answers 451 4.3.0 and the sending MTA retries later. It
	// matches channels.ErrTransient too.
	ErrTransient = fmt.Errorf("email: %w", channels.ErrTransient)
	// ErrPermanent is a failure a retry will not fix; the server answers
	// 554 5.3.0 and the sending MTA bounces the message. It matches
	// channels.ErrPermanent too.
	ErrPermanent = fmt.Errorf("email: %w", channels.ErrPermanent)
)

// Limits on the MIME structure and parse time, checked before and while a
// message is parsed.
var (
	// ErrTooManyParts marks a message with more MIME parts (or declared
	// boundaries) than the limit; the server answers 552 5.3.4.
	ErrTooManyParts = errors.New("email: too many MIME parts")
	// ErrTooDeep marks a message whose multiparts nest deeper than the
	// limit; the server answers 554 5.6.0.
	ErrTooDeep = errors.New("email: MIME parts nested too deep")
	// ErrParseTimeout marks a message whose parsing took longer than the
	// limit; the server answers 451 4.3.0 and logs it.
	ErrParseTimeout = errors.New("email: parsing took too long")
	// ErrHeaderTooLarge marks a message whose header section, or a MIME
	// part's, or one header field in them, is above its limit; checked
	// before any header parser or sender check reads it. The server
	// answers 552 5.3.4.
	ErrHeaderTooLarge = errors.New("email: header too large")
)

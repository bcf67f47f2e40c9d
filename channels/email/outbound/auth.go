package outbound

import (
	"errors"
	"net/smtp"
)

// plainAuth is SASL PLAIN (RFC 4616). Whether the connection is safe for it
// is decided by Relay.auth, not here.
type plainAuth struct{ user, pass string }

func (a plainAuth) Start(*smtp.ServerInfo) (string, []byte, error) {
	return "PLAIN", []byte("\x00" + a.user + "\x00" + a.pass), nil
}

func (a plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("unexpected AUTH PLAIN challenge")
	}
	return nil, nil
}

// loginAuth is the non-standard but common AUTH LOGIN: username, then
// password, each answering one challenge.
type loginAuth struct {
	user, pass string
	step       int
}

func (a *loginAuth) Start(*smtp.ServerInfo) (string, []byte, error) {
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(_ []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	switch a.step {
	case 1:
		return []byte(a.user), nil
	case 2:
		return []byte(a.pass), nil
	default:
		return nil, errors.New("unexpected AUTH LOGIN challenge")
	}
}

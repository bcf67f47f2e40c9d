package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/channels"
)

// SocketAdapter is a bring-your-own-app connection with an app-level token
// (Config.AppToken): Slack delivers its events over a Socket Mode
// websocket (docs.slack.dev/apis/events-api/using-socket-mode) that Poll
// keeps open, so the gateway needs no public URL. It sends, shows typing
// and provisions like *Adapter.
type SocketAdapter struct {
	a *Adapter
}

var (
	_ channels.Sender      = (*SocketAdapter)(nil)
	_ channels.Typer       = (*SocketAdapter)(nil)
	_ channels.Provisioner = (*SocketAdapter)(nil)
	_ channels.Poller      = (*SocketAdapter)(nil)
	_ channels.Closer      = (*SocketAdapter)(nil)
)

// Send is Adapter.Send.
func (s *SocketAdapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	return s.a.Send(ctx, msg)
}

// Typing is Adapter.Typing.
func (s *SocketAdapter) Typing(ctx context.Context, t channels.Typing) error {
	return s.a.Typing(ctx, t)
}

// Provision checks the bot token (auth.test) and the app-level token
// (apps.connections.open; the URL it gives is not used).
func (s *SocketAdapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	p, err := s.a.Provision(ctx)
	if err != nil {
		return p, err
	}
	if _, err := s.a.openSocket(ctx); err != nil {
		if errors.Is(err, channels.ErrPermanent) {
			return channels.Provisioned{}, &channels.ConfigError{Field: "app_token", Msg: "Slack refused the app-level token: " + err.Error()}
		}
		return channels.Provisioned{}, err
	}
	return p, nil
}

// Close ends the calls and the session in flight.
func (s *SocketAdapter) Close() error { return s.a.Close() }

// maxReconnects bounds the reconnections one Poll makes when Slack asks
// for them ("disconnect"); then Poll returns and the gateway starts a new
// session with its backoff.
const maxReconnects = 100

// Poll keeps a Socket Mode connection: it opens one (apps.connections.open,
// then the websocket), emits the messages of each events_api envelope and
// acknowledges the envelope ({"envelope_id":…}) once emit accepted them
// all, and reconnects when Slack sends "disconnect". An emit that fails
// ends the session with a transient error, unacknowledged: Slack delivers
// the envelope again. It returns nil when ctx ends.
func (s *SocketAdapter) Poll(ctx context.Context, emit channels.Emit) error {
	for range maxReconnects {
		again, err := s.session(ctx, emit)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !again {
			break
		}
	}
	return channels.Transient(0, "slack: socket mode: the connection ended")
}

// openSocket calls apps.connections.open and returns the websocket URL.
func (a *Adapter) openSocket(ctx context.Context) (string, error) {
	var r struct {
		URL string `json:"url"`
	}
	if err := a.call(ctx, "open socket", "apps.connections.open", a.cfg.AppToken, url.Values{}, &r); err != nil {
		return "", err
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return "", channels.Transient(0, "slack: open socket: apps.connections.open gave no websocket URL")
	}
	return r.URL, nil
}

// socketMessage is a Socket Mode message.
type socketMessage struct {
	Type       string          `json:"type"`
	EnvelopeID string          `json:"envelope_id"`
	Reason     string          `json:"reason"`
	Payload    json.RawMessage `json:"payload"`
}

// session runs one websocket connection; again says Slack asked to
// reconnect.
func (s *SocketAdapter) session(ctx context.Context, emit channels.Emit) (again bool, err error) {
	a := s.a
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.closed, cancel)
	defer stop()
	wsURL, err := a.openSocket(ctx)
	if err != nil {
		return false, err
	}
	dialCtx, dialCancel := context.WithTimeout(ctx, a.opts.CallTimeout)
	c, resp, err := websocket.DefaultDialer.DialContext(dialCtx, wsURL, nil)
	dialCancel()
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return false, channels.Transient(0, "slack: socket mode: connect: %v", err)
	}
	c.SetReadLimit(MaxEvent + 64<<10)
	var once sync.Once
	closeConn := func() { once.Do(func() { _ = c.Close() }) }
	defer closeConn()
	unwatch := context.AfterFunc(ctx, closeConn)
	defer unwatch()
	for {
		var m socketMessage
		_, data, err := c.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, channels.Transient(0, "slack: socket mode: %v", err)
		}
		if json.Unmarshal(data, &m) != nil {
			continue // not a message of the protocol
		}
		switch m.Type {
		case "hello":
			continue
		case "disconnect":
			a.opts.Logger.Info("slack: socket mode: Slack asked to reconnect", "connection", a.conn.ID, "reason", sanitize(m.Reason))
			return true, nil
		}
		if m.EnvelopeID == "" {
			continue
		}
		var ins []channels.Inbound
		var perr error
		if m.Type == "events_api" {
			var env envelope
			if env, perr = parseEnvelope(m.Payload); perr == nil {
				ins, perr = a.events(ctx, env)
			}
		}
		if errors.Is(perr, channels.ErrTransient) {
			return false, perr // a file download failed: Slack delivers it again
		}
		for _, in := range ins {
			if err := emit(in); err != nil {
				return false, channels.Transient(0, "slack: socket mode: storing a message failed: %v", err)
			}
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := c.WriteJSON(map[string]string{"envelope_id": m.EnvelopeID}); err != nil {
			return false, channels.Transient(0, "slack: socket mode: acknowledge: %v", err)
		}
		if errors.Is(perr, channels.ErrRevoked) {
			return false, perr
		}
		if perr != nil {
			a.opts.Logger.Info("slack: socket mode: an envelope was dropped", "connection", a.conn.ID, "error", perr)
		}
	}
}

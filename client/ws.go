package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The GraphQL-over-websocket protocol Listen speaks.
const (
	wsProtocol     = "graphql-transport-ws"
	wsSubscription = `subscription($after: Int, $type: String) { events(afterSeq: $after, type: $type) { seq type data } }`
	wsWriteTimeout = 10 * time.Second
)

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// gqlError is an error of a GraphQL result.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code        string `json:"code"`
		Param       string `json:"param"`
		EarliestSeq int64  `json:"earliest_seq"`
	} `json:"extensions"`
}

// socketURL is the websocket address of the gateway's /graphql.
func socketURL(base string) string {
	switch {
	case strings.HasPrefix(base, "https://"):
		return "wss://" + strings.TrimPrefix(base, "https://") + "/graphql"
	case strings.HasPrefix(base, "http://"):
		return "ws://" + strings.TrimPrefix(base, "http://") + "/graphql"
	}
	return base + "/graphql"
}

// followSocket subscribes to the events after the accepted cursor and
// hands them to the dispatcher until the socket fails, ctx ends or the
// listener stops. It returns how long the subscription was up.
func (l *listener) followSocket(ctx context.Context) (time.Duration, error) {
	d := websocket.Dialer{
		Subprotocols:     []string{wsProtocol},
		HandshakeTimeout: 10 * time.Second,
		Proxy:            http.ProxyFromEnvironment,
	}
	if tr, ok := l.c.hc.Transport.(*http.Transport); ok {
		d.Proxy = tr.Proxy
		d.NetDialContext = tr.DialContext
		if tr.TLSClientConfig != nil {
			d.TLSClientConfig = tr.TLSClientConfig.Clone()
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+l.c.key)
	h.Set("User-Agent", userAgent)
	ws, resp, err := d.DialContext(ctx, socketURL(l.c.baseURL), h)
	if err != nil {
		if resp != nil {
			return 0, fmt.Errorf("dial: %w (status %d)", err, resp.StatusCode)
		}
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer ws.Close()
	if ws.Subprotocol() != wsProtocol {
		return 0, fmt.Errorf("the gateway did not accept subprotocol %s", wsProtocol)
	}
	// Closing the socket unblocks the reader when ctx ends or the
	// listener stops.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-l.stopCh:
		case <-done:
		}
		ws.Close()
	}()

	var wmu sync.Mutex
	write := func(m wsMessage) error {
		wmu.Lock()
		defer wmu.Unlock()
		ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		return ws.WriteJSON(m)
	}
	idle := 3 * l.cfg.socketPing
	ws.SetPingHandler(func(data string) error {
		ws.SetReadDeadline(time.Now().Add(idle))
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(wsWriteTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})

	initPayload, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + l.c.key})
	if err := write(wsMessage{Type: "connection_init", Payload: initPayload}); err != nil {
		return 0, fmt.Errorf("connection_init: %w", err)
	}
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		m, err := readMessage(ws)
		if err != nil {
			return 0, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		if m.Type == "connection_ack" {
			break
		}
		if m.Type == "ping" {
			write(wsMessage{Type: "pong", Payload: m.Payload})
		}
	}

	l.mu.Lock()
	after := l.accepted
	l.mu.Unlock()
	vars := map[string]any{"after": after, "type": nil}
	if l.typeFilter != "" {
		vars["type"] = l.typeFilter
	}
	sub, _ := json.Marshal(map[string]any{"query": wsSubscription, "variables": vars})
	if err := write(wsMessage{ID: "events", Type: "subscribe", Payload: sub}); err != nil {
		return 0, fmt.Errorf("subscribe: %w", err)
	}
	began := time.Now()
	up := func() time.Duration { return time.Since(began) }

	go func() { // keep-alive: the gateway answers each ping with a pong
		t := time.NewTicker(l.cfg.socketPing)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if write(wsMessage{Type: "ping"}) != nil {
					return
				}
			}
		}
	}()

	for {
		ws.SetReadDeadline(time.Now().Add(idle))
		m, err := readMessage(ws)
		if err != nil {
			return up(), err
		}
		switch m.Type {
		case "next":
			var p struct {
				Data struct {
					Events *Event `json:"events"`
				} `json:"data"`
				Errors []gqlError `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return up(), fmt.Errorf("malformed event message: %w", err)
			}
			if len(p.Errors) > 0 {
				return up(), errorOfGraphQL(p.Errors)
			}
			if p.Data.Events == nil {
				return up(), errors.New("event message without an event")
			}
			if _, ok := l.accept(*p.Data.Events); !ok {
				return up(), nil
			}
		case "error":
			var errs []gqlError
			json.Unmarshal(m.Payload, &errs)
			return up(), errorOfGraphQL(errs)
		case "complete":
			return up(), errors.New("the gateway completed the subscription")
		case "ping":
			if err := write(wsMessage{Type: "pong", Payload: m.Payload}); err != nil {
				return up(), err
			}
		}
	}
}

// readMessage reads one protocol message; a close with an authentication
// code becomes ErrUnauthenticated.
func readMessage(ws *websocket.Conn) (wsMessage, error) {
	var m wsMessage
	_, data, err := ws.ReadMessage()
	if err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) && (ce.Code == 4401 || ce.Code == 4403) {
			return m, &Error{Status: http.StatusUnauthorized, Code: ErrUnauthenticated.Code, Message: ce.Text}
		}
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("malformed protocol message: %w", err)
	}
	return m, nil
}

// errorOfGraphQL turns a subscription's GraphQL errors into an *Error with
// the REST code and the status that goes with it.
func errorOfGraphQL(errs []gqlError) error {
	if len(errs) == 0 {
		return errors.New("subscription failed")
	}
	e := errs[0]
	code := e.Extensions.Code
	if code == "" {
		code = ErrInternal.Code
	}
	return &Error{Status: statusOfCode(code), Code: code, Message: e.Message, Param: e.Extensions.Param, EarliestSeq: e.Extensions.EarliestSeq}
}

// statusOfCode is the HTTP status that goes with an error code.
func statusOfCode(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

var codeStatus = map[string]int{
	ErrInvalid.Code:              http.StatusBadRequest,
	ErrMalformedJSON.Code:        http.StatusBadRequest,
	ErrUnauthenticated.Code:      http.StatusUnauthorized,
	ErrPaymentRequired.Code:      http.StatusPaymentRequired,
	ErrForbidden.Code:            http.StatusForbidden,
	ErrNotFound.Code:             http.StatusNotFound,
	ErrRouteNotFound.Code:        http.StatusNotFound,
	ErrMethodNotAllowed.Code:     http.StatusMethodNotAllowed,
	ErrConflict.Code:             http.StatusConflict,
	ErrCursorExpired.Code:        http.StatusGone,
	ErrPayloadTooLarge.Code:      http.StatusRequestEntityTooLarge,
	ErrUnsupportedMediaType.Code: http.StatusUnsupportedMediaType,
	ErrRateLimited.Code:          http.StatusTooManyRequests,
	ErrInternal.Code:             http.StatusInternalServerError,
	ErrNotImplemented.Code:       http.StatusNotImplemented,
	ErrUnavailable.Code:          http.StatusServiceUnavailable,
}

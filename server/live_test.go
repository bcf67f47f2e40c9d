package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsClient is a minimal graphql-transport-ws client.
type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
}

type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialWS opens a websocket to /graphql. readBuffer, if positive, shrinks
// the client's TCP receive buffer (a client that does not read then holds
// back little in its kernel).
func (g *gateway) dialWS(t *testing.T, readBuffer int) (*wsClient, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	if readBuffer > 0 {
		d.NetDial = func(network, addr string) (net.Conn, error) {
			c, err := net.Dial(network, addr)
			if err == nil {
				c.(*net.TCPConn).SetReadBuffer(readBuffer)
			}
			return c, err
		}
	}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(g.URL, "http")+"/graphql", nil)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.Close() })
	return &wsClient{t: t, ws: ws}, resp, nil
}

func (c *wsClient) write(m wsMsg) error {
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteJSON(m)
}

// next reads the next message other than pings and pongs.
func (c *wsClient) next(timeout time.Duration) (wsMsg, error) {
	for {
		c.ws.SetReadDeadline(time.Now().Add(timeout))
		var m wsMsg
		if err := c.ws.ReadJSON(&m); err != nil {
			return m, err
		}
		if m.Type != "ping" && m.Type != "pong" {
			return m, nil
		}
	}
}

func (c *wsClient) init(key string) {
	c.t.Helper()
	if err := c.write(wsMsg{Type: "connection_init", Payload: json.RawMessage(`{"apiKey":"` + key + `"}`)}); err != nil {
		c.t.Fatal(err)
	}
	if m, err := c.next(10 * time.Second); err != nil || m.Type != "connection_ack" {
		c.t.Fatalf("connection_init: %v %+v", err, m)
	}
}

func (c *wsClient) subscribe(id, query string, vars map[string]any) error {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return c.write(wsMsg{ID: id, Type: "subscribe", Payload: b})
}

// events reads subscription id's events until the one with seq last; the
// largest message's size is returned too.
func (c *wsClient) events(id string, last int64) ([]event, int, error) {
	var (
		out     []event
		largest int
	)
	for len(out) == 0 || out[len(out)-1].Seq < last {
		m, err := c.next(20 * time.Second)
		if err != nil {
			return out, largest, err
		}
		if m.ID != id {
			continue
		}
		if m.Type != "next" {
			return out, largest, fmt.Errorf("unexpected %s %s", m.Type, m.Payload)
		}
		largest = max(largest, len(m.Payload))
		var p struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return out, largest, err
		}
		for _, raw := range p.Data {
			if raw[0] == '[' {
				var evs []event
				if err := json.Unmarshal(raw, &evs); err != nil {
					return out, largest, err
				}
				out = append(out, evs...)
			} else {
				var e event
				if err := json.Unmarshal(raw, &e); err != nil {
					return out, largest, err
				}
				out = append(out, e)
			}
		}
	}
	return out, largest, nil
}

// wantClosed reads until the socket closes and wants the close code and a
// reason containing reason; the data messages read before are returned.
func (c *wsClient) wantClosed(code int, reason string) []wsMsg {
	c.t.Helper()
	var got []wsMsg
	for {
		m, err := c.next(20 * time.Second)
		if err == nil {
			got = append(got, m)
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Text, reason) {
			c.t.Fatalf("socket ended with %v, want close %d %q", err, code, reason)
		}
		return got
	}
}

// dense checks that evs are exactly seqs 1..last, in order.
func dense(t *testing.T, what string, evs []event, last int64) {
	t.Helper()
	if int64(len(evs)) != last {
		t.Fatalf("%s: %d events, want %d", what, len(evs), last)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("%s: position %d holds seq %d", what, i, e.Seq)
		}
	}
}

package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/comm-gateway/comm/store/storetest"
)

// TestTwoReplicas: two `comm serve` processes on one PostgreSQL database.
// Events appended through one reach a GraphQL subscriber on the other,
// promptly (LISTEN/NOTIFY), in order, each once.
func TestTwoReplicas(t *testing.T) {
	if os.Getenv(storetest.EnvURL) == "" {
		t.Skip(storetest.EnvURL + " is not set")
	}
	bin := binary(t)
	env := []string{"COMM_DATABASE_URL=" + storetest.Postgres(t).URL}
	a := start(t, bin, t.TempDir(), env...)
	b := start(t, bin, t.TempDir(), env...)

	code, body := call(t, "POST", a.base+"/v1/projects/sandbox", "", `{"name":"replicas"}`)
	if code != 201 {
		t.Fatalf("sandbox: %d %s", code, body)
	}
	var sb struct {
		Key string `json:"api_key"`
	}
	json.Unmarshal(body, &sb)
	code, body = call(t, "POST", a.base+"/v1/connections", sb.Key, `{"channel":"test"}`)
	if code != 201 {
		t.Fatalf("connect: %d %s", code, body)
	}
	var conn struct{ ID string }
	json.Unmarshal(body, &conn)

	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(b.base, "http")+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"apiKey": sb.Key}})
	var m struct {
		ID, Type string
		Payload  json.RawMessage
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := ws.ReadJSON(&m); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %v %+v", err, m)
	}
	ws.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { events(afterSeq: 0) { seq type } }`}})

	var last int64
	for i := range 10 {
		t0 := time.Now()
		code, body := call(t, "POST", a.base+"/v1/connections/"+conn.ID+"/inbound", sb.Key,
			fmt.Sprintf(`{"sender":"s","text":"hi %d"}`, i))
		if code != 201 {
			t.Fatalf("inbound: %d %s", code, body)
		}
		for {
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := ws.ReadJSON(&m); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			var p struct {
				Data struct {
					Events struct {
						Seq  int64
						Type string
					}
				}
			}
			json.Unmarshal(m.Payload, &p)
			if p.Data.Events.Seq != last+1 {
				t.Fatalf("seq %d after %d", p.Data.Events.Seq, last)
			}
			last = p.Data.Events.Seq
			if p.Data.Events.Type == "message.received" {
				break
			}
		}
		if d := time.Since(t0); d > 700*time.Millisecond {
			t.Errorf("event %d reached the other replica after %s", i, d)
		}
	}
	a.stop(t)
	b.stop(t)
}

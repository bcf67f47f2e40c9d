package server_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestAccessLog: one INFO line "http" per request, with the request id,
// the route pattern, the status, the bytes, the duration, the client IP
// and the project once authenticated; a websocket's line at its upgrade
// (101). No key, header, query value or body reaches the log, whether the
// key is in the header, the query string or a body refused as malformed.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{Config: gw.Config{Logger: logger}})

	resp := g.Do(t, gatewaytest.Request{Method: "POST", Path: "/v1/projects/sandbox", ContentType: "application/json", Body: `{"name":"logs"}`})
	var sb struct {
		Key     string `json:"api_key"`
		Project string `json:"project_id"`
	}
	if err := json.Unmarshal(resp.Body, &sb); err != nil || sb.Key == "" || sb.Project == "" {
		t.Fatalf("sandbox: %d %s", resp.Status, resp.Body)
	}
	const secret = "hunter2-body-secret"
	bad := g.Do(t, gatewaytest.Request{Method: "POST", Path: "/v1/messages", Key: sb.Key, ContentType: "application/json",
		RequestID: "req-bad-body", Body: `{"api_key":"` + sb.Key + `","password":"` + secret + `",`})
	if bad.Status != 400 {
		t.Fatalf("malformed body: %d %s", bad.Status, bad.Body)
	}
	if r := g.Do(t, gatewaytest.Request{Path: "/v1/project?api_key=" + sb.Key + "&token=" + secret, Key: sb.Key}); r.Status != 200 {
		t.Fatalf("GET /v1/project: %d %s", r.Status, r.Body)
	}
	const wrong = "comm_sk_not-a-real-key-but-secret"
	if r := g.Do(t, gatewaytest.Request{Path: "/v1/events", Key: wrong}); r.Status != 401 {
		t.Fatalf("wrong key: %d %s", r.Status, r.Body)
	}
	if r := g.Do(t, gatewaytest.Request{Path: "/no/such/route?key=" + secret}); r.Status != 404 {
		t.Fatalf("unknown route: %d %s", r.Status, r.Body)
	}
	// A websocket: logged at the upgrade, while it is open.
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(g.URL, "http")+"/graphql", http.Header{"Authorization": {"Bearer " + sb.Key}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + sb.Key}}); err != nil {
		t.Fatal(err)
	}
	var ack struct{ Type string }
	if err := ws.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_ack: %v %v", ack, err)
	}

	type line struct {
		Level, Msg, Method, Route, Project string
		RequestID                          string `json:"request_id"`
		ClientIP                           string `json:"client_ip"`
		Status                             int
		Bytes                              int64
		Duration                           *int64
	}
	var lines []line
	out := buf.String()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %s", sc.Text())
		}
		if l.Msg == "http" {
			lines = append(lines, l)
		}
	}
	for _, s := range []string{sb.Key, secret, wrong, "Bearer", "password"} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds %q:\n%s", s, out)
		}
	}
	find := func(route string, status int) *line {
		for i := range lines {
			if lines[i].Route == route && lines[i].Status == status {
				return &lines[i]
			}
		}
		t.Errorf("no access line for %s with %d in:\n%s", route, status, out)
		return nil
	}
	if l := find("POST /v1/projects/sandbox", 201); l != nil && (l.Project != "" || l.Bytes == 0) {
		t.Errorf("sandbox line: %+v", l)
	}
	if l := find("POST /v1/messages", 400); l != nil && (l.Project != sb.Project || l.RequestID != "req-bad-body" || l.Method != "POST") {
		t.Errorf("bad body line: %+v", l)
	}
	if l := find("GET /v1/project", 200); l != nil && (l.Project != sb.Project || l.ClientIP != "127.0.0.1" || l.Level != "INFO" || l.Duration == nil || l.RequestID == "") {
		t.Errorf("GET /v1/project line: %+v", l)
	}
	if l := find("GET /v1/events", 401); l != nil && l.Project != "" {
		t.Errorf("unauthenticated line names a project: %+v", l)
	}
	find("", 404)
	find("GET /graphql", 101)
}

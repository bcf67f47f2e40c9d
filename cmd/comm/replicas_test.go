package main_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
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
	env := []string{"COMM_DATABASE_URL=" + storetest.Postgres(t).URL,
		"COMM_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))}
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

// TestTwoReplicasSignIn: behind a load balancer a person's requests reach
// any replica. A sign-in started on A is signed into and approved on A and
// B alternately, and the command line polling A gets the key.
func TestTwoReplicasSignIn(t *testing.T) {
	if os.Getenv(storetest.EnvURL) == "" {
		t.Skip(storetest.EnvURL + " is not set")
	}
	bin := binary(t)
	env := []string{"COMM_DATABASE_URL=" + storetest.Postgres(t).URL,
		"COMM_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32)),
		"COMM_LOCAL_SIGNIN_PASSWORD=operator-secret"}
	a := start(t, bin, t.TempDir(), env...)
	b := start(t, bin, t.TempDir(), env...)

	_, body := call(t, "POST", a.base+"/v1/auth/device/start", "", `{}`)
	var st struct {
		UserCode   string `json:"user_code"`
		DeviceCode string `json:"device_code"`
	}
	json.Unmarshal(body, &st)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	page := func(base string) string {
		resp, err := browser.Get(base + "/device?code=" + st.UserCode)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	post := func(base, path string, form url.Values) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	m := csrfRE.FindStringSubmatch(page(a.base))
	if m == nil {
		t.Fatal("no csrf token on A's page")
	}
	if code := post(a.base, "/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {m[1]}, "password": {"operator-secret"}}); code != http.StatusSeeOther {
		t.Fatalf("local sign-in on A: %d", code)
	}
	onB := page(b.base) // the session cookie A set is valid on B
	m = csrfRE.FindStringSubmatch(onB)
	if m == nil || !strings.Contains(onB, `action="/device/approve"`) {
		t.Fatalf("B does not know the session signed in on A:\n%s", onB)
	}
	if code := post(b.base, "/device/approve", url.Values{"code": {st.UserCode}, "csrf": {m[1]}}); code != http.StatusOK {
		t.Fatalf("approve on B: %d", code)
	}
	_, body = call(t, "POST", a.base+"/v1/auth/device/token", "", `{"device_code":"`+st.DeviceCode+`"}`)
	var tok struct {
		Status string `json:"status"`
		APIKey string `json:"api_key"`
	}
	json.Unmarshal(body, &tok)
	if tok.Status != "approved" || tok.APIKey == "" {
		t.Fatalf("poll on A: %s", body)
	}
	if code, body := call(t, "GET", b.base+"/v1/account", tok.APIKey, ""); code != 200 || !strings.Contains(string(body), `"balance":"100.00"`) {
		t.Fatalf("account on B: %d %s", code, body)
	}
}

// TestReplicasRefuseOtherKey: on PostgreSQL a replica without an explicit
// encryption key, or with another key than the first one's, stops at
// start with an error naming the setting to fix.
func TestReplicasRefuseOtherKey(t *testing.T) {
	if os.Getenv(storetest.EnvURL) == "" {
		t.Skip(storetest.EnvURL + " is not set")
	}
	bin := binary(t)
	dbURL := "COMM_DATABASE_URL=" + storetest.Postgres(t).URL
	key := func(b byte) string {
		return "COMM_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
	}
	out := refused(t, bin, t.TempDir(), dbURL)
	for _, want := range []string{"PostgreSQL", "--encryption-key", "COMM_ENCRYPTION_KEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("without a key: the error lacks %q:\n%s", want, out)
		}
	}
	a := start(t, bin, t.TempDir(), dbURL, key(42))
	out = refused(t, bin, t.TempDir(), dbURL, key(43))
	for _, want := range []string{"does not match", "--encryption-key", "COMM_ENCRYPTION_KEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("another key: the error lacks %q:\n%s", want, out)
		}
	}
	b := start(t, bin, t.TempDir(), dbURL, key(42))
	if code, body := call(t, "GET", b.base+"/readyz", "", ""); code != 200 {
		t.Errorf("readyz of a replica with the same key: %d %s", code, body)
	}
	a.stop(t)
	b.stop(t)
}

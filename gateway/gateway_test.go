package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestWorkers: a gateway running every worker, as `comm serve` does,
// delivers a reply (the outbox), and stops cleanly, twice.
func TestWorkers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := gatewaytest.Start(t, cfg, gatewaytest.Options{Workers: &gateway.Workers{
			Outbox:        &delivery.Outbox{},
			Webhooks:      &delivery.Webhooks{},
			Sessions:      &delivery.Sessions{},
			VerifyDomains: time.Hour,
		}})
		post := func(path, key, body string, out any) {
			t.Helper()
			resp := g.Do(t, gatewaytest.Request{Method: http.MethodPost, Path: path, Key: key,
				ContentType: "application/json", Body: body})
			if resp.Status/100 != 2 {
				t.Fatalf("POST %s: %d %s", path, resp.Status, resp.Body)
			}
			if err := json.Unmarshal(resp.Body, out); err != nil {
				t.Fatalf("POST %s: %v in %s", path, err, resp.Body)
			}
		}
		var sb struct {
			Key string `json:"api_key"`
		}
		post("/v1/projects/sandbox", "", `{"name":"workers"}`, &sb)
		var conn, in, out struct {
			ID string `json:"id"`
		}
		post("/v1/connections", sb.Key, `{"channel":"test"}`, &conn)
		post("/v1/connections/"+conn.ID+"/inbound", sb.Key, `{"sender":"ann@example.com","text":"ping"}`, &in)
		post("/v1/messages/"+in.ID+"/reply", sb.Key, `{"text":"pong"}`, &out)

		var sent []struct {
			Data struct {
				Message struct {
					ID string `json:"id"`
				} `json:"message"`
			} `json:"data"`
		}
		gatewaytest.WaitFor(t, "message.sent", 15*time.Second, func() bool {
			resp := g.Do(t, gatewaytest.Request{Path: "/v1/events?type=message.sent&wait=5", Key: sb.Key})
			if resp.Status != http.StatusOK {
				t.Fatalf("GET /v1/events: %d %s", resp.Status, resp.Body)
			}
			if err := json.Unmarshal(resp.Body, &sent); err != nil {
				t.Fatal(err)
			}
			return len(sent) > 0
		})
		if len(sent) != 1 || sent[0].Data.Message.ID != out.ID {
			t.Errorf("message.sent events %+v, want one of %s", sent, out.ID)
		}
		g.Stop()
		g.Stop()
	})
}

// TestBaseURL: the front door's BaseURL is the address the test server
// listens on (links the gateway hands out work), unless the test sets one.
func TestBaseURL(t *testing.T) {
	t.Parallel()
	g := gatewaytest.Start(t, storetest.SQLite(t), gatewaytest.Options{})
	resp := g.Do(t, gatewaytest.Request{Method: http.MethodPost, Path: "/oauth/device/code",
		ContentType: "application/x-www-form-urlencoded", Body: "client_id=comm-cli"})
	if resp.Status != http.StatusOK {
		t.Fatalf("POST /oauth/device/code: %d %s", resp.Status, resp.Body)
	}
	var dc struct {
		URI string `json:"verification_uri"`
	}
	if err := json.Unmarshal(resp.Body, &dc); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s/device", g.URL); dc.URI != want {
		t.Errorf("verification_uri %q, want %q", dc.URI, want)
	}
}

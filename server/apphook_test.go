package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// appSecret signs the app-level webhook of the "teamchat" test channel, a
// provider that sends every workspace's events to one URL (as Slack does).
var appSecret = []byte("teamchat app secret")

// teamEvent is a teamchat event: a message in a workspace (team).
type teamEvent struct {
	Team string `json:"team"`
	ID   string `json:"id"`
	From string `json:"from"`
	Text string `json:"text"`
}

func signTeam(body []byte) string {
	m := hmac.New(sha256.New, appSecret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// teamApp is teamchat's app-level webhook: it verifies the app signature,
// answers the URL check itself, and routes by team.
type teamApp struct{}

func (teamApp) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if r.Method == http.MethodGet {
		ch := r.URL.Query().Get("challenge")
		if !hmac.Equal([]byte(r.Header.Get("X-Teamchat-Signature")), []byte(signTeam([]byte(ch)))) {
			return nil, nil, channels.ErrSignature
		}
		return nil, &channels.Response{Body: []byte(ch)}, nil
	}
	if !hmac.Equal([]byte(r.Header.Get("X-Teamchat-Signature")), []byte(signTeam(body))) {
		return nil, nil, channels.ErrSignature
	}
	var ev teamEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, nil, fmt.Errorf("teamchat: %v", err)
	}
	return []string{ev.Team}, nil, nil
}

// teamAdapter is one workspace's connection.
type teamAdapter struct{ team string }

func (a *teamAdapter) Send(context.Context, channels.Outbound) (channels.SendResult, error) {
	return channels.SendResult{ProviderID: "sent"}, nil
}

func (a *teamAdapter) Provision(context.Context) (channels.Provisioned, error) {
	return channels.Provisioned{RouteKey: a.team, Address: a.team}, nil
}

// ParseWebhook checks the app signature too (as the contract asks) and
// returns the events of its own team only.
func (a *teamAdapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if !hmac.Equal([]byte(r.Header.Get("X-Teamchat-Signature")), []byte(signTeam(body))) {
		return nil, channels.ErrSignature
	}
	var ev teamEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, err
	}
	if ev.Team != a.team {
		return nil, nil
	}
	if ev.ID == "app_uninstalled" {
		return nil, channels.Revoked("teamchat: the app was uninstalled from %s", ev.Team)
	}
	return []channels.Inbound{{ProviderID: ev.ID, Sender: ev.From, Text: ev.Text}}, nil
}

func teamchat() channels.Descriptor {
	return channels.Descriptor{Channel: "teamchat", Tier: channels.Free, App: teamApp{},
		New: func(_ context.Context, c channels.Connection) (channels.Adapter, error) {
			var cfg struct {
				Team string `json:"team"`
			}
			if err := json.Unmarshal(c.Config, &cfg); err != nil || cfg.Team == "" {
				return nil, &channels.ConfigError{Field: "team", Msg: "required"}
			}
			return &teamAdapter{team: cfg.Team}, nil
		}}
}

// TestAppLevelWebhook: a provider that sends every tenant's events to one
// URL (/hooks/{channel}) is verified with the app's secret first, then
// routed by the key each connection registered; a forged request stores
// nothing, an unknown key is ignored, a key is one connection's at a time,
// and a deleted connection's key is free again.
func TestAppLevelWebhook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{teamchat()}})
		a, b := g.newSandbox(t, "team one").APIKey, g.newSandbox(t, "team two").APIKey
		connect := func(key, team string) response {
			return g.post(t, key, "/v1/connections", `{"channel":"teamchat","config":{"team":"`+team+`"}}`)
		}
		ca := connect(a, "T1")
		if ca.Status != http.StatusCreated {
			t.Fatalf("connect T1: %d %s", ca.Status, ca.Body)
		}
		if r := connect(b, "T2"); r.Status != http.StatusCreated {
			t.Fatalf("connect T2: %d %s", r.Status, r.Body)
		}
		// A workspace is one connection's at a time, across projects.
		wantError(t, connect(b, "T1"), http.StatusConflict, "conflict", "config")

		post := func(ev teamEvent, sig string) response {
			body, _ := json.Marshal(ev)
			if sig == "" {
				sig = signTeam(body)
			}
			return g.do(t, request{Method: "POST", Path: "/hooks/teamchat", ContentType: "application/json", Body: string(body),
				Header: map[string]string{"X-Teamchat-Signature": sig}})
		}
		texts := func(key string) []string {
			var out []string
			for _, e := range g.events(t, key, "type=message.received") {
				out = append(out, receivedOf(t, e).Text)
			}
			return out
		}
		for _, ev := range []teamEvent{{"T1", "m1", "u1", "for one"}, {"T2", "m2", "u2", "for two"}, {"T1", "m1", "u1", "for one"}} {
			if r := post(ev, ""); r.Status != http.StatusOK {
				t.Fatalf("post %+v: %d %s", ev, r.Status, r.Body)
			}
		}
		// Forged: the payload names T1, the signature is not the app's.
		wantError(t, post(teamEvent{"T1", "m9", "mallory", "forged"}, "00"), http.StatusUnauthorized, "unauthenticated", "")
		// A team no connection holds: accepted, stored nowhere.
		if r := post(teamEvent{"T9", "m3", "u3", "nobody's"}, ""); r.Status != http.StatusOK {
			t.Fatalf("unknown team: %d %s", r.Status, r.Body)
		}
		if got := texts(a); len(got) != 1 || got[0] != "for one" {
			t.Errorf("project one received %q, want [for one]", got)
		}
		if got := texts(b); len(got) != 1 || got[0] != "for two" {
			t.Errorf("project two received %q, want [for two]", got)
		}

		// The workspace uninstalls the app: its connection is revoked,
		// once, and the provider hears 200.
		for range 2 {
			if r := post(teamEvent{Team: "T2", ID: "app_uninstalled"}, ""); r.Status != http.StatusOK {
				t.Fatalf("uninstall event: %d %s", r.Status, r.Body)
			}
		}
		if evs := g.events(t, b, "type=connection.revoked"); len(evs) != 1 {
			t.Fatalf("%d connection.revoked events, want 1", len(evs))
		}

		// The app answers its URL check itself.
		r := g.do(t, request{Path: "/hooks/teamchat?challenge=abc123", Header: map[string]string{"X-Teamchat-Signature": signTeam([]byte("abc123"))}})
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, []byte("abc123")) {
			t.Errorf("challenge: %d %q", r.Status, r.Body)
		}
		wantError(t, g.do(t, request{Path: "/hooks/teamchat?challenge=abc123"}), http.StatusUnauthorized, "unauthenticated", "")
		// A channel without an app-level webhook.
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/telegram", Body: "{}"}), http.StatusNotFound, "not_found", "")
		// An app-level channel's connections take nothing at their own
		// URL, signed or not.
		var connA connection
		decodeJSON(t, ca.Body, &connA)
		body, _ := json.Marshal(teamEvent{"T1", "m8", "u1", "side door"})
		wantError(t, g.do(t, request{Method: "POST", Path: "/hooks/teamchat/" + connA.ID, ContentType: "application/json",
			Body: string(body), Header: map[string]string{"X-Teamchat-Signature": signTeam(body)}}), http.StatusNotFound, "not_found", "")

		// Deleted: its team's events go nowhere, and the team can be
		// connected again.
		var conn connection
		decodeJSON(t, ca.Body, &conn)
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + conn.ID, Key: a}); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := post(teamEvent{"T1", "m4", "u1", "after delete"}, ""); r.Status != http.StatusOK {
			t.Fatalf("after delete: %d %s", r.Status, r.Body)
		}
		if got := texts(a); len(got) != 1 {
			t.Errorf("project one received %q after its connection was deleted", got)
		}
		if r := connect(b, "T1"); r.Status != http.StatusCreated {
			t.Fatalf("connect T1 again: %d %s", r.Status, r.Body)
		}
	})
}

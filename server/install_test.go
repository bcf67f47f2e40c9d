package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/tenant"
)

// workspaceApp is a test channel installed as the operator's OAuth app
// (as Slack and Discord are): an empty config waits for an install; the
// code "good-<team>" installs it in that team, any other code is refused.
type workspaceApp struct {
	conn      channels.Connection
	installed bool
}

func (a *workspaceApp) Send(context.Context, channels.Outbound) (channels.SendResult, error) {
	return channels.SendResult{ProviderID: "sent"}, nil
}

func (a *workspaceApp) NeedsInstall() bool { return !a.installed }

func (a *workspaceApp) AuthorizeURL(state, redirect string) string {
	return "https://workspace.example/oauth/authorize?" + url.Values{"client_id": {"comm"}, "state": {state}, "redirect_uri": {redirect}}.Encode()
}

func (a *workspaceApp) Install(_ context.Context, code, redirect string) (channels.Provisioned, error) {
	team, ok := strings.CutPrefix(code, "good-")
	if !ok || !strings.HasSuffix(redirect, "/oauth/workspace/callback") {
		return channels.Provisioned{}, &channels.ConfigError{Field: "code", Msg: "the workspace refused the code"}
	}
	cfg, _ := json.Marshal(map[string]string{"token": "xoxb-" + team, "team": team})
	return channels.Provisioned{Config: cfg, Address: "team " + team, RouteKey: team}, nil
}

func workspaceChannel() channels.Descriptor {
	return channels.Descriptor{Channel: "workspace", Tier: channels.Free,
		New: func(_ context.Context, c channels.Connection) (channels.Adapter, error) {
			var cfg struct{ Token string }
			if len(c.Config) > 0 {
				if err := json.Unmarshal(c.Config, &cfg); err != nil {
					return nil, err
				}
			}
			return &workspaceApp{conn: c, installed: cfg.Token != ""}, nil
		}}
}

// TestInstallOperatorApp: connecting a channel the operator's app installs
// answers a pending connection with an authorize_url whose state is bound
// to it; the provider's callback with a wrong or used state, a denial, or
// a refused code connects nothing; the right one stores the credentials
// sealed and appends connection.authorized, then connection.active.
func TestInstallOperatorApp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{workspaceChannel()}})
		key := g.newSandbox(t, "install").APIKey
		resp := g.post(t, key, "/v1/connections", `{"channel":"workspace"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		var pending connection
		decodeJSON(t, resp.Body, &pending)
		if pending.Status != "pending" || pending.AuthorizeURL == nil {
			t.Fatalf("connection %s: want pending with an authorize_url", resp.Body)
		}
		u, err := url.Parse(*pending.AuthorizeURL)
		if err != nil {
			t.Fatal(err)
		}
		state, redirect := u.Query().Get("state"), u.Query().Get("redirect_uri")
		if len(state) < 32 || redirect != g.URL+"/oauth/workspace/callback" {
			t.Fatalf("authorize_url %s: want a long state and the redirect %s/oauth/workspace/callback", u, g.URL)
		}
		callback := func(q url.Values) response {
			return g.do(t, request{Path: "/oauth/workspace/callback?" + q.Encode()})
		}
		page := func(r response, status int, want string) {
			t.Helper()
			if r.Status != status || !strings.Contains(strings.ToLower(string(r.Body)), strings.ToLower(want)) || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("callback page: %d %s, want %d saying %q", r.Status, r.Body, status, want)
			}
		}
		page(callback(url.Values{"state": {"forged-state"}, "code": {"good-T1"}}), http.StatusBadRequest, "no pending workspace install")
		page(callback(url.Values{"state": {state}, "error": {"access_denied"}}), http.StatusBadRequest, "not approved")
		page(callback(url.Values{"state": {state}, "code": {"stolen"}}), http.StatusBadRequest, "refused the code")
		if evs := g.events(t, key, ""); len(evs) != 0 {
			t.Fatalf("events before the install: %d", len(evs))
		}
		var still connection
		g.get(t, key, "/v1/connections/"+pending.ID, &still)
		if still.Status != "pending" {
			t.Fatalf("after a denial and a bad code: %s, want pending", still.Status)
		}

		page(callback(url.Values{"state": {state}, "code": {"good-T1"}}), http.StatusOK, "Connected workspace (team T1)")
		var evs []string
		for _, e := range g.events(t, key, "") {
			evs = append(evs, e.Type)
		}
		if strings.Join(evs, ",") != "connection.authorized,connection.active" {
			t.Fatalf("events %v, want connection.authorized then connection.active", evs)
		}
		var done connection
		g.get(t, key, "/v1/connections/"+pending.ID, &done)
		if done.Status != "active" || done.AuthorizeURL != nil || done.Address == nil || *done.Address != "team T1" {
			t.Fatalf("connection after the install: %+v", done)
		}
		// The state is good once.
		page(callback(url.Values{"state": {state}, "code": {"good-T1"}}), http.StatusBadRequest, "no pending workspace install")
		// The credentials are sealed at rest.
		row, err := g.Svc.Ent().Connection.Get(tenant.System(context.Background()), pending.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(row.Config), "xoxb-T1") {
			t.Fatalf("the installed token is stored in the clear")
		}
		// A second install of the same team, from another project: refused.
		other := g.newSandbox(t, "other").APIKey
		var p2 connection
		decodeJSON(t, g.post(t, other, "/v1/connections", `{"channel":"workspace"}`).Body, &p2)
		u2, _ := url.Parse(*p2.AuthorizeURL)
		page(callback(url.Values{"state": {u2.Query().Get("state")}, "code": {"good-T1"}}), http.StatusConflict, "connected already")
	})
}

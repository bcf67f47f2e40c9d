package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestSlackInstall drives the install of the operator's Slack app through
// HTTP against the fake Slack: a pending connection with its authorize
// URL, a denial, the approval and its callback (connection.authorized,
// connection.active), then the Events API at /hooks/slack (signatures,
// stale timestamps, retries, url_verification), a reply with
// chat.postMessage, and the uninstall revoking the connection.
func TestSlackInstall(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := slacktest.NewServer()
		t.Cleanup(fake.Close)
		team := fake.NewTeam("Acme")
		g := startGateway(t, cfg, setup{outbox: true, slack: slack.Options{APIURL: fake.APIURL, AuthorizeURL: fake.AuthorizeURL,
			ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, SigningSecret: fake.SigningSecret}})
		key := g.newSandbox(t, "slack").APIKey
		var pending connection
		resp := g.post(t, key, "/v1/connections", `{"channel":"slack"}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		decodeJSON(t, resp.Body, &pending)
		if pending.Status != "pending" || pending.AuthorizeURL == nil || !strings.HasPrefix(*pending.AuthorizeURL, fake.AuthorizeURL) {
			t.Fatalf("connection %s: want pending with the Slack authorize URL", resp.Body)
		}
		follow := func(redirect string) response {
			t.Helper()
			u, err := url.Parse(redirect)
			if err != nil || !strings.HasPrefix(redirect, g.URL+"/oauth/slack/callback") {
				t.Fatalf("redirect %q (%v): want the gateway's callback", redirect, err)
			}
			return g.do(t, request{Path: u.RequestURI()})
		}
		denied, err := fake.Deny(*pending.AuthorizeURL)
		if err != nil {
			t.Fatal(err)
		}
		if r := follow(denied); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "access_denied") {
			t.Fatalf("denied: %d %s", r.Status, r.Body)
		}
		approved, err := fake.Authorize(*pending.AuthorizeURL, team)
		if err != nil {
			t.Fatal(err)
		}
		if r := follow(approved); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Acme") {
			t.Fatalf("approved: %d %s", r.Status, r.Body)
		}
		var types []string
		for _, e := range g.events(t, key, "") {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != "connection.authorized,connection.active" {
			t.Fatalf("events %v, want connection.authorized, connection.active", types)
		}

		// Slack calls the app-level URL, signed with the app's secret.
		hook := func(body []byte, ts time.Time, secret string, retry int) response {
			stamp := strconv.FormatInt(ts.Unix(), 10)
			h := map[string]string{slack.TimestampHeader: stamp, slack.SignatureHeader: slack.Sign(secret, stamp, body)}
			if retry > 0 {
				h["X-Slack-Retry-Num"] = strconv.Itoa(retry)
			}
			return g.do(t, request{Method: "POST", Path: "/hooks/slack", ContentType: "application/json", Body: string(body), Header: h})
		}
		ch := hook(slacktest.URLVerification("chal-123"), time.Now(), fake.SigningSecret, 0)
		if ch.Status != http.StatusOK || !strings.Contains(string(ch.Body), "chal-123") {
			t.Fatalf("url_verification: %d %s", ch.Status, ch.Body)
		}
		ev := slacktest.EventCallback(team.ID, "Ev1", slacktest.Event{Channel: "D0DM", User: "U0ANN", Text: "hello & welcome", TS: "1700000000.000100"})
		if r := hook(ev, time.Now(), fake.SigningSecret, 0); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		if r := hook(ev, time.Now(), fake.SigningSecret, 1); r.Status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		wantError(t, hook(ev, time.Now(), "not-the-secret", 0), http.StatusUnauthorized, "unauthenticated", "")
		wantError(t, hook(ev, time.Now().Add(-10*time.Minute), fake.SigningSecret, 0), http.StatusUnauthorized, "unauthenticated", "")
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1 (a retry and forged requests store nothing)", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != "U0ANN" || in.Text != "hello & welcome" {
			t.Fatalf("received %+v", in)
		}

		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Hi Ann"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if sent := team.Sent(); len(sent) != 1 || sent[0].Channel != "D0DM" || sent[0].Text != "Hi Ann" {
			t.Fatalf("chat.postMessage got %+v", sent)
		}

		// Slack allows about one message a second per channel: replies
		// queued at once go out in order, at that pace, without a refused
		// call.
		fake.SetRateLimit(true)
		var ids []string
		for i := range 4 {
			ids = append(ids, g.queue(t, key, "/v1/messages/"+in.ID+"/reply", fmt.Sprintf(`{"text":"part %d"}`, i)).ID)
		}
		for _, id := range ids {
			g.waitMessage(t, key, id, "sent", func(m message) bool { return m.Status == "sent" })
		}
		sent := team.Sent()[1:]
		for i, m := range sent {
			if m.Text != fmt.Sprintf("part %d", i) {
				t.Fatalf("sent out of order: %+v", sent)
			}
		}
		if n := fake.Limited(); n != 0 {
			t.Errorf("%d calls refused with 429 for %d messages: comm should keep Slack's pace", n, len(ids))
		}
		fake.SetRateLimit(false)

		// Uninstalled from the workspace: revoked, once.
		gone := slacktest.Envelope(team.ID, "Ev2", map[string]any{"type": "app_uninstalled"})
		if r := hook(gone, time.Now(), fake.SigningSecret, 0); r.Status != http.StatusOK {
			t.Fatalf("app_uninstalled: %d %s", r.Status, r.Body)
		}
		if n := len(g.events(t, key, "type=connection.revoked")); n != 1 {
			t.Fatalf("%d connection.revoked events, want 1", n)
		}
	})
}

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
)

// SlackConnection is a sandbox project with the operator's Slack app
// installed in a workspace of the fake Slack.
type SlackConnection struct {
	Key, ConnectionID string
	Team              *slacktest.Team
}

// NewSlackConnections makes n sandbox projects and installs the
// operator's Slack app for each in a workspace of its own, through the
// gateway's OAuth flow (the fake approves at once).
func NewSlackConnections(ctx context.Context, a *API, fake *slacktest.Server, n int) ([]SlackConnection, error) {
	out := make([]SlackConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		var c struct {
			ID           string  `json:"id"`
			AuthorizeURL *string `json:"authorize_url"`
		}
		if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, map[string]string{"channel": "slack"}, &c); err != nil || code != http.StatusCreated || c.AuthorizeURL == nil {
			return nil, fmt.Errorf("connect slack: %d %v", code, err)
		}
		team := fake.NewTeam(fmt.Sprintf("bench %d", i))
		redirect, err := fake.Authorize(*c.AuthorizeURL, team)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(redirect)
		if err != nil {
			return nil, err
		}
		if code, err := a.Do(ctx, "GET", u.RequestURI(), "", nil, nil); err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("install callback: %d %v", code, err)
		}
		out[i] = SlackConnection{Key: sb.APIKey, ConnectionID: c.ID, Team: team}
	}
	return out, nil
}

// SlackIngress runs `workers` clients playing Slack: each POSTs signed
// Events API deliveries (one DM message each) to /hooks/slack for the
// workspaces of conns, for d. The gateway answers 200 once the message and
// its message.received are committed.
func SlackIngress(ctx context.Context, base, secret string, conns []SlackConnection, workers int, d time.Duration) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		c := conns[w%len(conns)]
		i := 0
		return func() error {
			i++
			ts := fmt.Sprintf("%d.%06d", 1700000000+w, i)
			body := slacktest.EventCallback(c.Team.ID, fmt.Sprintf("Ev%d-%d", w, i), slacktest.Event{
				Channel: fmt.Sprintf("D%04dX%02d", w, i%50), User: fmt.Sprintf("U%04d", i%50), TS: ts,
				Text: "Hello! Could you tell me when my order ships? It was placed on Monday."})
			req, err := http.NewRequestWithContext(ctx, "POST", base+"/hooks/slack", bytes.NewReader(body))
			if err != nil {
				return err
			}
			stamp := strconv.FormatInt(time.Now().Unix(), 10)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(slack.TimestampHeader, stamp)
			req.Header.Set(slack.SignatureHeader, slack.Sign(secret, stamp, body))
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("POST /hooks/slack: %s", resp.Status)
			}
			return nil
		}
	})
	r.Note = fmt.Sprintf("%d workspace(s), %d concurrent clients", len(conns), workers)
	if err != nil {
		return r, err
	}
	keys := make([]string, len(conns))
	for i, c := range conns {
		keys[i] = c.Key
	}
	// connection.authorized and connection.active come first.
	return r, checkStored(ctx, NewAPI(base, 1), keys, int64(2*len(conns)), r.Ops)
}

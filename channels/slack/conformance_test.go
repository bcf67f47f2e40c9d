package slack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
)

// hookURL is a connection's own ingress, appURL the app-level one; the
// fake never dials them.
const (
	hookURL = "https://comm.example/hooks/slack/conn_channeltest"
	appURL  = "https://comm.example/hooks/slack"
)

// person is the Slack user the tests talk to, dm the app's DM with them.
const (
	person = "U0PERSON1"
	dm     = "D0PERSON1"
)

// TestConformanceOwnApp runs the suite against bring-your-own-app
// connections (no operator app: no Descriptor.App).
func TestConformanceOwnApp(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: slack.Descriptor(slack.Options{APIURL: srv.APIURL, PostInterval: -1}),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, false) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{}`), // no operator app to install
			json.RawMessage(`{"bot_token":""}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc"}`),
			json.RawMessage(`{"bot_token":"xoxp-123-abc","signing_secret":"abcdef0123456789"}`),
			json.RawMessage(`{"bot_token":"xoxb-123/../x","signing_secret":"abcdef0123456789"}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","signing_secret":"has space in it"}`),
			json.RawMessage(`{"bot_token":123,"signing_secret":"abcdef0123456789"}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","signing_secret":"abcdef0123456789","extra":1}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","signing_secret":"abcdef0123456789","app":"operator","team_id":"T1"}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","signing_secret":"abcdef0123456789"} {}`),
		},
	})
}

// TestConformanceOperatorApp runs the suite against connections of the
// operator's app: events come signed with the app's secret, to the
// app-level webhook as well as the connection's own ingress.
func TestConformanceOperatorApp(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: slack.Descriptor(operatorOptions(srv)),
		Fake:       func(t *testing.T) *channeltest.Fake { return newFake(t, srv, true) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"bot_token":"xoxb-123-abc","app":"operator"}`), // no team
			json.RawMessage(`{"bot_token":"xoxb-123-abc","app":"someone-else","team_id":"T1"}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","app":"operator","team_id":"T1","signing_secret":"abcdef0123456789"}`),
			json.RawMessage(`{"app":"operator","team_id":"T1"}`),
		},
	})
}

// TestConformanceSocketMode runs the suite against bring-your-own-app
// connections with an app-level token: events come over Socket Mode.
func TestConformanceSocketMode(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	channeltest.Run(t, channeltest.Harness{
		Descriptor: slack.Descriptor(slack.Options{APIURL: srv.APIURL, PostInterval: -1}),
		Fake: func(t *testing.T) *channeltest.Fake {
			fk, f, team := newFakeFull(t, srv, false)
			var cfg map[string]any
			_ = json.Unmarshal(fk.Config, &cfg)
			cfg["app_token"] = team.EnableSocketMode()
			delete(cfg, "signing_secret")
			fk.Config = config(t, cfg)
			fk.BadCredential = config(t, map[string]any{"bot_token": "xoxb-0000-notatoken", "app_token": cfg["app_token"]})
			fk.Inbound, fk.Raw, fk.Tamper, fk.Handshake = nil, nil, nil, nil
			fk.WebhookURL = ""
			fk.Queue = func(_ *testing.T, m channels.Inbound) { team.QueueSocket(f.body(team.ID, m)) }
			return fk
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"bot_token":"xoxb-123-abc","app_token":"xoxb-123-abc"}`),
			json.RawMessage(`{"bot_token":"xoxb-123-abc","app_token":"xapp-1 2"}`),
		},
	})
}

func operatorOptions(srv *slacktest.Server) slack.Options {
	return slack.Options{APIURL: srv.APIURL, AuthorizeURL: srv.AuthorizeURL, PostInterval: -1,
		ClientID: srv.ClientID, ClientSecret: srv.ClientSecret, SigningSecret: srv.SigningSecret}
}

// fake is one subtest's workspace(s) and the ts it gave the suite's tokens.
type fake struct {
	srv   *slacktest.Server
	teams map[string]*slacktest.Team // by id

	mu  sync.Mutex
	tss map[string]string // suite token -> ts
}

func (f *fake) ts(token string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, ok := f.tss[token]
	if !ok {
		ts = fmt.Sprintf("1600000000.%06d", len(f.tss)+1)
		f.tss[token] = ts
	}
	return ts
}

// body is the event_callback delivering m in team.
func (f *fake) body(teamID string, m channels.Inbound) []byte {
	ts := f.ts(m.ProviderID)
	return slacktest.EventCallback(teamID, "Ev"+strings.ReplaceAll(ts, ".", ""), slacktest.Event{
		Channel: dm, User: m.Sender, Text: m.Text, TS: ts})
}

func config(t *testing.T, v map[string]any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func newFake(t *testing.T, srv *slacktest.Server, operator bool) *channeltest.Fake {
	fk, _, _ := newFakeFull(t, srv, operator)
	return fk
}

func newFakeFull(t *testing.T, srv *slacktest.Server, operator bool) (*channeltest.Fake, *fake, *slacktest.Team) {
	team := srv.NewTeam("acme")
	f := &fake{srv: srv, teams: map[string]*slacktest.Team{team.ID: team}, tss: map[string]string{}}
	secret := srv.SigningSecret
	cfg := map[string]any{"bot_token": team.BotToken, "team_id": team.ID, "bot_user_id": team.BotUserID}
	bad := map[string]any{"bot_token": "xoxb-0000-notatoken"}
	if operator {
		cfg["app"] = slack.AppOperator
		bad["app"], bad["team_id"] = slack.AppOperator, team.ID
	} else {
		secret = "ownsecret" + strings.ToLower(team.ID)
		cfg["signing_secret"] = secret
		bad["signing_secret"] = secret
	}
	tamper := func(_ *testing.T, r *http.Request) *http.Request {
		r.Header.Set(slack.SignatureHeader, "v0="+strings.Repeat("0", 64))
		return r
	}
	fk := &channeltest.Fake{
		Config:             config(t, cfg),
		WebhookURL:         hookURL,
		To:                 dm,
		Sender:             person,
		BadCredential:      config(t, bad),
		RetryAfter:         7 * time.Second,
		TypingNeedsMessage: true,
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, m := range team.Sent() {
				thread := m.Channel
				if m.ThreadTS != "" {
					thread += ":" + m.ThreadTS
				}
				out = append(out, channels.Outbound{To: m.Channel, ThreadKey: thread, Text: m.Text})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, s := range team.Statuses() {
				out = append(out, channels.Typing{To: s.ChannelID, ThreadKey: s.ChannelID, InReplyTo: s.ChannelID + ":" + s.ThreadTS})
			}
			return out
		},
		Inbound: func(_ *testing.T, m channels.Inbound) *http.Request {
			return slacktest.SignedRequest(hookURL, secret, time.Now(), f.body(team.ID, m), 0)
		},
		Raw: func(_ *testing.T, body []byte) *http.Request {
			return slacktest.SignedRequest(hookURL, secret, time.Now(), body, 0)
		},
		Tamper: tamper,
		Handshake: func(*testing.T) (*http.Request, channels.Response) {
			return slacktest.SignedRequest(hookURL, secret, time.Now(), slacktest.URLVerification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"), 0),
				channels.Response{Body: []byte("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")}
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var fl slacktest.Failure
			detail := ""
			switch kind {
			case channeltest.RateLimited:
				fl, detail = slacktest.RateLimited(7), "ratelimited"
			case channeltest.Unavailable:
				fl, detail = slacktest.Unavailable, "503"
			case channeltest.Timeout:
				fl = slacktest.Hang
			case channeltest.Rejected:
				fl, detail = slacktest.ChannelNotFound, "channel_not_found"
			case channeltest.Unauthorized:
				fl, detail = slacktest.InvalidAuth, "invalid_auth"
			default:
				return "", ""
			}
			team.FailNext("chat.postMessage", fl)
			return dm, detail
		},
	}
	if operator {
		other := srv.NewTeam("globex")
		f.teams[other.ID] = other
		fk.RouteKey = team.ID
		fk.OtherTenant = config(t, map[string]any{"bot_token": other.BotToken, "app": slack.AppOperator, "team_id": other.ID})
		fk.AppInbound = func(t *testing.T, key string, m channels.Inbound) *http.Request {
			if f.teams[key] == nil {
				t.Fatalf("slack fake: no team %q", key)
			}
			return slacktest.SignedRequest(appURL, srv.SigningSecret, time.Now(), f.body(key, m), 0)
		}
		fk.AppHandshake = func(*testing.T) (*http.Request, channels.Response) {
			return slacktest.SignedRequest(appURL, srv.SigningSecret, time.Now(), slacktest.URLVerification("app-challenge-1"), 0),
				channels.Response{Body: []byte("app-challenge-1")}
		}
		fk.AppTamper = tamper
		fk.Provisioned = func(*testing.T) bool { return team.Installed() }
	}
	return fk, f, team
}

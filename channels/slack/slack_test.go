package slack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/slack/slacktest"
)

// The vector of docs.slack.dev "Verifying requests from Slack" (channels.md §13).
const (
	vecSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	vecTS     = "1531420618"
	vecBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	vecSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignatureVector(t *testing.T) {
	if got := slack.Sign(vecSecret, vecTS, []byte(vecBody)); got != vecSig {
		t.Fatalf("Sign = %s, want %s", got, vecSig)
	}
	h := http.Header{}
	h.Set(slack.TimestampHeader, vecTS)
	h.Set(slack.SignatureHeader, vecSig)
	if err := slack.Verify(vecSecret, h, []byte(vecBody), time.Unix(1531420618+30, 0)); err != nil {
		t.Fatalf("Verify of the documented vector: %v", err)
	}
	for name, now := range map[string]time.Time{
		"stale":  time.Unix(1531420618+301, 0),
		"future": time.Unix(1531420618-301, 0),
	} {
		if err := slack.Verify(vecSecret, h, []byte(vecBody), now); !errors.Is(err, channels.ErrSignature) {
			t.Errorf("%s timestamp: Verify = %v, want ErrSignature", name, err)
		}
	}
	if err := slack.Verify("another-secret", h, []byte(vecBody), time.Unix(1531420618, 0)); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("wrong secret: Verify = %v, want ErrSignature", err)
	}
}

// env is an adapter of a bring-your-own-app connection at a fake Slack,
// with a fixed clock.
type env struct {
	srv    *slacktest.Server
	team   *slacktest.Team
	secret string
	now    time.Time
	a      *slack.Adapter
}

// newEnv is a connection of a customer's own app whose sends are not
// paced (see newPacedEnv).
func newEnv(t *testing.T) *env {
	return newEnvWith(t, -1)
}

// newPacedEnv is newEnv with Slack's pace of one post a second per
// channel.
func newPacedEnv(t *testing.T) *env {
	return newEnvWith(t, 0)
}

func newEnvWith(t *testing.T, postInterval time.Duration) *env {
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	team := srv.NewTeam("acme")
	e := &env{srv: srv, team: team, secret: "ownsecret0123456789", now: time.Unix(1700000500, 0)}
	opts := slack.Options{APIURL: srv.APIURL, Now: func() time.Time { return e.now }, PostInterval: postInterval}
	cfg, _ := json.Marshal(map[string]string{"bot_token": team.BotToken, "signing_secret": e.secret})
	a, err := slack.Descriptor(opts).New(t.Context(), channels.Connection{ID: "conn_1", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.(channels.Provisioner).Provision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p.Address != "acme" || p.RouteKey != "" {
		t.Errorf("Provision = address %q route key %q, want acme and none (own app)", p.Address, p.RouteKey)
	}
	a, err = slack.Descriptor(opts).New(t.Context(), channels.Connection{ID: "conn_1", Config: p.Config})
	if err != nil {
		t.Fatal(err)
	}
	e.a = a.(*slack.Adapter)
	t.Cleanup(func() { _ = e.a.Close() })
	return e
}

func (e *env) parse(t *testing.T, body []byte, at time.Time, retry int) ([]channels.Inbound, error) {
	t.Helper()
	r := slacktest.SignedRequest("https://comm.example/hooks/slack/conn_1", e.secret, at, body, retry)
	r.Body = http.NoBody
	return e.a.ParseWebhook(r, body)
}

func (e *env) one(t *testing.T, ev slacktest.Event) channels.Inbound {
	t.Helper()
	ins, err := e.parse(t, slacktest.EventCallback(e.team.ID, "Ev1", ev), e.now, 0)
	if err != nil || len(ins) != 1 {
		t.Fatalf("ParseWebhook = %v, %v; want one message", ins, err)
	}
	return ins[0]
}

func TestStaleTimestampRefused(t *testing.T) {
	e := newEnv(t)
	body := slacktest.EventCallback(e.team.ID, "Ev1", slacktest.Event{Channel: "D1", User: "U1", Text: "hi", TS: "1700000000.000100"})
	if _, err := e.parse(t, body, e.now.Add(-6*time.Minute), 0); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("a request signed 6 min ago: %v, want ErrSignature", err)
	}
	if ins, err := e.parse(t, body, e.now.Add(-4*time.Minute), 0); err != nil || len(ins) != 1 {
		t.Errorf("a request signed 4 min ago: %v, %v; want the message", ins, err)
	}
}

func TestURLVerification(t *testing.T) {
	e := newEnv(t)
	body := slacktest.URLVerification("chall-42")
	r := slacktest.SignedRequest("https://comm.example/hooks/slack/conn_1", e.secret, e.now, body, 0)
	resp, err := e.a.Respond(r, body)
	if err != nil || resp == nil || string(resp.Body) != "chall-42" {
		t.Fatalf("Respond = %+v, %v; want the challenge", resp, err)
	}
	if ins, err := e.a.ParseWebhook(r, body); err != nil || len(ins) != 0 {
		t.Errorf("ParseWebhook of url_verification = %v, %v; want nothing", ins, err)
	}
	r = slacktest.SignedRequest("https://comm.example/hooks/slack/conn_1", "not-the-secret", e.now, body, 0)
	if resp, err := e.a.Respond(r, body); !errors.Is(err, channels.ErrSignature) || resp != nil {
		t.Errorf("Respond with a wrong secret = %+v, %v; want ErrSignature", resp, err)
	}
}

func TestRetryIsSameMessage(t *testing.T) {
	e := newEnv(t)
	body := slacktest.EventCallback(e.team.ID, "Ev9", slacktest.Event{Channel: "D1", User: "U1", Text: "hi", TS: "1700000000.000100"})
	first, err := e.parse(t, body, e.now, 0)
	if err != nil || len(first) != 1 {
		t.Fatal(first, err)
	}
	again, err := e.parse(t, body, e.now.Add(time.Minute), 1)
	if err != nil || !reflect.DeepEqual(first, again) {
		t.Errorf("a retry (X-Slack-Retry-Num: 1) parsed as %+v, %v; the first as %+v", again, err, first)
	}
	if first[0].ProviderID != "D1:1700000000.000100" {
		t.Errorf("ProviderID = %q", first[0].ProviderID)
	}
}

func TestThreadMapping(t *testing.T) {
	e := newEnv(t)
	dm := e.one(t, slacktest.Event{Channel: "D1", User: "U1", Text: "hi", TS: "1700000000.000100"})
	if dm.ThreadKey != "D1" || dm.Sender != "U1" || len(dm.References) != 0 {
		t.Errorf("a DM: %+v", dm)
	}
	reply := e.one(t, slacktest.Event{Channel: "C1", ChannelType: "channel", User: "U1", Text: "in thread", TS: "1700000001.000200", ThreadTS: "1700000000.000100"})
	if reply.ThreadKey != "C1:1700000000.000100" || !reflect.DeepEqual(reply.References, []string{"C1:1700000000.000100"}) {
		t.Errorf("a thread reply: %+v", reply)
	}
	mention := e.one(t, slacktest.Event{Type: "app_mention", Channel: "C1", User: "U1", Text: "<@UBOT> hi", TS: "1700000002.000300"})
	if mention.ThreadKey != "C1:1700000002.000300" || mention.ProviderID != "C1:1700000002.000300" {
		t.Errorf("a mention: %+v", mention)
	}

	// Answers go into the thread; typing needs one.
	res, err := e.a.Send(t.Context(), channels.Outbound{ThreadKey: mention.ThreadKey, To: "U1", Text: "answer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Send(t.Context(), channels.Outbound{ThreadKey: dm.ThreadKey, To: "U1", InReplyTo: dm.ProviderID, Text: "dm answer"}); err != nil {
		t.Fatal(err)
	}
	sent := e.team.Sent()
	if len(sent) != 2 || sent[0].Channel != "C1" || sent[0].ThreadTS != "1700000002.000300" || sent[1].ThreadTS != "" ||
		!strings.HasPrefix(res.ProviderID, "C1:") {
		t.Errorf("sent %+v (provider id %q)", sent, res.ProviderID)
	}
	if err := e.a.Typing(t.Context(), channels.Typing{ThreadKey: "D1", To: "U1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Typing(t.Context(), channels.Typing{ThreadKey: "D1", To: "U1", InReplyTo: dm.ProviderID}); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Typing(t.Context(), channels.Typing{ThreadKey: reply.ThreadKey, To: "U1"}); err != nil {
		t.Fatal(err)
	}
	want := []slacktest.Status{{ChannelID: "D1", ThreadTS: "1700000000.000100", Status: slack.TypingStatus},
		{ChannelID: "C1", ThreadTS: "1700000000.000100", Status: slack.TypingStatus}}
	if got := e.team.Statuses(); !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %+v, want %+v", got, want)
	}
}

func TestDropped(t *testing.T) {
	e := newEnv(t)
	for name, ev := range map[string]slacktest.Event{
		"bot":         {Channel: "D1", User: "U1", BotID: "B1", Text: "x", TS: "1700000000.000100"},
		"bot_message": {Channel: "D1", User: "U1", Subtype: "bot_message", Text: "x", TS: "1700000000.000100"},
		"edit":        {Channel: "D1", User: "U1", Subtype: "message_changed", Text: "x", TS: "1700000000.000100"},
		"delete":      {Channel: "D1", User: "U1", Subtype: "message_deleted", Text: "x", TS: "1700000000.000100"},
		"own":         {Channel: "D1", User: e.team.BotUserID, Text: "x", TS: "1700000000.000100"},
		"channel":     {Channel: "C1", ChannelType: "channel", User: "U1", Text: "x", TS: "1700000000.000100"},
	} {
		ins, err := e.parse(t, slacktest.EventCallback(e.team.ID, "Ev1", ev), e.now, 0)
		if err != nil || len(ins) != 0 {
			t.Errorf("%s: %+v, %v; want nothing", name, ins, err)
		}
	}
	other := slacktest.EventCallback("T0OTHER", "Ev1", slacktest.Event{Channel: "D1", User: "U1", Text: "x", TS: "1700000000.000100"})
	if ins, err := e.parse(t, other, e.now, 0); err != nil || len(ins) != 0 {
		t.Errorf("another team's event: %+v, %v; want nothing", ins, err)
	}
}

func TestRevokedEvents(t *testing.T) {
	e := newEnv(t)
	for name, ev := range map[string]any{
		"app_uninstalled": map[string]any{"type": "app_uninstalled"},
		"tokens_revoked":  map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"bot": []string{e.team.BotUserID}}},
	} {
		_, err := e.parse(t, slacktest.Envelope(e.team.ID, "Ev1", ev), e.now, 0)
		if !errors.Is(err, channels.ErrRevoked) {
			t.Errorf("%s: %v, want ErrRevoked", name, err)
		}
	}
	users := map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"oauth": []string{"U1"}}}
	if _, err := e.parse(t, slacktest.Envelope(e.team.ID, "Ev1", users), e.now, 0); err != nil {
		t.Errorf("a user token revoked: %v, want nothing", err)
	}
}

func TestSendErrors(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		f     slacktest.Failure
		class error
		after time.Duration
	}{
		{slacktest.RateLimited(3), channels.ErrTransient, 3 * time.Second},
		{slacktest.Unavailable, channels.ErrTransient, 0},
		{slacktest.ChannelNotFound, channels.ErrPermanent, 0},
		{slacktest.NotInChannel, channels.ErrPermanent, 0},
		{slacktest.MsgTooLong, channels.ErrPermanent, 0},
		{slacktest.InvalidAuth, channels.ErrRevoked, 0},
		{slacktest.TokenRevoked, channels.ErrRevoked, 0},
		{slacktest.Failure{Error: "ratelimited"}, channels.ErrTransient, 0},
	}
	for _, c := range cases {
		e.team.FailNext("chat.postMessage", c.f)
		_, err := e.a.Send(t.Context(), channels.Outbound{To: "D1", ThreadKey: "D1", Text: "x"})
		if !errors.Is(err, c.class) || channels.RetryAfter(err) != c.after || !strings.Contains(err.Error(), "slack") {
			t.Errorf("%+v: %v (retry after %s), want %v after %s", c.f, err, channels.RetryAfter(err), c.class, c.after)
		}
	}
}

func TestFakeRateLimit(t *testing.T) {
	e := newEnv(t)
	now := time.Unix(1700000000, 0)
	e.srv.SetNow(func() time.Time { return now })
	e.srv.SetRateLimit(true)
	out := channels.Outbound{To: "D1", ThreadKey: "D1", Text: "x"}
	if _, err := e.a.Send(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	_, err := e.a.Send(t.Context(), out)
	if !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) != time.Second {
		t.Errorf("a second post in the same second: %v, want transient after 1s", err)
	}
	if _, err := e.a.Send(t.Context(), channels.Outbound{To: "D2", Text: "x"}); err != nil {
		t.Errorf("another channel: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := e.a.Send(t.Context(), out); err != nil {
		t.Errorf("a second later: %v", err)
	}
}

// TestSendPaced: sends to one channel go out a second apart (Slack's pace)
// without a single 429 from the fake enforcing it; another channel is not
// held back.
func TestSendPaced(t *testing.T) {
	t.Parallel()
	e := newPacedEnv(t)
	e.srv.SetRateLimit(true)
	start := time.Now()
	for i := range 3 {
		if _, err := e.a.Send(t.Context(), channels.Outbound{To: "D1", ThreadKey: "D1", Text: fmt.Sprint("paced ", i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("3 posts to one channel took %s, want at least 2 s", el)
	}
	other := time.Now()
	if _, err := e.a.Send(t.Context(), channels.Outbound{To: "D2", ThreadKey: "D2", Text: "elsewhere"}); err != nil || time.Since(other) > 500*time.Millisecond {
		t.Errorf("another channel: %v after %s, want at once", err, time.Since(other))
	}
	if n := e.srv.Limited(); n != 0 {
		t.Errorf("the fake refused %d posts with 429", n)
	}
}

func TestLongTextSplit(t *testing.T) {
	e := newEnv(t)
	text := strings.Repeat("word ", slack.MaxText/5*2+10)
	if _, err := e.a.Send(t.Context(), channels.Outbound{To: "D1", Text: text}); err != nil {
		t.Fatal(err)
	}
	var joined string
	sent := e.team.Sent()
	for _, m := range sent {
		if len([]rune(m.Text)) > slack.MaxText {
			t.Errorf("a part of %d characters", len([]rune(m.Text)))
		}
		joined += m.Text
	}
	if len(sent) != 3 || joined != text {
		t.Errorf("%d parts, joined equal: %v", len(sent), joined == text)
	}
}

func TestFileDownload(t *testing.T) {
	e := newEnv(t)
	f := e.team.AddFile("notes.txt", "text/plain", []byte("file body"))
	in := e.one(t, slacktest.Event{Channel: "D1", User: "U1", Subtype: "file_share", Text: "see", TS: "1700000000.000100", Files: []slacktest.File{f}})
	if len(in.Attachments) != 1 || string(in.Attachments[0].Data) != "file body" || in.Attachments[0].Filename != "notes.txt" ||
		in.Attachments[0].ContentType != "text/plain" {
		t.Errorf("attachments %+v", in.Attachments)
	}

	// A file the fake does not serve: transient, so Slack's retry tries again.
	gone := f
	gone.URLPrivateDownload = e.srv.URL + "/files/" + e.team.ID + "/FGONE/x.txt"
	_, err := e.parse(t, slacktest.EventCallback(e.team.ID, "Ev2", slacktest.Event{Channel: "D1", User: "U1", Subtype: "file_share",
		Text: "see", TS: "1700000000.000200", Files: []slacktest.File{gone}}), e.now, 0)
	if !errors.Is(err, channels.ErrTransient) {
		t.Errorf("a failed download: %v, want transient", err)
	}

	// A file elsewhere never gets the token: left out.
	foreign := f
	foreign.URLPrivate, foreign.URLPrivateDownload = "https://attacker.example/x", ""
	in = e.one(t, slacktest.Event{Channel: "D1", User: "U1", Subtype: "file_share", Text: "see", TS: "1700000000.000300", Files: []slacktest.File{foreign}})
	if len(in.Attachments) != 0 || !strings.Contains(string(in.Details), "files_left_out") {
		t.Errorf("a foreign file: %+v %s", in.Attachments, in.Details)
	}
}

func TestInstall(t *testing.T) {
	srv := slacktest.NewServer()
	t.Cleanup(srv.Close)
	team := srv.NewTeam("acme")
	d := slack.Descriptor(operatorOptions(srv))
	if d.App == nil {
		t.Fatal("no app-level webhook with the operator's app configured")
	}
	a, err := d.New(t.Context(), channels.Connection{ID: "conn_1", Config: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	in := a.(channels.Installer)
	if !in.NeedsInstall() {
		t.Fatal("an empty config does not need an install")
	}
	const redirect = "https://comm.example/oauth/slack/callback"
	au := in.AuthorizeURL("state-1", redirect)
	if !strings.HasPrefix(au, srv.AuthorizeURL+"?") || !strings.Contains(au, "chat%3Awrite") {
		t.Errorf("AuthorizeURL = %s", au)
	}

	// Declined: no code.
	back, err := srv.Deny(au)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(back)
	if u.Query().Get("error") != "access_denied" || u.Query().Get("state") != "state-1" {
		t.Errorf("denial redirect %s", back)
	}

	back, err = srv.Authorize(au, team)
	if err != nil {
		t.Fatal(err)
	}
	u, _ = url.Parse(back)
	if u.Query().Get("state") != "state-1" || !strings.HasPrefix(back, redirect+"?") {
		t.Errorf("redirect %s", back)
	}
	code := u.Query().Get("code")
	p, err := in.Install(t.Context(), code, redirect)
	if err != nil {
		t.Fatal(err)
	}
	var cfg slack.Config
	_ = json.Unmarshal(p.Config, &cfg)
	want := slack.Config{BotToken: team.BotToken, App: slack.AppOperator, TeamID: team.ID, BotUserID: team.BotUserID}
	if cfg != want || p.RouteKey != team.ID || p.Address != "acme" {
		t.Errorf("Install = %+v (config %+v)", p, cfg)
	}
	var ce *channels.ConfigError
	if _, err := in.Install(t.Context(), code, redirect); !errors.As(err, &ce) || ce.Field != "code" {
		t.Errorf("a used code: %v, want a ConfigError on code", err)
	}
	if _, err := in.Install(t.Context(), "made-up", redirect); !errors.As(err, &ce) || ce.Field != "code" {
		t.Errorf("a bad code: %v, want a ConfigError on code", err)
	}

	// A connection still waiting for its install takes no events.
	ev := slacktest.EventCallback(team.ID, "Ev0", slacktest.Event{Channel: "D1", User: "U1", Text: "early", TS: "1700000000.000050"})
	wr := slacktest.SignedRequest("https://comm.example/hooks/slack/conn_1", srv.SigningSecret, time.Now(), ev, 0)
	if ins, err := a.(channels.WebhookReceiver).ParseWebhook(wr, ev); err != nil || len(ins) != 0 {
		t.Errorf("a connection not installed yet parsed %+v, %v", ins, err)
	}

	// The installed connection works and routes by team.
	b, err := d.New(t.Context(), channels.Connection{ID: "conn_1", Config: p.Config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), channels.Outbound{To: "D1", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	body := slacktest.EventCallback(team.ID, "Ev1", slacktest.Event{Channel: "D1", User: "U1", Text: "hi", TS: "1700000000.000100"})
	r := slacktest.SignedRequest("https://comm.example/hooks/slack", srv.SigningSecret, time.Now(), body, 0)
	keys, resp, err := d.App.Route(r, body)
	if err != nil || resp != nil || !reflect.DeepEqual(keys, []string{team.ID}) {
		t.Errorf("Route = %v %v %v", keys, resp, err)
	}
}

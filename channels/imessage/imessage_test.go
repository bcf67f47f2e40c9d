package imessage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
)

const hookBase = "https://comm.example/hooks/imessage"

// relayEnv is a fake relay and a descriptor over it.
type relayEnv struct {
	srv *bluebubblestest.Server
	d   channels.Descriptor
}

func newRelay(t *testing.T, private bool, opts imessage.Options) relayEnv {
	t.Helper()
	srv := bluebubblestest.NewServer(password, address)
	srv.SetPrivateAPI(private)
	t.Cleanup(srv.Close)
	opts.Relays = []imessage.Relay{{URL: srv.URL, Password: password, Address: address}}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 5 * time.Second
	}
	return relayEnv{srv: srv, d: imessage.Descriptor(opts)}
}

func (e relayEnv) adapter(t *testing.T, webhookURL string) *imessage.Adapter {
	t.Helper()
	a, err := e.d.New(t.Context(), channels.Connection{ID: "conn_1", ProjectID: "proj_1", Line: address, WebhookURL: webhookURL})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*imessage.Adapter)
}

// hook is the webhook URL the relay has, or "".
func (e relayEnv) hook(t *testing.T) string {
	t.Helper()
	ws := e.srv.Webhooks()
	if len(ws) != 1 {
		t.Fatalf("the relay has %d webhooks, want 1: %+v", len(ws), ws)
	}
	return ws[0].URL
}

// receive runs a webhook request through App.Route and Shared.Receive as
// the gateway does.
func (e relayEnv) receive(t *testing.T, target string, typ string, m bluebubblestest.Message) ([]channels.LineInbound, error) {
	t.Helper()
	body := bluebubblestest.Event(typ, m)
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	r.Body = http.NoBody
	keys, resp, err := e.d.App.Route(r, body)
	if err != nil {
		return nil, err
	}
	if keys != nil || resp != nil {
		t.Fatalf("Route = %v, %v; want no keys and no answer", keys, resp)
	}
	return e.d.Shared.Receive(r, body)
}

func TestDescriptorWithoutRelays(t *testing.T) {
	t.Parallel()
	d := imessage.Descriptor(imessage.Options{})
	if d.Channel != "imessage" || d.Tier != channels.Paid || d.New != nil || d.App != nil || d.Shared != nil || d.Session != nil {
		t.Errorf("descriptor without relays = %+v; want the paid channel with no adapter (501)", d)
	}
	e := newRelay(t, false, imessage.Options{})
	if e.d.New == nil || e.d.App == nil || e.d.Shared == nil || e.d.Session == nil {
		t.Errorf("descriptor with a relay: New, App, Shared and Session (catching up in webhook mode) set, got %+v", e.d)
	}
	f := newRelay(t, false, imessage.Options{Follow: true})
	if f.d.Session == nil {
		t.Error("descriptor following the relays has no Session")
	}
}

func TestParseRelays(t *testing.T) {
	t.Parallel()
	got, err := imessage.ParseRelays(`[{"url":"https://mac.example.com/","password":"pw","address":"+1 (555) 000-1111"},{"url":"http://10.0.0.2:1234","password":"pw2","address":"Agent@iCloud.com"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Address != "+15550001111" || got[1].Address != "agent@icloud.com" {
		t.Errorf("addresses = %q, %q; want E.164 and lower-cased", got[0].Address, got[1].Address)
	}
	if rs, err := imessage.ParseRelays(" "); err != nil || rs != nil {
		t.Errorf("empty: %v, %v; want none", rs, err)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"url":"x"}`, "JSON array"},
		{`[{"url":"ftp://mac","password":"p","address":"+15550001111"}]`, "element 0: url"},
		{`[{"url":"https://mac","password":"","address":"+15550001111"}]`, "element 0 (https://mac): password"},
		{`[{"url":"https://mac","password":"p","address":"5550001111"}]`, "element 0 (https://mac): address"},
		{`[{"url":"https://mac","password":"p","address":"+15550001111","extra":1}]`, "element 0"},
		{`[{"url":"https://a","password":"p","address":"+15550001111"},{"url":"https://b","password":"p","address":"+1 555 000 1111"}]`, "element 1: address +15550001111 is also element 0's"},
	} {
		if _, err := imessage.ParseRelays(tc.raw); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRelays(%s) = %v; want an error containing %q", tc.raw, err, tc.want)
		}
	}
}

func TestAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"+1 (555) 123-4567": "+15551234567",
		" +447700900123 ":   "+447700900123",
		"Someone@Mac.COM":   "someone@mac.com",
	} {
		if got, err := imessage.Address(in); err != nil || got != want {
			t.Errorf("Address(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "5551234567", "+0123", "no@", "a b@c.com", "iMessage;-;+15551234567"} {
		if got, err := imessage.Address(bad); err == nil {
			t.Errorf("Address(%q) = %q; want an error", bad, got)
		}
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	lines := e.d.Shared.Lines()
	if len(lines) != 1 || lines[0].ID != address || lines[0].Address != address || lines[0].JoinLink == nil {
		t.Fatalf("Lines() = %+v", lines)
	}
	if got, want := lines[0].JoinLink("K7Q2"), "sms:agent@icloud.com?&body=join%20K7Q2"; got != want {
		t.Errorf("JoinLink = %q, want %q", got, want)
	}
}

// TestProvisionRegistersOnce: the first connection's Provision registers
// the webhook with the relay's id and secret; later connections, another
// process with the same relays (a replica, a restart) and a second
// Provision add none.
func TestProvisionRegistersOnce(t *testing.T) {
	t.Parallel()
	e := newRelay(t, true, imessage.Options{})
	res, err := e.adapter(t, hookBase+"/conn_1").Provision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Address != address || res.RouteKey != "" || res.Config != nil {
		t.Errorf("Provisioned = %+v; want the relay's address, no route key, no config", res)
	}
	hook := e.hook(t)
	u, err := url.Parse(hook)
	if err != nil || !strings.HasPrefix(hook, hookBase+"?") || u.Query().Get("relay") == "" || len(u.Query().Get("secret")) < 32 {
		t.Fatalf("registered %q; want %s?relay=…&secret=…", hook, hookBase)
	}
	if ev := e.srv.Webhooks()[0].Events; strings.Join(ev, ",") != "new-message,updated-message" {
		t.Errorf("events = %q", ev)
	}
	if _, err := e.adapter(t, hookBase+"/conn_2").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := e.srv.Calls("GET /api/v1/webhook"); n != 1 {
		t.Errorf("the process listed the webhooks %d times, want once", n)
	}
	// Another process (a replica) computes the same URL and finds it.
	replica := relayEnv{srv: e.srv, d: imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: e.srv.URL, Password: password, Address: address}}})}
	if _, err := replica.adapter(t, hookBase+"/conn_3").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := e.hook(t); got != hook {
		t.Errorf("the replica's URL %q differs from %q", got, hook)
	}
	if n := e.srv.Calls("POST /api/v1/webhook"); n != 1 {
		t.Errorf("registered %d times, want once", n)
	}
}

// TestProvisionReplacesStaleSecret: after the relay's password changed,
// comm's registration with the old secret is deleted and the new one
// added; another service's webhook is left alone.
func TestProvisionReplacesStaleSecret(t *testing.T) {
	t.Parallel()
	srv := bluebubblestest.NewServer("old-password", address)
	t.Cleanup(srv.Close)
	old := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: srv.URL, Password: "old-password", Address: address}}})
	a, _ := old.New(t.Context(), channels.Connection{ID: "conn_1", Line: address, WebhookURL: hookBase + "/conn_1"})
	if _, err := a.(channels.Provisioner).Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	stale := srv.Webhooks()[0].URL
	other, _ := json.Marshal(map[string]any{"url": "https://other.example/bb", "events": []string{"*"}})
	resp, err := http.Post(srv.URL+"/api/v1/webhook?password=old-password", "application/json", bytes.NewReader(other))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Password = "new-password" // the operator changed it on the Mac and in COMM_IMESSAGE_RELAYS
	e := relayEnv{srv: srv, d: imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: srv.URL, Password: "new-password", Address: address}}})}
	if _, err := e.adapter(t, hookBase+"/conn_2").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, w := range srv.Webhooks() {
		urls = append(urls, w.URL)
	}
	if len(urls) != 2 || urls[0] != "https://other.example/bb" || urls[1] == stale || !strings.HasPrefix(urls[1], hookBase+"?") {
		t.Errorf("webhooks = %q; want the other service's and comm's new one (not %q)", urls, stale)
	}
}

// TestProvisionOperatorErrors: a relay refusing the password or down is
// the operator's problem: a transient provider failure naming the relay,
// never a *channels.ConfigError the caller would be asked to fix.
func TestProvisionOperatorErrors(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	wrong := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: e.srv.URL, Password: "not-it", Address: address}}})
	a, _ := wrong.New(t.Context(), channels.Connection{ID: "conn_1", Line: address, WebhookURL: hookBase + "/conn_1"})
	_, err := a.(channels.Provisioner).Provision(t.Context())
	var ce *channels.ConfigError
	if err == nil || errors.As(err, &ce) || !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "the relay agent@icloud.com refused the password") {
		t.Errorf("wrong password: %v; want a transient error saying the relay refused the password", err)
	}
	for _, down := range []bluebubblestest.Down{bluebubblestest.Unavailable, bluebubblestest.Closed} {
		e.srv.SetDown(down)
		_, err := e.adapter(t, hookBase+"/conn_1").Provision(t.Context())
		if !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "imessage: relay agent@icloud.com") {
			t.Errorf("relay down (%d): %v; want a transient error naming the relay", down, err)
		}
	}
	e.srv.SetDown(bluebubblestest.Up)
	if len(e.srv.Webhooks()) != 0 {
		t.Error("a failed Provision registered a webhook")
	}
}

// TestProvisionWithoutPublicURL: following the relays, or without a
// public URL, nothing is registered.
func TestProvisionWithoutPublicURL(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	if _, err := e.adapter(t, "").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := newRelay(t, false, imessage.Options{Follow: true})
	if _, err := f.adapter(t, hookBase+"/conn_1").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(e.srv.Webhooks())+len(f.srv.Webhooks()) != 0 {
		t.Error("a webhook was registered without a public URL, or while following")
	}
}

func TestNewLine(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	_, err := e.d.New(t.Context(), channels.Connection{ID: "conn_1", Line: "+15559990000"})
	var ce *channels.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no longer configured") {
		t.Errorf("New on an unknown line: %v", err)
	}
	if a := e.adapter(t, ""); a.Line() != address {
		t.Errorf("Line() = %q", a.Line())
	}
}

// TestRoute: the secret and relay id in the URL decide; a wrong, missing
// or other relay's secret is channels.ErrSignature.
func TestRoute(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	if _, err := e.adapter(t, hookBase+"/conn_1").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	hook := e.hook(t)
	u, _ := url.Parse(hook)
	q := u.Query()
	wrong := url.Values{"relay": {q.Get("relay")}, "secret": {strings.Repeat("0", len(q.Get("secret")))}}
	missing := url.Values{"relay": {q.Get("relay")}}
	other := url.Values{"relay": {"000000000000"}, "secret": {q.Get("secret")}}
	m := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "hello"})
	for name, v := range map[string]url.Values{"wrong secret": wrong, "no secret": missing, "other relay": other} {
		if _, err := e.receive(t, hookBase+"?"+v.Encode(), "new-message", m); !errors.Is(err, channels.ErrSignature) {
			t.Errorf("%s: %v; want channels.ErrSignature", name, err)
		}
		body := bluebubblestest.Event("new-message", m)
		r := httptest.NewRequest(http.MethodPost, hookBase+"?"+v.Encode(), bytes.NewReader(body))
		if _, err := e.d.Shared.Receive(r, body); !errors.Is(err, channels.ErrSignature) {
			t.Errorf("%s: Receive without Route: %v; want channels.ErrSignature", name, err)
		}
	}
	if _, err := e.receive(t, hook, "new-message", m); err != nil {
		t.Errorf("the registered URL: %v", err)
	}
}

// TestReceive maps a person's message, a reply in a thread, a group
// message with attachments, and leaves out our own messages, tapbacks and
// other events.
func TestReceive(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{MaxAttachment: 1000})
	if _, err := e.adapter(t, hookBase+"/conn_1").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	hook := e.hook(t)
	one := func(typ string, m bluebubblestest.Message) []channels.LineInbound {
		t.Helper()
		got, err := e.receive(t, hook, typ, m)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	m := e.srv.Incoming(bluebubblestest.Incoming{From: "+1 555 123 0000", Text: "join K7Q2"})
	got := one("new-message", m)
	if len(got) != 1 {
		t.Fatalf("got %d items, want 1", len(got))
	}
	in := got[0]
	if in.Line != address || in.ProviderID != m.GUID || in.Sender != person || in.ThreadKey != person || in.Text != "join K7Q2" || in.Receipt != nil {
		t.Errorf("inbound = %+v", in)
	}
	var details map[string]any
	if err := json.Unmarshal(in.Details, &details); err != nil || details["guid"] != m.GUID || details["relay"] != address {
		t.Errorf("details = %s", in.Details)
	}

	reply := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "this one", ThreadOriginatorGUID: "p:0/ORIGINAL"})
	if got := one("new-message", reply); len(got) != 1 || len(got[0].References) != 1 || got[0].References[0] != "p:0/ORIGINAL" {
		t.Errorf("reply: %+v; want References [p:0/ORIGINAL]", got)
	}

	small := e.srv.AddAttachment("IMG_0001.jpeg", "image/jpeg", []byte("jpeg bytes"))
	big := e.srv.AddAttachment("movie.mov", "video/quicktime", bytes.Repeat([]byte("x"), 2000))
	group := e.srv.Incoming(bluebubblestest.Incoming{From: "Friend@iCloud.com", Text: "\ufffclook", ChatGUID: "iMessage;+;chat123456",
		Attachments: []bluebubblestest.Attachment{small, big, {GUID: "at_gone", MimeType: "image/png", TransferName: "gone.png"}}})
	got = one("new-message", group)
	if len(got) != 1 {
		t.Fatalf("group: %d items", len(got))
	}
	in = got[0]
	if in.Sender != "friend@icloud.com" || in.ThreadKey != "iMessage;+;chat123456" || in.Text != "look" {
		t.Errorf("group message = %+v", in.Inbound)
	}
	if len(in.Attachments) != 1 || in.Attachments[0].Filename != "IMG_0001.jpeg" || in.Attachments[0].ContentType != "image/jpeg" || string(in.Attachments[0].Data) != "jpeg bytes" {
		t.Errorf("attachments = %+v", in.Attachments)
	}
	if !strings.Contains(string(in.Details), "movie.mov: over 1000 bytes") || !strings.Contains(string(in.Details), "gone.png: the relay answered HTTP 404") {
		t.Errorf("details do not name the attachments left out: %s", in.Details)
	}

	tapback := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "Loved “this one”", Tapback: "love", TapbackOf: reply.GUID})
	mine := m
	mine.IsFromMe = true
	for name, ev := range map[string]struct {
		typ string
		m   bluebubblestest.Message
	}{"tapback": {"new-message", tapback}, "our own": {"new-message", mine}, "typing": {"typing-indicator", m}, "not ours updated": {"updated-message", m}} {
		if got := one(ev.typ, ev.m); len(got) != 0 {
			t.Errorf("%s: %+v; want nothing", name, got)
		}
	}
	if _, err := e.receive(t, hook, "new-message", bluebubblestest.Message{}); err != nil {
		t.Errorf("an empty message: %v", err)
	}
	body := []byte(`{"type":"new-message","data":`)
	r := httptest.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
	if _, err := e.d.Shared.Receive(r, body); err == nil || errors.Is(err, channels.ErrTransient) {
		t.Errorf("malformed body: %v; want a permanent error", err)
	}
}

// TestReceipts: updated-message events of our own sends are delivered
// and read receipts by guid.
func TestReceipts(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	a := e.adapter(t, hookBase+"/conn_1")
	if _, err := a.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: person, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	hook := e.hook(t)
	var mu sync.Mutex
	var states []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		r.URL, _ = url.Parse(hook) // as the gateway sees its own URL
		got, err := e.d.Shared.Receive(r, body.Bytes())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, in := range got {
			if in.Receipt == nil || in.Receipt.MessageID != res.ProviderID || in.Line != address || in.Receipt.At.IsZero() {
				t.Errorf("receipt item = %+v", in)
				continue
			}
			states = append(states, in.Receipt.State)
		}
	}))
	t.Cleanup(recv.Close)
	e.srv.Rewrite = func(string) string { return recv.URL }
	if err := e.srv.Delivered(t.Context(), res.ProviderID); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Read(t.Context(), res.ProviderID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(states, ",") != "delivered,read" {
		t.Errorf("receipts = %q, want delivered,read", states)
	}
}

// TestSendMethods: with the Private API a reply carries
// selectedMessageGuid and typing reaches the relay; with AppleScript
// neither (typing is a quiet no-op).
func TestSendMethods(t *testing.T) {
	t.Parallel()
	for _, private := range []bool{true, false} {
		e := newRelay(t, private, imessage.Options{})
		a := e.adapter(t, "")
		res, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", ThreadKey: "iMessage;-;" + person, To: person, Text: "answer", InReplyTo: "p:0/THEIRS"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Typing(t.Context(), channels.Typing{ThreadKey: "iMessage;+;chat9", To: person}); err != nil {
			t.Errorf("private=%v: Typing: %v", private, err)
		}
		sent := e.srv.Sent()
		if len(sent) != 1 || sent[0].GUID != res.ProviderID || sent[0].TempGUID != "msg_1" || sent[0].ChatGUID != "iMessage;-;"+person {
			t.Fatalf("private=%v: sent %+v, result %+v", private, sent, res)
		}
		typings := e.srv.Typings()
		if private && (sent[0].Method != "private-api" || sent[0].SelectedMessageGUID != "p:0/THEIRS" || len(typings) != 1 || typings[0] != "iMessage;+;chat9") {
			t.Errorf("private API: sent %+v, typings %q", sent[0], typings)
		}
		if !private && (sent[0].Method != "apple-script" || sent[0].SelectedMessageGUID != "" || len(typings) != 0) {
			t.Errorf("AppleScript: sent %+v, typings %q", sent[0], typings)
		}
	}
}

// TestSendSplitsLongText: a text over MaxText goes out as several
// messages with tempGuids of their own; the first's guid names it.
func TestSendSplitsLongText(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	text := strings.Repeat("word ", imessage.MaxText/5*2+10)
	res, err := e.adapter(t, "").Send(t.Context(), channels.Outbound{MessageID: "msg_long", To: person, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.srv.Sent()
	var joined string
	for _, s := range sent {
		joined += s.Text
		if len(s.Text) > imessage.MaxText {
			t.Errorf("a part of %d characters", len(s.Text))
		}
	}
	if len(sent) != 3 || joined != text || sent[0].GUID != res.ProviderID || sent[0].TempGUID != "msg_long" || sent[1].TempGUID != "msg_long.2" {
		t.Errorf("sent %d parts (temp guids %q, %q), joined equal: %v", len(sent), sent[0].TempGUID, sent[len(sent)-1].TempGUID, joined == text)
	}
}

// TestSendRelayDown: a relay that is down, closed or slow is a transient
// failure; 4xx permanent with the relay's message; a bad recipient is
// refused before any call.
func TestSendRelayDown(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{CallTimeout: 300 * time.Millisecond})
	a := e.adapter(t, "")
	out := channels.Outbound{MessageID: "msg_1", To: person, Text: "hi"}
	for _, down := range []bluebubblestest.Down{bluebubblestest.Unavailable, bluebubblestest.Closed} {
		e.srv.SetDown(down)
		if _, err := a.Send(t.Context(), out); !errors.Is(err, channels.ErrTransient) || !strings.Contains(err.Error(), "imessage: relay agent@icloud.com") {
			t.Errorf("down %d: %v; want transient naming the relay", down, err)
		}
	}
	e.srv.SetDown(bluebubblestest.Up)
	e.srv.FailNext(bluebubblestest.Hang)
	if _, err := a.Send(t.Context(), out); !errors.Is(err, channels.ErrTransient) {
		t.Errorf("hang: %v; want transient", err)
	}
	e.srv.FailNext(bluebubblestest.BadRequest)
	if _, err := a.Send(t.Context(), out); !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "Invalid chat GUID") {
		t.Errorf("400: %v; want permanent with the relay's message", err)
	}
	if _, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_2", To: "5551234", Text: "hi"}); !errors.Is(err, channels.ErrPermanent) {
		t.Errorf("bad recipient: %v", err)
	}
	if _, err := a.Send(t.Context(), out); err != nil {
		t.Errorf("after the failures: %v", err)
	}
}

// TestAnswer sends outside any connection, on the line's relay.
func TestAnswer(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	if err := e.d.Shared.Answer(t.Context(), address, person, "Send join <code> to reach a project."); err != nil {
		t.Fatal(err)
	}
	if sent := e.srv.Sent(); len(sent) != 1 || sent[0].ChatGUID != "iMessage;-;"+person || sent[0].TempGUID == "" {
		t.Errorf("sent %+v", sent)
	}
	if err := e.d.Shared.Answer(t.Context(), "+15559990000", person, "x"); err == nil {
		t.Error("Answer on an unknown line succeeded")
	}
}

// TestCatchUp: in webhook mode the session still reads the relay (every
// CatchUpInterval), so a message whose webhook never reached the gateway
// (it was down: BlueBubbles does not retry) is emitted late, not lost.
func TestCatchUp(t *testing.T) {
	t.Parallel()
	state := &channels.MemState{}
	e := newRelay(t, false, imessage.Options{State: state, CatchUpInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan channels.Inbound, 10)
	done := make(chan error, 1)
	go func() {
		done <- e.d.Session.Run(ctx, func(key string, ins ...channels.Inbound) error {
			for _, in := range ins {
				got <- in
			}
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for v, _ := state.Get(t.Context(), "cursor/"+relayID(t, e)); v == nil; v, _ = state.Get(t.Context(), "cursor/"+relayID(t, e)) {
		if time.Now().After(deadline) {
			t.Fatal("no cursor saved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "sent while comm was down"})
	select {
	case in := <-got:
		if in.Text != "sent while comm was down" {
			t.Errorf("caught up %q", in.Text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message the webhook missed was never read")
	}
}

// TestSession follows the relay: messages after the cursor are emitted
// with the relay's address as the key, our own skipped; a failed emit
// ends the session and the next one emits the same message again; a
// fresh session with the saved cursor emits nothing old.
func TestSession(t *testing.T) {
	t.Parallel()
	state := &channels.MemState{}
	e := newRelay(t, false, imessage.Options{Follow: true, State: state, PollInterval: 10 * time.Millisecond})
	old := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "before comm followed"})
	type emitted struct {
		key string
		in  channels.Inbound
	}
	run := func(fail func(channels.Inbound) bool) (chan emitted, func() error) {
		ctx, cancel := context.WithCancel(t.Context())
		ch := make(chan emitted, 100)
		done := make(chan error, 1)
		go func() {
			done <- e.d.Session.Run(ctx, func(key string, ins ...channels.Inbound) error {
				for _, in := range ins {
					if fail != nil && fail(in) {
						return errors.New("store failed")
					}
					ch <- emitted{key, in}
				}
				return nil
			})
		}()
		return ch, func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return")
				return nil
			}
		}
	}
	wait := func(ch chan emitted, text string) emitted {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got := <-ch:
				if got.in.Text == text {
					return got
				}
				if got.in.Text == old.Text {
					t.Errorf("the session replayed a message from before it followed the relay")
				}
			case <-timeout:
				t.Fatalf("no message %q emitted", text)
			}
		}
	}
	ch, stop := run(nil)
	// The first round sets the cursor at now.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, _ := state.Get(t.Context(), "cursor/"+relayID(t, e)); v != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no cursor saved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	m1 := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "first"})
	if _, err := e.adapter(t, "").Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: person, Text: "our own"}); err != nil {
		t.Fatal(err)
	}
	got := wait(ch, "first")
	if got.key != address || got.in.ProviderID != m1.GUID || got.in.Sender != person || got.in.ThreadKey != person {
		t.Errorf("emitted %+v", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Run after its context ended: %v", err)
	}
	for len(ch) > 0 {
		if g := <-ch; g.in.Text == "our own" {
			t.Error("our own message was emitted")
		}
	}

	// The second message's emit fails: Run returns an error.
	m2 := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "second"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := e.d.Session.Run(ctx, func(string, ...channels.Inbound) error { return errors.New("store failed") })
	if err == nil || errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "store failed") {
		t.Errorf("Run after a failed emit: %v; want a retryable error", err)
	}
	ch, stop = run(nil)
	if got := wait(ch, "second"); got.in.ProviderID != m2.GUID {
		t.Errorf("the second message came again as %q, want %q", got.in.ProviderID, m2.GUID)
	}
	stop()
	for len(ch) > 0 {
		if g := <-ch; g.in.Text == "first" {
			t.Error("the first message was emitted again after its cursor was saved")
		}
	}
}

// TestSessionRelayDown: a relay that is down is asked again later; Run
// goes on and returns nil when its context ends.
func TestSessionRelayDown(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{Follow: true, PollInterval: 10 * time.Millisecond})
	e.srv.SetDown(bluebubblestest.Unavailable)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := e.d.Session.Run(ctx, func(string, ...channels.Inbound) error { return nil }); err != nil {
		t.Errorf("Run with the relay down: %v; want nil at the end of its context", err)
	}
}

// relayID is the relay's id, read from its webhook URL.
func relayID(t *testing.T, e relayEnv) string {
	t.Helper()
	srv := bluebubblestest.NewServer(password, address)
	defer srv.Close()
	d := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: srv.URL, Password: password, Address: address}}})
	a, _ := d.New(t.Context(), channels.Connection{ID: "c", Line: address, WebhookURL: hookBase + "/c"})
	if _, err := a.(channels.Provisioner).Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.Webhooks()[0].URL)
	return u.Query().Get("relay")
}

// TestTypingHold: the indicator is taken down once TypingHold passes
// without another Typing for the chat.
func TestTypingHold(t *testing.T) {
	t.Parallel()
	e := newRelay(t, true, imessage.Options{TypingHold: 150 * time.Millisecond})
	a := e.adapter(t, "")
	ty := channels.Typing{ThreadKey: "iMessage;-;" + person, To: person}
	if err := a.Typing(t.Context(), ty); err != nil {
		t.Fatal(err)
	}
	time.Sleep(75 * time.Millisecond)
	if err := a.Typing(t.Context(), ty); err != nil { // refreshed: the hold starts again
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if stops := e.srv.TypingStops(); len(stops) != 0 {
		t.Fatalf("taken down %q while refreshed", stops)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.srv.TypingStops()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if stops := e.srv.TypingStops(); len(stops) != 1 || stops[0] != "iMessage;-;"+person {
		t.Errorf("stops %q, want one in the chat", stops)
	}
}

// TestTahoeChats: on macOS 26 a person's chat is "any;-;<address>": an
// inbound message's thread is still the person's address, and replies
// go to the chat the relay named (Private API), or to
// "iMessage;-;<address>" through AppleScript (which cannot send to
// "any"); a process that never saw the chat falls back to "any;-;" when
// the relay finds no "iMessage;-;" chat.
func TestTahoeChats(t *testing.T) {
	t.Parallel()
	e := newRelay(t, true, imessage.Options{})
	e.srv.SetTahoe(true)
	if _, err := e.adapter(t, hookBase+"/conn_1").Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := e.srv.Incoming(bluebubblestest.Incoming{From: person, Text: "hi from Tahoe"})
	got, err := e.receive(t, e.hook(t), "new-message", m)
	if err != nil || len(got) != 1 || got[0].ThreadKey != person || !strings.Contains(string(got[0].Details), `"chat_guid":"any;-;+15551230000"`) {
		t.Fatalf("inbound %+v %v", got, err)
	}
	if _, err := e.adapter(t, "").Send(t.Context(), channels.Outbound{MessageID: "msg_1", ThreadKey: person, To: person, Text: "reply"}); err != nil {
		t.Fatal(err)
	}
	// Another process: it has not seen the chat.
	fresh := relayEnv{srv: e.srv, d: imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: e.srv.URL, Password: password, Address: address}}})}
	if _, err := fresh.adapter(t, "").Send(t.Context(), channels.Outbound{MessageID: "msg_2", ThreadKey: person, To: person, Text: "from elsewhere"}); err != nil {
		t.Fatal(err)
	}
	e.srv.SetPrivateAPI(false)
	apple := relayEnv{srv: e.srv, d: imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: e.srv.URL, Password: password, Address: address}}})}
	if _, err := apple.adapter(t, "").Send(t.Context(), channels.Outbound{MessageID: "msg_3", ThreadKey: person, To: person, Text: "by AppleScript"}); err != nil {
		t.Fatal(err)
	}
	var chats []string
	for _, s := range e.srv.Sent() {
		chats = append(chats, s.ChatGUID)
	}
	if want := []string{"any;-;" + person, "any;-;" + person, "iMessage;-;" + person}; strings.Join(chats, " ") != strings.Join(want, " ") {
		t.Errorf("sent to %q, want %q", chats, want)
	}
}

// TestSendResumesSplit: when a later part of a split text fails, the
// retry sends only the parts not sent yet.
func TestSendResumesSplit(t *testing.T) {
	t.Parallel()
	e := newRelay(t, false, imessage.Options{})
	a := e.adapter(t, "")
	text := strings.Repeat("word ", imessage.MaxText/5+10) // two parts
	out := channels.Outbound{MessageID: "msg_split", To: person, Text: text}
	e.srv.FailNext(0) // the first part goes through
	e.srv.FailNext(bluebubblestest.ServerError)
	if _, err := a.Send(t.Context(), out); !errors.Is(err, channels.ErrTransient) {
		t.Fatalf("second part failing: %v", err)
	}
	res, err := a.Send(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	sent := e.srv.Sent()
	if len(sent) != 2 || sent[0].Text+sent[1].Text != text || res.ProviderID != sent[0].GUID || sent[1].TempGUID != "msg_split.2" {
		t.Errorf("sent %d parts (want 2, the first once), result %+v", len(sent), res)
	}
}

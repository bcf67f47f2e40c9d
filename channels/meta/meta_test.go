package meta_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/meta/metatest"
)

// TestSignatureVector checks Sign and Verify against the documented
// X-Hub-Signature-256 vector (channels.md §13.3, GitHub's construction).
func TestSignatureVector(t *testing.T) {
	t.Parallel()
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	body := []byte("Hello, World!")
	if got := meta.Sign("It's a Secret to Everybody", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if got := metatest.Sign("It's a Secret to Everybody", body); got != want {
		t.Fatalf("metatest.Sign = %s, want %s", got, want)
	}
	h := http.Header{meta.SignatureHeader: {want}}
	if err := meta.Verify("facebook", "It's a Secret to Everybody", h, body); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for name, c := range map[string]struct {
		secret, sig string
		body        []byte
	}{
		"wrong secret":  {"It's a secret to everybody", want, body},
		"altered body":  {"It's a Secret to Everybody", want, []byte("Hello, World?")},
		"missing":       {"It's a Secret to Everybody", "", body},
		"sha1 only":     {"It's a Secret to Everybody", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59", body},
		"no secret":     {"", want, body},
		"upper hex":     {"It's a Secret to Everybody", strings.ToUpper(want), body},
		"without label": {"It's a Secret to Everybody", strings.TrimPrefix(want, "sha256="), body},
	} {
		h := http.Header{}
		if c.sig != "" {
			h.Set(meta.SignatureHeader, c.sig)
		}
		if err := meta.Verify("facebook", c.secret, h, c.body); !errors.Is(err, channels.ErrSignature) {
			t.Errorf("%s: Verify = %v, want ErrSignature", name, err)
		}
	}
}

// env is an operator-app Messenger connection against a fake Page.
type env struct {
	srv    *metatest.Server
	page   *metatest.Page
	a      *meta.Adapter
	person string
}

func newEnv(t *testing.T, channel string) *env {
	t.Helper()
	srv := metatest.NewServer()
	t.Cleanup(srv.Close)
	page := srv.NewUser("Ann").NewPage("Acme")
	cfg := map[string]any{"app": meta.AppOperator, "page_id": page.ID, "page_access_token": page.OperatorToken}
	if channel == meta.Instagram {
		cfg["ig_id"] = page.LinkInstagram("acme")
	}
	raw, _ := json.Marshal(cfg)
	opts := operatorOptions(srv)
	opts.MaxAttachment = 1000
	a, err := meta.New(channel, opts, channels.Connection{ID: "conn_1", Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return &env{srv: srv, page: page, a: a, person: page.Person(channel == meta.Instagram)}
}

func (e *env) parse(t *testing.T, object string, evs ...metatest.Event) []channels.Inbound {
	t.Helper()
	id := e.page.ID
	if object == "instagram" {
		id = e.page.IGID
	}
	body := metatest.Batch(object, metatest.Entry{ID: id, Messaging: evs})
	r := metatest.SignedRequest("https://comm.example/hooks/x", e.srv.AppSecret, body)
	ins, err := e.a.ParseWebhook(r, body)
	if err != nil {
		t.Fatalf("ParseWebhook: %v", err)
	}
	return ins
}

// TestInbound: text with a reply reference, echoes ignored, postbacks,
// attachments downloaded (too big, gone and non-file ones left out).
func TestInbound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, meta.Facebook)
	img := e.srv.AddFile("cat.png", "image/png", []byte("\x89PNG small"))
	big := e.srv.AddFile("big.mp4", "video/mp4", make([]byte, 2000))
	gone := e.srv.URL + "/cdn/nothere/x.jpg"
	ins := e.parse(t, "page",
		metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_1", Text: "hi", ReplyTo: "m_0"}.Event(),
		metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_echo", Text: "our own", Echo: true}.Event(),
		metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_2", Attachments: [][2]string{
			{"image", img}, {"video", big}, {"image", gone}, {"location", ""}, {"file", "https://evil.example/x"}}}.Event(),
		metatest.Postback(e.person, e.page.ID, "m_pb", "Get started", "START"),
	)
	if len(ins) != 3 {
		t.Fatalf("got %d items, want 3 (the echo ignored): %+v", len(ins), ins)
	}
	if in := ins[0]; in.ProviderID != "m_1" || in.Sender != e.person || in.ThreadKey != e.person || in.Text != "hi" || !slices.Equal(in.References, []string{"m_0"}) {
		t.Errorf("text message: %+v", in)
	}
	in := ins[1]
	if len(in.Attachments) != 1 || in.Attachments[0].Filename != "cat.png" || in.Attachments[0].ContentType != "image/png" || string(in.Attachments[0].Data) != "\x89PNG small" {
		t.Errorf("attachments %+v, want cat.png only", in.Attachments)
	}
	var d map[string]any
	_ = json.Unmarshal(in.Details, &d)
	if left, _ := d["attachments_left_out"].([]any); len(left) != 4 {
		t.Errorf("details %s: want 4 attachments left out", in.Details)
	}
	if pb := ins[2]; pb.ProviderID != "m_pb" || pb.Text != "Get started" || !strings.Contains(string(pb.Details), "START") {
		t.Errorf("postback %+v", pb)
	}
	// A CDN that fails is transient: Meta delivers again.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(broken.Close)
	raw, _ := json.Marshal(map[string]any{"app": meta.AppOperator, "page_id": e.page.ID, "page_access_token": e.page.OperatorToken})
	a2, err := meta.New(meta.Facebook, meta.Options{APIURL: broken.URL + "/v23.0", AppID: "1", AppSecret: e.srv.AppSecret, VerifyToken: "v"}, channels.Connection{Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	body := metatest.Batch("page", metatest.Entry{ID: e.page.ID, Messaging: []metatest.Event{
		metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_3", Attachments: [][2]string{{"image", broken.URL + "/x.png"}}}.Event()}})
	if _, err := a2.ParseWebhook(metatest.SignedRequest("https://comm.example/hooks/x", e.srv.AppSecret, body), body); !errors.Is(err, channels.ErrTransient) {
		t.Errorf("a failing CDN: %v, want a transient error", err)
	}
}

// TestBatchedEntries: one POST carrying several Pages' entries gives each
// connection its own events only, and the app's Route names every Page.
func TestBatchedEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, meta.Facebook)
	other := e.srv.NewUser("Bob").NewPage("Globex")
	body := metatest.Batch("page",
		metatest.Entry{ID: e.page.ID, Messaging: []metatest.Event{metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_a", Text: "for acme"}.Event()}},
		metatest.Entry{ID: other.ID, Messaging: []metatest.Event{metatest.Message{Sender: "42", Recipient: other.ID, MID: "m_b", Text: "for globex"}.Event()}},
		metatest.Entry{ID: e.page.ID, Messaging: []metatest.Event{metatest.Message{Sender: e.person, Recipient: e.page.ID, MID: "m_c", Text: "acme again"}.Event()}},
	)
	r := metatest.SignedRequest("https://comm.example/hooks/facebook", e.srv.AppSecret, body)
	ins, err := e.a.ParseWebhook(r, body)
	if err != nil || len(ins) != 2 || ins[0].ProviderID != "m_a" || ins[1].ProviderID != "m_c" {
		t.Fatalf("ParseWebhook: %v %+v, want m_a and m_c", err, ins)
	}
	keys, resp, err := meta.FacebookDescriptor(operatorOptions(e.srv)).App.Route(r, body)
	if err != nil || resp != nil || !slices.Equal(keys, []string{e.page.ID, other.ID}) {
		t.Fatalf("Route: %v %v %v, want both Pages once", keys, resp, err)
	}
	// Instagram's route takes the instagram object only.
	keys, resp, err = meta.InstagramDescriptor(operatorOptions(e.srv)).App.Route(r, body)
	if err != nil || resp != nil || len(keys) != 0 {
		t.Fatalf("instagram Route of a page object: %v %v %v, want nothing", keys, resp, err)
	}
}

// TestVerification: the GET verification answers the challenge only with
// the verify token.
func TestVerification(t *testing.T) {
	t.Parallel()
	srv := metatest.NewServer()
	t.Cleanup(srv.Close)
	app := meta.FacebookDescriptor(operatorOptions(srv)).App
	_, resp, err := app.Route(metatest.Verification("https://comm.example/hooks/facebook", srv.VerifyToken, "8472"), nil)
	if err != nil || resp == nil || string(resp.Body) != "8472" {
		t.Fatalf("verification: %v %+v", err, resp)
	}
	for _, r := range []*http.Request{
		metatest.Verification("https://comm.example/hooks/facebook", "wrong", "8472"),
		metatest.Verification("https://comm.example/hooks/facebook", srv.VerifyToken, ""),
		metatest.Verification("https://comm.example/hooks/facebook", srv.VerifyToken, "<script>"+strings.Repeat("x", 300)),
		httptest.NewRequest("GET", "https://comm.example/hooks/facebook?hub.mode=unsubscribe&hub.verify_token="+url.QueryEscape(srv.VerifyToken)+"&hub.challenge=1", nil),
	} {
		if _, resp, err := app.Route(r, nil); !errors.Is(err, channels.ErrSignature) || resp != nil {
			t.Errorf("%s: %v %+v, want ErrSignature", r.URL, err, resp)
		}
	}
}

// TestReceipts: deliveries name mids; a Messenger read watermark names
// the mids this adapter sent to the person before it; Instagram's seen
// names its mid.
func TestReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, meta.Facebook)
	ctx := context.Background()
	var mids []string
	for _, text := range []string{"one", "two"} {
		r, err := e.a.Send(ctx, channels.Outbound{To: e.person, ThreadKey: e.person, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		mids = append(mids, r.ProviderID)
	}
	later := time.Now().Add(time.Minute).UnixMilli()
	ins := e.parse(t, "page",
		metatest.Delivery(e.person, e.page.ID, []string{mids[0]}, later),
		metatest.Delivery(e.person, e.page.ID, nil, later),
		metatest.Read(e.person, e.page.ID, later),
		metatest.Read(e.person, e.page.ID, later), // all read already: nothing
	)
	type rc struct{ mid, state string }
	var got []rc
	for _, in := range ins {
		if in.Receipt == nil {
			t.Fatalf("a receipt event gave a message: %+v", in)
		}
		if in.Receipt.At.IsZero() {
			t.Errorf("receipt %+v without a time", in.Receipt)
		}
		got = append(got, rc{in.Receipt.MessageID, in.Receipt.State})
	}
	want := []rc{{mids[0], channels.ReceiptDelivered}, {mids[0], channels.ReceiptDelivered}, {mids[1], channels.ReceiptDelivered},
		{mids[0], channels.ReceiptRead}, {mids[1], channels.ReceiptRead}}
	if !slices.Equal(got, want) {
		t.Fatalf("receipts %v, want %v", got, want)
	}
	// A watermark before the sends reads nothing.
	if ins := e.parse(t, "page", metatest.Read(e.person, e.page.ID, time.Now().Add(-time.Hour).UnixMilli())); len(ins) != 0 {
		t.Errorf("an old watermark gave %+v", ins)
	}
	// A watermark at Meta's own stamp of a message (taken between the
	// request and the answer, in ms) covers it; only the first part of a
	// split text is named (the message comm stores).
	long := strings.Repeat("word ", meta.MaxFacebookText/5+10)
	r, err := e.a.Send(ctx, channels.Outbound{To: e.person, ThreadKey: e.person, Text: long})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.page.Sent()
	if len(sent) != 4 || sent[2].MID != r.ProviderID {
		t.Fatalf("the Send API got %d messages, want the long text in 2 parts", len(sent))
	}
	for _, wm := range []time.Time{sent[2].At, sent[3].At} {
		ins = e.parse(t, "page", metatest.Read(e.person, e.page.ID, wm.UnixMilli()))
		if wm == sent[2].At && (len(ins) != 1 || ins[0].Receipt.MessageID != r.ProviderID || ins[0].Receipt.State != channels.ReceiptRead) {
			t.Fatalf("a watermark at the message's own stamp gave %+v, want it read", ins)
		}
		if wm == sent[3].At && len(ins) != 0 {
			t.Fatalf("a watermark at the second part's stamp gave %+v, want nothing more", ins)
		}
	}

	ig := newEnv(t, meta.Instagram)
	ins = ig.parse(t, "instagram", metatest.Seen(ig.person, ig.page.IGID, "m_ig1", time.Now().UnixMilli()))
	if len(ins) != 1 || ins[0].Receipt == nil || ins[0].Receipt.MessageID != "m_ig1" || ins[0].Receipt.State != channels.ReceiptRead {
		t.Fatalf("instagram seen: %+v", ins)
	}
}

// TestSendErrors: Meta's codes map to the failure classes.
func TestSendErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, meta.Facebook)
	ctx := context.Background()
	send := func() error {
		_, err := e.a.Send(ctx, channels.Outbound{To: e.person, ThreadKey: e.person, Text: "hello"})
		return err
	}
	for _, code := range []int{4, 17, 32, 613, 130429} {
		e.page.FailNext(metatest.RateLimited(code, 0))
		err := send()
		if !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) <= 0 {
			t.Errorf("rate limit code %d: %v (retry after %s), want transient with a backoff", code, err, channels.RetryAfter(err))
		}
	}
	e.page.FailNext(metatest.RateLimited(613, 5))
	if err := send(); channels.RetryAfter(err) != 5*time.Minute {
		t.Errorf("estimated_time_to_regain_access 5: retry after %s, want 5m", channels.RetryAfter(err))
	}
	for _, f := range []metatest.Failure{metatest.OutsideWindow, metatest.NotAvailable} {
		e.page.FailNext(f)
		err := send()
		if !errors.Is(err, channels.ErrPermanent) || errors.Is(err, channels.ErrRevoked) || !strings.Contains(err.Error(), "24-hour") {
			t.Errorf("code %d: %v, want permanent naming the 24-hour window", f.Code, err)
		}
	}
	e.page.CloseWindow(e.person)
	if err := send(); !strings.Contains(fmtErr(err), "24-hour messaging window") {
		t.Errorf("outside the window: %v", err)
	}
	e.page.Revoke()
	if err := send(); !errors.Is(err, channels.ErrRevoked) {
		t.Errorf("expired token: %v, want revoked", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestSplit: Messenger texts are cut at 2000 characters, Instagram's at
// 1000 bytes, and the fake sees every part.
func TestSplit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		channel string
		text    string
		parts   int
	}{
		{meta.Facebook, strings.Repeat("é", 4500), 3},
		{meta.Instagram, strings.Repeat("é", 1200), 3},
		{meta.Instagram, strings.Repeat("word ", 150), 1},
		{meta.Facebook, strings.Repeat("👋", 1500), 2}, // 3000 UTF-16 units
	} {
		e := newEnv(t, c.channel)
		if _, err := e.a.Send(context.Background(), channels.Outbound{To: e.person, ThreadKey: e.person, Text: c.text}); err != nil {
			t.Fatalf("%s: %v", c.channel, err)
		}
		sent := e.page.Sent()
		var joined strings.Builder
		for _, m := range sent {
			joined.WriteString(m.Text)
			if m.MessagingType != "RESPONSE" {
				t.Errorf("messaging_type %q, want RESPONSE", m.MessagingType)
			}
		}
		if len(sent) != c.parts || joined.String() != c.text {
			t.Errorf("%s: %d parts, want %d, joined equal %v", c.channel, len(sent), c.parts, joined.String() == c.text)
		}
	}
	for _, p := range meta.Split(strings.Repeat("a b\n", 1000), 100, false) {
		if len(p) > 100 || !utf8.ValidString(p) {
			t.Fatalf("part %q over the limit", p)
		}
	}
	if got := meta.Split("", 100, true); len(got) != 1 || got[0] != "" {
		t.Errorf("Split of nothing: %q", got)
	}
	if got := meta.Split("short", 100, true); len(got) != 1 || got[0] != "short" {
		t.Errorf("Split of a short text: %q", got)
	}
}

// TestInstall: the login code gives the person's Pages; the connection
// binds to the one chosen, or the first, with its Page token; a Page not
// granted is named.
func TestInstall(t *testing.T) {
	t.Parallel()
	srv := metatest.NewServer()
	t.Cleanup(srv.Close)
	ann := srv.NewUser("Ann")
	p1, p2 := ann.NewPage("One"), ann.NewPage("Two")
	ig2 := p2.LinkInstagram("two")
	const redirect = "https://comm.example/oauth/facebook/callback"
	install := func(channel, config string) (channels.Provisioned, error) {
		t.Helper()
		a, err := meta.New(channel, operatorOptions(srv), channels.Connection{ID: "conn_x", Config: json.RawMessage(config)})
		if err != nil {
			t.Fatal(err)
		}
		if !a.NeedsInstall() {
			t.Fatalf("%s: does not wait for an install", config)
		}
		au := a.AuthorizeURL("state-1", redirect)
		u, _ := url.Parse(au)
		if q := u.Query(); q.Get("client_id") != srv.AppID || !strings.Contains(q.Get("scope"), "pages_messaging") || q.Get("response_type") != "code" {
			t.Fatalf("authorize URL %s", au)
		}
		back, err := srv.Authorize(au, ann)
		if err != nil {
			t.Fatal(err)
		}
		bu, _ := url.Parse(back)
		return a.Install(context.Background(), bu.Query().Get("code"), redirect)
	}
	check := func(p channels.Provisioned, err error, key string) map[string]string {
		t.Helper()
		if err != nil || p.RouteKey != key {
			t.Fatalf("install: %v, route key %q, want %q", err, p.RouteKey, key)
		}
		var cfg map[string]string
		_ = json.Unmarshal(p.Config, &cfg)
		return cfg
	}
	p, err := install(meta.Facebook, `{}`)
	if cfg := check(p, err, p1.ID); cfg["page_access_token"] != p1.OperatorToken || cfg["app"] != "operator" {
		t.Errorf("first Page: %v", cfg)
	}
	p, err = install(meta.Facebook, `{"page_id":"`+p2.ID+`"}`)
	check(p, err, p2.ID)
	p, err = install(meta.Instagram, `{}`)
	if cfg := check(p, err, ig2); cfg["ig_id"] != ig2 || cfg["page_id"] != p2.ID {
		t.Errorf("instagram: %v, want the Page with a linked account", cfg)
	}
	var ce *channels.ConfigError
	if _, err := install(meta.Facebook, `{"page_id":"999"}`); !errors.As(err, &ce) || ce.Field != "page_id" || !strings.Contains(ce.Msg, p1.ID) {
		t.Errorf("a Page not granted: %v", err)
	}
	a, _ := meta.New(meta.Facebook, operatorOptions(srv), channels.Connection{Config: json.RawMessage(`{}`)})
	if _, err := a.Install(context.Background(), "AQforged", redirect); !errors.As(err, &ce) || ce.Field != "code" {
		t.Errorf("a forged code: %v, want a ConfigError on code", err)
	}
	wrong := operatorOptions(srv)
	wrong.AppSecret = "not0the0app0secret0"
	a, _ = meta.New(meta.Facebook, wrong, channels.Connection{Config: json.RawMessage(`{}`)})
	if _, err := a.Install(context.Background(), "AQany", redirect); !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "app secret") {
		t.Errorf("a wrong app secret: %v, want a permanent failure naming the app secret", err)
	}
}

// TestHumanAgent: with human_agent, a message refused outside the 24-hour
// window goes out again with the HUMAN_AGENT tag.
func TestHumanAgent(t *testing.T) {
	t.Parallel()
	srv := metatest.NewServer()
	t.Cleanup(srv.Close)
	page := srv.NewUser("Ann").NewPage("Acme")
	raw, _ := json.Marshal(map[string]any{"page_id": page.ID, "page_access_token": page.Token, "app_secret": page.AppSecret, "human_agent": true})
	a, err := meta.New(meta.Facebook, meta.Options{APIURL: srv.APIURL}, channels.Connection{ID: "conn_h", Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	person := page.Person(false)
	page.CloseWindow(person)
	if _, err := a.Send(context.Background(), channels.Outbound{To: person, ThreadKey: person, Text: "An agent here."}); err != nil {
		t.Fatal(err)
	}
	if sent := page.Sent(); len(sent) != 1 || sent[0].MessagingType != "MESSAGE_TAG" || sent[0].Tag != "HUMAN_AGENT" {
		t.Fatalf("sent %+v, want one HUMAN_AGENT tagged message", sent)
	}
}

// TestProvisionWrongSecret: an app secret that is not the token's app's is
// named (Meta refuses the appsecret_proof).
func TestProvisionWrongSecret(t *testing.T) {
	t.Parallel()
	srv := metatest.NewServer()
	t.Cleanup(srv.Close)
	page := srv.NewUser("Ann").NewPage("Acme")
	raw, _ := json.Marshal(map[string]any{"page_id": page.ID, "page_access_token": page.Token, "app_secret": "0123456789abcdef0123"})
	a, err := meta.New(meta.Facebook, meta.Options{APIURL: srv.APIURL}, channels.Connection{ID: "conn_w", Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	var ce *channels.ConfigError
	if _, err := a.Provision(context.Background()); !errors.As(err, &ce) || ce.Field != "app_secret" {
		t.Fatalf("Provision with another app's secret: %v, want a ConfigError on app_secret", err)
	}
}

package telnyx_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
)

// TestVector checks signing and verification against channels.md §13's
// Telnyx vector (fixed seed 01..20).
func TestVector(t *testing.T) {
	t.Parallel()
	seed, _ := hex.DecodeString("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20")
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	if got := base64.StdEncoding.EncodeToString(pub); got != "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ=" {
		t.Fatalf("public key %s", got)
	}
	body := []byte(`{"data":{"event_type":"message.received"}}`)
	const want = "NFRcYm6R2xTydmo7DA02Bow7hv9d28s0LO/jBFW2Z4lWVsmmID0ti/kP1P344kga11sNXBomrhz3AXm9bkRgAw=="
	if got := telnyx.Sign(key, "1700000000", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if got := telnyxtest.Sign(key, "1700000000", body); got != want {
		t.Fatalf("telnyxtest.Sign = %s, want %s", got, want)
	}
	h := http.Header{}
	h.Set("telnyx-signature-ed25519", want)
	h.Set("telnyx-timestamp", "1700000000")
	if err := telnyx.Verify(pub, h, body, time.Unix(1700000000, 0), telnyx.DefaultTolerance); err != nil {
		t.Fatalf("Verify of the vector: %v", err)
	}
}

// TestVerify: what the check refuses, each with a reason, all wrapping
// channels.ErrSignature; 300 s either way is accepted.
func TestVerify(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	body := []byte(`{"data":{"event_type":"message.received","id":"x"}}`)
	now := time.Unix(1800000000, 0)
	signed := func(at time.Time) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		h := http.Header{}
		h.Set(telnyx.TimestampHeader, ts)
		h.Set(telnyx.SignatureHeader, telnyx.Sign(key, ts, body))
		return h
	}
	for _, at := range []time.Time{now, now.Add(-300 * time.Second), now.Add(300 * time.Second)} {
		if err := telnyx.Verify(pub, signed(at), body, now, telnyx.DefaultTolerance); err != nil {
			t.Errorf("signed at %s (now %s): %v", at, now, err)
		}
	}
	tests := []struct {
		name string
		h    func() http.Header
		pub  ed25519.PublicKey
		body []byte
		want string
	}{
		{"no signature", func() http.Header { h := signed(now); h.Del(telnyx.SignatureHeader); return h }, pub, body, "no telnyx-signature-ed25519"},
		{"no timestamp", func() http.Header { h := signed(now); h.Del(telnyx.TimestampHeader); return h }, pub, body, "no telnyx-timestamp"},
		{"timestamp not a number", func() http.Header { h := signed(now); h.Set(telnyx.TimestampHeader, "yesterday"); return h }, pub, body, "not unix seconds"},
		{"signature not base64", func() http.Header { h := signed(now); h.Set(telnyx.SignatureHeader, "!!!"); return h }, pub, body, "not a base64 Ed25519 signature"},
		{"short signature", func() http.Header { h := signed(now); h.Set(telnyx.SignatureHeader, "AAAA"); return h }, pub, body, "not a base64 Ed25519 signature"},
		{"other key", func() http.Header { return signed(now) }, otherPub, body, "does not verify"},
		{"altered body", func() http.Header { return signed(now) }, pub, append(bytes.Clone(body), ' '), "does not verify"},
		{"timestamp moved", func() http.Header {
			h := signed(now)
			h.Set(telnyx.TimestampHeader, strconv.FormatInt(now.Unix()+1, 10))
			return h
		}, pub, body, "does not verify"},
		{"stale", func() http.Header { return signed(now.Add(-301 * time.Second)) }, pub, body, "5m1s old"},
		{"far future", func() http.Header { return signed(now.Add(time.Hour)) }, pub, body, "in the future"},
	}
	for _, tt := range tests {
		err := telnyx.Verify(tt.pub, tt.h(), tt.body, now, telnyx.DefaultTolerance)
		switch {
		case err == nil:
			t.Errorf("%s: verified", tt.name)
		case !errors.Is(err, channels.ErrSignature):
			t.Errorf("%s: %v does not wrap ErrSignature", tt.name, err)
		case !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %q does not say %q", tt.name, err, tt.want)
		}
	}
}

// env is an adapter against an account of a fake.
type env struct {
	srv  *telnyxtest.Server
	acct *telnyxtest.Account
	a    *telnyx.Adapter
	now  time.Time
}

const testHook = "https://comm.example/hooks/sms/conn_test"

func newEnv(t *testing.T, cfg map[string]any, opts telnyx.Options) *env {
	t.Helper()
	srv := telnyxtest.NewServer()
	t.Cleanup(srv.Close)
	e := &env{srv: srv, acct: srv.NewAccount(), now: time.Unix(1800000000, 0)}
	srv.Now = func() time.Time { return e.now }
	if cfg == nil {
		cfg = map[string]any{"from": e.acct.Number}
	}
	cfg["api_key"], cfg["public_key"] = e.acct.APIKey, e.acct.PublicKey
	raw, _ := json.Marshal(cfg)
	opts.APIURL = srv.APIURL
	opts.Now = func() time.Time { return e.now }
	a, err := telnyx.New(t.Context(), opts, channels.Connection{ID: "conn_test", ProjectID: "proj_test", Config: raw, WebhookURL: testHook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	e.a = a
	return e
}

func (e *env) parse(t *testing.T, body []byte) ([]channels.Inbound, error) {
	t.Helper()
	r, err := e.acct.Request(context.Background(), testHook, body)
	if err != nil {
		t.Fatal(err)
	}
	r.Body = http.NoBody
	return e.a.ParseWebhook(r, body)
}

func (e *env) receive(t *testing.T, m *telnyxtest.Inbound, attempt int) ([]channels.Inbound, error) {
	t.Helper()
	return e.parse(t, e.acct.Event(telnyx.EventReceived, e.acct.Received(m), attempt))
}

func TestReceived(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, telnyx.Options{})
	m := &telnyxtest.Inbound{From: "+15550100001", Text: "Hi there, is my order ready? 👋"}
	ins, err := e.receive(t, m, 1)
	if err != nil || len(ins) != 1 {
		t.Fatalf("%d messages, %v", len(ins), err)
	}
	in := ins[0]
	if in.ProviderID != m.ID || in.Sender != "+15550100001" || in.ThreadKey != "+15550100001" || in.Text != m.Text || in.Receipt != nil {
		t.Fatalf("inbound %+v", in)
	}
	var d map[string]any
	if err := json.Unmarshal(in.Details, &d); err != nil || d["type"] != "SMS" || d["carrier"] == nil {
		t.Fatalf("details %s: %v", in.Details, err)
	}
	// Telnyx retries: the same message id, so it is stored once.
	again, err := e.receive(t, &telnyxtest.Inbound{ID: m.ID, From: m.From, Text: m.Text}, 2)
	if err != nil || len(again) != 1 || again[0].ProviderID != in.ProviderID {
		t.Fatalf("retry: %+v %v", again, err)
	}
	// A message to another number of the profile is not this
	// connection's.
	other := e.acct.AddNumber(e.acct.ProfileID)
	if ins, err := e.receive(t, &telnyxtest.Inbound{From: "+15550100001", To: other, Text: "wrong number"}, 1); err != nil || len(ins) != 0 {
		t.Fatalf("message to %s: %+v %v, want none", other, ins, err)
	}
	// Events comm does not keep, and payloads without what it needs.
	if ins, err := e.parse(t, e.acct.Event("message.unknown_event", map[string]any{"id": "x"}, 1)); err != nil || len(ins) != 0 {
		t.Errorf("unknown event: %+v %v", ins, err)
	}
	if _, err := e.parse(t, e.acct.Event(telnyx.EventReceived, map[string]any{"id": "x", "text": "no sender"}, 1)); err == nil {
		t.Error("message.received without a sender accepted")
	}
	if _, err := e.parse(t, e.acct.Event(telnyx.EventReceived, map[string]any{"text": "no id"}, 1)); err == nil {
		t.Error("message.received without an id accepted")
	}
	// The clock: a delivery signed 6 minutes ago is refused.
	body := e.acct.Event(telnyx.EventReceived, e.acct.Received(&telnyxtest.Inbound{From: "+15550100001", Text: "late"}), 1)
	r, _ := e.acct.RequestAt(context.Background(), testHook, body, e.now.Add(-6*time.Minute))
	if _, err := e.a.ParseWebhook(r, body); !errors.Is(err, channels.ErrSignature) || !strings.Contains(err.Error(), "old") {
		t.Errorf("stale delivery: %v", err)
	}
}

func TestMMS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, telnyx.Options{MaxAttachment: 1000, MaxMedia: 2, LastAttemptMedia: 200 * time.Millisecond})
	jpg := bytes.Repeat([]byte{0xff, 0xd8, 0xff}, 100)
	photo := e.srv.AddMedia("photo.jpg", "image/jpeg", jpg)
	card := e.srv.AddMedia("contact", "text/vcard", []byte("BEGIN:VCARD\r\nEND:VCARD\r\n"))
	big := e.srv.AddMedia("video.mp4", "video/mp4", make([]byte, 2000))
	ins, err := e.receive(t, &telnyxtest.Inbound{From: "+15550100001", Media: []string{photo, card}}, 1)
	if err != nil || len(ins) != 1 {
		t.Fatalf("%+v %v", ins, err)
	}
	atts := ins[0].Attachments
	if len(atts) != 2 || !bytes.Equal(atts[0].Data, jpg) || atts[0].ContentType != "image/jpeg" || atts[0].Filename != "photo.jpg" ||
		atts[1].ContentType != "text/vcard" || !strings.HasPrefix(atts[1].Filename, "media2") {
		t.Fatalf("attachments %+v", atts)
	}

	// Too big, and more than MaxMedia: left out and listed.
	ins, err = e.receive(t, &telnyxtest.Inbound{From: "+15550100001", Text: "three", Media: []string{big, photo, card}}, 1)
	if err != nil || len(ins) != 1 || len(ins[0].Attachments) != 1 {
		t.Fatalf("%+v %v", ins, err)
	}
	if d := string(ins[0].Details); !strings.Contains(d, "larger than 1000 bytes") || !strings.Contains(d, "more than 2 media") {
		t.Fatalf("details %s do not list the media left out", d)
	}

	// A download failing with 503: the request fails transiently (Telnyx
	// delivers it again) until the last attempt, which stores the text and
	// lists the media.
	flaky := e.srv.AddMedia("flaky.png", "image/png", []byte("png"))
	e.srv.FailMedia(flaky, 503, 503, 503)
	m := &telnyxtest.Inbound{From: "+15550100001", Text: "see picture", Media: []string{flaky}}
	for attempt := 1; attempt < telnyx.LastAttempt; attempt++ {
		if _, err := e.receive(t, m, attempt); !errors.Is(err, channels.ErrTransient) {
			t.Fatalf("attempt %d with the media unavailable: %v, want a transient error", attempt, err)
		}
	}
	ins, err = e.receive(t, m, telnyx.LastAttempt)
	if err != nil || len(ins) != 1 || len(ins[0].Attachments) != 0 || ins[0].Text != "see picture" ||
		!strings.Contains(string(ins[0].Details), "503") {
		t.Fatalf("last attempt: %+v %v", ins, err)
	}
	// Then it works again.
	ins, err = e.receive(t, m, 1)
	if err != nil || len(ins) != 1 || len(ins[0].Attachments) != 1 {
		t.Fatalf("after recovery: %+v %v", ins, err)
	}
	// Slow media on the last attempt: stored in time without it.
	slow := e.srv.AddMedia("slow.png", "image/png", []byte("png"))
	e.srv.FailMedia(slow, telnyxtest.HangMedia)
	t0 := time.Now()
	ins, err = e.receive(t, &telnyxtest.Inbound{From: "+15550100001", Text: "slow one", Media: []string{slow}}, telnyx.LastAttempt)
	if err != nil || len(ins) != 1 || len(ins[0].Attachments) != 0 || !strings.Contains(string(ins[0].Details), "deadline") || time.Since(t0) > 5*time.Second {
		t.Fatalf("slow media on the last attempt: %+v %v after %s", ins, err, time.Since(t0))
	}
	// Gone (404): left out at once.
	gone := e.srv.AddMedia("gone.png", "image/png", []byte("png"))
	e.srv.FailMedia(gone, 404)
	ins, err = e.receive(t, &telnyxtest.Inbound{From: "+15550100001", Media: []string{gone}}, 1)
	if err != nil || len(ins) != 1 || len(ins[0].Attachments) != 0 || !strings.Contains(string(ins[0].Details), "404") {
		t.Fatalf("gone media: %+v %v", ins, err)
	}
}

func TestReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, telnyx.Options{})
	res, err := e.a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: "+15550100001", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	report := func(typ, status string, errs ...telnyxtest.Error) []channels.Inbound {
		t.Helper()
		p, err := e.acct.Report(res.ProviderID, status, errs...)
		if err != nil {
			t.Fatal(err)
		}
		ins, err := e.parse(t, e.acct.Event(typ, p, 1))
		if err != nil {
			t.Fatalf("%s %s: %v", typ, status, err)
		}
		return ins
	}
	want := func(ins []channels.Inbound, state, code, reason string) {
		t.Helper()
		if len(ins) != 1 || ins[0].Receipt == nil {
			t.Fatalf("%+v, want one receipt", ins)
		}
		rc := ins[0].Receipt
		if rc.MessageID != res.ProviderID || rc.State != state || rc.Code != code || !strings.Contains(rc.Reason, reason) || !rc.At.Equal(e.now) {
			t.Fatalf("receipt %+v, want %s %s %q at %s for %s", rc, state, code, reason, e.now, res.ProviderID)
		}
	}
	want(report(telnyx.EventSent, "sent"), channels.ReceiptSent, "", "")
	want(report(telnyx.EventFinalized, "delivered"), channels.ReceiptDelivered, "", "")
	want(report(telnyx.EventFinalized, "delivery_failed", telnyxtest.Error{Code: "40008", Title: "Undeliverable", Detail: "The carrier did not accept the message."}),
		channels.ReceiptFailed, "40008", "Undeliverable: The carrier did not accept the message.")
	want(report(telnyx.EventFinalized, "sending_failed"), channels.ReceiptFailed, "", "sending failed")
	want(report(telnyx.EventFinalized, "delivery_unconfirmed"), channels.ReceiptSent, "", "")
	if ins := report(telnyx.EventFinalized, "queued"); len(ins) != 0 {
		t.Errorf("finalized while queued: %+v, want nothing", ins)
	}
}

func TestProvision(t *testing.T) {
	t.Parallel()
	t.Run("from", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil, telnyx.Options{})
		e.srv.SetWebhook(e.acct.ProfileID, "https://old.example/hook", "1")
		p, err := e.a.Provision(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		prof, _ := e.srv.Profile(e.acct.ProfileID)
		if prof.WebhookURL != testHook || prof.WebhookAPIVersion != "2" || p.Address != e.acct.Number {
			t.Fatalf("profile %+v, address %q", prof, p.Address)
		}
		var cfg telnyx.Config
		if err := json.Unmarshal(p.Config, &cfg); err != nil || cfg.MessagingProfileID != e.acct.ProfileID || !cfg.WebhookSet {
			t.Fatalf("stored config %s", p.Config)
		}
		// Deprovision clears the webhook it set, and can be repeated.
		b, err := telnyx.New(t.Context(), telnyx.Options{APIURL: e.srv.APIURL}, channels.Connection{ID: "conn_test", Config: p.Config, WebhookURL: testHook})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := b.Deprovision(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if prof, _ := e.srv.Profile(e.acct.ProfileID); prof.WebhookURL != "" {
			t.Fatalf("webhook after deprovision: %+v", prof)
		}
		// One pointing elsewhere is left alone; a revoked key is nothing
		// to undo.
		e.srv.SetWebhook(e.acct.ProfileID, "https://elsewhere.example/", "2")
		if err := b.Deprovision(t.Context()); err != nil {
			t.Fatal(err)
		}
		if prof, _ := e.srv.Profile(e.acct.ProfileID); prof.WebhookURL != "https://elsewhere.example/" {
			t.Fatalf("deprovision changed another webhook: %+v", prof)
		}
		e.acct.Revoke()
		if err := b.Deprovision(t.Context()); err != nil {
			t.Fatalf("deprovision with a revoked key: %v", err)
		}
	})
	t.Run("no-configure", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil, telnyx.Options{})
		e = envWith(t, e, map[string]any{"from": e.acct.Number, "configure_webhooks": false})
		if _, err := e.a.Provision(t.Context()); err != nil {
			t.Fatal(err)
		}
		if e.acct.Calls("patch") != 0 || e.acct.Webhook() != "" {
			t.Fatalf("configure_webhooks false patched the profile: %q", e.acct.Webhook())
		}
		// A v1 profile cannot be verified: said at once.
		e.srv.SetWebhook(e.acct.ProfileID, "https://customer.example/", "1")
		checkConfigError(t, e.a, "configure_webhooks", "version")
	})
	t.Run("pool", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, map[string]any{"from": "+15550000000"}, telnyx.Options{})
		e = envWith(t, e, map[string]any{"messaging_profile_id": e.acct.ProfileID})
		p, err := e.a.Provision(t.Context())
		if err != nil || e.acct.Webhook() != testHook || p.Address != "" {
			t.Fatalf("%+v %v (webhook %q)", p, err, e.acct.Webhook())
		}
		a2, err := telnyx.New(t.Context(), telnyx.Options{APIURL: e.srv.APIURL}, channels.Connection{ID: "conn_test", Config: p.Config, WebhookURL: testHook})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a2.Send(t.Context(), channels.Outbound{To: "+15550100001", Text: "from the pool"}); err != nil {
			t.Fatal(err)
		}
		s := e.acct.Sent()
		if len(s) != 1 || s[0].Path != "/v2/messages/number_pool" || s[0].From != e.acct.Number || s[0].WebhookURL != testHook {
			t.Fatalf("sent %+v", s)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil, telnyx.Options{})
		checkConfigError(t, envWith(t, e, map[string]any{"from": "+15559999999"}).a, "from", "not a messaging number of this Telnyx account")
		loose := e.acct.AddNumber("")
		checkConfigError(t, envWith(t, e, map[string]any{"from": loose}).a, "from", "not assigned to a messaging profile")
		other := e.acct.AddProfile("other")
		checkConfigError(t, envWith(t, e, map[string]any{"from": e.acct.Number, "messaging_profile_id": other}).a, "messaging_profile_id", "belongs to the messaging profile")
		checkConfigError(t, envWith(t, e, map[string]any{"messaging_profile_id": "00000000-0000-0000-0000-000000000000"}).a, "messaging_profile_id", "no messaging profile")
		noHook, err := telnyx.New(t.Context(), telnyx.Options{APIURL: e.srv.APIURL}, channels.Connection{ID: "conn_x",
			Config: mustJSON(map[string]any{"api_key": e.acct.APIKey, "public_key": e.acct.PublicKey, "from": e.acct.Number})})
		if err != nil {
			t.Fatal(err)
		}
		checkConfigError(t, noHook, "configure_webhooks", "no public URL")
		e.acct.Revoke()
		checkConfigError(t, envWith(t, e, map[string]any{"from": e.acct.Number}).a, "api_key", "rejected the API key")
	})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// envWith is e with an adapter of cfg (the account's key added).
func envWith(t *testing.T, e *env, cfg map[string]any) *env {
	t.Helper()
	cfg["api_key"], cfg["public_key"] = e.acct.APIKey, e.acct.PublicKey
	a, err := telnyx.New(t.Context(), telnyx.Options{APIURL: e.srv.APIURL, Now: func() time.Time { return e.now }},
		channels.Connection{ID: "conn_test", Config: mustJSON(cfg), WebhookURL: testHook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	n := *e
	n.a = a
	return &n
}

func checkConfigError(t *testing.T, a *telnyx.Adapter, field, says string) {
	t.Helper()
	_, err := a.Provision(t.Context())
	var ce *channels.ConfigError
	if !errors.As(err, &ce) || ce.Field != field || !strings.Contains(ce.Msg, says) || !strings.Contains(ce.Msg, "telnyx") {
		t.Errorf("Provision: %v, want a config error on %s saying %q", err, field, says)
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, telnyx.Options{})
	send := func(to string) error {
		_, err := e.a.Send(t.Context(), channels.Outbound{MessageID: "msg_x", To: to, Text: "hi"})
		return err
	}
	e.acct.FailNext(telnyxtest.TooManyRequests(12))
	if err := send("+15550100001"); !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) != 12*time.Second {
		t.Errorf("429: %v (retry after %s)", err, channels.RetryAfter(err))
	}
	e.acct.FailNext(telnyxtest.Failure{Status: 429, Code: "10011", Title: "Too many requests"})
	if err := send("+15550100001"); !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) != 0 {
		t.Errorf("429 without a delay: %v", err)
	}
	e.acct.FailNext(telnyxtest.OptedOut)
	if err := send("+15550100001"); !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "opted out") || !strings.Contains(err.Error(), "40300") {
		t.Errorf("opted out: %v", err)
	}
	e.acct.FailNext(telnyxtest.Failure{Status: 403, Code: "10010", Title: "Authorization failed"})
	if err := send("+15550100001"); !errors.Is(err, channels.ErrRevoked) || !errors.Is(err, channels.ErrPermanent) {
		t.Errorf("403: %v", err)
	}
	// The fake's own checks: a number it cannot send to.
	if err := send("+1"); !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "E.164") {
		t.Errorf("not E.164: %v", err)
	}
	e.acct.Revoke()
	err := send("+15550100001")
	if !errors.Is(err, channels.ErrRevoked) || !strings.Contains(err.Error(), "10009") || strings.Contains(err.Error(), e.acct.APIKey) {
		t.Errorf("revoked: %v", err)
	}
}

// TestLongText: a text over 10 segments goes out in parts the fake
// accepts (it refuses more than 10 segments with 40302), in order.
func TestLongText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, telnyx.Options{})
	for _, text := range []string{
		strings.Repeat("All work and no play makes a dull SMS. ", 100), // GSM-7, 3900 septets
		strings.Repeat("Grüße aus Köln — 👋 with an emoji. ", 60),       // UCS-2
		strings.Repeat("{braces} cost two septets each [x]. ", 80),     // GSM-7 escapes
		strings.Repeat("x", telnyx.MaxGSM7) + strings.Repeat("y", 10),  // no space to cut at
	} {
		before := len(e.acct.Sent())
		res, err := e.a.Send(t.Context(), channels.Outbound{MessageID: "msg_long", To: "+15550100001", Text: text})
		if err != nil {
			t.Fatalf("send %d bytes: %v", len(text), err)
		}
		sent := e.acct.Sent()[before:]
		var joined string
		for _, s := range sent {
			joined += s.Text
			if s.Parts > telnyx.MaxSegments {
				t.Errorf("a part of %d segments", s.Parts)
			}
		}
		if len(sent) < 2 || joined != text || sent[0].ID != res.ProviderID {
			t.Errorf("%d parts, joined equal %t, first id %s vs %s", len(sent), joined == text, sent[0].ID, res.ProviderID)
		}
	}
	short := "Short and sweet."
	if got := telnyx.Split(short); len(got) != 1 || got[0] != short {
		t.Errorf("Split(%q) = %q", short, got)
	}
	for _, p := range telnyx.Split(strings.Repeat("🙂", 1000)) {
		if !utf8.ValidString(p) || utf8.RuneCountInString(p)*2 > telnyx.MaxUCS2 {
			t.Errorf("emoji part of %d runes", utf8.RuneCountInString(p))
		}
	}
}

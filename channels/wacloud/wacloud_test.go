package wacloud_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
)

const hook = "https://comm.example/hooks/whatsapp"

// world is a fake with two numbers and the descriptor configured for it.
type world struct {
	srv      *wacloudtest.Server
	one, two *wacloudtest.Number
	d        channels.Descriptor
}

func newWorld(t *testing.T, tweak ...func(*wacloud.Options)) *world {
	t.Helper()
	srv := wacloudtest.NewServer()
	t.Cleanup(srv.Close)
	w := &world{srv: srv, one: srv.AddNumber("+15550001111"), two: srv.AddNumber("+15550002222")}
	opts := wacloud.Options{GraphURL: srv.GraphURL, AppSecret: srv.AppSecret, VerifyToken: srv.VerifyToken}
	for _, n := range []*wacloudtest.Number{w.one, w.two} {
		opts.Numbers = append(opts.Numbers, wacloud.Number{PhoneNumberID: n.PhoneNumberID, DisplayNumber: n.DisplayNumber, AccessToken: n.AccessToken})
	}
	for _, f := range tweak {
		f(&opts)
	}
	w.d = wacloud.Descriptor(opts)
	if w.d.New == nil || w.d.App == nil || w.d.Shared == nil {
		t.Fatal("Descriptor with numbers has no New, App or Shared")
	}
	return w
}

// adapter is the adapter of a connection on n.
func (w *world) adapter(t *testing.T, n *wacloudtest.Number) *wacloud.Adapter {
	t.Helper()
	a, err := w.d.New(t.Context(), channels.Connection{ID: "conn_1", Config: json.RawMessage(`{}`), Line: n.PhoneNumberID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.(channels.Closer).Close() })
	return a.(*wacloud.Adapter)
}

// receive verifies and reads a webhook body as the gateway does.
func (w *world) receive(t *testing.T, body []byte) ([]channels.LineInbound, error) {
	t.Helper()
	r := wacloudtest.SignedRequest(hook, w.srv.AppSecret, body)
	if _, _, err := w.d.App.Route(r, body); err != nil {
		return nil, err
	}
	return w.d.Shared.Receive(r, body)
}

// TestMetaSignatureVector: the app webhook verifies channels.md §13's
// X-Hub-Signature-256 vector and refuses a changed body or signature.
func TestMetaSignatureVector(t *testing.T) {
	t.Parallel()
	const secret, want = "It's a Secret to Everybody", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	body := []byte("Hello, World!")
	if got := wacloudtest.Sign(secret, body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	d := wacloud.Descriptor(wacloud.Options{AppSecret: secret, VerifyToken: "v",
		Numbers: []wacloud.Number{{PhoneNumberID: "1", DisplayNumber: "+15550001111", AccessToken: "EAAG0123456789abcdef"}}})
	r := httptest.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
	r.Header.Set(meta.SignatureHeader, want)
	if _, _, err := d.App.Route(r, body); err != nil {
		t.Fatalf("Route of the vector: %v", err)
	}
	if _, _, err := d.App.Route(r, []byte("Hello, World?")); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("Route of an altered body: %v, want ErrSignature", err)
	}
	r.Header.Set(meta.SignatureHeader, strings.Replace(want, "7571", "7572", 1))
	if _, _, err := d.App.Route(r, body); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("Route of a wrong signature: %v, want ErrSignature", err)
	}
	r.Header.Del(meta.SignatureHeader)
	if _, err := d.Shared.Receive(r, body); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("Receive of an unsigned request: %v, want ErrSignature", err)
	}
}

// TestHandshake: the GET verification is answered with hub.challenge
// when the verify token matches, refused otherwise.
func TestHandshake(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, resp, err := w.d.App.Route(wacloudtest.Verification(hook, w.srv.VerifyToken, "1158201444"), nil)
	if err != nil || resp == nil || string(resp.Body) != "1158201444" {
		t.Fatalf("verification: %v %+v", err, resp)
	}
	if _, _, err := w.d.App.Route(wacloudtest.Verification(hook, "wrong", "1158201444"), nil); !errors.Is(err, channels.ErrSignature) {
		t.Errorf("wrong verify token: %v, want ErrSignature", err)
	}
}

// TestLines: the numbers are the lines, with their E.164 address and the
// wa.me join link.
func TestLines(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ls := w.d.Shared.Lines()
	if len(ls) != 2 || ls[0].ID != w.one.PhoneNumberID || ls[0].Address != "+15550001111" || ls[1].ID != w.two.PhoneNumberID {
		t.Fatalf("Lines = %+v", ls)
	}
	if got, want := ls[0].JoinLink("K7PQ-2M"), "https://wa.me/15550001111?text=join%20K7PQ-2M"; got != want {
		t.Errorf("JoinLink = %s, want %s", got, want)
	}
}

// TestUnconfigured: without numbers (or with a bad one) the channel has
// no New (501); an adapter for a line not configured is an error.
func TestUnconfigured(t *testing.T) {
	t.Parallel()
	if d := wacloud.Descriptor(wacloud.Options{AppSecret: "s", VerifyToken: "v"}); d.New != nil || d.Shared != nil || d.Tier != channels.Paid || d.Provider != "hosted" {
		t.Errorf("no numbers: %+v", d)
	}
	bad := wacloud.Options{Numbers: []wacloud.Number{{PhoneNumberID: "1", DisplayNumber: "+15550001111", AccessToken: "EAAG0123456789abcdef"}}}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "COMM_META_APP_SECRET") {
		t.Errorf("numbers without the app secret: Check = %v", err)
	}
	w := newWorld(t)
	for _, line := range []string{"", "999"} {
		if _, err := w.d.New(t.Context(), channels.Connection{ID: "conn_1", Line: line}); err == nil || !strings.Contains(err.Error(), "whatsapp") {
			t.Errorf("line %q: New = %v, want an error naming whatsapp", line, err)
		}
	}
}

// TestParseNumbers: COMM_WHATSAPP_HOSTED_NUMBERS is decoded, display
// numbers put in E.164, and a bad element named with its field.
func TestParseNumbers(t *testing.T) {
	t.Parallel()
	ns, err := wacloud.ParseNumbers(`[{"phone_number_id":"106540352242922","display_number":"+1 (555) 000-1111","access_token":"EAAG0123456789abcdef"}]`)
	if err != nil || len(ns) != 1 || ns[0].DisplayNumber != "+15550001111" {
		t.Fatalf("ParseNumbers = %+v, %v", ns, err)
	}
	for raw, want := range map[string]string{
		`{}`: "JSON array",
		`[{"phone_number_id":"1","display_number":"+15550001111","access_token":"EAAG0123456789abcdef"},{"phone_number_id":"x1","display_number":"+15550001111","access_token":"EAAG0123456789abcdef"}]`: "element 2: phone_number_id",
		`[{"phone_number_id":"1","display_number":"5550","access_token":"EAAG0123456789abcdef"}]`:                                                                                                        "element 1: display_number",
		`[{"phone_number_id":"1","display_number":"+15550001111"}]`:                                                                                                                                      "element 1: access_token",
		`[{"phone_number_id":"1","display_number":"+15550001111","access_token":"EAAG0123456789abcdef","waba":"2"}]`:                                                                                     "waba",
		`[{"phone_number_id":"1","display_number":"+15550001111","access_token":"EAAG0123456789abcdef"},{"phone_number_id":"1","display_number":"+15550002222","access_token":"EAAG0123456789abcdef"}]`:  "element 2: phone_number_id 1 is listed twice",
	} {
		if _, err := wacloud.ParseNumbers(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseNumbers(%s) = %v, want an error containing %q", raw, err, want)
		}
	}
}

// TestReceive: messages with and without a BSUID, a quoted reply, media
// downloaded with the number's token, a reaction (nothing), an
// unsupported type (noted), statuses as receipts, another number's and
// an unknown number's events each on their line.
func TestReceive(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	img := []byte("\x89PNG\r\n\x1a\nfake image")
	mediaID := w.one.AddMedia("image/png", img)
	doc := w.one.AddMedia("application/pdf", []byte("%PDF-1.4"))
	body := wacloudtest.Payload(
		wacloudtest.Value{Number: w.one, Messages: []wacloudtest.Message{
			{From: "16505551234", UserID: "US.13491208655302741918", Name: "Ada", ID: "wamid.A1", Text: "hello", Context: "wamid.OUT1"},
			{From: "4915112345678", Name: "Bo", ID: "wamid.A2", MediaID: mediaID, MimeType: "image/png", Text: "a picture"},
			{From: "4915112345678", Name: "Bo", ID: "wamid.A3", Type: "document", MediaID: doc, MimeType: "application/pdf", Filename: "invoice.pdf"},
			{From: "4915112345678", ID: "wamid.A4", Type: "reaction", Context: "wamid.OUT1"},
			{From: "4915112345678", ID: "wamid.A5", Type: "unsupported"},
		}, Statuses: []wacloudtest.Status{
			{ID: "wamid.OUT1", Status: "delivered", RecipientID: "16505551234", RecipientUserID: "US.13491208655302741918"},
			{ID: "wamid.OUT2", Status: "failed", RecipientID: "16505551234", Code: 131047, Title: "Re-engagement message", Message: "More than 24 hours have passed"},
		}},
		wacloudtest.Value{Number: w.two, Messages: []wacloudtest.Message{{UserID: "DE.998877", ID: "wamid.B1", Text: "on two"}}},
		wacloudtest.Value{Number: &wacloudtest.Number{PhoneNumberID: "777", DisplayNumber: "+15559999999"}, Messages: []wacloudtest.Message{{From: "1555", ID: "wamid.C1", Text: "lost"}}},
	)
	lis, err := w.receive(t, body)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]channels.LineInbound{}
	for _, li := range lis {
		byID[li.ProviderID] = li
	}
	if len(lis) != 7 {
		t.Fatalf("got %d items, want 7 (4 messages on one, 2 receipts, 1 on two): %+v", len(lis), lis)
	}
	a1 := byID["wamid.A1"]
	if a1.Line != w.one.PhoneNumberID || a1.Sender != "US.13491208655302741918" || a1.ThreadKey != a1.Sender || a1.Text != "hello" ||
		len(a1.References) != 1 || a1.References[0] != "wamid.OUT1" {
		t.Errorf("BSUID message: %+v", a1)
	}
	var det map[string]any
	_ = json.Unmarshal(a1.Details, &det)
	if det["wa_id"] != "16505551234" || det["user_id"] != "US.13491208655302741918" || det["profile_name"] != "Ada" {
		t.Errorf("details %s", a1.Details)
	}
	a2 := byID["wamid.A2"]
	if a2.Sender != "4915112345678" || a2.Text != "a picture" || len(a2.Attachments) != 1 || !bytes.Equal(a2.Attachments[0].Data, img) ||
		a2.Attachments[0].ContentType != "image/png" {
		t.Errorf("image message: %+v", a2)
	}
	if a3 := byID["wamid.A3"]; len(a3.Attachments) != 1 || a3.Attachments[0].Filename != "invoice.pdf" {
		t.Errorf("document: %+v", a3)
	}
	if _, ok := byID["wamid.A4"]; ok {
		t.Error("a reaction was stored")
	}
	if a5 := byID["wamid.A5"]; !strings.Contains(string(a5.Details), `"unsupported":true`) {
		t.Errorf("unsupported type not noted: %s", a5.Details)
	}
	if r := byID["receipt:delivered:wamid.OUT1"]; r.Receipt == nil || r.Receipt.MessageID != "wamid.OUT1" || r.Sender != "US.13491208655302741918" {
		t.Errorf("delivered receipt: %+v", r)
	}
	if r := byID["receipt:failed:wamid.OUT2"]; r.Receipt == nil || r.Receipt.Code != "131047" || !strings.Contains(r.Receipt.Reason, "template") {
		t.Errorf("failed receipt: %+v", r.Receipt)
	}
	if b1 := byID["wamid.B1"]; b1.Line != w.two.PhoneNumberID || b1.Sender != "DE.998877" {
		t.Errorf("message on two: %+v", b1)
	}
	if _, ok := byID["wamid.C1"]; ok {
		t.Error("a message to a number not configured was returned")
	}

	// Meta's retry of the same body gives the same ids.
	again, err := w.receive(t, body)
	if err != nil || len(again) != len(lis) || again[0].ProviderID != lis[0].ProviderID {
		t.Errorf("redelivery: %v, %d items", err, len(again))
	}
}

// TestMedia: a download that fails is transient (Meta delivers again); a
// file over the limit is left out and noted.
func TestMedia(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(o *wacloud.Options) { o.MaxAttachment = 16 })
	small := w.one.AddMedia("audio/ogg", []byte("OggS small"))
	big := w.one.AddMedia("video/mp4", bytes.Repeat([]byte("v"), 64))
	w.srv.FailFiles(1)
	msg := wacloudtest.Payload(wacloudtest.Value{Number: w.one, Messages: []wacloudtest.Message{{From: "16505551234", ID: "wamid.M1", Type: "audio", MediaID: small, MimeType: "audio/ogg"}}})
	if _, err := w.receive(t, msg); !errors.Is(err, channels.ErrTransient) {
		t.Fatalf("failed download: %v, want a transient error", err)
	}
	lis, err := w.receive(t, msg)
	if err != nil || len(lis) != 1 || len(lis[0].Attachments) != 1 {
		t.Fatalf("retry: %v %+v", err, lis)
	}
	lis, err = w.receive(t, wacloudtest.Payload(wacloudtest.Value{Number: w.one, Messages: []wacloudtest.Message{{From: "16505551234", ID: "wamid.M2", Type: "video", MediaID: big, MimeType: "video/mp4"}}}))
	if err != nil || len(lis) != 1 || len(lis[0].Attachments) != 0 || !strings.Contains(string(lis[0].Details), "attachments_left_out") {
		t.Fatalf("too large: %v %+v", err, lis)
	}
}

// TestSend: a quoted reply, a long text in parts, a BSUID recipient, a
// template, typing on the message answered.
func TestSend(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.adapter(t, w.one)
	res, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "16505551234", To: "16505551234", Text: "hi <b>&</b>", InReplyTo: "wamid.IN1"})
	if err != nil || !strings.HasPrefix(res.ProviderID, "wamid.") {
		t.Fatalf("Send: %+v %v", res, err)
	}
	long := strings.Repeat("word ", 1000) // 5000 characters
	if _, err := a.Send(t.Context(), channels.Outbound{To: "+1 650 555 1234", Text: long, InReplyTo: "wamid.IN2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "US.13491208655302741918", Text: "to a username"}); err != nil {
		t.Fatal(err)
	}
	tpl := &channels.Template{Name: "order_update", Language: "en_US", Variables: map[string]string{"2": "shipped", "1": "Ada"}}
	if err := a.CheckTemplate(*tpl); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "16505551234", Template: tpl}); err != nil {
		t.Fatal(err)
	}
	sent := w.one.Sent()
	if len(sent) != 5 {
		t.Fatalf("sent %d messages, want 5: %+v", len(sent), sent)
	}
	if s := sent[0]; s.To != "16505551234" || s.Text != "hi <b>&</b>" || s.ContextID != "wamid.IN1" || s.PreviewURL || s.Type != "text" || s.WAMID != res.ProviderID {
		t.Errorf("reply: %+v", s)
	}
	if sent[1].Text+sent[2].Text != long || sent[1].ContextID != "wamid.IN2" || sent[2].ContextID != "" || sent[1].To != "16505551234" {
		t.Errorf("long text: %d+%d characters, contexts %q %q", len(sent[1].Text), len(sent[2].Text), sent[1].ContextID, sent[2].ContextID)
	}
	if s := sent[3]; s.Recipient != "US.13491208655302741918" || s.To != "" {
		t.Errorf("BSUID send: to=%q recipient=%q", s.To, s.Recipient)
	}
	if s := sent[4]; s.Type != "template" || s.Template == nil || s.Template.Name != "order_update" || s.Template.Language != "en_US" ||
		strings.Join(s.Template.Params, ",") != "Ada,shipped" {
		t.Errorf("template: %+v %+v", s, s.Template)
	}
	if len(w.two.Sent()) != 0 {
		t.Error("number two sent for a connection on number one")
	}

	if err := a.Typing(t.Context(), channels.Typing{ThreadKey: "16505551234"}); err != nil {
		t.Errorf("typing without a message: %v, want a no-op", err)
	}
	if err := a.Typing(t.Context(), channels.Typing{ThreadKey: "16505551234", InReplyTo: "wamid.IN1"}); err != nil {
		t.Fatal(err)
	}
	if ty := w.one.Typings(); len(ty) != 1 || ty[0].MessageID != "wamid.IN1" || ty[0].Indicator != "text" {
		t.Errorf("typings %+v", ty)
	}

	// The answer to an unbound person goes out from the line, plain.
	if err := w.d.Shared.Answer(t.Context(), w.two.PhoneNumberID, "4915112345678", "Send join <code> to start."); err != nil {
		t.Fatal(err)
	}
	if s := w.two.Sent(); len(s) != 1 || s[0].To != "4915112345678" || s[0].ContextID != "" {
		t.Errorf("answer: %+v", s)
	}
}

// TestSendErrors: Meta's codes decide the class and what the failure says.
func TestSendErrors(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.adapter(t, w.one)
	cases := []struct {
		fail  wacloudtest.Failure
		class error
		after time.Duration
		says  []string
	}{
		{wacloudtest.RateLimited(130429, 0), channels.ErrTransient, 30 * time.Second, []string{"130429"}},
		{wacloudtest.RateLimited(131056, 7), channels.ErrTransient, 7 * time.Second, []string{"131056"}},
		{wacloudtest.RateLimited(131057, 0), channels.ErrTransient, time.Minute, []string{"131057"}},
		{wacloudtest.Unavailable, channels.ErrTransient, 0, []string{"131000"}},
		{wacloudtest.Reengagement, channels.ErrPermanent, 0, []string{"24-hour", "template", "131047"}},
		{wacloudtest.TokenExpired, channels.ErrPermanent, 0, []string{"operator", "+15550001111", "code 190"}},
		{wacloudtest.Failure{Code: 131026, Message: "Message undeliverable"}, channels.ErrPermanent, 0, []string{"131026", "Message undeliverable"}},
	}
	for _, c := range cases {
		w.one.FailNext(c.fail)
		_, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "16505551234", Text: "x"})
		if !errors.Is(err, c.class) || (c.class == channels.ErrPermanent && errors.Is(err, channels.ErrTransient)) {
			t.Errorf("code %d: %v, want %v", c.fail.Code, err, c.class)
			continue
		}
		if errors.Is(err, channels.ErrRevoked) {
			t.Errorf("code %d: %v revokes the connection; the token is the operator's", c.fail.Code, err)
		}
		if got := channels.RetryAfter(err); got != c.after {
			t.Errorf("code %d: RetryAfter = %s, want %s", c.fail.Code, got, c.after)
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("code %d: %q does not say %q", c.fail.Code, err, s)
			}
		}
	}
	// The 24-hour window as the fake enforces it: a text fails, a
	// template goes.
	w.one.CloseWindow("16505551234")
	if _, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "16505551234", Text: "late"}); !errors.Is(err, channels.ErrPermanent) || !strings.Contains(err.Error(), "template") {
		t.Errorf("outside the window: %v", err)
	}
	if _, err := a.Send(t.Context(), channels.Outbound{ThreadKey: "16505551234", Template: &channels.Template{Name: "hello_world", Language: "en_US"}}); err != nil {
		t.Errorf("template outside the window: %v", err)
	}
}

// TestCheckTemplate: each wrong field is named.
func TestCheckTemplate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.adapter(t, w.one)
	for _, c := range []struct {
		t     channels.Template
		field string
	}{
		{channels.Template{ContentSID: "HX0123456789abcdef0123456789abcdef"}, "template.content_sid"},
		{channels.Template{Language: "en_US"}, "template.name"},
		{channels.Template{Name: "Order Update", Language: "en_US"}, "template.name"},
		{channels.Template{Name: "order_update"}, "template.language"},
		{channels.Template{Name: "order_update", Language: "english"}, "template.language"},
		{channels.Template{Name: "order_update", Language: "en", Variables: map[string]string{"1": "a", "3": "c"}}, "template.variables"},
		{channels.Template{Name: "order_update", Language: "en", Variables: map[string]string{"name": "a"}}, "template.variables"},
		{channels.Template{Name: "order_update", Language: "en", Variables: map[string]string{"1": ""}}, "template.variables"},
	} {
		var ce *channels.ConfigError
		if err := a.CheckTemplate(c.t); !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("CheckTemplate(%+v) = %v, want a ConfigError on %s", c.t, err, c.field)
		}
	}
}

// TestAddress: phone numbers become wa_id digits, BSUIDs stay.
func TestAddress(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.adapter(t, w.one)
	for in, want := range map[string]string{
		"+1 (650) 555-1234":           "16505551234",
		"whatsapp:+4915112345678":     "4915112345678",
		"16505551234":                 "16505551234",
		"US.13491208655302741918":     "US.13491208655302741918",
		"US.ENT.11815799212886844830": "US.ENT.11815799212886844830",
	} {
		if got, err := a.Address(in); err != nil || got != want {
			t.Errorf("Address(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "hello", "+0123", "us.123", "123"} {
		if _, err := a.Address(bad); err == nil {
			t.Errorf("Address(%q) accepted", bad)
		}
	}
}

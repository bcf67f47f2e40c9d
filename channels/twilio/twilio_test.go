package twilio_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
)

// The vectors of channels.md §13 (twilio-go's request_validator_test.go).
func TestSignatureVectors(t *testing.T) {
	t.Parallel()
	const token = "12345"
	const u = "https://mycompany.com/myapp.php?foo=1&bar=2"
	params := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
		"From": {"+14158675309"}, "To": {"+18005551212"}}
	for name, sign := range map[string]func(string, string, url.Values) string{"twilio": twilio.Signature, "twiliotest": twiliotest.Sign} {
		if got := sign(token, u, params); got != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" {
			t.Errorf("%s: signature %s, want RSOYDt4T1cUTdK1PDd93/VVr8B8=", name, got)
		}
		p2 := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+12349013030"}, "Digits": {"1234"},
			"From": {"+12349013030"}, "To": {"+18005551212"}}
		if got := sign(token, u, p2); got != "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" {
			t.Errorf("%s: second signature %s, want 0/KCTR6DLpKmkAf8muzZqo1nDgQ=", name, got)
		}
	}
	if !twilio.Verify(token, u, params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		t.Error("Verify refuses the documented vector")
	}
	// Twilio's validators accept the URL with the default port added or
	// removed.
	if !twilio.Verify(token, "https://mycompany.com:443/myapp.php?foo=1&bar=2", params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		t.Error("Verify refuses the vector with :443 added to the URL")
	}
	withPort := twilio.Signature(token, "https://mycompany.com:443/myapp.php?foo=1&bar=2", params)
	if !twilio.Verify(token, u, params, withPort) {
		t.Error("Verify refuses a signature of the URL with :443 when the URL has none")
	}
	if twilio.Verify(token, "https://mycompany.com:8443/myapp.php?foo=1&bar=2", params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		t.Error("Verify accepts the vector on another port")
	}
	if twilio.Verify(token, u, params, "") || twilio.Verify("54321", u, params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		t.Error("Verify accepts an empty signature or another token")
	}
	// The port vectors of twilio-python (the URL signed with :443, and
	// the http URL with :80).
	if !twilio.Verify(token, u, params, "kvajT1Ptam85bY51eRf/AJRuM3w=") {
		t.Error("Verify refuses twilio-python's vector signed with :443")
	}
	if !twilio.Verify(token, strings.Replace(u, "https", "http", 1), params, "0ZXoZLH/DfblKGATFgpif+LLRf4=") {
		t.Error("Verify refuses twilio-python's vector signed with :80")
	}
	// twilio-php's repeated parameter vector (values sorted, duplicates
	// dropped).
	dup := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
	if !twilio.Verify(token, u, dup, "IK+Dwps556ElfBT0I3Rgjkr1wJU=") {
		t.Error("Verify refuses twilio-php's vector with a repeated parameter")
	}
	if !twilio.Verify(token, u, dup, twilio.Signature(token, u, dup)) {
		t.Error("Verify refuses repeated values signed in order")
	}
	// JSON bodies: the URL carries bodySHA256 and is signed alone.
	const hash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	if sum := sha256.Sum256([]byte(`{"property": "value", "boolean": true}`)); hex.EncodeToString(sum[:]) != hash {
		t.Errorf("body hash %x", sum)
	}
	for url, want := range map[string]string{
		u + "&bodySHA256=" + hash:                            "a9nBmqA0ju/hNViExpshrM61xv4=",
		"https://mycompany.com/myapp.php?bodySHA256=" + hash: "y77kIzt2vzLz71DgmJGsen2scGs=",
	} {
		if got := twilio.Signature(token, url, nil); got != want || twiliotest.Sign(token, url, nil) != want {
			t.Errorf("JSON signature of %s: %s, want %s", url, got, want)
		}
	}
}

// newAdapter builds an adapter of channel for acct at srv, with hook as
// its webhook URL.
func newAdapter(t *testing.T, srv *twiliotest.Server, channel string, cfg map[string]any, hook string) channels.Adapter {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	a, err := twilio.Descriptor(channel, opts(srv)).New(t.Context(), channels.Connection{ID: "conn_1", Config: raw, WebhookURL: hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.(channels.Closer).Close() })
	return a
}

func parse(t *testing.T, a channels.Adapter, r *http.Request) ([]channels.Inbound, error) {
	t.Helper()
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			t.Fatal(err)
		}
	}
	r.Body = http.NoBody
	return a.(channels.WebhookReceiver).ParseWebhook(r, body)
}

// TestSharedKeySigning: an account whose webhook settings sign with a
// shared key (HMAC-SHA256, named in X-Twilio-Webhooks-Signature-Settings)
// verifies with config.webhook_signing_key; without it, or with another
// algorithm, the request is refused saying what to set.
func TestSharedKeySigning(t *testing.T) {
	t.Parallel()
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	acct := srv.NewAccount()
	acct.AddNumber(number)
	const hook = "https://comm.example/hooks/sms/conn_1"
	const shared = "a-shared-signing-key-secret"
	base := map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": number}
	withKey := map[string]any{"webhook_signing_key": shared}
	for k, v := range base {
		withKey[k] = v
	}
	p := url.Values{"MessageSid": {"SM0123456789abcdef0123456789abcd01"}, "AccountSid": {acct.SID}, "From": {person}, "To": {number}, "Body": {"signed with a shared key"}}
	request := func(sig, settings string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, hook, strings.NewReader(p.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set(twilio.SignatureHeader, sig)
		if settings != "" {
			r.Header.Set(twilio.SettingsHeader, settings)
		}
		return r
	}
	good := twilio.SharedKeySignature(shared, hook, p)
	a := newAdapter(t, srv, twilio.SMS, withKey, hook)
	ins, err := parse(t, a, request(good, "key=KS0123,algorithm=HMAC_SHA256"))
	if err != nil || len(ins) != 1 || ins[0].Text != "signed with a shared key" {
		t.Fatalf("shared-key request: %v %+v", err, ins)
	}
	// The Auth Token's signature still verifies when no settings header
	// says otherwise.
	if _, err := parse(t, a, request(twilio.Signature(acct.AuthToken, hook, p), "")); err != nil {
		t.Errorf("auth token request: %v", err)
	}
	for name, c := range map[string]struct {
		a             channels.Adapter
		sig, settings string
		mention       string
	}{
		"no key configured": {newAdapter(t, srv, twilio.SMS, base, hook), good, "key=KS0123,algorithm=HMAC_SHA256", "webhook_signing_key"},
		"wrong key":         {a, twilio.SharedKeySignature("another", hook, p), "key=KS0123,algorithm=HMAC_SHA256", "webhook_signing_key"},
		"auth token's sha1": {a, twilio.Signature(acct.AuthToken, hook, p), "key=KS0123,algorithm=HMAC_SHA256", "webhook_signing_key"},
		"other algorithm":   {a, good, "key=KS0123,algorithm=ED25519", "ED25519"},
	} {
		_, err := parse(t, c.a, request(c.sig, c.settings))
		if !errors.Is(err, channels.ErrSignature) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %v, want a signature error naming %q", name, err, c.mention)
		}
	}
}

func TestInbound(t *testing.T) {
	t.Parallel()
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	acct := srv.NewAccount()
	acct.AddNumber(number)
	const hook = "https://comm.example/hooks/whatsapp/conn_1"
	a := newAdapter(t, srv, twilio.WhatsApp, map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": "whatsapp:" + number}, hook)

	t.Run("whatsapp", func(t *testing.T) {
		p := acct.Params(twiliotest.Incoming{From: person, To: number, Body: "hi", WhatsApp: true, ProfileName: "Ada",
			RepliedTo:  "SM0123456789abcdef0123456789abcdef",
			MediaTypes: []string{"image/jpeg", "application/pdf"}, Media: [][]byte{[]byte("jpeg bytes"), []byte("%PDF")}})
		r, _ := acct.Request(t.Context(), hook, p)
		// The request arrives at another host than the public URL: the
		// signature is checked against the connection's URL.
		r.Host = "127.0.0.1:8080"
		r.URL.Host = "127.0.0.1:8080"
		ins, err := parse(t, a, r)
		if err != nil || len(ins) != 1 {
			t.Fatalf("ParseWebhook: %v %+v", err, ins)
		}
		in := ins[0]
		if in.Sender != person || in.ThreadKey != person || in.Text != "hi" || in.ProviderID != p.Get("MessageSid") ||
			len(in.References) != 1 || in.References[0] != "SM0123456789abcdef0123456789abcdef" {
			t.Errorf("inbound %+v", in)
		}
		var d map[string]any
		_ = json.Unmarshal(in.Details, &d)
		if d["wa_id"] != "15557654321" || d["profile_name"] != "Ada" || d["to"] != "whatsapp:"+number {
			t.Errorf("details %s", in.Details)
		}
		if len(in.Attachments) != 2 || string(in.Attachments[0].Data) != "jpeg bytes" || in.Attachments[0].ContentType != "image/jpeg" ||
			!strings.HasSuffix(in.Attachments[0].Filename, ".jpg") || in.Attachments[1].ContentType != "application/pdf" {
			t.Errorf("attachments %+v", in.Attachments)
		}
		ack := a.(channels.Acknowledger).Ack()
		if ack.Status != 200 || ack.Header.Get("Content-Type") != "text/xml; charset=utf-8" || !strings.Contains(string(ack.Body), "<Response/>") {
			t.Errorf("Ack %+v", ack)
		}
	})

	t.Run("media too big or failing", func(t *testing.T) {
		raw, _ := json.Marshal(map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": "whatsapp:" + number})
		o := opts(srv)
		o.MaxAttachment = 8
		small, err := twilio.New(t.Context(), twilio.WhatsApp, o, channels.Connection{Config: raw, WebhookURL: hook})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = small.(channels.Closer).Close() })
		acct.FailNext(twiliotest.OpMedia, twiliotest.Unavailable)
		p := acct.Params(twiliotest.Incoming{From: person, To: number, Body: "two files", WhatsApp: true,
			MediaTypes: []string{"image/png", "image/png", "image/png"}, Media: [][]byte{[]byte("fails"), []byte("0123456789 too big"), []byte("fits")}})
		// And one URL that is not the account's media: never fetched.
		p.Set("NumMedia", "4")
		p.Set("MediaUrl3", "https://evil.example/steal")
		r, _ := acct.Request(t.Context(), hook, p)
		ins, err := parse(t, small, r)
		if err != nil || len(ins) != 1 {
			t.Fatalf("ParseWebhook: %v", err)
		}
		in := ins[0]
		if in.Text != "two files" || len(in.Attachments) != 1 || string(in.Attachments[0].Data) != "fits" {
			t.Errorf("inbound %+v: want the text and the one file that fits", in)
		}
		var d struct {
			MediaFailed []struct{ URL, Error string } `json:"media_failed"`
		}
		_ = json.Unmarshal(in.Details, &d)
		if len(d.MediaFailed) != 3 || !strings.Contains(d.MediaFailed[0].Error, "503") ||
			!strings.Contains(d.MediaFailed[1].Error, "larger") || !strings.Contains(d.MediaFailed[2].Error, "not a media URL") {
			t.Errorf("media_failed %+v", d.MediaFailed)
		}
	})

	t.Run("status callbacks", func(t *testing.T) {
		const sid = "SM0123456789abcdef0123456789abcdef"
		cases := []struct {
			status     string
			code       int
			state      string
			wantReason string
		}{
			{"queued", 0, "", ""},
			{"sending", 0, "", ""},
			{"sent", 0, channels.ReceiptSent, ""},
			{"delivered", 0, channels.ReceiptDelivered, ""},
			{"read", 0, channels.ReceiptRead, ""},
			{"undelivered", 30007, channels.ReceiptFailed, "carrier filtered"},
			{"failed", 63016, channels.ReceiptFailed, "template"},
			{"failed", 0, channels.ReceiptFailed, "failed"},
		}
		for _, c := range cases {
			r, _ := acct.Request(t.Context(), hook, acct.StatusParams(sid, c.status, c.code))
			ins, err := parse(t, a, r)
			if err != nil {
				t.Fatalf("%s: %v", c.status, err)
			}
			if c.state == "" {
				if len(ins) != 0 {
					t.Errorf("%s: %+v, want nothing", c.status, ins)
				}
				continue
			}
			if len(ins) != 1 || ins[0].Receipt == nil {
				t.Fatalf("%s: %+v, want one receipt", c.status, ins)
			}
			rc := ins[0].Receipt
			if rc.MessageID != sid || rc.State != c.state || !strings.Contains(rc.Reason, c.wantReason) {
				t.Errorf("%s: receipt %+v", c.status, rc)
			}
			if c.code != 0 && rc.Code != strconv.Itoa(c.code) {
				t.Errorf("%s: code %q, want %d", c.status, rc.Code, c.code)
			}
			if c.status == "delivered" && rc.At.IsZero() {
				t.Errorf("delivered: no time from RawDlrDoneDate")
			}
		}
	})

	t.Run("json body", func(t *testing.T) {
		body := []byte(`{"MessageSid":"SM00000000000000000000000000000001","AccountSid":"` + acct.SID + `","From":"whatsapp:` + person + `","Body":"json","NumMedia":0}`)
		r, _ := acct.JSONRequest(t.Context(), hook, body)
		ins, err := parse(t, a, r)
		if err != nil || len(ins) != 1 || ins[0].Text != "json" || ins[0].Sender != person {
			t.Fatalf("JSON webhook: %v %+v", err, ins)
		}
		// Without bodySHA256 in the URL a JSON body does not verify.
		r, _ = acct.JSONRequest(t.Context(), hook, body)
		q := r.URL.Query()
		q.Del("bodySHA256")
		r.URL.RawQuery = q.Encode()
		if _, err := parse(t, a, r); !errors.Is(err, channels.ErrSignature) {
			t.Errorf("JSON without bodySHA256: %v, want ErrSignature", err)
		}
	})

	t.Run("other account", func(t *testing.T) {
		p := acct.Params(twiliotest.Incoming{From: person, To: number, Body: "x"})
		p.Set("AccountSid", "AC0123456789abcdef0123456789abcdef")
		r, _ := acct.Request(t.Context(), hook, p)
		if _, err := parse(t, a, r); err == nil || errors.Is(err, channels.ErrSignature) {
			t.Errorf("a webhook of another account: %v, want a refusal that is not a signature error", err)
		}
	})
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	acct := srv.NewAccount()
	acct.AddNumber(number)
	a := newAdapter(t, srv, twilio.SMS, map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": number}, "https://comm.example/hooks/sms/conn_1")
	out := channels.Outbound{MessageID: "msg_1", To: person, Text: "hello"}
	cases := []struct {
		f     twiliotest.Failure
		class error
		words []string
		after time.Duration
	}{
		{twiliotest.RateLimited, channels.ErrTransient, []string{"20429"}, 7 * time.Second},
		{twiliotest.Failure{Status: 429, Message: "slow down", RetryAfter: 3}, channels.ErrTransient, []string{"rate limited"}, 3 * time.Second},
		{twiliotest.Unavailable, channels.ErrTransient, []string{"503"}, 0},
		{twiliotest.InvalidTo, channels.ErrPermanent, []string{"21211", "valid phone number"}, 0},
		{twiliotest.OptedOut, channels.ErrPermanent, []string{"21610", "opted out"}, 0},
		{twiliotest.Region, channels.ErrPermanent, []string{"21408", "region"}, 0},
		{twiliotest.OutsideWindow, channels.ErrPermanent, []string{"63016", "template", "24 hours"}, 0},
		{twiliotest.AuthFailed, channels.ErrRevoked, []string{"20003", "rejected"}, 0},
	}
	for _, c := range cases {
		acct.FailNext(twiliotest.OpMessage, c.f)
		_, err := a.Send(t.Context(), out)
		if !errors.Is(err, c.class) {
			t.Errorf("%d/%d: %v, want class %v", c.f.Status, c.f.Code, err, c.class)
			continue
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d/%d: %q does not say %q", c.f.Status, c.f.Code, err, w)
			}
		}
		if got := channels.RetryAfter(err); got != c.after {
			t.Errorf("%d/%d: retry after %s, want %s", c.f.Status, c.f.Code, got, c.after)
		}
	}
	if _, err := a.Send(t.Context(), channels.Outbound{To: "not a number", Text: "x"}); !errors.Is(err, channels.ErrPermanent) {
		t.Errorf("send to a non-number: %v", err)
	}
	if _, err := a.Send(t.Context(), channels.Outbound{To: person, Template: &channels.Template{ContentSID: "HX0123456789abcdef0123456789abcdef"}}); !errors.Is(err, channels.ErrPermanent) {
		t.Errorf("template on SMS: %v, want permanent", err)
	}
	if _, ok := a.(channels.TemplateSender); ok {
		t.Error("the SMS adapter claims templates")
	}
	if _, ok := a.(channels.Typer); ok {
		t.Error("the SMS adapter claims typing")
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "short", strings.Repeat("a", 1600), strings.Repeat("a", 1601), strings.Repeat("word ", 700), strings.Repeat("👋", 1000)} {
		parts := twilio.Split(s, twilio.MaxText)
		if strings.Join(parts, "") != s {
			t.Errorf("parts of a %d-byte text do not join to it", len(s))
		}
		for _, p := range parts {
			n := 0
			for _, r := range p {
				n++
				if r >= 0x10000 {
					n++
				}
			}
			if n > twilio.MaxText {
				t.Errorf("a part of %d units", n)
			}
		}
	}
	if n := len(twilio.Split(strings.Repeat("👋", 1000), twilio.MaxText)); n != 2 {
		t.Errorf("1000 emoji (2000 UTF-16 units) in %d parts, want 2", n)
	}
}

func TestProvision(t *testing.T) {
	t.Parallel()
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	acct := srv.NewAccount()
	acct.AddNumber(number)
	const hook = "https://comm.example/hooks/sms/conn_1"
	base := map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	provision := func(channel string, cfg map[string]any, hookURL string) (channels.Provisioned, error) {
		return newAdapter(t, srv, channel, cfg, hookURL).(channels.Provisioner).Provision(t.Context())
	}
	field := func(err error) string {
		var ce *channels.ConfigError
		if errors.As(err, &ce) {
			return ce.Field
		}
		return ""
	}

	// A number of the account, by API key.
	p, err := provision(twilio.SMS, with("from", number, "api_key_sid", acct.KeySID, "api_key_secret", acct.KeySecret), hook)
	if err != nil || p.Address != number || !strings.Contains(string(p.Config), `"number_sid":"PN`) {
		t.Fatalf("provision: %+v %v", p, err)
	}
	if n, _ := acct.Number(number); n.SMSURL != hook {
		t.Errorf("number %+v", n)
	}
	// A wrong API key secret: named.
	if _, err := provision(twilio.SMS, with("from", number, "api_key_sid", acct.KeySID, "api_key_secret", strings.Repeat("b", 32)), hook); field(err) != "api_key_secret" {
		t.Errorf("bad key secret: %v", err)
	}
	// Not the account's number; a WhatsApp sandbox sender without
	// configuring is fine; with configuring it is not.
	if _, err := provision(twilio.SMS, with("from", "+15559999999"), hook); field(err) != "from" {
		t.Errorf("foreign number: %v", err)
	}
	if _, err := provision(twilio.WhatsApp, with("from", "whatsapp:"+twiliotest.SandboxNumber, "configure_webhooks", false), hook); err != nil {
		t.Errorf("sandbox sender without configure_webhooks: %v", err)
	}
	if _, err := provision(twilio.WhatsApp, with("from", "whatsapp:"+twiliotest.SandboxNumber), hook); field(err) != "from" || !strings.Contains(err.Error(), "configure_webhooks") {
		t.Errorf("sandbox sender with configure_webhooks: %v", err)
	}
	// No public URL to point at.
	if _, err := provision(twilio.SMS, with("from", number), ""); field(err) != "configure_webhooks" {
		t.Errorf("no webhook URL: %v", err)
	}
	// A Messaging Service of another account.
	other := srv.NewAccount().AddService()
	if _, err := provision(twilio.SMS, with("from", other.SID), hook); field(err) != "from" {
		t.Errorf("foreign service: %v", err)
	}
	// Twilio down: transient.
	acct.FailNext(twiliotest.OpAccount, twiliotest.Unavailable)
	if _, err := provision(twilio.SMS, with("from", number), hook); !errors.Is(err, channels.ErrTransient) {
		t.Errorf("Twilio down: %v", err)
	}
}

// The adapter never sends the credentials to a host other than the API's,
// even when the webhook names one.
func TestMediaHost(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	}))
	t.Cleanup(evil.Close)
	srv := twiliotest.NewServer()
	t.Cleanup(srv.Close)
	acct := srv.NewAccount()
	const hook = "https://comm.example/hooks/sms/conn_1"
	a := newAdapter(t, srv, twilio.SMS, map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": number}, hook)
	p := acct.Params(twiliotest.Incoming{From: person, To: number, Body: "x"})
	p.Set("NumMedia", "1")
	p.Set("MediaUrl0", evil.URL+"/2010-04-01/Accounts/"+acct.SID+"/Messages/MM1/Media/ME1")
	r, _ := acct.Request(t.Context(), hook, p)
	if _, err := parse(t, a, r); err != nil {
		t.Fatal(err)
	}
	select {
	case auth := <-got:
		t.Fatalf("the adapter fetched media from another host (Authorization %q)", auth)
	default:
	}
}

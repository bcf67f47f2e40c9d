package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// twilioBase is the gateway's public base URL in the Twilio tests: Twilio
// is given URLs on it and signs them, while the gateway itself listens on
// 127.0.0.1 (a proxy in front rewrites the host). Signatures must verify
// against the base URL, not the request's Host.
const twilioBase = "https://sms.comm.test"

const (
	twilioNumber = "+15550001111"
	twilioPerson = "+15557654321"
)

// startTwilio serves a gateway whose Twilio provider talks to fake, and
// points the fake's webhooks (signed for twilioBase) at the gateway.
func startTwilio(t *testing.T, cfg store.Config, fake *twiliotest.Server) *gateway {
	t.Helper()
	g := startGateway(t, cfg, setup{outbox: true,
		server: server.Options{BaseURL: twilioBase},
		twilio: twilio.Options{APIURL: fake.URL, MessagingURL: fake.URL, MaxAttachment: 1 << 20}})
	fake.Rewrite = func(u string) string { return strings.Replace(u, twilioBase, g.URL, 1) }
	return g
}

// connectTwilio connects channel with config and wants 201.
func (g *gateway) connectTwilio(t *testing.T, key, channel string, config map[string]any) connection {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"channel": channel, "provider": "twilio", "config": config})
	resp := g.post(t, key, "/v1/connections", string(body))
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect %s: %d %s", channel, resp.Status, resp.Body)
	}
	var c connection
	decodeJSON(t, resp.Body, &c)
	return c
}

// wantTwiML checks a webhook answer: 200 with empty TwiML.
func wantTwiML(t *testing.T, status int, body []byte, err error) {
	t.Helper()
	if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte("<Response/>")) {
		t.Fatalf("webhook answer %d %q (%v), want 200 with empty TwiML", status, body, err)
	}
}

// TestTwilioSMS drives an SMS connection end to end against the fake
// Twilio: connect (credentials and number checked, SmsUrl pointed at the
// connection), inbound signed for the public base URL while the request
// arrives on another host, a replay stored once, forged and mis-signed
// requests refused, a reply with its status callback URL, status
// callbacks taken, MMS media downloaded (and a failed download keeping
// the text), an opted-out recipient failing permanently, a rate limit
// retried, and delete clearing the webhook.
func TestTwilioSMS(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := twiliotest.NewServer()
		t.Cleanup(fake.Close)
		acct := fake.NewAccount()
		acct.AddNumber(twilioNumber)
		g := startTwilio(t, cfg, fake)
		key := g.newSandbox(t, "twilio").APIKey
		ctx := t.Context()

		// Credentials Twilio refuses, a number of another account, a
		// missing field: 400 naming the field.
		e := wantError(t, g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"sms","provider":"twilio","config":{"account_sid":%q,"auth_token":"%s","from":%q}}`,
			acct.SID, strings.Repeat("0", 32), twilioNumber)), http.StatusBadRequest, "invalid_parameter", "config.auth_token")
		if !strings.Contains(e.Error.Message, "rejected") {
			t.Errorf("bad token message %q does not say it was rejected", e.Error.Message)
		}
		wantError(t, g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"sms","provider":"twilio","config":{"account_sid":%q,"auth_token":%q,"from":"+15559999999"}}`,
			acct.SID, acct.AuthToken)), http.StatusBadRequest, "invalid_parameter", "config.from")
		wantError(t, g.post(t, key, "/v1/connections", `{"channel":"sms","provider":"twilio","config":{}}`),
			http.StatusBadRequest, "invalid_parameter", "config.account_sid")

		conn := g.connectTwilio(t, key, "sms", map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": twilioNumber})
		hook := twilioBase + "/hooks/sms/" + conn.ID
		if conn.Status != "active" || conn.Address == nil || *conn.Address != twilioNumber || conn.WebhookURL == nil || *conn.WebhookURL != hook {
			t.Fatalf("connection %+v: want active, address %s, webhook_url %s", conn, twilioNumber, hook)
		}
		if n, _ := acct.Number(twilioNumber); n.SMSURL != hook || n.SMSMethod != "POST" {
			t.Fatalf("number after connect %+v, want SmsUrl %s", n, hook)
		}

		// A person texts the number; Twilio posts to the SmsUrl (signed
		// for the public URL; the request reaches 127.0.0.1).
		params, status, body, err := acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "hello & welcome"})
		wantTwiML(t, status, body, err)
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != twilioPerson || in.Text != "hello & welcome" {
			t.Fatalf("received %+v", in)
		}
		// Twilio retries the same webhook: stored once.
		st, b, err := acct.Deliver(ctx, hook, params)
		wantTwiML(t, st, b, err)
		// Forged: no signature, a wrong one, one for the URL the request
		// arrived at (the Host a proxy rewrote) instead of the public one,
		// one with another Auth Token. 401 each, nothing stored.
		form := params.Encode()
		for name, sig := range map[string]string{
			"missing":   "",
			"wrong":     "bm90IHRoZSBzaWduYXR1cmU=",
			"local URL": twiliotest.Sign(acct.AuthToken, g.URL+"/hooks/sms/"+conn.ID, params),
			"other key": twiliotest.Sign(strings.Repeat("a", 32), hook, params),
		} {
			r := g.do(t, request{Method: "POST", Path: "/hooks/sms/" + conn.ID, ContentType: "application/x-www-form-urlencoded",
				Body: form, Header: map[string]string{"X-Twilio-Signature": sig}})
			e := wantError(t, r, http.StatusUnauthorized, "unauthenticated", "")
			if !strings.Contains(e.Error.Message, "signature") {
				t.Errorf("%s signature: message %q does not mention the signature", name, e.Error.Message)
			}
		}
		r := g.do(t, request{Method: "POST", Path: "/hooks/sms/" + conn.ID, ContentType: "application/x-www-form-urlencoded",
			Body: strings.Replace(form, "welcome", "forged", 1), Header: map[string]string{"X-Twilio-Signature": twiliotest.Sign(acct.AuthToken, hook, params)}})
		wantError(t, r, http.StatusUnauthorized, "unauthenticated", "")
		if n := len(g.events(t, key, "type=message.received")); n != 1 {
			t.Fatalf("%d message.received events after a replay and forged requests, want 1", n)
		}

		// A JSON-bodied webhook (bodySHA256 in the signed URL).
		jp := acct.Params(twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "sent as JSON"})
		obj := map[string]string{}
		for k := range jp {
			obj[k] = jp.Get(k)
		}
		jb, _ := json.Marshal(obj)
		st, b, err = acct.DeliverJSON(ctx, hook, jb)
		wantTwiML(t, st, b, err)
		// The body altered after signing: its digest no longer matches.
		jr, err := acct.JSONRequest(ctx, hook, jb)
		if err != nil {
			t.Fatal(err)
		}
		altered := bytes.Replace(jb, []byte("sent as JSON"), []byte("sent as XML!"), 1)
		r = g.do(t, request{Method: "POST", Path: jr.URL.RequestURI(), ContentType: "application/json", Body: string(altered),
			Header: map[string]string{"X-Twilio-Signature": jr.Header.Get("X-Twilio-Signature")}})
		wantError(t, r, http.StatusUnauthorized, "unauthenticated", "")

		// Reply: Messages.json from the number, with the status callback
		// (whose first reports arrive before Messages.json answers).
		acct.CallbackFirst("sent", "delivered")
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Hi! How can I help?"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := acct.Sent()
		if len(sent) != 1 || sent[0].To != twilioPerson || sent[0].From != twilioNumber || sent[0].Body != "Hi! How can I help?" || sent[0].StatusCallback != hook {
			t.Fatalf("Messages.json got %+v, want the reply from %s to %s with StatusCallback %s", sent, twilioNumber, twilioPerson, hook)
		}
		if got := acct.EarlyAnswers(); len(got) != 2 || got[0] != 200 || got[1] != 200 {
			t.Errorf("status callbacks before the send's answer got %v, want 200 twice", got)
		}
		// Status callbacks for it: taken (200, TwiML), no message stored.
		for _, s := range []string{"sent", "delivered"} {
			st, b, err := acct.Status(ctx, sent[0].SID, s, 0)
			wantTwiML(t, st, b, err)
		}
		st, b, err = acct.Status(ctx, sent[0].SID, "undelivered", 30007)
		wantTwiML(t, st, b, err)
		if n := len(g.events(t, key, "type=message.received")); n != 2 {
			t.Fatalf("%d message.received events after status callbacks, want 2 (hello, JSON)", n)
		}

		// MMS: the picture is downloaded into an attachment.
		jpeg := []byte("\xff\xd8\xff\xe0 a tiny jpeg")
		_, st, b, err = acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "look",
			MediaTypes: []string{"image/jpeg"}, Media: [][]byte{jpeg}})
		wantTwiML(t, st, b, err)
		evs = g.events(t, key, "type=message.received")
		mms := receivedOf(t, evs[len(evs)-1])
		full := g.message(t, key, mms.ID)
		if mms.Text != "look" || len(full.Attachments) != 1 || full.Attachments[0].ContentType != "image/jpeg" || full.Attachments[0].Size != int64(len(jpeg)) {
			t.Fatalf("MMS stored as %+v, want the text and one image/jpeg attachment", full)
		}
		att := g.do(t, request{Path: "/v1/messages/" + mms.ID + "/attachments/" + full.Attachments[0].ID, Key: key})
		if att.Status != http.StatusOK || !bytes.Equal(att.Body, jpeg) {
			t.Fatalf("attachment download: %d %q", att.Status, att.Body)
		}
		// A media download that fails: the text is stored, the file is
		// listed as left out.
		acct.FailNext(twiliotest.OpMedia, twiliotest.Unavailable)
		_, st, b, err = acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "picture failed",
			MediaTypes: []string{"image/png"}, Media: [][]byte{[]byte("png")}})
		wantTwiML(t, st, b, err)
		evs = g.events(t, key, "type=message.received")
		lost := g.message(t, key, receivedOf(t, evs[len(evs)-1]).ID)
		if lost.Text != "picture failed" || len(lost.Attachments) != 0 || !bytes.Contains(lost.Details, []byte(`"media_failed"`)) ||
			!bytes.Contains(lost.Details, []byte("503")) {
			t.Fatalf("message with a failed download: %+v details %s, want its text and media_failed naming the 503", lost, lost.Details)
		}

		// The person opted out (21610): failed at once, saying so.
		acct.FailNext(twiliotest.OpMessage, twiliotest.OptedOut)
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"still there?"}`)
		m := g.waitMessage(t, key, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if m.Error == nil || !strings.Contains(*m.Error, "21610") || !strings.Contains(*m.Error, "opted out") || m.Attempts != 1 {
			t.Errorf("opted-out reply: error %v after %d attempt(s), want 21610 and the reason after 1", m.Error, m.Attempts)
		}
		// 20429 with Retry-After: retried, then sent.
		acct.FailNext(twiliotest.OpMessage, twiliotest.Failure{Status: 429, Code: 20429, Message: "Too Many Requests", RetryAfter: 1})
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"after the rate limit"}`)
		m = g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if m.Attempts < 2 {
			t.Errorf("rate-limited reply sent after %d attempt(s), want a retry", m.Attempts)
		}
		// A long text goes out in parts of at most 1600 characters.
		long := strings.Repeat("word ", 700) // 3500 characters
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", fmt.Sprintf(`{"text":%q}`, long))
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		var joined strings.Builder
		parts := 0
		for _, s := range acct.Sent() {
			if strings.HasPrefix(s.Body, "word") {
				parts++
				joined.WriteString(s.Body)
			}
		}
		if parts != 3 || joined.String() != long {
			t.Errorf("long text went out as %d parts (joined equal: %v), want 3 making the text", parts, joined.String() == long)
		}

		// Templates are WhatsApp's: 400 naming the field here.
		wantError(t, g.post(t, key, "/v1/messages/"+in.ID+"/reply", `{"template":{"content_sid":"HX0123456789abcdef0123456789abcdef"}}`),
			http.StatusBadRequest, "invalid_parameter", "template")

		// Delete: the number's webhook is cleared.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + conn.ID, Key: key}); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if n, _ := acct.Number(twilioNumber); n.SMSURL != "" {
			t.Errorf("number after delete %+v, want no SmsUrl", n)
		}
	})
}

// TestTwilioWhatsApp drives a WhatsApp connection: inbound with the
// profile in details, typing on the inbound message, a send outside the
// 24-hour window failing with the template reason, a template send and
// reply (ContentSid, ContentVariables), template validation, a reply to
// our message joining its conversation, and a Messaging Service sender
// with configure_webhooks false left alone.
func TestTwilioWhatsApp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := twiliotest.NewServer()
		t.Cleanup(fake.Close)
		acct := fake.NewAccount()
		acct.AddNumber(twilioNumber)
		g := startTwilio(t, cfg, fake)
		key := g.newSandbox(t, "whatsapp").APIKey
		ctx := t.Context()

		// With an API key (and the Auth Token that signs webhooks).
		conn := g.connectTwilio(t, key, "whatsapp", map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken,
			"api_key_sid": acct.KeySID, "api_key_secret": acct.KeySecret, "from": "whatsapp:" + twilioNumber})
		hook := twilioBase + "/hooks/whatsapp/" + conn.ID
		if conn.Status != "active" || conn.WebhookURL == nil || *conn.WebhookURL != hook {
			t.Fatalf("connection %+v, want active with webhook_url %s", conn, hook)
		}

		params, st, b, err := acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "hola", WhatsApp: true, ProfileName: "Ada"})
		wantTwiML(t, st, b, err)
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		full := g.message(t, key, in.ID)
		if in.Sender != twilioPerson || in.Text != "hola" || !bytes.Contains(full.Details, []byte(`"profile_name":"Ada"`)) ||
			!bytes.Contains(full.Details, []byte(`"wa_id":"15557654321"`)) {
			t.Fatalf("received %+v details %s, want sender %s without whatsapp:, profile and wa_id in details", in, full.Details, twilioPerson)
		}

		// Typing shows on the inbound message.
		if r := g.post(t, key, "/v1/messages/"+in.ID+"/typing", ""); r.Status != http.StatusOK {
			t.Fatalf("typing: %d %s", r.Status, r.Body)
		}
		if ty := acct.Typings(); len(ty) != 1 || ty[0].MessageID != params.Get("MessageSid") || ty[0].Channel != "whatsapp" {
			t.Fatalf("typing indicators %+v, want one on %s", ty, params.Get("MessageSid"))
		}

		// A reply: whatsapp: addresses.
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Hello Ada"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := acct.Sent()
		if len(sent) != 1 || sent[0].To != "whatsapp:"+twilioPerson || sent[0].From != "whatsapp:"+twilioNumber || sent[0].StatusCallback != hook {
			t.Fatalf("Messages.json got %+v", sent)
		}
		// The person answers that message (a WhatsApp reply): same
		// conversation.
		_, st, b, err = acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: twilioNumber, Body: "thanks", WhatsApp: true, RepliedTo: sent[0].SID})
		wantTwiML(t, st, b, err)
		evs = g.events(t, key, "type=message.received")
		if r := receivedOf(t, evs[len(evs)-1]); r.ConversationID != in.ConversationID {
			t.Errorf("a reply to our message went to conversation %s, want %s", r.ConversationID, in.ConversationID)
		}

		// A message sent to the person, named the WhatsApp way, joins
		// the conversation of their own messages (conversations are keyed
		// by the E.164 number); a recipient that is no phone number is
		// refused at once, naming "to".
		proactive := g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"whatsapp:%s","text":"one more thing"}`, conn.ID, twilioPerson))
		if rcpt := proactive.Recipient; proactive.ConversationID != in.ConversationID || rcpt == nil || *rcpt != twilioPerson {
			t.Errorf("a send to whatsapp:%s went to conversation %s (recipient %v), want %s (%s)", twilioPerson, proactive.ConversationID, rcpt, in.ConversationID, twilioPerson)
		}
		g.waitMessage(t, key, proactive.ID, "sent", func(m message) bool { return m.Status == "sent" })
		wantError(t, g.post(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"Ada","text":"x"}`, conn.ID)), http.StatusBadRequest, "invalid_parameter", "to")

		// Outside the 24-hour window (63016): failed, saying a template
		// is needed.
		acct.FailNext(twiliotest.OpMessage, twiliotest.OutsideWindow)
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"are you there?"}`)
		m := g.waitMessage(t, key, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if m.Error == nil || !strings.Contains(*m.Error, "63016") || !strings.Contains(*m.Error, "template") || m.Attempts != 1 {
			t.Errorf("out-of-window reply: error %v after %d attempt(s), want 63016 and a template hint after 1", m.Error, m.Attempts)
		}
		failed := g.events(t, key, "type=message.failed")
		if len(failed) == 0 || !strings.Contains(string(failed[len(failed)-1].Data), "template") {
			t.Errorf("message.failed events %d, want the last naming the template", len(failed))
		}
		// The same status reported asynchronously is a receipt (taken).
		st, b, err = acct.Status(ctx, sent[0].SID, "failed", 63016)
		wantTwiML(t, st, b, err)

		// A template, proactively and as a reply.
		const hx = "HX0123456789abcdef0123456789abcdef"
		out = g.queue(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"template":{"content_sid":%q,"variables":{"1":"Ada","2":"Tuesday"}}}`,
			conn.ID, twilioPerson, hx))
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", fmt.Sprintf(`{"template":{"content_sid":%q}}`, hx))
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		var tmpl []twiliotest.Message
		for _, s := range acct.Sent() {
			if s.ContentSID != "" {
				tmpl = append(tmpl, s)
			}
		}
		if len(tmpl) != 2 || tmpl[0].ContentSID != hx || tmpl[0].ContentVariables != `{"1":"Ada","2":"Tuesday"}` || tmpl[0].Body != "" ||
			tmpl[0].To != "whatsapp:"+twilioPerson || tmpl[1].ContentVariables != "" {
			t.Fatalf("template sends %+v", tmpl)
		}
		// Template validation names the field.
		wantError(t, g.post(t, key, "/v1/messages/"+in.ID+"/reply", `{"template":{"content_sid":"nope"}}`),
			http.StatusBadRequest, "invalid_parameter", "template.content_sid")
		wantError(t, g.post(t, key, "/v1/messages/"+in.ID+"/reply", fmt.Sprintf(`{"text":"hi","template":{"content_sid":%q}}`, hx)),
			http.StatusBadRequest, "invalid_parameter", "template")
		wantError(t, g.post(t, key, "/v1/messages/"+in.ID+"/reply", `{"template":{"content_sid":"x","extra":1}}`),
			http.StatusBadRequest, "invalid_parameter", "extra")

		// A Messaging Service sender with configure_webhooks false: its
		// webhooks are left to the customer.
		svc := acct.AddService()
		conn2 := g.connectTwilio(t, key, "whatsapp", map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken,
			"from": svc.SID, "configure_webhooks": false})
		if got, _ := acct.Service(svc.SID); got.InboundRequestURL != "" || conn2.Status != "active" || conn2.WebhookURL == nil {
			t.Fatalf("service %+v, connection %+v: want the service untouched and the URL shown", got, conn2)
		}
		// And configured: inbound and status callbacks point at it.
		svc2 := acct.AddService()
		conn3 := g.connectTwilio(t, key, "sms", map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": svc2.SID})
		if got, _ := acct.Service(svc2.SID); got.InboundRequestURL != *conn3.WebhookURL || got.StatusCallback != *conn3.WebhookURL {
			t.Fatalf("service after connect %+v, want its URLs at %s", got, *conn3.WebhookURL)
		}
		_, st, b, err = acct.Send(ctx, twiliotest.Incoming{From: twilioPerson, To: "+15550002222", Body: "via the service", MessagingServiceSID: svc2.SID})
		wantTwiML(t, st, b, err)
	})
}

package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// postWhatsApp posts a signed Cloud API webhook body to /hooks/whatsapp.
func postWhatsApp(t *testing.T, g *gateway, secret string, body []byte) response {
	t.Helper()
	return g.do(t, request{Method: http.MethodPost, Path: "/hooks/whatsapp", ContentType: "application/json", Body: string(body),
		Header: map[string]string{meta.SignatureHeader: wacloudtest.Sign(secret, body)}})
}

// TestWhatsAppHosted drives hosted WhatsApp through the HTTP server
// against the fake Cloud API: the callback URL's verification; a sandbox
// key is refused (paid); a signed-in project connects and gets the
// operator's number, a join code and the wa.me link; a person who has
// not joined is answered how to join and reaches no project; "join
// <code>" binds them; their image message (with a business-scoped user
// id) arrives as message.received with its attachment, once though Meta
// delivers it twice; a tampered signature is refused; typing reaches the
// fake on the inbound wamid; a reply goes out quoting it (context) to the
// BSUID (recipient); statuses move the reply's delivery to read; a quoted
// answer joins the conversation; outside the 24-hour window a text fails
// saying a template is needed, and a Cloud API template goes out.
func TestWhatsAppHosted(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := wacloudtest.NewServer()
		t.Cleanup(fake.Close)
		num := fake.AddNumber("+15550001111")
		g := startGateway(t, cfg, setup{outbox: true, whatsAppHosted: wacloud.Options{GraphURL: fake.GraphURL,
			AppSecret: fake.AppSecret, VerifyToken: fake.VerifyToken,
			Numbers: []wacloud.Number{{PhoneNumberID: num.PhoneNumberID, DisplayNumber: num.DisplayNumber, AccessToken: num.AccessToken}}}})

		// Meta verifies the callback URL.
		q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {fake.VerifyToken}, "hub.challenge": {"1158201444"}}
		if r := g.do(t, request{Path: "/hooks/whatsapp?" + q.Encode()}); r.Status != http.StatusOK || string(r.Body) != "1158201444" {
			t.Fatalf("verification: %d %s", r.Status, r.Body)
		}

		sb := g.newSandbox(t, "clinic")
		wantError(t, g.post(t, sb.APIKey, "/v1/connections", `{"channel":"whatsapp","provider":"hosted"}`), http.StatusPaymentRequired, "payment_required", "")
		key := signedInKey(t, g, sb.ProjectID)
		r := g.post(t, key, "/v1/connections", `{"channel":"whatsapp","provider":"hosted","name":"front desk"}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		var conn connection
		decodeJSON(t, r.Body, &conn)
		if conn.Address == nil || *conn.Address != "+15550001111" || conn.Line == nil || *conn.Line != num.PhoneNumberID || conn.JoinCode == nil ||
			conn.JoinLink == nil || *conn.JoinLink != "https://wa.me/15550001111?text=join%20"+*conn.JoinCode {
			t.Fatalf("connection %s", r.Body)
		}

		const person, phone = "US.13491208655302741918", "16505551234"
		msg := func(m wacloudtest.Message) []byte {
			m.From, m.UserID, m.Name = phone, person, "Ada"
			return wacloudtest.Payload(wacloudtest.Value{Number: num, Messages: []wacloudtest.Message{m}})
		}
		sentTo := func() []wacloudtest.Sent {
			var out []wacloudtest.Sent
			for _, s := range num.Sent() {
				if s.Recipient == person {
					out = append(out, s)
				}
			}
			return out
		}

		// Not joined: answered how to join, nothing stored.
		if r := postWhatsApp(t, g, fake.AppSecret, msg(wacloudtest.Message{ID: "wamid.HELLO", Text: "hello?"})); r.Status != http.StatusOK {
			t.Fatalf("unbound message: %d %s", r.Status, r.Body)
		}
		if s := sentTo(); len(s) != 1 || !strings.Contains(s[0].Text, "join") {
			t.Fatalf("the unbound person got %+v, want one answer saying how to join", s)
		}
		if got := receivedTexts(t, g, key); len(got) != 0 {
			t.Fatalf("an unbound person's message reached the project: %q", got)
		}

		// Join.
		if r := postWhatsApp(t, g, fake.AppSecret, msg(wacloudtest.Message{ID: "wamid.JOIN", Text: "join " + strings.ToLower(*conn.JoinCode)})); r.Status != http.StatusOK {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		if got := bindingsOf(t, g, key, conn.ID); len(got) != 1 || got[0] != person {
			t.Fatalf("bindings %q, want [%s]", got, person)
		}

		// An image, delivered twice; a tampered copy refused.
		img := []byte("\x89PNG\r\n\x1a\nan x-ray")
		body := msg(wacloudtest.Message{ID: "wamid.IMG1", MediaID: num.AddMedia("image/png", img), MimeType: "image/png", Text: "my x-ray"})
		for range 2 {
			if r := postWhatsApp(t, g, fake.AppSecret, body); r.Status != http.StatusOK {
				t.Fatalf("image message: %d %s", r.Status, r.Body)
			}
		}
		bad := g.do(t, request{Method: http.MethodPost, Path: "/hooks/whatsapp", ContentType: "application/json", Body: string(body),
			Header: map[string]string{meta.SignatureHeader: wacloudtest.Sign("not the app secret", body)}})
		if bad.Status != http.StatusUnauthorized {
			t.Errorf("tampered signature: %d %s, want 401", bad.Status, bad.Body)
		}
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != person || in.Text != "my x-ray" {
			t.Errorf("received %+v", in)
		}
		var stored message
		g.get(t, key, "/v1/messages/"+in.ID, &stored)
		if len(stored.Attachments) != 1 || stored.Attachments[0].ContentType != "image/png" || stored.Attachments[0].Size != int64(len(img)) {
			t.Fatalf("attachments %+v", stored.Attachments)
		}
		if a := g.do(t, request{Path: "/v1/messages/" + in.ID + "/attachments/" + stored.Attachments[0].ID, Key: key}); a.Status != http.StatusOK || !bytes.Equal(a.Body, img) {
			t.Errorf("attachment download: %d, %d bytes", a.Status, len(a.Body))
		}
		if !strings.Contains(string(stored.Details), `"wa_id":"16505551234"`) {
			t.Errorf("details %s", stored.Details)
		}

		// Typing on the message, then a reply quoting it.
		if r := g.post(t, key, "/v1/messages/"+in.ID+"/typing", ""); r.Status >= 300 {
			t.Fatalf("typing: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the typing indicator", func() bool {
			ty := num.Typings()
			return len(ty) == 1 && ty[0].MessageID == "wamid.IMG1" && ty[0].Indicator == "text"
		})
		r = g.post(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Thanks, the doctor will look at it today."}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("reply: %d %s", r.Status, r.Body)
		}
		var reply message
		decodeJSON(t, r.Body, &reply)
		waitFor(t, "the reply at the fake", func() bool { return len(sentTo()) == 3 }) // how-to-join, joined, reply
		out := sentTo()[2]
		if out.ContextID != "wamid.IMG1" || out.To != "" || out.Text != "Thanks, the doctor will look at it today." {
			t.Fatalf("reply at the fake: %+v", out)
		}
		waitFor(t, "the reply sent", func() bool {
			var m message
			g.get(t, key, "/v1/messages/"+reply.ID, &m)
			return m.Status == "sent"
		})

		// Statuses: delivered, then read (and a late delivered after it).
		st := func(s string) wacloudtest.Status {
			return wacloudtest.Status{ID: out.WAMID, Status: s, RecipientID: phone, RecipientUserID: person}
		}
		if r := postWhatsApp(t, g, fake.AppSecret, wacloudtest.Payload(wacloudtest.Value{Number: num, Statuses: []wacloudtest.Status{st("sent"), st("delivered"), st("read")}})); r.Status != http.StatusOK {
			t.Fatalf("statuses: %d %s", r.Status, r.Body)
		}
		postWhatsApp(t, g, fake.AppSecret, wacloudtest.Payload(wacloudtest.Value{Number: num, Statuses: []wacloudtest.Status{st("delivered")}}))
		g.get(t, key, "/v1/messages/"+reply.ID, &reply)
		if reply.Delivery == nil || reply.Delivery.State != "read" {
			t.Errorf("delivery %+v, want read", reply.Delivery)
		}

		// A quoted answer joins the reply's conversation.
		postWhatsApp(t, g, fake.AppSecret, msg(wacloudtest.Message{ID: "wamid.ANS", Text: "thank you", Context: out.WAMID}))
		evs = g.events(t, key, "type=message.received")
		if len(evs) != 2 || receivedOf(t, evs[1]).ConversationID != in.ConversationID {
			t.Errorf("the quoted answer: %d events, conversation %q want %q", len(evs), receivedOf(t, evs[len(evs)-1]).ConversationID, in.ConversationID)
		}

		// Outside the 24-hour window: text fails naming the template,
		// a template goes out.
		num.CloseWindow(person)
		r = g.post(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"`+person+`","text":"Your results are ready."}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("late text: %d %s", r.Status, r.Body)
		}
		var late message
		decodeJSON(t, r.Body, &late)
		waitFor(t, "the late text to fail", func() bool {
			g.get(t, key, "/v1/messages/"+late.ID, &late)
			return late.Status == "failed"
		})
		if late.Error == nil || !strings.Contains(*late.Error, "template") {
			t.Errorf("late text error %v, want one saying a template is needed", late.Error)
		}
		r = g.post(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"`+person+`","template":{"name":"results_ready","language":"en_US","variables":{"1":"Ada"}}}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("template: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the template at the fake", func() bool {
			s := sentTo()
			return len(s) == 4 && s[3].Template != nil && s[3].Template.Name == "results_ready" && strings.Join(s[3].Template.Params, ",") == "Ada"
		})
		var tpl message
		decodeJSON(t, r.Body, &tpl)
		waitFor(t, "the template sent", func() bool {
			g.get(t, key, "/v1/messages/"+tpl.ID, &tpl)
			return tpl.Status == "sent"
		})
		// Meta reports it undeliverable: the delivery fails with the code,
		// and message.failed is appended.
		failed := wacloudtest.Status{ID: sentTo()[3].WAMID, Status: "failed", RecipientUserID: person, Code: 131026, Title: "Message undeliverable", Message: "Message failed to send"}
		if r := postWhatsApp(t, g, fake.AppSecret, wacloudtest.Payload(wacloudtest.Value{Number: num, Statuses: []wacloudtest.Status{failed}})); r.Status != http.StatusOK {
			t.Fatalf("failed status: %d %s", r.Status, r.Body)
		}
		g.get(t, key, "/v1/messages/"+tpl.ID, &tpl)
		if tpl.Delivery == nil || tpl.Delivery.State != "failed" || tpl.Delivery.Code == nil || *tpl.Delivery.Code != "131026" ||
			tpl.Delivery.Reason == nil || !strings.Contains(*tpl.Delivery.Reason, "undeliverable") {
			t.Errorf("delivery after a failed status: %+v", tpl.Delivery)
		}
		if n := len(g.events(t, key, "type=message.failed")); n != 2 { // the late text, and the template
			t.Errorf("%d message.failed events, want 2", n)
		}
		wantError(t, g.post(t, key, "/v1/messages", `{"connection_id":"`+conn.ID+`","to":"`+person+`","template":{"content_sid":"HX0123456789abcdef0123456789abcdef"}}`),
			http.StatusBadRequest, "invalid_parameter", "template.content_sid")

		var details map[string]any
		_ = json.Unmarshal(stored.Details, &details)
		if details["user_id"] != person {
			t.Errorf("details.user_id %v", details["user_id"])
		}
	})
}

// TestWhatsAppHostedDedicated: a connection with a number of its own
// (config.dedicated) takes that number, needs no join step, and gets
// every message to it; the shared number's connections do not.
func TestWhatsAppHostedDedicated(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := wacloudtest.NewServer()
		t.Cleanup(fake.Close)
		one, two := fake.AddNumber("+15550001111"), fake.AddNumber("+15550002222")
		opts := wacloud.Options{GraphURL: fake.GraphURL, AppSecret: fake.AppSecret, VerifyToken: fake.VerifyToken}
		for _, n := range []*wacloudtest.Number{one, two} {
			opts.Numbers = append(opts.Numbers, wacloud.Number{PhoneNumberID: n.PhoneNumberID, DisplayNumber: n.DisplayNumber, AccessToken: n.AccessToken})
		}
		g := startGateway(t, cfg, setup{outbox: true, whatsAppHosted: opts})
		shared := signedInKey(t, g, g.newSandbox(t, "shared").ProjectID)
		own := signedInKey(t, g, g.newSandbox(t, "own").ProjectID)
		var cs, cd connection
		r := g.post(t, shared, "/v1/connections", `{"channel":"whatsapp","provider":"hosted"}`)
		decodeJSON(t, r.Body, &cs)
		r = g.post(t, own, "/v1/connections", `{"channel":"whatsapp","provider":"hosted","config":{"dedicated":true}}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("dedicated: %d %s", r.Status, r.Body)
		}
		decodeJSON(t, r.Body, &cd)
		if cd.Line == nil || *cd.Line != two.PhoneNumberID || cd.JoinCode != nil || cd.Address == nil || *cd.Address != "+15550002222" {
			t.Fatalf("dedicated connection %s, want +15550002222 without a join code", r.Body)
		}
		body := wacloudtest.Payload(wacloudtest.Value{Number: two, Messages: []wacloudtest.Message{{From: "4915112345678", Name: "Bo", ID: "wamid.D1", Text: "straight in"}}})
		if r := postWhatsApp(t, g, fake.AppSecret, body); r.Status != http.StatusOK {
			t.Fatalf("message: %d %s", r.Status, r.Body)
		}
		if got := receivedTexts(t, g, own); len(got) != 1 || got[0] != "straight in" {
			t.Errorf("dedicated connection received %q", got)
		}
		if got := receivedTexts(t, g, shared); len(got) != 0 {
			t.Errorf("the shared number's connection received %q", got)
		}
		r = g.post(t, own, "/v1/messages", `{"connection_id":"`+cd.ID+`","to":"+49 151 12345678","text":"hello Bo"}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the send from the dedicated number", func() bool {
			s := two.Sent()
			return len(s) == 1 && s[0].To == "4915112345678" && s[0].Text == "hello Bo"
		})
		var m message
		decodeJSON(t, r.Body, &m)
		evs := g.events(t, own, "type=message.received")
		if in := receivedOf(t, evs[0]); in.ConversationID != m.ConversationID {
			t.Errorf("a send to +49 151 12345678 opened conversation %s, want the person's own %s", m.ConversationID, in.ConversationID)
		}
	})
}

package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// startTelnyx serves a gateway with SMS through Telnyx pointed at fake.
func startTelnyx(t *testing.T, cfg store.Config, fake *telnyxtest.Server) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{outbox: true,
		channels: []channels.Descriptor{telnyx.Descriptor(telnyx.Options{APIURL: fake.APIURL})}})
}

// postSigned POSTs body to the gateway's url as Telnyx does, signed at at
// with key, and returns the status and the answer.
func postSigned(t *testing.T, key ed25519.PrivateKey, url string, body []byte, at time.Time) (int, string) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(telnyxtest.TimestampHeader, ts)
	r.Header.Set(telnyxtest.SignatureHeader, telnyxtest.Sign(key, ts, body))
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// messageEvents lists the types of the events of evs about the message id,
// in order.
func messageEvents(t *testing.T, evs []event, id string) string {
	t.Helper()
	var out []string
	for _, e := range evs {
		var d struct {
			Message *struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Message != nil && d.Message.ID == id {
			out = append(out, e.Type)
		}
	}
	return strings.Join(out, ",")
}

// TestTelnyx drives SMS through Telnyx end to end against the fake API:
// connect (the key checked, the profile's webhook_url set), signed inbound
// through /hooks/sms/{id} (a bad signature and a stale timestamp refused
// saying why, a retry stored once, MMS media downloaded, a download that
// keeps failing handled: 502 until Telnyx's last attempt), a reply (POST /v2/messages), its delivery
// reports (sent, delivered; another reply's delivery_failed making it failed with
// one message.failed naming Telnyx's code; a report that beats the send's
// answer applied after it; repeats changing nothing),
// 429 honoured, an invalid number failing with Telnyx's reason, and
// delete (the webhook cleared).
func TestTelnyx(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := telnyxtest.NewServer()
		t.Cleanup(fake.Close)
		acct := fake.NewAccount()
		g := startTelnyx(t, cfg, fake)
		key := g.newSandbox(t, "telnyx").APIKey
		ctx := context.Background()

		// SMS has two providers: the caller names one.
		wantError(t, g.post(t, key, "/v1/connections", `{"channel":"sms","config":{}}`), http.StatusBadRequest, "invalid_parameter", "provider")
		// A key Telnyx refuses, a number not of the account: 400 naming
		// the field, nothing stored.
		conf := func(apiKey, from string) string {
			return fmt.Sprintf(`{"channel":"sms","provider":"telnyx","config":{"api_key":%q,"public_key":%q,"from":%q}}`, apiKey, acct.PublicKey, from)
		}
		e := wantError(t, g.post(t, key, "/v1/connections", conf("KEYNOTAKEY000000", acct.Number)), http.StatusBadRequest, "invalid_parameter", "config.api_key")
		if !strings.Contains(e.Error.Message, "rejected the API key") {
			t.Errorf("bad key: %q", e.Error.Message)
		}
		wantError(t, g.post(t, key, "/v1/connections", conf(acct.APIKey, "+15559999999")), http.StatusBadRequest, "invalid_parameter", "config.from")

		resp := g.post(t, key, "/v1/connections", conf(acct.APIKey, acct.Number))
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		if strings.Contains(string(resp.Body), acct.APIKey) {
			t.Fatalf("the connection shows the API key: %s", resp.Body)
		}
		var conn struct {
			ID         string  `json:"id"`
			Channel    string  `json:"channel"`
			Provider   *string `json:"provider"`
			Status     string  `json:"status"`
			Address    *string `json:"address"`
			WebhookURL *string `json:"webhook_url"`
		}
		if err := json.Unmarshal(resp.Body, &conn); err != nil {
			t.Fatal(err)
		}
		hook := g.URL + "/hooks/sms/" + conn.ID
		if conn.Status != "active" || conn.Channel != "sms" || conn.Provider == nil || *conn.Provider != "telnyx" ||
			conn.Address == nil || *conn.Address != acct.Number || conn.WebhookURL == nil || *conn.WebhookURL != hook {
			t.Fatalf("connection %s: want active sms/telnyx at %s, webhook_url %s", resp.Body, acct.Number, hook)
		}
		if p, _ := fake.Profile(acct.ProfileID); p.WebhookURL != hook || p.WebhookAPIVersion != "2" {
			t.Fatalf("profile %+v, want webhook_url %s (API v2)", p, hook)
		}

		// A person texts the number; Telnyx POSTs message.received.
		const person = "+15550100001"
		body, err := acct.Incoming(ctx, &telnyxtest.Inbound{From: person, Text: "hello, is anyone there?"})
		if err != nil {
			t.Fatal(err)
		}
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received events, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != person || in.Text != "hello, is anyone there?" {
			t.Fatalf("received %+v", in)
		}
		// Telnyx retries the event: stored once.
		if st, b, err := acct.Deliver(ctx, body); err != nil || st != http.StatusOK {
			t.Fatalf("retry: %d %s %v", st, b, err)
		}
		// Signed by another key, stale, or from the future: 401 saying why.
		_, otherKey, _ := ed25519.GenerateKey(nil)
		for _, c := range []struct {
			key  ed25519.PrivateKey
			at   time.Time
			says string
		}{
			{otherKey, time.Now(), "does not verify"},
			{acct.Key, time.Now().Add(-6 * time.Minute), "old"},
			{acct.Key, time.Now().Add(time.Hour), "in the future"},
		} {
			st, b := postSigned(t, c.key, hook, body, c.at)
			if st != http.StatusUnauthorized || !strings.Contains(b, c.says) {
				t.Errorf("forged or stale delivery: %d %s, want 401 saying %q", st, b, c.says)
			}
		}
		if n := len(g.events(t, key, "type=message.received")); n != 1 {
			t.Fatalf("%d message.received events after a retry and forged requests, want 1", n)
		}

		// A reply: POST /v2/messages from the number to the person.
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Yes! How can I help?"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := acct.Sent()
		if len(sent) != 1 || sent[0].Text != "Yes! How can I help?" || sent[0].To != person || sent[0].From != acct.Number || sent[0].WebhookURL != hook {
			t.Fatalf("POST /v2/messages got %+v", sent)
		}

		// Its delivery reports, signed as Telnyx signs them: message.sent,
		// then message.finalized "delivered"; GET shows delivered, a
		// repeat changes nothing.
		report := func(typ, id, status string, errs ...telnyxtest.Error) []byte {
			t.Helper()
			payload, err := acct.Report(id, status, errs...)
			if err != nil {
				t.Fatal(err)
			}
			ev := acct.Event(typ, payload, 1)
			if st, b, err := acct.Deliver(ctx, ev); err != nil || st != http.StatusOK {
				t.Fatalf("%s %s: %d %s %v", typ, status, st, b, err)
			}
			return ev
		}
		report(telnyx.EventSent, sent[0].ID, "sent")
		if m := g.message(t, key, out.ID); m.Delivery == nil || m.Delivery.State != "sent" {
			t.Fatalf("after message.sent: delivery %+v, want sent", m.Delivery)
		}
		delivered := report(telnyx.EventFinalized, sent[0].ID, "delivered")
		dm := g.message(t, key, out.ID)
		if dm.Status != "sent" || dm.Delivery == nil || dm.Delivery.State != "delivered" || dm.Delivery.DeliveredAt == nil || dm.Delivery.Code != nil {
			t.Fatalf("after message.finalized delivered: %s %+v, want sent and delivered", dm.Status, dm.Delivery)
		}
		all := len(g.events(t, key, ""))
		if st, b, err := acct.Deliver(ctx, delivered); err != nil || st != http.StatusOK {
			t.Fatalf("repeated message.finalized: %d %s %v", st, b, err)
		}
		if again := g.message(t, key, out.ID); !again.Delivery.DeliveredAt.Equal(*dm.Delivery.DeliveredAt) || len(g.events(t, key, "")) != all {
			t.Fatalf("a repeated report changed the message (%+v) or added events", again.Delivery)
		}

		// Another reply the carrier refuses: message.finalized
		// delivery_failed makes it failed with Telnyx's code, one
		// message.failed; a repeat adds nothing.
		out2 := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"Are you still there?"}`)
		g.waitMessage(t, key, out2.ID, "sent", func(m message) bool { return m.Status == "sent" })
		id2 := acct.Sent()[len(acct.Sent())-1].ID
		undeliverable := telnyxtest.Error{Code: "40008", Title: "Undeliverable", Detail: "The carrier did not accept the message."}
		failedReport := report(telnyx.EventFinalized, id2, "delivery_failed", undeliverable)
		wantFailed := func(id, code string) {
			t.Helper()
			m := g.message(t, key, id)
			if m.Status != "failed" || m.Error == nil || !strings.Contains(*m.Error, code) || m.SentAt == nil ||
				m.Delivery == nil || m.Delivery.State != "failed" || m.Delivery.Code == nil || *m.Delivery.Code != code {
				t.Fatalf("message %s after a failed delivery: %s, error %v, delivery %+v; want failed with code %s", id, m.Status, m.Error, m.Delivery, code)
			}
			if got := messageEvents(t, g.events(t, key, ""), id); got != "message.sent,message.failed" {
				t.Fatalf("events of %s: %s, want message.sent, then message.failed", id, got)
			}
		}
		wantFailed(out2.ID, "40008")
		fails := g.events(t, key, "type=message.failed")
		if len(fails) != 1 || !strings.Contains(string(fails[0].Data), `"code":"40008"`) || !strings.Contains(string(fails[0].Data), "Undeliverable") {
			t.Fatalf("message.failed after a failed delivery report: %d events (%s), want 1 naming 40008", len(fails), types(fails))
		}
		all = len(g.events(t, key, ""))
		if st, b, err := acct.Deliver(ctx, failedReport); err != nil || st != http.StatusOK {
			t.Fatalf("repeated delivery_failed: %d %s %v", st, b, err)
		}
		report(telnyx.EventFinalized, id2, "delivered") // late and contrary: failed is final
		if n := len(g.events(t, key, "")); n != all {
			t.Fatalf("%d events after repeated reports, want %d", n, all)
		}
		wantFailed(out2.ID, "40008")

		// A report that beats the send's answer: Telnyx has the message
		// (and reports it failed) while comm still waits for POST
		// /v2/messages to answer. It is kept, and applied once the send
		// is recorded: message.sent, then message.failed.
		release := acct.HoldNext()
		t.Cleanup(release)
		total := acct.SentTotal()
		out3 := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"One more thing"}`)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = acct.WaitSent(wctx, total+1)
		cancel()
		if err != nil {
			t.Fatalf("the held send never reached the fake: %v", err)
		}
		id3 := acct.Sent()[len(acct.Sent())-1].ID
		report(telnyx.EventFinalized, id3, "sending_failed", telnyxtest.Error{Code: "40006", Title: "Recipient server unavailable", Detail: "The recipient's carrier is unavailable."})
		if m := g.message(t, key, out3.ID); m.Status != "sending" || m.Delivery != nil {
			t.Fatalf("while the send's answer is held: %s %+v, want sending with no delivery yet", m.Status, m.Delivery)
		}
		release()
		g.waitMessage(t, key, out3.ID, "failed", func(m message) bool { return m.Status == "failed" })
		wantFailed(out3.ID, "40006")
		if n := len(g.events(t, key, "type=message.failed")); n != 2 {
			t.Fatalf("%d message.failed events, want 2", n)
		}

		// MMS: the media downloaded into attachments.
		before := len(g.events(t, key, "type=message.received"))
		photo := fake.AddMedia("photo.jpg", "image/jpeg", []byte("\xff\xd8\xff a photo"))
		if _, err := acct.Incoming(ctx, &telnyxtest.Inbound{From: person, Text: "look", Media: []string{photo}}); err != nil {
			t.Fatal(err)
		}
		evs = g.events(t, key, "type=message.received")
		var mms struct {
			Message struct {
				Attachments []struct {
					Filename    string `json:"filename"`
					ContentType string `json:"content_type"`
					Size        int64  `json:"size"`
				} `json:"attachments"`
			} `json:"message"`
		}
		if err := json.Unmarshal(evs[len(evs)-1].Data, &mms); err != nil || len(mms.Message.Attachments) != 1 ||
			mms.Message.Attachments[0].ContentType != "image/jpeg" || mms.Message.Attachments[0].Size != 11 {
			t.Fatalf("MMS event %s: %v", evs[len(evs)-1].Data, err)
		}
		// Media that cannot be fetched: 502 to Telnyx (it retries) until its
		// last attempt, which stores the text and lists the media.
		flaky := fake.AddMedia("flaky.png", "image/png", []byte("png"))
		fake.FailMedia(flaky, 503, 503, 503, 503)
		m := &telnyxtest.Inbound{From: person, Text: "and this one", Media: []string{flaky}}
		if st, b, _ := acct.Deliver(ctx, acct.Event(telnyx.EventReceived, acct.Received(m), 1)); st != http.StatusBadGateway {
			t.Fatalf("media unavailable on attempt 1: %d %s, want 502", st, b)
		}
		if st, b, _ := acct.Deliver(ctx, acct.Event(telnyx.EventReceived, acct.Received(m), telnyx.LastAttempt)); st != http.StatusOK {
			t.Fatalf("media unavailable on the last attempt: %d %s, want 200", st, b)
		}
		evs = g.events(t, key, "type=message.received")
		if last := string(evs[len(evs)-1].Data); len(evs) != before+2 || !strings.Contains(last, "and this one") || !strings.Contains(last, "skipped_media") {
			t.Fatalf("%d events, last %s", len(evs), last)
		}

		// 429 with Retry-After: the outbox waits, then sends.
		acct.FailNext(telnyxtest.TooManyRequests(1))
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"after the rate limit"}`)
		if m := g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" }); m.Attempts < 2 {
			t.Errorf("rate-limited reply sent after %d attempt(s), want a retry", m.Attempts)
		}
		// An invalid number: failed at once with Telnyx's reason.
		acct.FailNext(telnyxtest.InvalidTo)
		out = g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"to nowhere"}`)
		msg := g.waitMessage(t, key, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if msg.Error == nil || !strings.Contains(*msg.Error, "40310") || msg.Attempts != 1 {
			t.Errorf("invalid number: error %v after %d attempt(s)", msg.Error, msg.Attempts)
		}

		// configure_webhooks false: the profile is left alone, and the
		// connection shows the URL to paste there.
		acct2 := fake.NewAccount()
		resp = g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"sms","provider":"telnyx","config":{"api_key":%q,"public_key":%q,"from":%q,"configure_webhooks":false}}`,
			acct2.APIKey, acct2.PublicKey, acct2.Number))
		var conn2 struct {
			ID         string  `json:"id"`
			Status     string  `json:"status"`
			WebhookURL *string `json:"webhook_url"`
		}
		if err := json.Unmarshal(resp.Body, &conn2); err != nil || resp.Status != http.StatusCreated || conn2.Status != "active" ||
			conn2.WebhookURL == nil || *conn2.WebhookURL != g.URL+"/hooks/sms/"+conn2.ID || acct2.Webhook() != "" || acct2.Calls("patch") != 0 {
			t.Fatalf("configure_webhooks false: %d %s (profile webhook %q)", resp.Status, resp.Body, acct2.Webhook())
		}
		fake.SetWebhook(acct2.ProfileID, *conn2.WebhookURL, "2") // the customer pastes it
		if _, err := acct2.Incoming(ctx, &telnyxtest.Inbound{From: person, Text: "to the second number"}); err != nil {
			t.Fatal(err)
		}

		// Deleting the connection clears the profile's webhook.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/connections/" + conn.ID, Key: key}); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if acct.Webhook() != "" {
			t.Errorf("webhook after delete: %q", acct.Webhook())
		}
		if st, _ := postSigned(t, acct.Key, hook, body, time.Now()); st != http.StatusNotFound {
			t.Errorf("delivery to a deleted connection: %d, want 404", st)
		}
	})
}

package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/meta/metatest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

func metaOptions(fake *metatest.Server) meta.Options {
	return meta.Options{APIURL: fake.APIURL, DialogURL: fake.DialogURL, AppID: fake.AppID, AppSecret: fake.AppSecret, VerifyToken: fake.VerifyToken}
}

// metaInstall connects channel with config for the project of key and
// logs in as user at the fake; it returns the active connection.
func (g *gateway) metaInstall(t *testing.T, fake *metatest.Server, key, channel, config string, user *metatest.User) connection {
	t.Helper()
	resp := g.post(t, key, "/v1/connections", `{"channel":"`+channel+`","config":`+config+`}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect %s: %d %s", channel, resp.Status, resp.Body)
	}
	var pending connection
	decodeJSON(t, resp.Body, &pending)
	if pending.Status != "pending" || pending.AuthorizeURL == nil || !strings.HasPrefix(*pending.AuthorizeURL, fake.DialogURL) {
		t.Fatalf("connection %s: want pending with the Facebook Login URL", resp.Body)
	}
	approved, err := fake.Authorize(*pending.AuthorizeURL, user)
	if err != nil {
		t.Fatal(err)
	}
	if r := g.metaFollow(t, approved, channel); r.Status != http.StatusOK {
		t.Fatalf("approved: %d %s", r.Status, r.Body)
	}
	var c connection
	g.get(t, key, "/v1/connections/"+pending.ID, &c)
	if c.Status != "active" {
		t.Fatalf("connection after the login: %+v", c)
	}
	return c
}

// metaFollow follows the login dialog's redirect to the gateway.
func (g *gateway) metaFollow(t *testing.T, redirect, channel string) response {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil || !strings.HasPrefix(redirect, g.URL+"/oauth/"+channel+"/callback") {
		t.Fatalf("redirect %q (%v): want the gateway's callback", redirect, err)
	}
	return g.do(t, request{Path: u.RequestURI()})
}

func types(evs []event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return strings.Join(out, ",")
}

// TestMetaMessenger drives the operator's Meta app through HTTP against
// the fake Graph API: two projects log in and bind two Pages (one named,
// one the first), a forged state and a denial connect nothing; the app's
// webhook /hooks/facebook answers the GET verification, takes a signed
// batch for both Pages and an unknown one and routes each entry to its
// project (a retry stores nothing, an echo is ignored, a bad signature is
// refused); a reply goes out through the Send API, its delivery (mids)
// and read (watermark) receipts show on GET (repeats, a late delivery and
// the echo of the send change nothing, add no event), outside the 24-hour
// window it fails naming the window, and an expired token revokes the
// connection.
func TestMetaMessenger(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := metatest.NewServer()
		t.Cleanup(fake.Close)
		ann := fake.NewUser("Ann")
		acme, globex := ann.NewPage("Acme"), ann.NewPage("Globex")
		g := startGateway(t, cfg, setup{outbox: true, meta: metaOptions(fake)})
		keyA, keyB := g.newSandbox(t, "a").APIKey, g.newSandbox(t, "b").APIKey

		// A forged state and a denial connect nothing.
		var pending connection
		decodeJSON(t, g.post(t, keyA, "/v1/connections", `{"channel":"facebook","config":{"page_id":"`+globex.ID+`"}}`).Body, &pending)
		forged := g.do(t, request{Path: "/oauth/facebook/callback?" + url.Values{"state": {"forged"}, "code": {"AQx"}}.Encode()})
		if forged.Status != http.StatusBadRequest || !strings.Contains(strings.ToLower(string(forged.Body)), "no pending facebook install") {
			t.Fatalf("forged state: %d %s", forged.Status, forged.Body)
		}
		denied, err := fake.Deny(*pending.AuthorizeURL)
		if err != nil {
			t.Fatal(err)
		}
		if r := g.metaFollow(t, denied, "facebook"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "access_denied") {
			t.Fatalf("denied: %d %s", r.Status, r.Body)
		}
		if evs := g.events(t, keyA, ""); len(evs) != 0 {
			t.Fatalf("events after a denial: %s", types(evs))
		}
		approved, err := fake.Authorize(*pending.AuthorizeURL, ann)
		if err != nil {
			t.Fatal(err)
		}
		if r := g.metaFollow(t, approved, "facebook"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Globex") {
			t.Fatalf("approved: %d %s", r.Status, r.Body)
		}
		if got := types(g.events(t, keyA, "")); got != "connection.authorized,connection.active" {
			t.Fatalf("events %s, want connection.authorized, connection.active", got)
		}
		for _, f := range []string{"messages", "messaging_postbacks", "message_deliveries", "message_reads"} {
			if !slices.Contains(globex.Subscribed(), f) {
				t.Errorf("the app is subscribed to %v on the Page, want %s too", globex.Subscribed(), f)
			}
		}
		if len(acme.Subscribed()) != 0 {
			t.Errorf("the Page not chosen was subscribed")
		}
		// Project B takes the first Page.
		cb := g.metaInstall(t, fake, keyB, "facebook", `{}`, ann)
		if cb.Address == nil || *cb.Address != "Acme" {
			t.Fatalf("project B's connection: %+v, want the first Page", cb)
		}

		// The app's webhook: the GET verification.
		verify := func(token string) response {
			return g.do(t, request{Path: "/hooks/facebook?" + url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {token}, "hub.challenge": {"1158201444"}}.Encode()})
		}
		if r := verify(fake.VerifyToken); r.Status != http.StatusOK || string(r.Body) != "1158201444" {
			t.Fatalf("verification: %d %s", r.Status, r.Body)
		}
		wantError(t, verify("wrong"), http.StatusUnauthorized, "unauthenticated", "")

		// One signed batch for both Pages and a Page no connection holds.
		pa, pg := acme.Person(false), globex.Person(false)
		batch := metatest.Batch("page",
			metatest.Entry{ID: acme.ID, Messaging: []metatest.Event{metatest.Message{Sender: pa, Recipient: acme.ID, MID: "m_acme1", Text: "hello Acme"}.Event()}},
			metatest.Entry{ID: globex.ID, Messaging: []metatest.Event{
				metatest.Message{Sender: pg, Recipient: globex.ID, MID: "m_globex1", Text: "hello Globex"}.Event(),
				metatest.Message{Sender: pg, Recipient: globex.ID, MID: "m_echo", Text: "an echo of our own send", Echo: true}.Event()}},
			metatest.Entry{ID: "999999999", Messaging: []metatest.Event{metatest.Message{Sender: "1", Recipient: "999999999", MID: "m_lost", Text: "nobody"}.Event()}},
		)
		hook := &metatest.Webhook{URL: g.URL + "/hooks/facebook", Secret: fake.AppSecret}
		ctx := context.Background()
		unrouted := g.Svc.UnroutedEvents()
		for range 2 { // Meta retries: stored once
			if n, status, err := hook.Post(ctx, batch); err != nil || n != 1 {
				t.Fatalf("webhook: %d attempts, %d, %v", n, status, err)
			}
		}
		if g.Svc.UnroutedEvents() != unrouted+2 {
			t.Errorf("unrouted events %d, want %d (the unknown Page, twice)", g.Svc.UnroutedEvents(), unrouted+2)
		}
		forgedHook := &metatest.Webhook{URL: g.URL + "/hooks/facebook", Secret: "not-the-app-secret"}
		if status, err := forgedHook.PostOnce(ctx, batch); err != nil || status != http.StatusUnauthorized {
			t.Fatalf("a bad signature: %d %v, want 401", status, err)
		}
		evsA, evsB := g.events(t, keyA, "type=message.received"), g.events(t, keyB, "type=message.received")
		if len(evsA) != 1 || len(evsB) != 1 {
			t.Fatalf("message.received: %d in A, %d in B; want 1 each (retries, echoes, forged and unknown ones store nothing)", len(evsA), len(evsB))
		}
		inA, inB := receivedOf(t, evsA[0]), receivedOf(t, evsB[0])
		if inA.Sender != pg || inA.Text != "hello Globex" || inB.Sender != pa || inB.Text != "hello Acme" {
			t.Fatalf("routed wrong: A got %+v, B got %+v", inA, inB)
		}

		// Typing shows Messenger's indicator to the person.
		if r := g.post(t, keyA, "/v1/messages/"+inA.ID+"/typing", ""); r.Status != http.StatusOK {
			t.Fatalf("typing: %d %s", r.Status, r.Body)
		}
		if ty := globex.Typings(); len(ty) != 1 || ty[0].Recipient != pg || ty[0].Action != "typing_on" {
			t.Fatalf("sender actions %+v, want typing_on to %s", ty, pg)
		}
		// A photo answering the first message: downloaded, and in the same
		// conversation.
		photo := fake.AddFile("receipt.jpg", "image/jpeg", []byte("\xff\xd8\xff a small jpeg"))
		if _, _, err := hook.Post(ctx, metatest.Batch("page", metatest.Entry{ID: globex.ID, Messaging: []metatest.Event{
			metatest.Message{Sender: pg, Recipient: globex.ID, MID: "m_globex2", Text: "here is the receipt", ReplyTo: "m_globex1",
				Attachments: [][2]string{{"image", photo}}}.Event()}})); err != nil {
			t.Fatal(err)
		}
		evsA = g.events(t, keyA, "type=message.received")
		if len(evsA) != 2 {
			t.Fatalf("%d message.received, want 2", len(evsA))
		}
		var withPhoto message
		g.get(t, keyA, "/v1/messages/"+receivedOf(t, evsA[1]).ID, &withPhoto)
		if len(withPhoto.Attachments) != 1 || withPhoto.Attachments[0].ContentType != "image/jpeg" || withPhoto.Attachments[0].Size != int64(len("\xff\xd8\xff a small jpeg")) ||
			withPhoto.ConversationID != inA.ConversationID {
			t.Fatalf("message with a photo: %+v, want the jpeg in conversation %s", withPhoto, inA.ConversationID)
		}

		// A reply goes out through the Send API.
		out := g.queue(t, keyA, "/v1/messages/"+inA.ID+"/reply", `{"text":"Hi from Globex"}`)
		g.waitMessage(t, keyA, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if sent := globex.Sent(); len(sent) != 1 || sent[0].Recipient != pg || sent[0].Text != "Hi from Globex" || sent[0].MessagingType != "RESPONSE" {
			t.Fatalf("the Send API got %+v", sent)
		}
		// Delivery and read receipts, signed, at the app's webhook: a
		// second reply; message_deliveries naming both mids makes both
		// delivered (a repeat changes nothing); a read watermark at Meta's
		// timestamp of the first makes only the first read, one at the
		// second's makes it read too. The echo of our own send stays
		// ignored. Receipts come with no events.
		out2 := g.queue(t, keyA, "/v1/messages/"+inA.ID+"/reply", `{"text":"Anything else?"}`)
		g.waitMessage(t, keyA, out2.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := globex.Sent()
		if len(sent) != 2 {
			t.Fatalf("the Send API got %d messages, want 2", len(sent))
		}
		mid1, mid2 := sent[0].MID, sent[1].MID
		all := len(g.events(t, keyA, ""))
		page := func(evs ...metatest.Event) {
			t.Helper()
			if n, status, err := hook.Post(ctx, metatest.Batch("page", metatest.Entry{ID: globex.ID, Messaging: evs})); err != nil || n != 1 || status != http.StatusOK {
				t.Fatalf("receipts: %d attempts, %d, %v", n, status, err)
			}
		}
		state := func(id string) string {
			t.Helper()
			m := g.message(t, keyA, id)
			if m.Delivery == nil {
				return ""
			}
			return m.Delivery.State
		}
		deliveries := metatest.Delivery(pg, globex.ID, []string{mid1, mid2}, sent[1].At.UnixMilli())
		page(deliveries)
		if s1, s2 := state(out.ID), state(out2.ID); s1 != "delivered" || s2 != "delivered" {
			t.Fatalf("after message_deliveries: %q and %q, want delivered", s1, s2)
		}
		page(deliveries)
		page(metatest.Read(pg, globex.ID, sent[0].At.UnixMilli()))
		m1 := g.message(t, keyA, out.ID)
		if m1.Delivery == nil || m1.Delivery.State != "read" || m1.Delivery.ReadAt == nil || m1.Delivery.DeliveredAt == nil || state(out2.ID) != "delivered" {
			t.Fatalf("after a read watermark at the first reply: %+v and %q, want read and delivered", m1.Delivery, state(out2.ID))
		}
		page(metatest.Read(pg, globex.ID, sent[1].At.UnixMilli()))
		m2 := g.message(t, keyA, out2.ID)
		if s1 := state(out.ID); s1 != "read" || m2.Delivery == nil || m2.Delivery.State != "read" || m2.Delivery.ReadAt == nil {
			t.Fatalf("after a read watermark at the second reply: %q and %+v, want read", s1, m2.Delivery)
		}
		page(metatest.Delivery(pg, globex.ID, []string{mid2}, time.Now().UnixMilli())) // late: read stays
		page(metatest.Message{Sender: pg, Recipient: globex.ID, MID: mid1, Text: "Hi from Globex", Echo: true}.Event())
		if again := g.message(t, keyA, out2.ID); again.Delivery == nil || again.Delivery.State != "read" || !again.Delivery.ReadAt.Equal(*m2.Delivery.ReadAt) ||
			!again.Delivery.DeliveredAt.Equal(*m2.Delivery.DeliveredAt) {
			t.Fatalf("after a late delivery and an echo: %+v, want it as it was (%+v)", again.Delivery, m2.Delivery)
		}
		if evs := g.events(t, keyA, ""); len(evs) != all {
			t.Fatalf("receipts and an echo added events: %s", types(evs[all:]))
		}
		if n := len(g.events(t, keyA, "type=message.received")); n != 2 {
			t.Fatalf("%d message.received after an echo, want 2", n)
		}
		// Outside the 24-hour window: failed, naming the window.
		acme.CloseWindow(pa)
		late := g.queue(t, keyB, "/v1/messages/"+inB.ID+"/reply", `{"text":"Too late"}`)
		failed := g.waitMessage(t, keyB, late.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if failed.Error == nil || !strings.Contains(*failed.Error, "24-hour") {
			t.Fatalf("outside the window: %+v, want an error naming the 24-hour window", failed)
		}
		// An expired Page token revokes the connection.
		globex.Revoke()
		gone := g.queue(t, keyA, "/v1/messages/"+inA.ID+"/reply", `{"text":"Still there?"}`)
		g.waitMessage(t, keyA, gone.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if n := len(g.events(t, keyA, "type=connection.revoked")); n != 1 {
			t.Fatalf("%d connection.revoked events, want 1", n)
		}
	})
}

// TestMetaInstagram connects the Instagram account linked to a Page with
// the operator's app and takes its messages at /hooks/instagram (object
// "instagram", routed by the account id); a long reply goes out in parts
// of Instagram's 1000-character limit, and messaging_seen of its first
// part marks it read.
func TestMetaInstagram(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := metatest.NewServer()
		t.Cleanup(fake.Close)
		ann := fake.NewUser("Ann")
		ann.NewPage("No Instagram")
		page := ann.NewPage("Shop")
		igID := page.LinkInstagram("shop")
		g := startGateway(t, cfg, setup{outbox: true, meta: metaOptions(fake)})
		key := g.newSandbox(t, "ig").APIKey
		c := g.metaInstall(t, fake, key, "instagram", `{}`, ann)
		if c.Address == nil || *c.Address != "@shop" {
			t.Fatalf("instagram connection %+v, want @shop", c)
		}
		person := page.Person(true)
		hook := &metatest.Webhook{URL: g.URL + "/hooks/instagram", Secret: fake.AppSecret}
		body := metatest.Batch("instagram", metatest.Entry{ID: igID, Messaging: []metatest.Event{
			metatest.Message{Sender: person, Recipient: igID, MID: "aWdfZAG1faXRlbToxOklH", Text: "is this in stock?"}.Event()}})
		if _, _, err := hook.Post(context.Background(), body); err != nil {
			t.Fatal(err)
		}
		// The same body at the Messenger route is not Messenger's.
		if _, _, err := (&metatest.Webhook{URL: g.URL + "/hooks/facebook", Secret: fake.AppSecret}).Post(context.Background(), body); err != nil {
			t.Fatal(err)
		}
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 {
			t.Fatalf("%d message.received, want 1", len(evs))
		}
		in := receivedOf(t, evs[0])
		if in.Sender != person || in.Text != "is this in stock?" {
			t.Fatalf("received %+v", in)
		}
		long := strings.Repeat("Yes, we have it. ", 100) // 1700 characters
		out := g.queue(t, key, "/v1/messages/"+in.ID+"/reply", `{"text":"`+long+`"}`)
		g.waitMessage(t, key, out.ID, "sent", func(m message) bool { return m.Status == "sent" })
		sent := page.Sent()
		var joined strings.Builder
		for _, m := range sent {
			joined.WriteString(m.Text)
			if !m.Instagram || len(m.Text) > 1000 || m.Recipient != person {
				t.Errorf("sent %+v", m)
			}
		}
		if len(sent) != 2 || joined.String() != long {
			t.Fatalf("%d parts, want 2 that join to the text", len(sent))
		}
		// messaging_seen names the mid: the first part's is the message
		// comm stores (read); the second's names nothing (dropped).
		seen := func(mid string) {
			t.Helper()
			b := metatest.Batch("instagram", metatest.Entry{ID: igID, Messaging: []metatest.Event{metatest.Seen(person, igID, mid, time.Now().UnixMilli())}})
			if n, status, err := hook.Post(context.Background(), b); err != nil || n != 1 || status != http.StatusOK {
				t.Fatalf("seen: %d attempts, %d, %v", n, status, err)
			}
		}
		all := len(g.events(t, key, ""))
		seen(sent[1].MID)
		if m := g.message(t, key, out.ID); m.Delivery != nil {
			t.Fatalf("seen of the second part: delivery %+v, want none", m.Delivery)
		}
		seen(sent[0].MID)
		if m := g.message(t, key, out.ID); m.Delivery == nil || m.Delivery.State != "read" || m.Delivery.ReadAt == nil {
			t.Fatalf("seen of the message: delivery %+v, want read", m.Delivery)
		}
		if n := len(g.events(t, key, "")); n != all {
			t.Fatalf("seen receipts added %d events", n-all)
		}
	})
}

// TestMetaOwnApp connects a Page with the caller's own Meta app (no
// operator app configured): the connection's webhook URL answers the GET
// verification with the caller's verify token and takes POSTs signed with
// the caller's app secret.
func TestMetaOwnApp(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		fake := metatest.NewServer()
		t.Cleanup(fake.Close)
		page := fake.NewUser("Ann").NewPage("Acme")
		g := startGateway(t, cfg, setup{outbox: true, meta: meta.Options{APIURL: fake.APIURL}})
		key := g.newSandbox(t, "own").APIKey
		if r := g.post(t, key, "/v1/connections", `{"channel":"facebook"}`); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "page_access_token") {
			t.Fatalf("connect without credentials and no operator app: %d %s", r.Status, r.Body)
		}
		resp := g.post(t, key, "/v1/connections", `{"channel":"facebook","config":{"page_id":"`+page.ID+`","page_access_token":"`+page.Token+`","app_secret":"`+page.AppSecret+`","verify_token":"my-verify"}}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", resp.Status, resp.Body)
		}
		var c connection
		decodeJSON(t, resp.Body, &c)
		if c.Status != "active" || c.WebhookURL == nil || len(page.Subscribed()) == 0 {
			t.Fatalf("connection %s (subscribed %v)", resp.Body, page.Subscribed())
		}
		u, _ := url.Parse(*c.WebhookURL)
		r := g.do(t, request{Path: u.Path + "?" + url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {"my-verify"}, "hub.challenge": {"42"}}.Encode()})
		if r.Status != http.StatusOK || string(r.Body) != "42" {
			t.Fatalf("verification: %d %s", r.Status, r.Body)
		}
		person := page.Person(false)
		body := metatest.Batch("page", metatest.Entry{ID: page.ID, Messaging: []metatest.Event{
			metatest.Message{Sender: person, Recipient: page.ID, MID: "m_own1", Text: "hi"}.Event()}})
		if status, err := (&metatest.Webhook{URL: g.URL + u.Path, Secret: fake.AppSecret}).PostOnce(context.Background(), body); err != nil || status != http.StatusUnauthorized {
			t.Fatalf("signed with another app's secret: %d %v, want 401", status, err)
		}
		if _, _, err := (&metatest.Webhook{URL: g.URL + u.Path, Secret: page.AppSecret}).Post(context.Background(), body); err != nil {
			t.Fatal(err)
		}
		evs := g.events(t, key, "type=message.received")
		if len(evs) != 1 || receivedOf(t, evs[0]).Sender != person {
			t.Fatalf("message.received: %d", len(evs))
		}
	})
}

package imessage_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
)

// FuzzReceive feeds bodies to the app's Route and Shared.Receive at the
// relay's own webhook URL: they never panic, and what they return is
// complete (a message has a guid and a sender, a receipt a message id,
// every item the relay's line).
func FuzzReceive(f *testing.F) {
	srv := bluebubblestest.NewServer(password, address)
	f.Cleanup(srv.Close)
	m := srv.Incoming(bluebubblestest.Incoming{From: person, Text: "hi", ThreadOriginatorGUID: "p:0/X",
		Attachments: []bluebubblestest.Attachment{srv.AddAttachment("a.txt", "text/plain", []byte("a"))}})
	f.Add(bluebubblestest.Event("new-message", m))
	f.Add(bluebubblestest.Event("updated-message", bluebubblestest.Message{GUID: "g", IsFromMe: true, DateRead: new(int64(1700000000000))}))
	f.Add([]byte(`{"type":"new-message","data":{"guid":"g","handle":{"address":"x@y.z"},"chats":[{"guid":"any;+;chat1"}],"associatedMessageType":2000,"associatedMessageGuid":"p:0/Y"}}`))
	f.Add([]byte(`{"type":"new-message","data":[]}`))
	f.Add([]byte(`[]`))
	e := relayEnv{srv: srv, d: imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: srv.URL, Password: password, Address: address}}})}
	a, err := e.d.New(f.Context(), channels.Connection{ID: "conn_f", Line: address, WebhookURL: hookBase + "/conn_f"})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := a.(channels.Provisioner).Provision(f.Context()); err != nil {
		f.Fatal(err)
	}
	hook := srv.Webhooks()[0].URL
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
		if _, _, err := e.d.App.Route(r, body); err != nil {
			t.Fatalf("Route refused the relay's own URL: %v", err)
		}
		items, err := e.d.Shared.Receive(r, body)
		if err != nil {
			return
		}
		for _, it := range items {
			switch {
			case it.Line != address:
				t.Fatalf("item on line %q", it.Line)
			case it.Receipt != nil && (it.Receipt.MessageID == "" || it.ProviderID == ""):
				t.Fatalf("incomplete receipt %+v", it)
			case it.Receipt == nil && (it.ProviderID == "" || it.Sender == "" || it.ThreadKey == ""):
				t.Fatalf("incomplete message %+v", it)
			}
		}
	})
}

package x_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/channels/x/xtest"
)

// FuzzWebhook feeds signed bodies to the app-level route and to a
// connection's parser: neither panics, a route key is an X user id, and
// every message is complete.
func FuzzWebhook(f *testing.F) {
	e := xtest.Event{ID: "1900000000000000001", SenderID: peer, RecipientID: "1000000001", Text: "hi"}
	for _, seed := range [][]byte{xtest.DMReceived("1000000001", e), xtest.AccountActivity("1000000001", e),
		xtest.ChatReceived("1000000001", peer), xtest.OAuthRevoke("1000000001"), []byte(`{"data":null}`),
		[]byte(`{"data":{"payload":[1]}}`), []byte(`{}`), []byte(`[`)} {
		f.Add(seed)
	}
	opts := x.Options{ClientID: "id", ClientSecret: xtest.ClientSecret, ConsumerSecret: xtest.ConsumerSecret}
	d := x.Descriptor(opts)
	cfg, _ := json.Marshal(x.Config{AccessToken: "at-1", UserID: "1000000001", Username: "agent"})
	a, err := d.New(f.Context(), channels.Connection{ID: "conn_f", Config: cfg})
	if err != nil {
		f.Fatal(err)
	}
	wr := a.(channels.WebhookReceiver)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
		r.Header.Set(x.SignatureHeader, x.Sign(xtest.ConsumerSecret, body))
		keys, _, err := d.App.Route(r, body)
		if err == nil {
			for _, k := range keys {
				if k == "" || len(k) > 20 {
					t.Fatalf("route key %q", k)
				}
			}
		}
		ins, err := wr.ParseWebhook(r, body)
		if err != nil {
			return
		}
		for _, in := range ins {
			if in.ProviderID == "" || in.Sender == "" || in.ThreadKey == "" {
				t.Fatalf("incomplete message %+v", in)
			}
		}
	})
}

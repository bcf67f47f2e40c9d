package meta_test

import (
	"encoding/json"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/meta/metatest"
)

// FuzzParseWebhook feeds signed bodies to the parser and the app's Route:
// they never panic, and whatever they return is complete.
func FuzzParseWebhook(f *testing.F) {
	f.Add(metatest.Batch("page", metatest.Entry{ID: "1", Messaging: []metatest.Event{
		metatest.Message{Sender: "2", Recipient: "1", MID: "m_1", Text: "hi", ReplyTo: "m_0"}.Event(),
		metatest.Delivery("2", "1", []string{"m_9"}, 1700000000000), metatest.Read("2", "1", 1700000000000),
		metatest.Postback("2", "1", "m_p", "Start", "START")}}))
	f.Add([]byte(`{"object":"page","entry":[{"id":"1","messaging":[{"sender":{"id":"2"},"message":{"mid":"m","is_echo":true}}]}]}`))
	f.Add([]byte(`{"object":"instagram","entry":[{"id":"1","messaging":[{"sender":{"id":"2"},"read":{"mid":"x"}}]}]}`))
	f.Add([]byte(`{"object":"page","entry":{}}`))
	f.Add([]byte(`[]`))
	const secret = "fuzzsecret0123456789"
	raw, _ := json.Marshal(map[string]any{"page_id": "1", "page_access_token": "EAAPfuzz0123456789", "app_secret": secret})
	a, err := meta.New(meta.Facebook, meta.Options{APIURL: "http://127.0.0.1:1/v23.0"}, channels.Connection{ID: "conn_f", Config: raw})
	if err != nil {
		f.Fatal(err)
	}
	app := meta.FacebookDescriptor(meta.Options{AppID: "1", AppSecret: secret, VerifyToken: "v"}).App
	f.Fuzz(func(t *testing.T, body []byte) {
		r := metatest.SignedRequest("https://comm.example/hooks/facebook", secret, body)
		ins, err := a.ParseWebhook(r, body)
		if err == nil {
			for _, in := range ins {
				if in.ProviderID == "" || in.Sender == "" {
					t.Fatalf("incomplete item %+v", in)
				}
			}
		}
		_, _, _ = app.Route(metatest.SignedRequest("https://comm.example/hooks/facebook", secret, body), body)
	})
}

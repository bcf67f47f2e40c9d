package telnyx_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/telnyx"
)

// FuzzParseWebhook feeds correctly signed bodies to the parser: it never
// panics, and every message it returns is complete.
func FuzzParseWebhook(f *testing.F) {
	for _, s := range []string{
		`{"data":{"event_type":"message.received","id":"e","payload":{"id":"m","from":{"phone_number":"+15550100001"},"to":[{"phone_number":"+15550000001"}],"text":"hi","media":[]}},"meta":{"attempt":1}}`,
		`{"data":{"event_type":"message.finalized","payload":{"id":"m","direction":"outbound","to":[{"status":"delivery_failed"}],"errors":[{"code":40008,"title":"x"}]}}}`,
		`{"data":{"event_type":"message.sent","payload":{"id":"m","to":[]}}}`,
		`{"data":{"event_type":"message.received","payload":{"id":"m","from":{"phone_number":"+1"},"media":[{"url":"ftp://x"}]}}}`,
		`{}`, `null`, `[]`, `{"data":7}`,
	} {
		f.Add([]byte(s))
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1800000000, 0)
	cfg, _ := json.Marshal(map[string]any{"api_key": "KEY0123456789", "public_key": base64.StdEncoding.EncodeToString(pub), "from": "+15550000001"})
	a, err := telnyx.New(f.Context(), telnyx.Options{APIURL: "http://127.0.0.1:1/v2", Now: func() time.Time { return now }, CallTimeout: 50 * time.Millisecond},
		channels.Connection{ID: "conn_fuzz", Config: cfg})
	if err != nil {
		f.Fatal(err)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, _ := http.NewRequest(http.MethodPost, "https://comm.example/hooks/sms/conn_fuzz", http.NoBody)
		r.Header.Set(telnyx.TimestampHeader, ts)
		r.Header.Set(telnyx.SignatureHeader, telnyx.Sign(key, ts, body))
		ins, err := a.ParseWebhook(r, body)
		if err != nil {
			return
		}
		for _, in := range ins {
			if in.Receipt == nil && (in.ProviderID == "" || in.Sender == "") {
				t.Fatalf("incomplete message %+v", in)
			}
			if in.Receipt != nil && in.Receipt.MessageID == "" {
				t.Fatalf("receipt without a message id %+v", in.Receipt)
			}
		}
	})
}

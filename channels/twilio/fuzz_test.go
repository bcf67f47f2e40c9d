package twilio_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
)

// FuzzParseWebhook feeds the webhook parser arbitrary bodies, content
// types and queries, unsigned and correctly signed (so that the parser
// behind the signature is reached): it never panics, an unsigned request
// is always a signature error, and whatever it accepts is a complete
// message or a receipt.
func FuzzParseWebhook(f *testing.F) {
	srv := twiliotest.NewServer()
	f.Cleanup(srv.Close)
	acct := srv.NewAccount()
	const hook = "https://comm.example/hooks/sms/conn_fuzz"
	raw, _ := json.Marshal(map[string]any{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": number})
	a, err := twilio.New(f.Context(), twilio.SMS, opts(srv), channels.Connection{ID: "conn_fuzz", Config: raw, WebhookURL: hook})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = a.(channels.Closer).Close() })
	wr := a.(channels.WebhookReceiver)

	form := acct.Params(twiliotest.Incoming{From: person, To: number, Body: "hi"}).Encode()
	status := acct.StatusParams("SM0123456789abcdef0123456789abcdef", "failed", 30007).Encode()
	f.Add([]byte(form), "application/x-www-form-urlencoded", "", true)
	f.Add([]byte(status), "application/x-www-form-urlencoded", "", true)
	f.Add([]byte(`{"MessageSid":"SM0123456789abcdef0123456789abcdef","From":"+15557654321","Body":"x"}`), "application/json", "", true)
	f.Add([]byte("NumMedia=99&MediaUrl0=%zz"), "", "a=%", true)
	f.Add([]byte("\x00\xff"), "application/json", "bodySHA256=00", false)

	f.Fuzz(func(t *testing.T, body []byte, ctype, query string, sign bool) {
		if len(body) > 1<<16 {
			return
		}
		u := hook
		if query != "" {
			u += "?" + query
		}
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1/hooks/sms/conn_fuzz", http.NoBody)
		if err != nil {
			return
		}
		if parsed, err := url.Parse(u); err == nil {
			r.URL.RawQuery = parsed.RawQuery
		}
		r.Header.Set("Content-Type", ctype)
		if sign {
			if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || ctype == "application/json" {
				sum := sha256.Sum256(body)
				q := r.URL.Query()
				q.Set("bodySHA256", hex.EncodeToString(sum[:]))
				r.URL.RawQuery = q.Encode()
				r.Header.Set("X-Twilio-Signature", twiliotest.Sign(acct.AuthToken, hook+"?"+r.URL.RawQuery, nil))
			} else {
				p, _ := url.ParseQuery(string(body))
				signed := hook
				if r.URL.RawQuery != "" {
					signed += "?" + r.URL.RawQuery
				}
				r.Header.Set("X-Twilio-Signature", twiliotest.Sign(acct.AuthToken, signed, p))
			}
		}
		ins, err := wr.ParseWebhook(r, body)
		if !sign && !errors.Is(err, channels.ErrSignature) {
			t.Fatalf("an unsigned request: %v %+v", err, ins)
		}
		if err != nil && len(ins) != 0 {
			t.Fatalf("messages with an error: %+v", ins)
		}
		for _, in := range ins {
			if in.Receipt != nil {
				if in.Receipt.MessageID == "" || in.Receipt.State == "" {
					t.Fatalf("incomplete receipt %+v", in.Receipt)
				}
				continue
			}
			if in.ProviderID == "" || in.Sender == "" || in.ThreadKey == "" {
				t.Fatalf("incomplete message %+v", in)
			}
		}
	})
}

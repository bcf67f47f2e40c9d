package signature

import (
	"net/http"
	"testing"
	"time"
)

// The Standard Webhooks specification's example.
func TestSpecVector(t *testing.T) {
	key, err := Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"test": 2432232314}`)
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), body)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"seq":1}`)
	for _, secret := range []string{"whsec_c2VjcmV0LWtleS1ieXRlcw==", "plain secret"} {
		key, _ := Key(secret)
		h := http.Header{}
		SetHeaders(h, key, "proj_x_1", now, body)
		if err := Verify(secret, h, body, now.Add(time.Minute)); err != nil {
			t.Fatalf("%s: %v", secret, err)
		}
		if err := Verify(secret, h, []byte(`{"seq":2}`), now); err != ErrMismatch {
			t.Errorf("altered body: %v", err)
		}
		if err := Verify(secret, h, body, now.Add(10*time.Minute)); err != ErrTimestamp {
			t.Errorf("stale: %v", err)
		}
		h2 := h.Clone()
		h2.Set(HeaderSignature, "v1,bm9wZQ== "+h.Get(HeaderSignature))
		if err := Verify(secret, h2, body, now); err != nil {
			t.Errorf("several signatures: %v", err)
		}
		h2.Del(HeaderID)
		if err := Verify(secret, h2, body, now); err != ErrMissingHeaders {
			t.Errorf("missing id: %v", err)
		}
	}
	for _, bad := range []string{"", "whsec_", "whsec_!!!"} {
		if _, err := Key(bad); err == nil {
			t.Errorf("secret %q accepted", bad)
		}
	}
}

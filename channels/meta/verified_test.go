package meta

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestVerifiedOnce: the payload Route verified is reused by ParseWebhook
// only for the same request, the same body bytes and the same secret, and
// forgotten when the request ends.
func TestVerifiedOnce(t *testing.T) {
	t.Parallel()
	opts := Options{AppID: "1", AppSecret: "appsecret0123456789", VerifyToken: "v"}.withDefaults()
	app := &App{channel: Facebook, opts: opts}
	body := []byte(`{"object":"page","entry":[{"id":"42","messaging":[]}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/hooks/facebook", bytes.NewReader(body))
	r.Header.Set(SignatureHeader, Sign(opts.AppSecret, body))
	if keys, _, err := app.Route(r, body); err != nil || len(keys) != 1 {
		t.Fatalf("Route: %v %v", keys, err)
	}
	if _, ok := opts.verified.get(r, body, opts.AppSecret); !ok {
		t.Fatal("the verified payload is not remembered for its request")
	}
	if _, ok := opts.verified.get(r, bytes.Clone(body), opts.AppSecret); ok {
		t.Error("a copy of the body matched: only the very bytes Route verified may")
	}
	if _, ok := opts.verified.get(r, body, "another-secret"); ok {
		t.Error("another secret matched")
	}
	if _, ok := opts.verified.get(r.Clone(ctx), body, opts.AppSecret); ok {
		t.Error("another request matched")
	}
	cancel()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, ok := opts.verified.get(r, body, opts.AppSecret); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry outlived its request")
		}
		time.Sleep(time.Millisecond)
	}
}

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

func box(t *testing.T, b byte) *sealed.Box {
	t.Helper()
	bx, err := sealed.New(bytes.Repeat([]byte{b}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return bx
}

// readyz asks h for GET /readyz.
func readyz(t *testing.T, h http.Handler) (int, map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("readyz: %v in %s", err, rec.Body)
	}
	if (rec.Code == 200) != (body.Status == "ready") {
		t.Errorf("readyz: %d with status %q", rec.Code, body.Status)
	}
	return rec.Code, body.Checks
}

// TestReplicaKeyCheck: the first gateway on a database records a check
// value of its encryption key; a second with another key is refused at
// New with an error naming the setting, one with the same key starts,
// and /readyz reports a key that stopped matching.
func TestReplicaKeyCheck(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		a := gatewaytest.Start(t, cfg, gatewaytest.Options{Config: gateway.Config{Service: messaging.Options{Box: box(t, 1)}}})
		if code, checks := readyz(t, a.Front); code != 200 {
			t.Fatalf("readyz of the first gateway: %d %v", code, checks)
		}
		// Another replica on the same database.
		second := func(b *sealed.Box) (*gateway.Gateway, error) {
			log, err := stream.Open(a.DB, stream.Options{Logger: gatewaytest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { log.Close() })
			g, err := gateway.New(log, gateway.Config{Logger: gatewaytest.Logger(t), Service: messaging.Options{Box: b}})
			if g != nil {
				t.Cleanup(func() { g.Close() })
			}
			return g, err
		}
		_, err := second(box(t, 2))
		if !errors.Is(err, gateway.ErrKeyMismatch) {
			t.Fatalf("a gateway with another key: %v, want ErrKeyMismatch", err)
		}
		for _, want := range []string{"--encryption-key", "COMM_ENCRYPTION_KEY"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not name %s: %v", want, err)
			}
		}
		g, err := second(box(t, 1))
		if err != nil {
			t.Fatalf("a gateway with the same key: %v", err)
		}
		// Its workers never started: not ready, and says so.
		if code, checks := readyz(t, g.Front); code != 503 || checks["workers"] != "not started" || checks["encryption_key"] != "ok" {
			t.Errorf("readyz without workers: %d %v", code, checks)
		}

		// The recorded value no longer matches (another key won a race,
		// a restore from elsewhere): /readyz says which setting to fix.
		if _, err := a.DB.W.Exec(a.DB.Rebind("UPDATE provider_states SET value = ? WHERE id = ?"), []byte("other"), "gateway/encryption-key-check"); err != nil {
			t.Fatal(err)
		}
		code, checks := readyz(t, a.Front)
		if code != 503 || !strings.Contains(checks["encryption_key"], "COMM_ENCRYPTION_KEY") || checks["database"] != "ok" || checks["workers"] != "ok" {
			t.Errorf("readyz after the key stopped matching: %d %v", code, checks)
		}
	})
}

// TestKeyCheckRace: replicas starting together on a fresh database with
// different keys: exactly one key is recorded, the other refused.
func TestKeyCheckRace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		db := storetest.Open(t, cfg)
		log, err := stream.Open(db, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		errs := make([]error, 8)
		keys := []*sealed.Box{box(t, 1), box(t, 2)}
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = gateway.CheckKey(context.Background(), log, keys[i%2]) })
		}
		wg.Wait()
		var refused int
		for i, err := range errs {
			switch {
			case errors.Is(err, gateway.ErrKeyMismatch):
				refused++
			case err != nil:
				t.Errorf("check %d: %v", i, err)
			}
		}
		if refused != 4 {
			t.Errorf("%d of 8 refused, want the 4 of the key not recorded first (%v)", refused, errs)
		}
	})
}

package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// signIn carries a sandbox project into a new account of subject through
// the device flow (the approval is the domain call the /device page makes)
// and returns a client with the signed-in key.
func signIn(t *testing.T, g *gateway, baseURL, sandboxKey, subject string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx := context.Background()
	st, err := g.Accounts.StartDevice(ctx, account.DeviceStartInput{APIKey: sandboxKey})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "https://idp.test", Subject: subject,
		Email: subject + "@example.com", Name: "Person " + subject})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode); err != nil {
		t.Fatal(err)
	}
	tok, err := g.Accounts.PollDevice(ctx, st.DeviceCode)
	if err != nil || tok.APIKey == "" {
		t.Fatalf("poll: %+v %v", tok, err)
	}
	if baseURL == "" {
		baseURL = g.URL
	}
	opts = append([]client.Option{client.WithAPIKey(tok.APIKey), client.WithBaseURL(baseURL),
		client.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, opts...)
	c, err := client.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAccount drives Account against the real gateway: a sandbox key has
// none, the signed-in key sees the credit and the project it carried over.
func TestAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		ctx := context.Background()
		p := newProject(t, g, "")
		p.connectTest(t)

		_, err := p.Account(ctx)
		var e *client.Error
		if !errors.Is(err, client.ErrForbidden) || !errors.As(err, &e) || e.Status != http.StatusForbidden ||
			!strings.Contains(e.Message, "comm login") {
			t.Fatalf("Account with a sandbox key: %v", err)
		}

		c := signIn(t, g, "", p.Sandbox.APIKey, "ann")
		a, err := c.Account(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(a.Account.ID, "acct_") || a.Account.Issuer != "https://idp.test" || a.Account.Subject != "ann" ||
			a.Account.Email != "ann@example.com" || a.Account.Name != "Person ann" || a.Account.CreatedAt.IsZero() ||
			a.Currency != "USD" || a.BalanceMicros != 100_000_000 || a.Balance != "100.00" {
			t.Errorf("Account: %+v", a)
		}
		if len(a.Ledger) != 1 || a.Ledger[0].Kind != client.CreditGrant || a.Ledger[0].AmountMicros != 100_000_000 ||
			a.Ledger[0].Amount != "100.00" || a.Ledger[0].ProjectID != nil || a.Ledger[0].Description == "" {
			t.Errorf("ledger: %+v", a.Ledger)
		}
		if len(a.Projects) != 1 || a.Projects[0].ID != p.Sandbox.ProjectID || a.Projects[0].Connections != 1 ||
			a.Projects[0].LastSeq < 1 || a.Projects[0].CreatedAt.IsZero() {
			t.Errorf("projects: %+v", a.Projects)
		}
		// The sandbox key still has no account.
		if _, err := p.Account(ctx); !errors.Is(err, client.ErrForbidden) {
			t.Errorf("Account with the sandbox key after sign-in: %v", err)
		}
	})
}

// TestKeys drives Keys, CreateKey and RevokeKey against the real gateway.
func TestKeys(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		ctx := context.Background()
		p := newProject(t, g, "")

		ks, err := p.Keys(ctx)
		if err != nil || len(ks) != 1 || ks[0].Kind != client.KeySandbox || !ks[0].Current || ks[0].RevokedAt != nil ||
			!strings.HasPrefix(ks[0].Display, "comm_sandbox_") || !strings.HasPrefix(ks[0].ID, "key_") {
			t.Fatalf("Keys: %+v, %v", ks, err)
		}

		// A sandbox key makes sandbox keys, shown once.
		nk, err := p.CreateKey(ctx, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(nk.APIKey, "comm_sandbox_") || nk.Kind != client.KeySandbox || nk.Name == nil || *nk.Name != "ci" ||
			nk.Current || nk.RevokedAt != nil || !strings.HasSuffix(nk.APIKey, nk.Display[len(nk.Display)-4:]) {
			t.Fatalf("CreateKey: %+v", nk)
		}
		ci := newProjectClient(t, g.URL, nk.APIKey)
		if pr, err := ci.Project(ctx); err != nil || pr.ID != p.Sandbox.ProjectID {
			t.Fatalf("the new key: %+v, %v", pr, err)
		}
		unnamed, err := p.CreateKey(ctx, "")
		if err != nil || unnamed.Name != nil {
			t.Fatalf("CreateKey without a name: %+v, %v", unnamed, err)
		}
		var apiErr *client.Error
		if _, err := p.CreateKey(ctx, "two\nlines"); !errors.Is(err, client.ErrInvalid) || !errors.As(err, &apiErr) || apiErr.Param != "name" {
			t.Errorf("CreateKey with a bad name: %v", err)
		}

		ks, err = ci.Keys(ctx)
		if err != nil || len(ks) != 3 || ks[1].ID != nk.ID || !ks[1].Current || ks[0].Current {
			t.Fatalf("Keys with the new key: %+v, %v", ks, err)
		}

		// A signed-in key makes signed-in keys.
		si := signIn(t, g, "", p.Sandbox.APIKey, "ann")
		snk, err := si.CreateKey(ctx, "")
		if err != nil || snk.Kind != client.KeySignedIn || strings.HasPrefix(snk.APIKey, "comm_sandbox_") ||
			!strings.HasPrefix(snk.APIKey, "comm_") {
			t.Fatalf("CreateKey with a signed-in key: %+v, %v", snk, err)
		}

		// Revoking stops the key at once; again changes nothing.
		rk, err := si.RevokeKey(ctx, nk.ID)
		if err != nil || rk.ID != nk.ID || rk.RevokedAt == nil || rk.Current {
			t.Fatalf("RevokeKey: %+v, %v", rk, err)
		}
		if _, err := ci.Project(ctx); !errors.Is(err, client.ErrUnauthenticated) {
			t.Errorf("a revoked key: %v", err)
		}
		again, err := si.RevokeKey(ctx, nk.ID)
		if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*rk.RevokedAt) {
			t.Errorf("RevokeKey again: %+v, %v", again, err)
		}
		for _, id := range []string{"key_nope", "../" + nk.ID, p.Sandbox.ProjectID} {
			if _, err := si.RevokeKey(ctx, id); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("RevokeKey(%q): %v", id, err)
			}
		}
		if _, err := si.RevokeKey(ctx, ""); !errors.Is(err, client.ErrInvalid) || !errors.As(err, &apiErr) || apiErr.Param != "id" {
			t.Errorf("RevokeKey without an id: %v", err)
		}

		// Another project can neither list nor revoke these keys.
		other := newProject(t, g, "")
		if _, err := other.RevokeKey(ctx, unnamed.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("another project's RevokeKey: %v", err)
		}
		oks, err := other.Keys(ctx)
		if err != nil || len(oks) != 1 || oks[0].ID == unnamed.ID {
			t.Errorf("another project's Keys: %+v, %v", oks, err)
		}
		un := newProjectClient(t, g.URL, unnamed.APIKey)
		if _, err := un.Project(ctx); err != nil {
			t.Errorf("the key another project tried to revoke: %v", err)
		}

		// Revoking the client's own key: its next call is unauthenticated.
		// Once the project is in an account only signed-in keys manage
		// keys, so the signed-in key made above revokes itself.
		un = newProjectClient(t, g.URL, snk.APIKey)
		if k, err := un.RevokeKey(ctx, snk.ID); err != nil || !k.Current || k.RevokedAt == nil {
			t.Fatalf("revoking the own key: %+v, %v", k, err)
		}
		if _, err := un.Keys(ctx); !errors.Is(err, client.ErrUnauthenticated) {
			t.Errorf("after revoking the own key: %v", err)
		}
	})
}

// TestAccountRetries: Account, Keys and RevokeKey are retried like every
// GET and DELETE; CreateKey, a POST, never is.
func TestAccountRetries(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	ctx := context.Background()
	px := newProxy(t, g.URL)
	p := newProject(t, g, px.URL, client.WithRetries(3))
	si := signIn(t, g, px.URL, p.Sandbox.APIKey, "ann", client.WithRetries(3))

	for _, tc := range []struct {
		method, path string
		call         func() error
	}{
		{"GET", "/v1/account", func() error { _, err := si.Account(ctx); return err }},
		{"GET", "/v1/keys", func() error { _, err := si.Keys(ctx); return err }},
	} {
		f := &failer{method: tc.method, path: tc.path, n: 2, fail: unavailable}
		px.set(nil, f.intercept)
		if err := tc.call(); err != nil || f.attempts() != 3 {
			t.Errorf("%s %s after two 503s: %v after %d attempts, want success after 3", tc.method, tc.path, err, f.attempts())
		}
		px.set(nil, nil)
	}

	t.Run("POST retried with its key", func(t *testing.T) {
		// CreateKey sends an Idempotency-Key: it is retried, and makes one
		// key however many attempts it took.
		for _, fail := range []func(http.ResponseWriter, *http.Request){unavailable, hangUp} {
			f := &failer{method: "POST", path: "/v1/keys", n: 2, fail: fail}
			px.set(nil, f.intercept)
			if k, err := si.CreateKey(ctx, "retried"); err != nil || f.attempts() < 3 {
				t.Errorf("CreateKey after two failures: %+v, %v after %d attempts, want success", k, err, f.attempts())
			}
			px.set(nil, nil)
		}
		// The sandbox key, the signed-in one and the two created.
		ks, err := si.Keys(ctx)
		if err != nil || len(ks) != 4 {
			t.Errorf("keys after the retried creations: %+v, %v", ks, err)
		}
	})

	t.Run("DELETE whose answer was lost", func(t *testing.T) {
		nk, err := si.CreateKey(ctx, "lost")
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1/keys/" + nk.ID
		// The first DELETE reaches the gateway, but its answer is lost;
		// the retry finds the key revoked and answers it.
		f := &failer{method: "DELETE", path: path, n: 1, fail: func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequest("DELETE", g.URL+path, nil)
			req.Header.Set("Authorization", r.Header.Get("Authorization"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("revoke behind the client's back: %v %v", resp, err)
			}
			hangUp(w, r)
		}}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		k, err := si.RevokeKey(ctx, nk.ID)
		if err != nil || k.ID != nk.ID || k.RevokedAt == nil || f.attempts() != 2 {
			t.Errorf("RevokeKey: %+v, %v after %d attempts", k, err, f.attempts())
		}
	})

	t.Run("DELETE of an unknown key after a 503", func(t *testing.T) {
		// do counts not_found after an uncertain attempt as done; a key is
		// never removed, so RevokeKey still reports the unknown id.
		f := &failer{method: "DELETE", path: "/v1/keys/key_nope", n: 1, fail: unavailable}
		px.set(nil, f.intercept)
		defer px.set(nil, nil)
		if k, err := si.RevokeKey(ctx, "key_nope"); !errors.Is(err, client.ErrNotFound) || f.attempts() != 2 {
			t.Errorf("RevokeKey(key_nope): %+v, %v after %d attempts", k, err, f.attempts())
		}
	})
}

package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// The device sign-in endpoints and the account behind them, driven over
// HTTP; approval is the domain call the /device page makes (the page has
// its own tests).

// deviceStart is the answer of POST /v1/auth/device/start.
type deviceStart = api.DeviceStart

// deviceToken is the answer of POST /v1/auth/device/token.
type deviceToken = api.DeviceToken

func (g *gateway) startDevice(t *testing.T, apiKey string) deviceStart {
	t.Helper()
	body := "{}"
	if apiKey != "" {
		body = `{"api_key":"` + apiKey + `"}`
	}
	resp := g.do(t, request{Method: "POST", Path: "/v1/auth/device/start", ContentType: "application/json", Body: body})
	if resp.Status != 200 {
		t.Fatalf("device start: %d %s", resp.Status, resp.Body)
	}
	var st deviceStart
	decodeJSON(t, resp.Body, &st)
	return st
}

func (g *gateway) pollDevice(t *testing.T, code string) (int, deviceToken, []byte) {
	t.Helper()
	resp := g.do(t, request{Method: "POST", Path: "/v1/auth/device/token", ContentType: "application/json",
		Body: `{"device_code":"` + code + `"}`})
	var tok deviceToken
	if resp.Status == 200 {
		decodeJSON(t, resp.Body, &tok)
	}
	return resp.Status, tok, resp.Body
}

// clock is a test clock the gateway reads.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func TestDeviceFlow(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		clk := &clock{}
		g := startWith(t, cfg, server.Options{BaseURL: "https://comm.example"}, messaging.Options{Now: clk.now})
		ctx := context.Background()
		sb := g.newSandbox(t, "agent")
		conn := g.do(t, request{Method: "POST", Path: "/v1/connections", Key: sb.APIKey, ContentType: "application/json", Body: `{"channel":"test"}`})
		if conn.Status != 201 {
			t.Fatalf("connect: %d %s", conn.Status, conn.Body)
		}
		// A paid channel needs the signed-in key.
		if r := g.do(t, request{Method: "POST", Path: "/v1/connections", Key: sb.APIKey, ContentType: "application/json", Body: `{"channel":"x"}`}); r.Status != 402 ||
			!strings.Contains(string(r.Body), "comm login") {
			t.Fatalf("paid channel with a sandbox key: %d %s", r.Status, r.Body)
		}
		before := g.events(t, sb.APIKey, "")

		st := g.startDevice(t, sb.APIKey)
		if len(st.UserCode) != 9 || st.UserCode[4] != '-' || strings.Trim(strings.ReplaceAll(st.UserCode, "-", ""), account.UserCodeAlphabet) != "" {
			t.Fatalf("user code %q", st.UserCode)
		}
		if !strings.HasPrefix(st.DeviceCode, "dev_") || len(st.DeviceCode) < 4+22 || st.Interval != 5 || st.ExpiresIn != 900 ||
			st.VerificationURIComplete != "https://comm.example/device?code="+st.UserCode {
			t.Fatalf("start: %+v", st)
		}
		if _, tok, _ := g.pollDevice(t, st.DeviceCode); tok.Status != "pending" {
			t.Fatalf("first poll: %+v", tok)
		}
		// Polling faster than the interval slows the poller down.
		if _, tok, _ := g.pollDevice(t, st.DeviceCode); tok.Status != "slow_down" || tok.Interval != 10 {
			t.Fatalf("fast poll: %+v", tok)
		}
		clk.advance(11 * time.Second)
		if _, tok, _ := g.pollDevice(t, st.DeviceCode); tok.Status != "pending" || tok.Interval != 10 {
			t.Fatalf("poll after the interval: %+v", tok)
		}

		// The page shows the request; the person signs in and approves.
		view, err := g.Accounts.DeviceByUserCode(ctx, strings.ToLower(strings.ReplaceAll(st.UserCode, "-", " ")))
		if err != nil || view.Status != "pending" || view.Project == nil || view.Project.ID != sb.ProjectID || view.Project.Connections != 1 {
			t.Fatalf("device view: %+v %v", view, err)
		}
		acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "https://idp.test", Subject: "u1", Email: "ann@example.com", Name: "Ann"})
		if err != nil || !acct.New {
			t.Fatalf("sign in: %+v %v", acct, err)
		}
		ap, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode)
		if err != nil || ap.ProjectID != sb.ProjectID || !ap.CarriedOver {
			t.Fatalf("approve: %+v %v", ap, err)
		}
		if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode); !errors.Is(err, messaging.ErrConflict) {
			t.Fatalf("second approval: %v", err)
		}
		clk.advance(11 * time.Second)
		_, tok, _ := g.pollDevice(t, st.DeviceCode)
		if tok.Status != "approved" || !strings.HasPrefix(tok.APIKey, "comm_") || strings.HasPrefix(tok.APIKey, "comm_sandbox_") ||
			tok.BaseURL != "https://comm.example" {
			t.Fatalf("approved poll: %+v", tok)
		}
		// The key is delivered once: a second poll (a replayed device code)
		// is refused.
		if code, _, body := g.pollDevice(t, st.DeviceCode); code != 409 || !strings.Contains(string(body), "only once") {
			t.Fatalf("poll after delivery: %d %s", code, body)
		}

		// Same project, same history, same connection; the paid tier opens.
		if p := g.project(t, tok.APIKey); p.ID != sb.ProjectID {
			t.Fatalf("signed-in key's project %s, want %s", p.ID, sb.ProjectID)
		}
		after := g.events(t, tok.APIKey, "")
		if len(after) != len(before) || string(after[0].Data) != string(before[0].Data) {
			t.Fatalf("events differ: %d vs %d", len(after), len(before))
		}
		if r := g.do(t, request{Method: "POST", Path: "/v1/connections", Key: tok.APIKey, ContentType: "application/json", Body: `{"channel":"x"}`}); r.Status == 402 {
			t.Fatalf("paid channel with the signed-in key: %d %s", r.Status, r.Body)
		}
		// The sandbox key keeps working on free channels.
		if r := g.do(t, request{Method: "POST", Path: "/v1/connections", Key: sb.APIKey, ContentType: "application/json", Body: `{"channel":"test"}`}); r.Status != 201 {
			t.Fatalf("sandbox key after sign-in: %d %s", r.Status, r.Body)
		}

		// The account: $100 once.
		var a api.AccountView
		r := g.do(t, request{Path: "/v1/account", Key: tok.APIKey})
		decodeJSON(t, r.Body, &a)
		if r.Status != 200 || a.Balance != "100.00" || a.BalanceMicros != 100_000_000 || len(a.Ledger) != 1 || a.Ledger[0].Kind != "grant" ||
			a.Account.Email != "ann@example.com" || len(a.Projects) != 1 || a.Projects[0].ID != sb.ProjectID {
			t.Fatalf("account: %d %s", r.Status, r.Body)
		}
		if r := g.do(t, request{Path: "/v1/account", Key: sb.APIKey}); r.Status != 403 {
			t.Fatalf("account with the sandbox key: %d %s", r.Status, r.Body)
		}
		// Signing in again, without a key: a second project, no second grant.
		st2 := g.startDevice(t, "")
		again, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "https://idp.test", Subject: "u1", Email: "ann@example.com"})
		if err != nil || again.New || again.ID != acct.ID {
			t.Fatalf("second sign-in: %+v %v", again, err)
		}
		ap2, err := g.Accounts.ApproveDevice(ctx, acct.ID, st2.UserCode)
		if err != nil || ap2.CarriedOver || ap2.ProjectID == sb.ProjectID {
			t.Fatalf("approve without a key: %+v %v", ap2, err)
		}
		_, tok2, _ := g.pollDevice(t, st2.DeviceCode)
		r = g.do(t, request{Path: "/v1/account", Key: tok2.APIKey})
		decodeJSON(t, r.Body, &a)
		if a.Balance != "100.00" || len(a.Ledger) != 1 || len(a.Projects) != 2 {
			t.Fatalf("account after a second sign-in: %s", r.Body)
		}
	})
}

func TestDeviceDenyExpireAndBadCodes(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		clk := &clock{}
		g := startWith(t, cfg, server.Options{}, messaging.Options{Now: clk.now})
		ctx := context.Background()
		acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "local", Subject: "operator"})
		if err != nil {
			t.Fatal(err)
		}

		denied := g.startDevice(t, "")
		if err := g.Accounts.DenyDevice(ctx, acct.ID, denied.UserCode); err != nil {
			t.Fatal(err)
		}
		if _, tok, _ := g.pollDevice(t, denied.DeviceCode); tok.Status != "denied" || tok.APIKey != "" {
			t.Fatalf("denied: %+v", tok)
		}
		if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, denied.UserCode); !errors.Is(err, messaging.ErrConflict) {
			t.Fatalf("approve after deny: %v", err)
		}

		expired := g.startDevice(t, "")
		clk.advance(account.DeviceLifetime + time.Second)
		if _, tok, _ := g.pollDevice(t, expired.DeviceCode); tok.Status != "expired" {
			t.Fatalf("expired: %+v", tok)
		}
		if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, expired.UserCode); !errors.Is(err, messaging.ErrConflict) {
			t.Fatalf("approve after expiry: %v", err)
		}

		// Wrong and malformed codes.
		for _, tc := range []struct{ body, want string }{
			{`{"device_code":"dev_0000000000000000000000"}`, "unknown device code"},
			{`{"device_code":"nonsense"}`, "not a device code"},
			{`{"device_code":""}`, "required"},
			{`{}`, "required"},
			{`{"device_code":"dev_x","extra":1}`, "extra"},
		} {
			r := g.do(t, request{Method: "POST", Path: "/v1/auth/device/token", ContentType: "application/json", Body: tc.body})
			if r.Status != 400 || !strings.Contains(string(r.Body), tc.want) {
				t.Errorf("poll %s: %d %s", tc.body, r.Status, r.Body)
			}
		}
		for _, code := range []string{"AEIO-UAEI", "BCDF", "BCDF-GHJK-L", "<script>", ""} {
			if _, err := g.Accounts.DeviceByUserCode(ctx, code); !errors.Is(err, messaging.ErrInvalid) {
				t.Errorf("user code %q: %v, want invalid", code, err)
			}
		}
		if _, err := g.Accounts.DeviceByUserCode(ctx, "BCDF-GHJK"); !errors.Is(err, messaging.ErrNotFound) {
			t.Errorf("unknown user code: %v", err)
		}
		if r := g.do(t, request{Method: "POST", Path: "/v1/auth/device/start", ContentType: "application/json", Body: `{"api_key":"comm_sandbox_nope"}`}); r.Status != 401 {
			t.Errorf("start with a bad key: %d %s", r.Status, r.Body)
		}
	})
}

func TestDeviceRaces(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		clk := &clock{}
		g := startWith(t, cfg, server.Options{}, messaging.Options{Now: clk.now})
		ctx := context.Background()
		a1, _ := g.Accounts.SignIn(ctx, account.Identity{Issuer: "i", Subject: "a"})
		a2, _ := g.Accounts.SignIn(ctx, account.Identity{Issuer: "i", Subject: "b"})
		sb := g.newSandbox(t, "raced")
		st := g.startDevice(t, sb.APIKey)

		// Two approvals race: exactly one wins.
		var wg sync.WaitGroup
		var wins atomic.Int32
		errs := make(chan error, 2)
		for _, acct := range []string{a1.ID, a2.ID} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := g.Accounts.ApproveDevice(ctx, acct, st.UserCode); err == nil {
					wins.Add(1)
				} else {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if wins.Load() != 1 {
			t.Fatalf("%d approvals won", wins.Load())
		}
		for err := range errs {
			if !errors.Is(err, messaging.ErrConflict) {
				t.Fatalf("losing approval: %v", err)
			}
		}
		// Two polls race for the key: exactly one gets it.
		keys := make(chan string, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, tok, _ := g.pollDevice(t, st.DeviceCode); tok.APIKey != "" {
					keys <- tok.APIKey
				}
			}()
		}
		wg.Wait()
		close(keys)
		if n := len(keys); n != 1 {
			t.Fatalf("%d polls got a key", n)
		}
	})
}

func TestDeviceStartRateLimit(t *testing.T) {
	g := start(t, storetest.SQLite(t), server.Options{StartsPerMinute: 3})
	for i := range 4 {
		r := g.do(t, request{Method: "POST", Path: "/v1/auth/device/start", ContentType: "application/json", Body: `{}`})
		if i < 3 && r.Status != 200 {
			t.Fatalf("start %d: %d %s", i, r.Status, r.Body)
		}
		if i == 3 && (r.Status != 429 || r.Header.Get("Retry-After") == "") {
			t.Fatalf("start over the limit: %d %v %s", r.Status, r.Header, r.Body)
		}
	}
}

func TestKeys(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "keys")
		r := g.do(t, request{Method: "POST", Path: "/v1/keys", Key: sb.APIKey, ContentType: "application/json", Body: `{"name":"ci"}`})
		var nk api.NewKey
		decodeJSON(t, r.Body, &nk)
		if r.Status != 201 || !strings.HasPrefix(nk.APIKey, "comm_sandbox_") || nk.Kind != "sandbox" {
			t.Fatalf("create key: %d %s", r.Status, r.Body)
		}
		if p := g.project(t, nk.APIKey); p.ID != sb.ProjectID {
			t.Fatal("the new key is for another project")
		}
		r = g.do(t, request{Path: "/v1/keys", Key: nk.APIKey})
		var ks []map[string]any
		decodeJSON(t, r.Body, &ks)
		if len(ks) != 2 || strings.Contains(string(r.Body), nk.APIKey) || strings.Contains(string(r.Body), sb.APIKey) {
			t.Fatalf("list keys leaks or misses: %s", r.Body)
		}
		for _, k := range ks {
			if d, _ := k["display"].(string); !strings.HasPrefix(d, "comm_sandbox_") || !strings.Contains(d, "…") && len(d) > 24 {
				t.Errorf("display %q", d)
			}
		}
		// Revoking is effective at once.
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/keys/" + nk.ID, Key: sb.APIKey}); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		if r := g.do(t, request{Path: "/v1/project", Key: nk.APIKey}); r.Status != 401 || !strings.Contains(string(r.Body), "revoked") {
			t.Fatalf("revoked key: %d %s", r.Status, r.Body)
		}
		other := g.newSandbox(t, "other")
		if r := g.do(t, request{Method: "DELETE", Path: "/v1/keys/" + nk.ID, Key: other.APIKey}); r.Status != 404 {
			t.Fatalf("another project's key: %d %s", r.Status, r.Body)
		}
	})
}

// TestOAuthDeviceFlow runs golang.org/x/oauth2's device flow, a standard
// OAuth client, against the RFC 8628 endpoints.
func TestOAuthDeviceFlow(t *testing.T) {
	g := start(t, storetest.SQLite(t), server.Options{})
	ctx := context.Background()
	cfg := &oauth2.Config{ClientID: "comm-cli", Endpoint: oauth2.Endpoint{
		DeviceAuthURL: g.URL + "/oauth/device/code", TokenURL: g.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if da.UserCode == "" || da.DeviceCode == "" || !strings.HasSuffix(da.VerificationURI, "/device") || da.Interval != 5 {
		t.Fatalf("device auth: %+v", da)
	}
	da.Interval = 1 // the test does not wait 5 s between polls
	acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "i", Subject: "oauth"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond) // let the client poll (pending) first
		if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, da.UserCode); err != nil {
			t.Error(err)
		}
	}()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := cfg.DeviceAccessToken(tctx, da)
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || !strings.HasPrefix(tok.AccessToken, "comm_") {
		t.Fatalf("token %+v", tok)
	}
	if r := g.do(t, request{Path: "/v1/account", Key: tok.AccessToken}); r.Status != 200 {
		t.Fatalf("the access token is no signed-in key: %d %s", r.Status, r.Body)
	}

	// Denied and unknown codes come back as RFC errors.
	da2, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Accounts.DenyDevice(ctx, acct.ID, da2.UserCode); err != nil {
		t.Fatal(err)
	}
	da2.Interval = 1
	_, err = cfg.DeviceAccessToken(tctx, da2)
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "access_denied" {
		t.Fatalf("denied: %v", err)
	}
	r := g.do(t, request{Method: "POST", Path: "/oauth/token", ContentType: "application/x-www-form-urlencoded",
		Body: "grant_type=password&username=x"})
	if r.Status != 400 || !strings.Contains(string(r.Body), "unsupported_grant_type") {
		t.Fatalf("other grant: %d %s", r.Status, r.Body)
	}
}

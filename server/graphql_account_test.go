package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// The account and API keys over GraphQL: the same domain calls as
// GET /v1/account and /v1/keys, checked against the REST answers.

const (
	gqlAccountFields = `id issuer subject email name createdAt currency balanceMicros balance ledgerMore
		ledger { id kind amountMicros amount description projectID createdAt }
		projects { id name connections lastSeq createdAt }`
	gqlKeyFields = `id kind display name current createdAt lastUsedAt revokedAt`
)

// gqlAccount is an Account as GraphQL shows it.
type gqlAccount struct {
	ID            string    `json:"id"`
	Issuer        string    `json:"issuer"`
	Subject       string    `json:"subject"`
	Email         string    `json:"email"`
	Name          string    `json:"name"`
	CreatedAt     time.Time `json:"createdAt"`
	Currency      string    `json:"currency"`
	BalanceMicros int64     `json:"balanceMicros"`
	Balance       string    `json:"balance"`
	LedgerMore    bool      `json:"ledgerMore"`
	Ledger        []struct {
		ID           string    `json:"id"`
		Kind         string    `json:"kind"`
		AmountMicros int64     `json:"amountMicros"`
		Amount       string    `json:"amount"`
		Description  string    `json:"description"`
		ProjectID    *string   `json:"projectID"`
		CreatedAt    time.Time `json:"createdAt"`
	} `json:"ledger"`
	Projects []struct {
		ID          string    `json:"id"`
		Name        string    `json:"name"`
		Connections int       `json:"connections"`
		LastSeq     int64     `json:"lastSeq"`
		CreatedAt   time.Time `json:"createdAt"`
	} `json:"projects"`
}

// gqlKey is an APIKey as GraphQL shows it; APIKey is set on a NewAPIKey.
type gqlKey struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Display    string     `json:"display"`
	Name       *string    `json:"name"`
	Current    bool       `json:"current"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	APIKey     string     `json:"apiKey,omitempty"`
}

// keyREST is a key as GET /v1/keys shows it.
type keyREST = api.Key

func (k gqlKey) rest() keyREST {
	return keyREST{ID: k.ID, Kind: k.Kind, Display: k.Display, Name: k.Name, Current: k.Current,
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}

// signIn carries sb's project into an account of the identity through the
// device flow (approval is the domain call the /device page makes) and
// returns the signed-in key.
func (g *gateway) signIn(t *testing.T, sb sandbox, id account.Identity) string {
	t.Helper()
	ctx := context.Background()
	st, err := g.Accounts.StartDevice(ctx, account.DeviceStartInput{APIKey: sb.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := g.Accounts.SignIn(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode); err != nil {
		t.Fatal(err)
	}
	tok, err := g.Accounts.PollDevice(ctx, st.DeviceCode)
	if err != nil || tok.Status != account.DeviceApproved || tok.APIKey == "" {
		t.Fatalf("poll: %+v %v", tok, err)
	}
	return tok.APIKey
}

func TestGraphQLAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "agent")
		g.connectTest(t, sb.APIKey)
		key := g.signIn(t, sb, account.Identity{Issuer: "i", Subject: "s", Email: "a@b.c", Name: "Ann"})

		var data struct {
			Account *gqlAccount `json:"account"`
		}
		g.gqlOK(t, key, `{ account { `+gqlAccountFields+` } }`, nil, &data)
		a := data.Account
		if a == nil || !strings.HasPrefix(a.ID, "acct_") || a.Issuer != "i" || a.Subject != "s" || a.Email != "a@b.c" || a.Name != "Ann" ||
			a.CreatedAt.IsZero() || a.Currency != "USD" || a.BalanceMicros != 100_000_000 || a.Balance != "100.00" {
			t.Fatalf("account: %+v", a)
		}
		if len(a.Ledger) != 1 || a.Ledger[0].Kind != "grant" || a.Ledger[0].AmountMicros != 100_000_000 || a.Ledger[0].Amount != "100.00" ||
			a.Ledger[0].ProjectID != nil || a.Ledger[0].Description == "" || a.Ledger[0].ID == "" {
			t.Errorf("ledger: %+v", a.Ledger)
		}
		if len(a.Projects) != 1 || a.Projects[0].ID != sb.ProjectID || a.Projects[0].Name != "agent" || a.Projects[0].Connections != 1 ||
			a.Projects[0].LastSeq < 1 {
			t.Errorf("projects: %+v", a.Projects)
		}

		// The same as GET /v1/account.
		var rest account.AccountView
		r := g.do(t, request{Path: "/v1/account", Key: key})
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/account: %d %s", r.Status, r.Body)
		}
		decodeJSON(t, r.Body, &rest)
		if rest.Account.ID != a.ID || rest.Account.Issuer != a.Issuer || rest.Account.Subject != a.Subject ||
			rest.Account.Email != a.Email || rest.Account.Name != a.Name || !rest.Account.CreatedAt.Equal(a.CreatedAt) ||
			rest.Currency != a.Currency || rest.BalanceMicros != a.BalanceMicros || rest.Balance != a.Balance ||
			len(rest.Ledger) != len(a.Ledger) || len(rest.Projects) != len(a.Projects) {
			t.Fatalf("GraphQL %+v\nREST %s", a, r.Body)
		}
		for i, l := range rest.Ledger {
			gl := a.Ledger[i]
			if l.ID != gl.ID || l.Kind != gl.Kind || l.AmountMicros != gl.AmountMicros || l.Amount != gl.Amount ||
				l.Description != gl.Description || (l.ProjectID == nil) != (gl.ProjectID == nil) || !l.CreatedAt.Equal(gl.CreatedAt) {
				t.Errorf("ledger %d: GraphQL %+v, REST %+v", i, gl, l)
			}
		}
		for i, p := range rest.Projects {
			gp := a.Projects[i]
			if p.ID != gp.ID || p.Name != gp.Name || p.Connections != gp.Connections || p.LastSeq != gp.LastSeq || !p.CreatedAt.Equal(gp.CreatedAt) {
				t.Errorf("project %d: GraphQL %+v, REST %+v", i, gp, p)
			}
		}

		// A sandbox key has no account: forbidden, as on REST.
		res := g.gql(t, sb.APIKey, `{ account { id balance } }`, nil)
		e := gqlFail(t, res, "account", "forbidden", "")
		if !strings.Contains(e.Message, "comm login") {
			t.Errorf("forbidden without the way out: %s", res.Body)
		}
		other := g.newSandbox(t, "other")
		gqlFail(t, g.gql(t, other.APIKey, `{ account { id } }`, nil), "account", "forbidden", "")
		if r := g.do(t, request{Path: "/v1/account", Key: sb.APIKey}); r.Status != http.StatusForbidden {
			t.Errorf("REST account with the sandbox key: %d %s", r.Status, r.Body)
		}
	})
}

func TestGraphQLAPIKeys(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		sb := g.newSandbox(t, "keys")
		key := g.signIn(t, sb, account.Identity{Issuer: "i", Subject: "s", Email: "a@b.c"})

		listKeys := func(key string) []gqlKey {
			t.Helper()
			var data struct {
				APIKeys []gqlKey `json:"apiKeys"`
			}
			g.gqlOK(t, key, `{ apiKeys { `+gqlKeyFields+` } }`, nil, &data)
			return data.APIKeys
		}
		// The sandbox key and the signed-in key, oldest first; current
		// marks the caller's.
		ks := listKeys(key)
		if len(ks) != 2 || ks[0].Kind != "sandbox" || ks[1].Kind != "signed_in" || ks[0].Current || !ks[1].Current ||
			ks[0].RevokedAt != nil || ks[1].Name == nil || *ks[1].Name != "comm login" {
			t.Fatalf("apiKeys: %+v", ks)
		}
		for _, k := range ks {
			if !strings.HasPrefix(k.ID, "key_") || !strings.Contains(k.Display, "…") || k.CreatedAt.IsZero() {
				t.Errorf("key %+v", k)
			}
		}

		// createAPIKey answers the key once; it works at once, of the
		// caller's kind.
		var created struct {
			Key gqlKey `json:"createAPIKey"`
		}
		g.gqlOK(t, key, `mutation($name: String) { createAPIKey(name: $name) { `+gqlKeyFields+` apiKey } }`,
			map[string]any{"name": "ci"}, &created)
		nk := created.Key
		if !strings.HasPrefix(nk.APIKey, "comm_") || strings.HasPrefix(nk.APIKey, "comm_sandbox_") || nk.Kind != "signed_in" ||
			nk.Name == nil || *nk.Name != "ci" || nk.Current || nk.RevokedAt != nil || nk.LastUsedAt != nil ||
			!strings.HasSuffix(nk.APIKey, nk.Display[len(nk.Display)-4:]) {
			t.Fatalf("createAPIKey: %+v", nk)
		}
		if p := g.project(t, nk.APIKey); p.ID != sb.ProjectID {
			t.Fatalf("the new key's project %s, want %s", p.ID, sb.ProjectID)
		}
		var unnamed struct {
			Key gqlKey `json:"createAPIKey"`
		}
		// The project is in an account now: its sandbox key manages no
		// keys (issue 12, item 11).
		gqlFail(t, g.gql(t, sb.APIKey, `mutation { createAPIKey { `+gqlKeyFields+` apiKey } }`, nil), "createAPIKey", "forbidden", "")
		g.gqlOK(t, key, `mutation { createAPIKey { `+gqlKeyFields+` apiKey } }`, nil, &unnamed)
		if !strings.HasPrefix(unnamed.Key.APIKey, "comm_") || unnamed.Key.Kind != "signed_in" || unnamed.Key.Name != nil {
			t.Fatalf("createAPIKey without a name: %+v", unnamed.Key)
		}

		// The listing never holds a key, and agrees with REST.
		res := g.gql(t, nk.APIKey, `{ apiKeys { `+gqlKeyFields+` } }`, nil)
		for _, secret := range []string{key, sb.APIKey, nk.APIKey, unnamed.Key.APIKey} {
			if strings.Contains(string(res.Body), secret) {
				t.Fatalf("apiKeys leaks a key: %s", res.Body)
			}
		}
		ks = listKeys(nk.APIKey)
		var rest []keyREST
		r := g.do(t, request{Path: "/v1/keys", Key: nk.APIKey})
		decodeJSON(t, r.Body, &rest)
		if len(ks) != 4 || len(rest) != 4 {
			t.Fatalf("apiKeys %+v\nREST %s", ks, r.Body)
		}
		for i := range ks {
			// Each listing uses the key: last use may move between them.
			got, want := ks[i].rest(), rest[i]
			got.LastUsedAt, want.LastUsedAt = nil, nil
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("key %d: GraphQL %s, REST %s", i, gb, wb)
			}
		}
		if ks[2].ID != nk.ID || !ks[2].Current {
			t.Errorf("the new key is not current for itself: %+v", ks[2])
		}

		// revokeAPIKey: the key stops working at once, on REST and GraphQL.
		var revoked struct {
			Key gqlKey `json:"revokeAPIKey"`
		}
		g.gqlOK(t, key, `mutation($id: ID!) { revokeAPIKey(id: $id) { `+gqlKeyFields+` } }`, map[string]any{"id": nk.ID}, &revoked)
		if revoked.Key.ID != nk.ID || revoked.Key.RevokedAt == nil || revoked.Key.Current {
			t.Fatalf("revokeAPIKey: %+v", revoked.Key)
		}
		if r := g.do(t, request{Path: "/v1/project", Key: nk.APIKey}); r.Status != http.StatusUnauthorized {
			t.Fatalf("REST with the revoked key: %d %s", r.Status, r.Body)
		}
		if r := g.do(t, request{Method: http.MethodPost, Path: "/graphql", Key: nk.APIKey, ContentType: jsonCT,
			Body: `{"query":"{ apiKeys { id } }"}`}); r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "revoked") {
			t.Errorf("GraphQL with the revoked key: %d %s", r.Status, r.Body)
		}
		// Revoking again changes nothing.
		var again struct {
			Key gqlKey `json:"revokeAPIKey"`
		}
		g.gqlOK(t, key, `mutation($id: ID!) { revokeAPIKey(id: $id) { `+gqlKeyFields+` } }`, map[string]any{"id": nk.ID}, &again)
		if again.Key.RevokedAt == nil || !again.Key.RevokedAt.Equal(*revoked.Key.RevokedAt) {
			t.Errorf("revoking again: %+v, first %+v", again.Key, revoked.Key)
		}
		if ks := listKeys(key); ks[2].RevokedAt == nil {
			t.Errorf("apiKeys after revoking: %+v", ks[2])
		}

		// Refusals carry the REST codes.
		res = g.gql(t, key, `mutation($name: String) { createAPIKey(name: $name) { id apiKey } }`,
			map[string]any{"name": "two\nlines"})
		gqlFail(t, res, "createAPIKey", "invalid_parameter", "name")
		for _, id := range []string{"key_nope", "nonsense", sb.ProjectID} {
			res := g.gql(t, key, `mutation($id: ID!) { revokeAPIKey(id: $id) { id } }`, map[string]any{"id": id})
			gqlFail(t, res, "revokeAPIKey", "not_found", "")
		}
	})
}

// TestGraphQLAPIKeysIsolation: a project's keys are not another's to list
// or revoke.
func TestGraphQLAPIKeysIsolation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, server.Options{})
		a := g.newSandbox(t, "A")
		aKey := g.signIn(t, a, account.Identity{Issuer: "i", Subject: "a", Email: "a@example.com"})
		b := g.newSandbox(t, "B")
		bKey := g.signIn(t, b, account.Identity{Issuer: "i", Subject: "b", Email: "b@example.com"})

		var aKeys struct {
			APIKeys []gqlKey `json:"apiKeys"`
		}
		g.gqlOK(t, aKey, `{ apiKeys { `+gqlKeyFields+` } }`, nil, &aKeys)
		if len(aKeys.APIKeys) != 2 {
			t.Fatalf("A's keys: %+v", aKeys.APIKeys)
		}
		var bKeys struct {
			APIKeys []gqlKey `json:"apiKeys"`
		}
		g.gqlOK(t, bKey, `{ apiKeys { id } }`, nil, &bKeys)
		for _, bk := range bKeys.APIKeys {
			for _, ak := range aKeys.APIKeys {
				if bk.ID == ak.ID {
					t.Fatalf("B lists A's key %s", ak.ID)
				}
			}
		}
		// B revoking A's keys, with either of B's keys: not found (with
		// B's sandbox key, forbidden before any lookup: B's project is in
		// an account), and nothing changes.
		for _, k := range []struct{ key, code string }{{bKey, "not_found"}, {b.APIKey, "forbidden"}} {
			for _, ak := range aKeys.APIKeys {
				res := g.gql(t, k.key, `mutation($id: ID!) { revokeAPIKey(id: $id) { id } }`, map[string]any{"id": ak.ID})
				gqlFail(t, res, "revokeAPIKey", k.code, "")
				if r := g.do(t, request{Method: http.MethodDelete, Path: "/v1/keys/" + ak.ID, Key: k.key}); r.Status != map[string]int{"not_found": 404, "forbidden": 403}[k.code] {
					t.Errorf("REST revoke of A's key by B: %d %s", r.Status, r.Body)
				}
			}
		}
		for _, k := range []string{aKey, a.APIKey} {
			if r := g.do(t, request{Path: "/v1/project", Key: k}); r.Status != http.StatusOK {
				t.Errorf("A's key after B's attempts: %d %s", r.Status, r.Body)
			}
		}
		// Each account sees its own project and credit only.
		var acct struct {
			Account *gqlAccount `json:"account"`
		}
		g.gqlOK(t, bKey, `{ account { `+gqlAccountFields+` } }`, nil, &acct)
		if acct.Account.Email != "b@example.com" || len(acct.Account.Projects) != 1 || acct.Account.Projects[0].ID != b.ProjectID ||
			acct.Account.Balance != "100.00" {
			t.Errorf("B's account: %+v", acct.Account)
		}
	})
}

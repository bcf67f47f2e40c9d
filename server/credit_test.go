package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/testchan"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// paidTest is the test channel as a paid one ("paidtest"): messages are
// injected and delivered at once, and charged.
func paidTest() channels.Descriptor {
	d := testchan.Descriptor()
	d.Channel, d.Tier = "paidtest", channels.Paid
	return d
}

// signedInAccount makes a sandbox project, signs a person in and carries
// the project into their new account (as comm login does): the signed-in
// key, the project and the account.
func signedInAccount(t *testing.T, g *gateway, subject string) (key, projectID, accountID string) {
	t.Helper()
	sb := g.newSandbox(t, subject)
	st := g.startDevice(t, sb.APIKey)
	ctx := context.Background()
	acct, err := g.Accounts.SignIn(ctx, account.Identity{Issuer: "https://idp.test", Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accounts.ApproveDevice(ctx, acct.ID, st.UserCode); err != nil {
		t.Fatal(err)
	}
	_, tok, body := g.pollDevice(t, st.DeviceCode)
	if tok.APIKey == "" {
		t.Fatalf("device token: %s", body)
	}
	return tok.APIKey, sb.ProjectID, acct.ID
}

func (g *gateway) accountView(t *testing.T, key string) api.AccountView {
	t.Helper()
	var v api.AccountView
	g.get(t, key, "/v1/account", &v)
	return v
}

// ledgerSum sums every entry of the account's ledger, paging through GET
// /v1/account/ledger.
func (g *gateway) ledgerSum(t *testing.T, key string) (sum int64, n int, kinds map[string]int) {
	t.Helper()
	kinds = map[string]int{}
	after := ""
	for {
		var page []api.CreditEntry
		path := "/v1/account/ledger?limit=500"
		if after != "" {
			path += "&after=" + after
		}
		g.get(t, key, path, &page)
		for _, l := range page {
			sum += l.AmountMicros
			kinds[l.Kind]++
		}
		n += len(page)
		if len(page) < 500 {
			return sum, n, kinds
		}
		after = page[len(page)-1].ID
	}
}

func (g *gateway) connectPaid(t *testing.T, key string) connection {
	t.Helper()
	resp := g.post(t, key, "/v1/connections", `{"channel":"paidtest"}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect paidtest: %d %s", resp.Status, resp.Body)
	}
	var c connection
	decodeJSON(t, resp.Body, &c)
	return c
}

// TestCredit: paid messages debit the account in the transaction that
// records them, inbound at the "in" price and sends at the "out" price; a
// failed send is refunded once; a send the balance does not cover is 402
// insufficient_credit with nothing queued; inbound the credit does not
// cover is stored unbilled; account.balance_low comes once, when the
// balance crosses the threshold; the ledger sums to the balance.
func TestCredit(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		prices, err := account.ParsePrices(`{"paidtest":{"in":0.5,"out":30}}`)
		if err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, cfg, setup{outbox: true, channels: []channels.Descriptor{paidTest()},
			credit: account.Options{Prices: prices, LowThreshold: 35 * account.MicrosPerDollar}})
		key, projectID, _ := signedInAccount(t, g, "payer")
		c := g.connectPaid(t, key)

		// Sandbox keys still cannot connect a paid channel.
		wantError(t, g.post(t, g.newSandbox(t, "free").APIKey, "/v1/connections", `{"channel":"paidtest"}`), 402, "payment_required", "")

		in := g.inject(t, key, c.ID, `{"sender":"bob","text":"hello"}`)
		if in.Unbilled {
			t.Fatalf("inbound marked unbilled with 100 USD of credit: %+v", in)
		}
		send := func(to string) response {
			return g.post(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"x"}`, c.ID, to))
		}
		r1 := send("bob")
		if r1.Status != http.StatusAccepted {
			t.Fatalf("send: %d %s", r1.Status, r1.Body)
		}
		var m1 message
		decodeJSON(t, r1.Body, &m1)
		g.waitMessage(t, key, m1.ID, "sent", func(m message) bool { return m.Status == "sent" })
		if v := g.accountView(t, key); v.BalanceMicros != 69_500_000 || v.Balance != "69.50" {
			t.Fatalf("after one inbound (0.50) and one send (30): balance %d %q", v.BalanceMicros, v.Balance)
		}

		// A send that fails for good is refunded, once.
		r2 := send(testchan.FailPermanent)
		var m2 message
		decodeJSON(t, r2.Body, &m2)
		g.waitMessage(t, key, m2.ID, "failed", func(m message) bool { return m.Status == "failed" })
		v := g.accountView(t, key)
		if v.BalanceMicros != 69_500_000 {
			t.Fatalf("after a refunded send: balance %d", v.BalanceMicros)
		}
		refunds := 0
		for _, l := range v.Ledger {
			if l.Kind == api.CreditRefund {
				refunds++
				if l.AmountMicros != 30_000_000 || l.Amount != "30.00" || l.ProjectID == nil || *l.ProjectID != projectID ||
					!strings.Contains(l.Description, m2.ID) {
					t.Errorf("refund entry %+v", l)
				}
			}
		}
		if refunds != 1 {
			t.Fatalf("%d refund entries, want 1: %+v", refunds, v.Ledger)
		}
		if v.Ledger[0].Kind != api.CreditRefund {
			t.Errorf("the ledger is not newest first: %+v", v.Ledger)
		}

		// 69.50 -> 39.50, then 39.50 -> 9.50 crosses the 35 USD threshold:
		// one balance_low.
		for range 2 {
			r := send("bob")
			if r.Status != http.StatusAccepted {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			var m message
			decodeJSON(t, r.Body, &m)
			g.waitMessage(t, key, m.ID, "sent", func(m message) bool { return m.Status == "sent" })
		}
		before := rows(t, g, projectID)
		e := wantError(t, send("bob"), http.StatusPaymentRequired, "insufficient_credit", "")
		if !strings.Contains(e.Error.Message, "9.50 USD") || !strings.Contains(e.Error.Message, "30.00 USD") {
			t.Errorf("402 message does not give the balance and the price: %q", e.Error.Message)
		}
		if after := rows(t, g, projectID); after["messages"] != before["messages"] || after["events"] != before["events"] {
			t.Errorf("a refused send wrote something: %v -> %v", before, after)
		}

		// Inbound is stored all the same, unbilled, while the credit lasts
		// for it and after.
		for i := range 20 {
			got := g.inject(t, key, c.ID, fmt.Sprintf(`{"sender":"carol","text":"n%d"}`, i))
			if wantUnbilled := i >= 19; got.Unbilled != wantUnbilled {
				t.Fatalf("inbound %d: unbilled %v with 9.50 USD at 0.50 each", i, got.Unbilled)
			}
		}
		var low []event
		for _, ev := range g.events(t, key, "limit=500") {
			if ev.Type == api.EventAccountBalanceLow {
				low = append(low, ev)
			}
			if ev.Type == api.EventMessageReceived && strings.Contains(string(ev.Data), `"n19"`) && !strings.Contains(string(ev.Data), `"unbilled":true`) {
				t.Errorf("message.received of the unbilled message does not say so: %s", ev.Data)
			}
		}
		if len(low) != 1 || !strings.Contains(string(low[0].Data), `"balance":"9.50"`) || !strings.Contains(string(low[0].Data), `"threshold":"35.00"`) {
			t.Errorf("account.balance_low events: %d", len(low))
			for _, e := range low {
				t.Logf("seq %d: %s", e.Seq, e.Data)
			}
		}
		v = g.accountView(t, key)
		sum, n, kinds := g.ledgerSum(t, key)
		if v.BalanceMicros != 0 || sum != v.BalanceMicros {
			t.Errorf("balance %d, ledger sums to %d over %d entries", v.BalanceMicros, sum, n)
		}
		// grant, inbound hello, 4 sends, a refund, 19 billed inbound.
		if kinds[api.CreditGrant] != 1 || kinds[api.CreditDebit] != 24 || kinds[api.CreditRefund] != 1 {
			t.Errorf("ledger kinds %v", kinds)
		}
	})
}

// TestCreditRacingSends: many sends at once against a balance that covers
// only some of them: exactly those are accepted, the rest answer 402, and
// the balance never goes below zero (the debit is one conditional update,
// on SQLite and on PostgreSQL).
func TestCreditRacingSends(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		prices, err := account.ParsePrices(`{"paidtest":{"out":3}}`)
		if err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, cfg, setup{channels: []channels.Descriptor{paidTest()}, credit: account.Options{Prices: prices},
			server: server.Options{WritesPerSecond: -1}})
		key, _, _ := signedInAccount(t, g, "racer")
		c := g.connectPaid(t, key)
		const senders = 8
		const each = 8 // 64 sends of 3 USD against 100 USD: 33 fit
		var mu sync.Mutex
		status := map[int]int{}
		var wg sync.WaitGroup
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					r := g.post(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"p%d","text":"%d"}`, c.ID, s, i))
					if r.Status != http.StatusAccepted && r.Status != http.StatusPaymentRequired {
						t.Errorf("send: %d %s", r.Status, r.Body)
					}
					mu.Lock()
					status[r.Status]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if status[http.StatusAccepted] != 33 || status[http.StatusPaymentRequired] != senders*each-33 {
			t.Errorf("answers %v, want 33 accepted and %d refused", status, senders*each-33)
		}
		v := g.accountView(t, key)
		sum, _, kinds := g.ledgerSum(t, key)
		if v.BalanceMicros != 1_000_000 || sum != v.BalanceMicros || kinds[api.CreditDebit] != 33 {
			t.Errorf("balance %d, ledger sum %d, kinds %v; want 1 USD left and 33 debits", v.BalanceMicros, sum, kinds)
		}
	})
}

// TestPrices: COMM_PRICES is read exactly (no floating point) and checked
// against the channels the gateway has.
func TestPrices(t *testing.T) {
	t.Parallel()
	p, err := account.ParsePrices(account.DefaultPricesJSON)
	if err != nil {
		t.Fatal(err)
	}
	if p["whatsapp/hosted"].Out != 5_000 || p["x"].In != 10_000 || p["imessage"].In != 0 {
		t.Errorf("default prices %+v", p)
	}
	for _, bad := range []string{`[]`, `{"x":{"in":-1}}`, `{"x":{"in":0.0000001}}`, `{"x":{"sideways":1}}`, `{"x":{"in":1e3}}`, `{"x/y/z":{}}`} {
		if _, err := account.ParsePrices(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	reg := channels.NewRegistry(channels.Known()...)
	if err := p.Check(reg); err != nil {
		t.Errorf("default prices refused: %v", err)
	}
	free, _ := account.ParsePrices(`{"telegram":{"out":1}}`)
	if err := free.Check(reg); err == nil || !strings.Contains(err.Error(), "free channel") {
		t.Errorf("a free channel's price: %v", err)
	}
	unknown, _ := account.ParsePrices(`{"pigeon":{"out":1}}`)
	if err := unknown.Check(reg); err == nil || !strings.Contains(err.Error(), "pigeon") {
		t.Errorf("an unknown channel's price: %v", err)
	}
	over := mustPrices(t, `{"whatsapp":{"out":0.02},"x":{"in":0}}`).Over(p)
	if over["whatsapp"].Out != 20_000 || over["x"].In != 0 || over["x"].Out != 0 || over["imessage"].Out != 10_000 {
		t.Errorf("prices laid over the defaults: %+v", over)
	}
	if _, ok := over["whatsapp/hosted"]; ok {
		t.Errorf("a channel-level price left the default provider-level one in place: %+v", over)
	}
	for m, want := range map[int64]string{100_000_000: "100.00", -5_000: "-0.005", 99_995_000: "99.995", -250_000: "-0.25", 0: "0.00", 1: "0.000001"} {
		if got := account.FormatDollars(m); got != want {
			t.Errorf("FormatDollars(%d) = %q, want %q", m, got, want)
		}
	}
}

func mustPrices(t *testing.T, s string) account.Prices {
	t.Helper()
	p, err := account.ParsePrices(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

package account

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entcredit "github.com/comm-gateway/comm/ent/creditentry"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

// Micros is an amount in millionths of a US dollar: prices such as 0.005
// USD a message are not whole cents.
type Micros = int64

// MicrosPerDollar is one US dollar in Micros.
const MicrosPerDollar = 1_000_000

// SignUpCredit is the credit granted once per account, at its first
// sign-in: 100 US dollars.
const SignUpCredit Micros = 100 * MicrosPerDollar

// DefaultLowThreshold is the balance under which account.balance_low is
// appended (COMM_CREDIT_LOW_THRESHOLD): 5 US dollars.
const DefaultLowThreshold Micros = 5 * MicrosPerDollar

// Price is what a message costs, by direction.
type Price struct {
	In, Out Micros
}

// Prices are the prices of the paid channels, keyed "<channel>" or
// "<channel>/<provider>" (the more specific one wins).
type Prices map[string]Price

// DefaultPricesJSON is COMM_PRICES when the operator sets none.
const DefaultPricesJSON = `{"imessage":{"in":0,"out":0.01},"whatsapp/hosted":{"in":0,"out":0.005},"x":{"in":0.01,"out":0.01}}`

// DefaultPrices returns the prices of DefaultPricesJSON.
func DefaultPrices() Prices {
	p, err := ParsePrices(DefaultPricesJSON)
	if err != nil {
		panic(err)
	}
	return p
}

// ParsePrices reads COMM_PRICES: a JSON object of USD per message by
// channel (or channel/provider) and direction,
// {"x":{"in":0.01,"out":0.01}}. Amounts are non-negative with at most six
// decimals; a direction left out costs nothing.
func ParsePrices(s string) (Prices, error) {
	var raw map[string]map[string]json.Number
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf(`prices: want a JSON object such as {"x":{"in":0.01,"out":0.01}}: %v`, err)
	}
	out := Prices{}
	for key, dirs := range raw {
		if key == "" || strings.Count(key, "/") > 1 {
			return nil, fmt.Errorf("prices: %q: want \"<channel>\" or \"<channel>/<provider>\"", key)
		}
		var p Price
		for dir, n := range dirs {
			m, err := parseDollars(n.String())
			if err != nil {
				return nil, fmt.Errorf("prices: %s.%s: %v", key, dir, err)
			}
			switch dir {
			case "in":
				p.In = m
			case "out":
				p.Out = m
			default:
				return nil, fmt.Errorf("prices: %s: unknown direction %q (want \"in\" or \"out\")", key, dir)
			}
		}
		out[key] = p
	}
	return out, nil
}

// parseDollars reads a non-negative decimal amount of dollars with at
// most six decimals, exactly (no floating point).
func parseDollars(s string) (Micros, error) {
	if strings.ContainsAny(s, "eE+-") {
		return 0, fmt.Errorf("%s: want a plain non-negative decimal such as 0.005", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 6 {
		return 0, fmt.Errorf("%s: at most six decimals (a millionth of a dollar)", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 1_000_000 {
		return 0, fmt.Errorf("%s: not an amount of dollars up to 1000000", s)
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("%s: not a decimal", s)
		}
	}
	return w*MicrosPerDollar + f, nil
}

// ParseDollars reads an amount of dollars such as "5" or "0.25" (the
// low-balance threshold).
func ParseDollars(s string) (Micros, error) { return parseDollars(strings.TrimSpace(s)) }

// Check refuses prices for channels the registry does not have, or that
// are not paid: only paid channels are charged.
func (p Prices) Check(reg *channels.Registry) error {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ch, prov, _ := strings.Cut(k, "/")
		found, paid := false, false
		for _, d := range reg.Descriptors() {
			if d.Channel == ch && (prov == "" || d.Provider == prov) {
				found = true
				paid = paid || d.Tier == channels.Paid
			}
		}
		if !found {
			return fmt.Errorf("prices (COMM_PRICES): %q names no channel of this gateway (channels: %s)", k, strings.Join(reg.Channels(), ", "))
		}
		if !paid {
			return fmt.Errorf("prices (COMM_PRICES): %q is a free channel; only paid channels are charged", k)
		}
	}
	return nil
}

// Over returns p laid over base: p's prices, and base's for the channels p
// does not name. A channel-level key of p ("whatsapp") also replaces
// base's provider-level ones of that channel ("whatsapp/hosted").
func (p Prices) Over(base Prices) Prices {
	out := Prices{}
	for k, v := range base {
		ch, _, _ := strings.Cut(k, "/")
		if _, named := p[ch]; named {
			continue
		}
		out[k] = v
	}
	for k, v := range p {
		out[k] = v
	}
	return out
}

// of returns the price of a message on channel/provider in direction.
func (p Prices) of(channel, provider, direction string) Micros {
	pr, ok := p[channel+"/"+provider]
	if !ok {
		pr = p[channel]
	}
	if direction == messaging.ChargeIn {
		return pr.In
	}
	return pr.Out
}

// Options configure the accounts feature.
type Options struct {
	// Prices of the paid channels; DefaultPrices() when nil.
	Prices Prices
	// LowThreshold is the balance under which account.balance_low is
	// appended; DefaultLowThreshold when 0, none when negative.
	LowThreshold Micros
}

// FormatDollars renders micros as dollars with at least two decimals and
// no trailing zeros beyond them: "100.00", "-0.01", "-0.005".
func FormatDollars(m Micros) string {
	sign := ""
	if m < 0 {
		sign = "-"
		if m == math.MinInt64 {
			m++
		}
		m = -m
	}
	frac := fmt.Sprintf("%06d", m%MicrosPerDollar)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, m/MicrosPerDollar, frac)
}

// accountCache maps projects to the account owning them. A project joins
// an account once (at sign-in) and never leaves it, so only found accounts
// are kept.
type accountCache struct{ m sync.Map }

// accountOfProject returns the account owning project, or "".
func (s *Service) accountOfProject(tx *stream.Tx, project string) (string, error) {
	if v, ok := s.owners.m.Load(project); ok {
		return v.(string), nil
	}
	rows, err := tx.Query(tx.Rebind("SELECT account_id FROM projects WHERE id = ?"), project)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var acct sql.NullString
	if rows.Next() {
		if err := rows.Scan(&acct); err != nil {
			return "", err
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if acct.Valid && acct.String != "" {
		s.owners.m.Store(project, acct.String)
	}
	return acct.String, nil
}

// Charge debits a paid message from the account owning its project
// (messaging.Billing). The debit is one conditional update of the
// account's balance, so concurrent charges (on any replica) never take it
// below zero; the ledger entry, keyed by the message, is written with it.
func (s *Service) Charge(tx *stream.Tx, c messaging.Charge) error {
	price := s.prices.of(c.Channel, c.Provider, c.Direction)
	if price == 0 {
		return nil
	}
	acct, err := s.accountOfProject(tx, c.ProjectID)
	if err != nil {
		return err
	}
	if acct == "" {
		// A project outside any account cannot connect a paid channel;
		// one that was (a test's harness) is not charged.
		return nil
	}
	what := "outbound"
	if c.Direction == messaging.ChargeIn {
		what = "inbound"
	}
	e := entryRow{acct: acct, kind: entcredit.KindDebit, amount: -price, key: "debit:" + c.MessageID,
		description: fmt.Sprintf("%s %s message %s", label(c.Channel, c.Provider), what, c.MessageID), project: c.ProjectID}
	balance, ok, err := s.debitWithEntry(tx, e)
	if err != nil {
		return err
	}
	if !ok {
		return fault.InsufficientCredit("the account's balance is %s USD and this %s message costs %s USD: add credit, then send again",
			FormatDollars(balance), label(c.Channel, c.Provider), FormatDollars(price))
	}
	if t := s.lowThreshold; t > 0 && balance < t && balance+price >= t {
		return tx.Append(stream.AccountBalanceLow, api.BalanceLowEvent{AccountID: acct, BalanceMicros: balance,
			Balance: FormatDollars(balance), ThresholdMicros: t, Threshold: FormatDollars(t)})
	}
	return nil
}

// Refund credits back the debit of a message (messaging.Billing): once,
// and only when there was a debit.
func (s *Service) Refund(tx *stream.Tx, c messaging.Charge) error {
	acct, err := s.accountOfProject(tx, c.ProjectID)
	if err != nil || acct == "" {
		return err
	}
	cl, tctx := tx.Client(), tx.Context()
	debit, err := cl.CreditEntry.Query().Where(entcredit.AccountID(acct), entcredit.Key("debit:"+c.MessageID)).Only(tctx)
	if err != nil {
		if ent.IsNotFound(err) {
			return nil
		}
		return err
	}
	done, err := cl.CreditEntry.Query().Where(entcredit.AccountID(acct), entcredit.Key("refund:"+c.MessageID)).Exist(tctx)
	if err != nil || done {
		return err
	}
	amount := -microsOf(debit.AmountMicros, debit.AmountCents)
	if _, err := tx.Exec(tx.Rebind("UPDATE accounts SET balance_micros = balance_micros + ? WHERE id = ? AND balance_micros IS NOT NULL"), amount, acct); err != nil {
		return err
	}
	return s.insertEntry(tx, ident.New(ident.CreditEntry), s.now(), entryRow{acct: acct, kind: entcredit.KindRefund, amount: amount,
		key: "refund:" + c.MessageID, project: c.ProjectID,
		description: fmt.Sprintf("refund: %s outbound message %s failed", label(c.Channel, c.Provider), c.MessageID)})
}

// entryRow is a ledger entry to write.
type entryRow struct {
	acct        string
	kind        entcredit.Kind
	amount      Micros
	key         string
	description string
	project     string
}

// debitWithEntry takes -e.amount from the account's balance when it covers
// it and writes the entry, in as few statements as the database allows (a
// debit is on the path of every paid send): on PostgreSQL one (the update
// and the insert in one statement), on SQLite two. It returns the balance
// after (or the balance that did not cover the price).
func (s *Service) debitWithEntry(tx *stream.Tx, e entryRow) (Micros, bool, error) {
	price := -e.amount
	id, now := ident.New(ident.CreditEntry), s.now()
	if tx.Postgres() {
		rows, err := tx.Query(`WITH d AS (UPDATE accounts SET balance_micros = balance_micros - $1
				WHERE id = $2 AND balance_micros >= $1 RETURNING balance_micros)
			INSERT INTO credit_entries (id, created_at, account_id, kind, amount_cents, amount_micros, key, description, project_id_ref)
			SELECT $3, $4, $2, $5, $6, $7, $8, $9, $10 FROM d RETURNING (SELECT balance_micros FROM d)`,
			price, e.acct, id, now, string(e.kind), e.amount/10_000, e.amount, e.key, e.description, e.project)
		if err != nil {
			return 0, false, fmt.Errorf("credit: debit: %w", err)
		}
		var after Micros
		got := rows.Next()
		if got {
			err = rows.Scan(&after)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, false, fmt.Errorf("credit: debit: %w", err)
		}
		if got {
			return after, true, nil
		}
	}
	// SQLite, or a PostgreSQL balance that did not cover it (or was never
	// computed): the conditional update, then the entry.
	after, ok, err := s.debit(tx, e.acct, price)
	if err != nil || !ok {
		return after, ok, err
	}
	if err := s.insertEntry(tx, id, now, e); err != nil {
		return 0, false, err
	}
	return after, true, nil
}

// debit takes price from acct's balance when it covers it, and returns
// the balance after (or the balance that did not cover it).
func (s *Service) debit(tx *stream.Tx, acct string, price Micros) (Micros, bool, error) {
	for range 2 {
		rows, err := tx.Query(tx.Rebind(`UPDATE accounts SET balance_micros = balance_micros - ?
			WHERE id = ? AND balance_micros >= ? RETURNING balance_micros`), price, acct, price)
		if err != nil {
			return 0, false, fmt.Errorf("credit: debit: %w", err)
		}
		var after Micros
		got := rows.Next()
		if got {
			err = rows.Scan(&after)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, false, fmt.Errorf("credit: debit: %w", err)
		}
		if got {
			return after, true, nil
		}
		// Not covered, or an account from before the balance was kept.
		var bal sql.NullInt64
		if err := s.scanOne(tx, &bal, "SELECT balance_micros FROM accounts WHERE id = ?", acct); err != nil {
			return 0, false, err
		}
		if bal.Valid {
			return bal.Int64, false, nil
		}
		if _, err := tx.Exec(tx.Rebind(`UPDATE accounts SET balance_micros =
			(SELECT coalesce(sum(coalesce(amount_micros, amount_cents * 10000)), 0) FROM credit_entries WHERE account_id = ?)
			WHERE id = ? AND balance_micros IS NULL`), acct, acct); err != nil {
			return 0, false, fmt.Errorf("credit: compute the balance: %w", err)
		}
	}
	return 0, false, fmt.Errorf("credit: account %s has no balance", acct)
}

func (s *Service) scanOne(tx *stream.Tx, dst any, query string, args ...any) error {
	rows, err := tx.Query(tx.Rebind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	return rows.Scan(dst)
}

// insertEntry writes a ledger entry (the one writer of debits and refunds;
// PostgreSQL's debit writes its entry in the same statement as the
// balance, with the same columns).
func (s *Service) insertEntry(tx *stream.Tx, id string, now time.Time, e entryRow) error {
	if _, err := tx.Exec(tx.Rebind(`INSERT INTO credit_entries (id, created_at, account_id, kind, amount_cents, amount_micros, key, description, project_id_ref)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), id, now, e.acct, string(e.kind), e.amount/10_000, e.amount, e.key, e.description, e.project); err != nil {
		return fmt.Errorf("credit: ledger entry: %w", err)
	}
	return nil
}

// microsOf is an entry's amount: amount_micros, or amount_cents on rows
// written before it.
func microsOf(micros *int64, cents int64) Micros {
	if micros != nil {
		return *micros
	}
	return cents * 10_000
}

func label(channel, provider string) string {
	if provider == "" {
		return channel
	}
	return channel + "/" + provider
}

// Package account is the accounts feature beside the core: accounts of
// people who signed in through an identity provider, their browser
// sessions on the /device page, the device sign-in of the command line
// (which carries a sandbox project into an account and makes its signed-in
// key), and the credit ledger. It reaches the core (package messaging)
// through its public API; writes go through the event log like every other
// change. The core knows nothing of it.
package account

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/ent"
	entaccount "github.com/comm-gateway/comm/ent/account"
	entcredit "github.com/comm-gateway/comm/ent/creditentry"
	entproject "github.com/comm-gateway/comm/ent/project"
	entws "github.com/comm-gateway/comm/ent/websession"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Service is the accounts feature of one gateway.
type Service struct {
	svc  *messaging.Service
	log  *stream.Log
	read *ent.Client

	prices       Prices
	lowThreshold Micros
	owners       accountCache
}

// New returns the accounts feature served by svc. It charges paid
// messages once the caller hands it to svc.SetBilling.
func New(svc *messaging.Service, opts Options) *Service {
	if opts.Prices == nil {
		opts.Prices = DefaultPrices()
	}
	if opts.LowThreshold == 0 {
		opts.LowThreshold = DefaultLowThreshold
	}
	return &Service{svc: svc, log: svc.Log(), read: svc.Ent(), prices: opts.Prices, lowThreshold: opts.LowThreshold}
}

func (s *Service) now() time.Time { return s.svc.Now() }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// signUpKey is the ledger key of the sign-up grant; the unique (account,
// key) index makes it once per account.
const signUpKey = "grant:signup"

// Identity is who an identity provider says signed in.
type Identity struct {
	// Issuer and Subject identify the person: the provider's issuer URL
	// (or "local") and their id there.
	Issuer, Subject string
	// Email and Name are for display.
	Email, Name string
}

// Account is a signed-in account.
type Account = api.Account

// SignedIn is the account a sign-in found or made.
type SignedIn struct {
	*Account
	// New says this sign-in made the account (and granted the credit).
	New bool
}

func accountOf(a *ent.Account) *Account {
	return &Account{ID: a.ID, Issuer: a.Issuer, Subject: a.Subject, Email: a.Email, Name: a.Name, CreatedAt: a.CreatedAt.UTC()}
}

// SignIn records a sign-in: it finds the account of the identity, or makes
// it and grants SignUpCredit, once.
func (s *Service) SignIn(ctx context.Context, id Identity) (*SignedIn, error) {
	if id.Issuer == "" || id.Subject == "" {
		return nil, fmt.Errorf("sign-in: the identity has no issuer or subject")
	}
	sys := tenant.System(ctx)
	now := s.now()
	existing, err := s.read.Account.Query().Where(entaccount.Issuer(id.Issuer), entaccount.Subject(id.Subject)).Only(sys)
	if err != nil && !ent.IsNotFound(err) {
		return nil, err
	}
	acctID := ident.New(ident.Account)
	if existing != nil {
		acctID = existing.ID
	}
	var out *ent.Account
	created := false
	_, err = s.log.Write(sys, acctID, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		created = false
		if existing != nil {
			upd := cl.Account.UpdateOneID(existing.ID).SetLastSignInAt(now)
			if id.Email != "" {
				upd.SetEmail(id.Email)
			}
			if id.Name != "" {
				upd.SetName(id.Name)
			}
			var err error
			out, err = upd.Save(tctx)
			return err
		}
		var err error
		out, err = cl.Account.Create().SetID(acctID).SetIssuer(id.Issuer).SetSubject(id.Subject).
			SetEmail(id.Email).SetName(id.Name).SetLastSignInAt(now).SetBalanceMicros(SignUpCredit).SetCreatedAt(now).Save(tctx)
		if err != nil {
			return err
		}
		created = true
		return cl.CreditEntry.Create().SetID(ident.New(ident.CreditEntry)).SetAccountID(acctID).
			SetKind(entcredit.KindGrant).SetAmountMicros(SignUpCredit).SetAmountCents(SignUpCredit / 10_000).SetKey(signUpKey).
			SetDescription("Welcome credit for signing in").SetCreatedAt(now).Exec(tctx)
	})
	if ent.IsConstraintError(err) && existing == nil {
		// The same person signing in twice at once: the other made it.
		return s.SignIn(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return &SignedIn{Account: accountOf(out), New: created}, nil
}

// AccountByID returns an account.
func (s *Service) AccountByID(ctx context.Context, id string) (*Account, error) {
	a, err := s.read.Account.Get(tenant.System(ctx), id)
	if ent.IsNotFound(err) {
		return nil, fault.NotFound("account", id)
	}
	if err != nil {
		return nil, err
	}
	return accountOf(a), nil
}

// StartWebSession records a signed-in browser session of the /device page
// (by the hash of the id its cookie carries) until expires; sessions long
// expired are pruned on the way.
func (s *Service) StartWebSession(ctx context.Context, accountID string, tokenHash []byte, expires time.Time) error {
	sys := tenant.System(ctx)
	id := ident.New(ident.WebSession)
	now := s.now()
	_, err := s.log.Write(sys, id, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		if _, err := cl.WebSession.Delete().Where(entws.ExpiresAtLT(now.Add(-24 * time.Hour))).Exec(tctx); err != nil {
			return err
		}
		return cl.WebSession.Create().SetID(id).SetTokenHash(tokenHash).SetAccountID(accountID).
			SetExpiresAt(expires.UTC()).SetCreatedAt(now).Exec(tctx)
	})
	return err
}

// WebSessionAccount returns the account of a browser session that is
// recorded, unexpired and not signed out; "" otherwise.
func (s *Service) WebSessionAccount(ctx context.Context, tokenHash []byte) (string, error) {
	_, acct, err := s.WebSession(ctx, tokenHash)
	return acct, err
}

// EndWebSession signs a browser session out, on every replica: its cookie
// no longer works, even a copy of it.
func (s *Service) EndWebSession(ctx context.Context, tokenHash []byte) error {
	sys := tenant.System(ctx)
	w, err := s.read.WebSession.Query().Where(entws.TokenHash(tokenHash)).Only(sys)
	if ent.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.log.Write(sys, w.ID, func(tx *stream.Tx) error {
		return tx.Client().WebSession.Update().Where(entws.ID(w.ID), entws.RevokedAtIsNil()).
			SetRevokedAt(s.now()).Exec(tx.Context())
	})
	if err == nil {
		// The dashboard's websockets of the session close, as a revoked
		// key's do.
		s.log.Signal(messaging.KeyRevokedSignal, w.ID)
	}
	return err
}

// WebSession returns the id and the account of a browser session that is
// recorded, unexpired and not signed out; "" and "" otherwise.
func (s *Service) WebSession(ctx context.Context, tokenHash []byte) (id, accountID string, err error) {
	w, err := s.read.WebSession.Query().Where(entws.TokenHash(tokenHash)).Only(tenant.System(ctx))
	if ent.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if w.RevokedAt != nil || !s.now().Before(w.ExpiresAt) {
		return "", "", nil
	}
	return w.ID, w.AccountID, nil
}

// CreditLine is one ledger entry.
type CreditLine = api.CreditEntry

// AccountView is GET /v1/account: the account of a signed-in key, its
// credit and its projects.
type AccountView = api.AccountView

// LedgerPreview is how many of the newest ledger entries GET /v1/account
// shows; GET /v1/account/ledger pages through all of them.
const LedgerPreview = 100

func lineOf(l *ent.CreditEntry) CreditLine {
	m := microsOf(l.AmountMicros, l.AmountCents)
	return CreditLine{ID: l.ID, Kind: string(l.Kind), AmountMicros: m, Amount: FormatDollars(m),
		Description: l.Description, ProjectID: nonEmpty(l.ProjectIDRef), CreatedAt: l.CreatedAt.UTC()}
}

// AccountOf returns the account owning the caller's project, with its
// balance (the sum of the ledger), its newest ledger entries and its
// projects. A sandbox key answers
// ErrForbidden: the account is for signed-in keys.
func (s *Service) AccountOf(ctx context.Context) (*AccountView, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if !p.SignedIn() {
		return nil, fault.Forbidden("a sandbox key has no account: run `comm login` (or POST /v1/auth/device/start with this key) and use the signed-in key")
	}
	sys := tenant.System(ctx)
	pr, err := s.read.Project.Get(sys, p.ProjectID)
	if err != nil {
		return nil, err
	}
	if pr.AccountID == nil {
		return nil, fault.Forbidden("this project belongs to no account")
	}
	a, err := s.read.Account.Get(sys, *pr.AccountID)
	if err != nil {
		return nil, err
	}
	lines, err := s.read.CreditEntry.Query().Where(entcredit.AccountID(a.ID)).Order(ent.Desc(entcredit.FieldID)).
		Limit(LedgerPreview + 1).All(sys)
	if err != nil {
		return nil, err
	}
	v := &AccountView{Account: *accountOf(a), Currency: "USD", Ledger: []CreditLine{}, Projects: []ProjectSummary{}}
	if len(lines) > LedgerPreview {
		lines, v.LedgerMore = lines[:LedgerPreview], true
	}
	for _, l := range lines {
		v.Ledger = append(v.Ledger, lineOf(l))
	}
	if v.BalanceMicros, err = s.balance(ctx, a); err != nil {
		return nil, err
	}
	v.Balance = FormatDollars(v.BalanceMicros)
	prs, err := s.read.Project.Query().Where(entproject.AccountID(a.ID)).Order(ent.Asc(entproject.FieldID)).All(sys)
	if err != nil {
		return nil, err
	}
	for _, pr := range prs {
		ps, _, err := s.projectSummary(ctx, pr.ID)
		if err != nil {
			return nil, err
		}
		v.Projects = append(v.Projects, *ps)
	}
	return v, nil
}

// balance is an account's balance: the one kept on its row, or the sum of
// its ledger for an account made before it was kept.
func (s *Service) balance(ctx context.Context, a *ent.Account) (Micros, error) {
	if a.BalanceMicros != nil {
		return *a.BalanceMicros, nil
	}
	lines, err := s.read.CreditEntry.Query().Where(entcredit.AccountID(a.ID)).All(tenant.System(ctx))
	if err != nil {
		return 0, err
	}
	var sum Micros
	for _, l := range lines {
		sum += microsOf(l.AmountMicros, l.AmountCents)
	}
	return sum, nil
}

// Ledger pages through the ledger of the account owning the caller's
// project, oldest first.
func (s *Service) Ledger(ctx context.Context, pg messaging.Page) ([]CreditLine, bool, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, false, err
	}
	if !p.SignedIn() {
		return nil, false, fault.Forbidden("a sandbox key has no account: run `comm login` (or POST /v1/auth/device/start with this key) and use the signed-in key")
	}
	if err := pg.Validate(ident.CreditEntry); err != nil {
		return nil, false, err
	}
	sys := tenant.System(ctx)
	pr, err := s.read.Project.Get(sys, p.ProjectID)
	if err != nil {
		return nil, false, err
	}
	if pr.AccountID == nil {
		return nil, false, fault.Forbidden("this project belongs to no account")
	}
	q := s.read.CreditEntry.Query().Where(entcredit.AccountID(*pr.AccountID))
	if pg.After != "" {
		q.Where(entcredit.IDGT(pg.After))
	}
	rows, err := q.Order(ent.Asc(entcredit.FieldID)).Limit(pg.Limit + 1).All(sys)
	if err != nil {
		return nil, false, err
	}
	more := len(rows) > pg.Limit
	if more {
		rows = rows[:pg.Limit]
	}
	out := make([]CreditLine, 0, len(rows))
	for _, l := range rows {
		out = append(out, lineOf(l))
	}
	return out, more, nil
}

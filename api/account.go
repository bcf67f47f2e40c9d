package api

import "time"

// Key kinds and ledger entry kinds.
const (
	KeySandbox  = "sandbox"
	KeySignedIn = "signed_in"

	CreditGrant  = "grant"
	CreditDebit  = "debit"
	CreditRefund = "refund"
)

// Account is who signed in (comm login): the owner of signed-in projects.
type Account struct {
	ID string `json:"id"`
	// Issuer is the identity provider's issuer URL (or "local"), Subject
	// the person's id there.
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	// Email and Name are as the identity provider gave them; either may
	// be empty.
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// AccountView is the answer of GET /v1/account: the account owning the
// key's project, its credit and its projects.
type AccountView struct {
	Account Account `json:"account"`
	// Currency is the currency of the amounts ("USD").
	Currency string `json:"currency"`
	// BalanceMicros is the sum of the ledger in millionths of the
	// currency (prices such as 0.005 USD are not whole cents); Balance is
	// the same in the currency's units ("100.00", "99.995").
	BalanceMicros int64  `json:"balance_micros"`
	Balance       string `json:"balance"`
	// Ledger lists the newest credit entries (at most 100), newest first;
	// LedgerMore says there are older ones (GET /v1/account/ledger pages
	// through all).
	Ledger     []CreditEntry `json:"ledger"`
	LedgerMore bool          `json:"ledger_more"`
	// Projects lists the account's projects, oldest first.
	Projects []ProjectSummary `json:"projects"`
}

// CreditEntry is one entry of an account's ledger.
type CreditEntry struct {
	ID string `json:"id"`
	// Kind is "grant", "debit" (a paid message) or "refund" (of a paid
	// message that failed).
	Kind string `json:"kind"`
	// AmountMicros is signed (negative for a debit), in millionths of the
	// currency; Amount is the same in its units ("100.00", "-0.005").
	AmountMicros int64  `json:"amount_micros"`
	Amount       string `json:"amount"`
	Description  string `json:"description"`
	// ProjectID is the project the entry is for; nil for an account-wide
	// entry.
	ProjectID *string   `json:"project_id"`
	CreatedAt time.Time `json:"created_at"`
}

// ProjectSummary describes a project of an account.
type ProjectSummary struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Connections counts its live connections.
	Connections int `json:"connections"`
	// LastSeq is the head of its event stream.
	LastSeq   int64     `json:"last_seq"`
	CreatedAt time.Time `json:"created_at"`
}

// Key is an API key of the project as listings show it: never the key
// itself.
type Key struct {
	ID string `json:"id"`
	// Kind is "sandbox" or "signed_in".
	Kind string `json:"kind"`
	// Display is the key's prefix and last four characters
	// ("comm_sandbox_…abcd").
	Display string `json:"display"`
	// Name is what the key is for, nil when its maker gave none.
	Name *string `json:"name"`
	// Current is true for the key that made the request.
	Current    bool       `json:"current"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is nil for a live key.
	RevokedAt *time.Time `json:"revoked_at"`
}

// NewKey is a key just made: its listing fields and the key itself, which
// is shown only this once.
type NewKey struct {
	Key
	APIKey string `json:"api_key"`
}

// BalanceLowEvent is the data of account.balance_low: the account's
// balance went under the operator's threshold (once per crossing).
type BalanceLowEvent struct {
	AccountID       string `json:"account_id"`
	BalanceMicros   int64  `json:"balance_micros"`
	Balance         string `json:"balance"`
	ThresholdMicros int64  `json:"threshold_micros"`
	Threshold       string `json:"threshold"`
}

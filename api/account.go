package api

import "time"

// Key kinds and ledger entry kinds.
const (
	KeySandbox  = "sandbox"
	KeySignedIn = "signed_in"

	CreditGrant = "grant"
	CreditDebit = "debit"
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
	// BalanceCents is the sum of the ledger; Balance is the same in the
	// currency's units ("100.00").
	BalanceCents int64  `json:"balance_cents"`
	Balance      string `json:"balance"`
	// Ledger lists the credit entries, oldest first.
	Ledger []CreditEntry `json:"ledger"`
	// Projects lists the account's projects, oldest first.
	Projects []ProjectSummary `json:"projects"`
}

// CreditEntry is one entry of an account's ledger.
type CreditEntry struct {
	ID string `json:"id"`
	// Kind is "grant" or "debit".
	Kind string `json:"kind"`
	// AmountCents is signed (negative for a debit); Amount is the same in
	// the currency's units ("100.00", "-0.25").
	AmountCents int64  `json:"amount_cents"`
	Amount      string `json:"amount"`
	Description string `json:"description"`
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

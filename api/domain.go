package api

import "time"

// Domain statuses and domain record states.
const (
	DomainPending = "pending"
	// DomainUnverified: verified once, then its ownership record was
	// missing past the gateway's grace period.
	DomainUnverified = "unverified"
	DomainVerified   = "verified"

	RecordPending  = "pending"
	RecordFound    = "found"
	RecordMissing  = "missing"
	RecordMismatch = "mismatch"
)

// Domain is a custom email domain of the project: the DNS records its
// owner publishes, and what verification found. Once verified, mail from
// the domain is DKIM-signed and inboxes on InboundDomain receive mail.
type Domain struct {
	ID string `json:"id"`
	// Domain is the domain, normalized (lowercase, punycode).
	Domain string `json:"domain"`
	// InboundDomain is the domain inbox addresses live on (Domain or a
	// subdomain of it); nil when the domain only sends.
	InboundDomain *string `json:"inbound_domain"`
	// Status is "pending" until every required record is found, then
	// "verified"; "unverified" when it was verified once and its ownership
	// record then stayed missing past the gateway's grace period.
	Status string `json:"status"`
	// Records are the records to publish, in the order to show them.
	Records []DomainRecord `json:"records"`
	// LastError says why the last check did not complete: a DNS failure,
	// or the domain verified by another project.
	LastError *string `json:"last_error"`
	// CheckedAt is when verification last looked (POST
	// /v1/domains/{id}/verify or the gateway's periodic check).
	CheckedAt  *time.Time `json:"checked_at"`
	VerifiedAt *time.Time `json:"verified_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// DomainRecord is one DNS record to publish, and what verification found.
type DomainRecord struct {
	// Kind is what the record is for: ownership, spf, dkim, dmarc or mx.
	Kind string `json:"kind"`
	// Type is TXT or MX.
	Type string `json:"type"`
	// Name is the fully qualified owner name, without the trailing dot.
	Name string `json:"name"`
	// Value is the TXT text (unsplit) or the MX target host.
	Value string `json:"value"`
	// Priority is the MX preference; zero for TXT.
	Priority int `json:"priority,omitempty"`
	// Required records must all be found before the domain is verified.
	Required bool `json:"required"`
	// Purpose explains the record, for the domain's owner.
	Purpose string `json:"purpose"`
	// State is "pending" until verification has looked, then "found",
	// "missing" or "mismatch".
	State string `json:"state"`
	// Seen is what DNS answered at Name (TXT texts, MX hosts); Detail
	// explains a missing or mismatched record.
	Seen   []string `json:"seen,omitempty"`
	Detail string   `json:"detail,omitempty"`
	// Zone is the record as a zone-file line, ready to paste.
	Zone string `json:"zone"`
}

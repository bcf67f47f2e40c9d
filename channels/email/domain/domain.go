// Package domain plans and verifies a customer's custom email domain: the
// DNS records comm asks the customer to publish (ownership token, SPF
// include, DKIM public key, DMARC, inbound MX) and the check that they are
// there.
//
// Lifecycle: Plan once when the customer adds the domain (store the Records
// and seal DKIMPrivateKeyPEM); show Records.Records to the customer; call
// Verify on request and periodically with a Resolver (NewResolver for a
// configured COMM_DNS_RESOLVER, net.DefaultResolver otherwise) until
// Status.Verified. Verify only reads DNS; recording the result and
// appending domain.verified is the caller's job.
package domain

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base32"
	"fmt"
	"strings"
)

// Kind says what a record is for.
type Kind string

// Record kinds.
const (
	Ownership Kind = "ownership" // TXT _comm-verify.<domain> = token
	SPF       Kind = "spf"       // TXT <domain> = v=spf1 include:... ~all
	DKIM      Kind = "dkim"      // TXT <selector>._domainkey.<domain> = v=DKIM1; k=rsa; p=...
	DMARC     Kind = "dmarc"     // TXT _dmarc.<domain> = v=DMARC1; p=none
	Inbound   Kind = "mx"        // MX <inbound domain> -> comm's SMTP host
)

// DNS record types used.
const (
	TypeTXT = "TXT"
	TypeMX  = "MX"
)

// OwnershipPrefix is the label under which the ownership token is published.
const OwnershipPrefix = "_comm-verify"

// DefaultSelector is the DKIM selector when PlanConfig.Selector is empty.
const DefaultSelector = "comm"

// DKIMKeyBits is the size of the RSA keys Plan generates.
const DKIMKeyBits = 2048

// mxPriority is the preference suggested for the inbound MX record.
const mxPriority = 10

// suggestedTTL is the TTL shown in zone-file lines.
const suggestedTTL = 3600

// PlanConfig is the operator's side of a domain plan.
type PlanConfig struct {
	// SPFInclude is the host whose SPF record lists the relay comm sends
	// through (the customer adds include:<SPFInclude>). Required.
	SPFInclude string
	// MXHost is the public host name of comm's SMTP listener. Empty means
	// the domain is for sending only and no MX record is planned.
	MXHost string
	// InboundSubdomain is the part left of the domain that receives mail,
	// e.g. "in" for in.example.com. Empty means the domain itself; a
	// subdomain leaves the customer's existing mail (their apex MX) alone.
	InboundSubdomain string
	// Selector is the DKIM selector; DefaultSelector when empty.
	Selector string
	// DMARCReport is the mailbox for aggregate reports in the suggested
	// DMARC record (rua=mailto:...); empty suggests a record without one.
	DMARCReport string
	// Key, when set, is published instead of a freshly generated key (to
	// keep a key across a re-plan, or in tests). RSA, at least 2048 bits.
	Key *rsa.PrivateKey
}

// Record is one DNS record the customer is asked to publish.
type Record struct {
	Kind Kind `json:"kind"`
	// Type is TypeTXT or TypeMX.
	Type string `json:"type"`
	// Name is the fully qualified owner name, without the trailing dot.
	Name string `json:"name"`
	// Value is the TXT text (unsplit) or the MX target host.
	Value string `json:"value"`
	// Priority is the MX preference; zero for TXT.
	Priority int `json:"priority,omitempty"`
	// Required records must all be found before the domain is verified.
	Required bool `json:"required"`
	// Purpose explains the record to the customer.
	Purpose string `json:"purpose"`
}

// Records is a domain's plan: what to publish and what Verify expects.
// Store it with the domain; it holds no secret except DKIMPrivateKeyPEM,
// which is never marshalled.
type Records struct {
	// Domain is the normalized domain (lowercase, punycode, no trailing dot).
	Domain string `json:"domain"`
	// InboundDomain is the domain inbox addresses live on (Domain or a
	// subdomain); empty when no MX is planned.
	InboundDomain string `json:"inboundDomain,omitempty"`
	// Token is the random ownership token.
	Token string `json:"token"`
	// Selector is the DKIM selector to sign with.
	Selector string `json:"selector"`
	// SPFInclude and MXHost are what Verify looks for.
	SPFInclude string `json:"spfInclude"`
	MXHost     string `json:"mxHost,omitempty"`
	// Records, in the order to show them.
	Records []Record `json:"records"`
	// DKIMPrivateKeyPEM is the PKCS#8 PEM of the DKIM signing key. Seal it
	// before storing and never show it; see ParsePrivateKey.
	DKIMPrivateKeyPEM []byte `json:"-"`
}

// Get returns the record of kind k.
func (r *Records) Get(k Kind) (Record, bool) {
	for _, rec := range r.Records {
		if rec.Kind == k {
			return rec, true
		}
	}
	return Record{}, false
}

// ZoneLine renders the record as a zone-file line, with long TXT values
// split into quoted strings of at most 255 bytes as DNS requires.
func (rec Record) ZoneLine() string {
	switch rec.Type {
	case TypeMX:
		return fmt.Sprintf("%s. %d IN MX %d %s.", rec.Name, suggestedTTL, rec.Priority, strings.TrimSuffix(rec.Value, "."))
	default:
		return fmt.Sprintf("%s. %d IN TXT %s", rec.Name, suggestedTTL, quoteTXT(rec.Value))
	}
}

// quoteTXT splits v into character-strings of at most 255 bytes, quoted.
func quoteTXT(v string) string {
	var parts []string
	for len(v) > 255 {
		parts = append(parts, v[:255])
		v = v[255:]
	}
	parts = append(parts, v)
	for i, p := range parts {
		p = strings.ReplaceAll(p, `\`, `\\`)
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `\"`) + `"`
	}
	return strings.Join(parts, " ")
}

// Plan validates domain and returns the records its owner must publish,
// with a new ownership token and DKIM key. Errors about the domain or the
// configuration wrap ErrInvalidDomain.
func Plan(domain string, cfg PlanConfig) (*Records, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		return nil, err
	}
	spfHost, err := configHost("SPF include host", cfg.SPFInclude)
	if err != nil {
		return nil, err
	}
	selector := strings.ToLower(cfg.Selector)
	if selector == "" {
		selector = DefaultSelector
	}
	if why := checkLabels(selector); why != "" {
		return nil, fmt.Errorf("domain: %w: DKIM selector %q: %s", ErrInvalidDomain, cfg.Selector, why)
	}
	recs := &Records{Domain: d, Selector: selector, SPFInclude: spfHost}

	// Every derived name must fit DNS limits too.
	dkimName := selector + "._domainkey." + d
	names := []string{OwnershipPrefix + "." + d, dkimName, "_dmarc." + d}
	if cfg.MXHost != "" {
		recs.MXHost, err = configHost("MX host", cfg.MXHost)
		if err != nil {
			return nil, err
		}
		recs.InboundDomain = d
		if sub := strings.Trim(strings.ToLower(cfg.InboundSubdomain), "."); sub != "" {
			if why := checkLabels(sub); why != "" {
				return nil, fmt.Errorf("domain: %w: inbound subdomain %q: %s", ErrInvalidDomain, cfg.InboundSubdomain, why)
			}
			recs.InboundDomain = sub + "." + d
		}
		names = append(names, recs.InboundDomain)
	}
	for _, n := range names {
		if len(n) > maxNameLen {
			return nil, fmt.Errorf("domain: %w %q: too long: %s would exceed %d characters", ErrInvalidDomain, domain, n, maxNameLen)
		}
	}

	recs.Token, err = newToken()
	if err != nil {
		return nil, fmt.Errorf("domain: plan: %w", err)
	}
	key := cfg.Key
	if key == nil {
		key, err = rsa.GenerateKey(rand.Reader, DKIMKeyBits)
		if err != nil {
			return nil, fmt.Errorf("domain: plan: generate DKIM key: %w", err)
		}
	} else if key.N.BitLen() < DKIMKeyBits {
		return nil, fmt.Errorf("domain: plan: DKIM key has %d bits, want at least %d", key.N.BitLen(), DKIMKeyBits)
	}
	pub, priv, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("domain: plan: %w", err)
	}
	recs.DKIMPrivateKeyPEM = priv

	recs.Records = []Record{{
		Kind: Ownership, Type: TypeTXT, Name: OwnershipPrefix + "." + d, Value: recs.Token, Required: true,
		Purpose: "Proves you control " + d + ". Publish this token as a TXT record and keep it: a verified domain whose token stays missing past the gateway's grace period is unverified (its mail is no longer signed and no new inboxes are accepted).",
	}, {
		Kind: SPF, Type: TypeTXT, Name: d, Value: "v=spf1 include:" + spfHost + " ~all", Required: true,
		Purpose: "Authorizes comm's servers to send mail for " + d + ". A domain may have only one SPF record: if " + d +
			" already has a TXT record starting with v=spf1, add include:" + spfHost + " to it (before the final all) instead of publishing a second one.",
	}, {
		Kind: DKIM, Type: TypeTXT, Name: dkimName, Value: "v=DKIM1; k=rsa; p=" + pub, Required: true,
		Purpose: "Public key that lets receivers check the DKIM signature on mail comm sends for " + d +
			". The value is longer than 255 characters: most DNS providers split it for you; otherwise enter it as several quoted strings (see the zone-file line).",
	}, {
		Kind: DMARC, Type: TypeTXT, Name: "_dmarc." + d, Value: dmarcValue(cfg.DMARCReport), Required: false,
		Purpose: "Recommended, not required: tells receivers what to do with mail that fails SPF and DKIM. Keep your existing DMARC record if you have one.",
	}}
	if recs.MXHost != "" {
		recs.Records = append(recs.Records, Record{
			Kind: Inbound, Type: TypeMX, Name: recs.InboundDomain, Value: recs.MXHost, Priority: mxPriority, Required: true,
			Purpose: "Routes mail for " + recs.InboundDomain + " to comm, so your agents receive replies. Only use the domain itself if no other mail service receives mail for it.",
		})
	}
	return recs, nil
}

// configHost validates an operator-supplied host name.
func configHost(what, host string) (string, error) {
	if strings.TrimSpace(host) == "" {
		return "", fmt.Errorf("domain: %w: %s is not configured", ErrInvalidDomain, what)
	}
	h, err := NormalizeDomain(host)
	if err != nil {
		return "", fmt.Errorf("domain: %s: %w", what, err)
	}
	return h, nil
}

func dmarcValue(report string) string {
	if report == "" {
		return "v=DMARC1; p=none"
	}
	return "v=DMARC1; p=none; rua=mailto:" + report
}

// newToken returns 20 random bytes in lowercase base32 (32 characters).
func newToken() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("ownership token: %w", err)
	}
	return "comm-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)), nil
}

package inbound

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
)

// Verdict is the outcome of one authentication method, with the names of
// RFC 8601 (Authentication-Results).
type Verdict string

// Verdicts.
const (
	Pass      Verdict = "pass"
	Fail      Verdict = "fail"
	None      Verdict = "none"
	TempError Verdict = "temperror"
	PermError Verdict = "permerror"
)

// Resolver looks up DNS TXT records. *net.Resolver satisfies it; tests use
// a map. A name that does not exist should give a *net.DNSError with
// IsNotFound set.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// AuthResult is what comm could verify about the sender of a message, so an
// agent can tell a spoofed From.
type AuthResult struct {
	// SPF is always None for now: the check (RFC 7208 with include, a, mx
	// and redirect) is not implemented.
	SPF Verdict
	// DKIM summarises DKIMSignatures: Pass when any signature verifies,
	// None when the message is unsigned, else the first failure.
	DKIM           Verdict
	DKIMSignatures []DKIMResult
	// DMARC is Pass when a DKIM signature that verifies is aligned with the
	// From domain, Fail when the From domain publishes a DMARC policy and
	// none is, None when it publishes none.
	DMARC Verdict
	// DMARCPolicy is the published policy ("none", "quarantine",
	// "reject"), empty without a record.
	DMARCPolicy string
	// Reason explains a None or error verdict ("no resolver configured").
	Reason string `json:",omitempty"`
}

// DKIMResult is the verdict on one DKIM-Signature.
type DKIMResult struct {
	// Domain is the signing domain (d=).
	Domain  string
	Verdict Verdict
	// Reason is why it did not pass.
	Reason string `json:",omitempty"`
}

// maxDKIMSignatures bounds the work a message can ask for.
const maxDKIMSignatures = 5

// Authenticator checks DKIM signatures and DMARC alignment of inbound mail.
type Authenticator struct {
	// Resolver answers the DKIM key and DMARC record lookups. When nil no
	// check runs and every verdict is None.
	Resolver Resolver
}

// Check verifies the raw message whose From address is from.
func (a Authenticator) Check(ctx context.Context, raw []byte, from string) AuthResult {
	res := AuthResult{SPF: None, DKIM: None, DMARC: None}
	if a.Resolver == nil {
		res.Reason = "no resolver configured"
		return res
	}
	lookup := func(name string) ([]string, error) { return a.Resolver.LookupTXT(ctx, name) }

	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT:        lookup,
		MaxVerifications: maxDKIMSignatures,
	})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		res.DKIM = PermError
		res.Reason = "dkim: " + err.Error()
	}
	for _, v := range verifs {
		r := DKIMResult{Domain: strings.ToLower(v.Domain), Verdict: Pass}
		switch {
		case v.Err == nil:
		case dkim.IsTempFail(v.Err):
			r.Verdict, r.Reason = TempError, v.Err.Error()
		case dkim.IsPermFail(v.Err):
			r.Verdict, r.Reason = PermError, v.Err.Error()
		default:
			r.Verdict, r.Reason = Fail, v.Err.Error()
		}
		res.DKIMSignatures = append(res.DKIMSignatures, r)
	}
	if len(res.DKIMSignatures) > 0 {
		res.DKIM = res.DKIMSignatures[0].Verdict
		for _, r := range res.DKIMSignatures {
			if r.Verdict == Pass {
				res.DKIM = Pass
				break
			}
		}
	}
	a.dmarc(&res, lookup, domainOf(from))
	return res
}

// dmarc looks up the From domain's policy (falling back to its
// organisational domain) and checks DKIM alignment. The organisational
// domain is approximated by the last two labels; there is no public suffix
// list here, so "example.co.uk" style domains only align strictly.
func (a Authenticator) dmarc(res *AuthResult, lookup func(string) ([]string, error), fromDomain string) {
	if fromDomain == "" {
		return
	}
	opts := &dmarc.LookupOptions{LookupTXT: lookup}
	rec, err := dmarc.LookupWithOptions(fromDomain, opts)
	if errors.Is(err, dmarc.ErrNoPolicy) {
		if org := orgDomain(fromDomain); org != fromDomain {
			rec, err = dmarc.LookupWithOptions(org, opts)
		}
	}
	switch {
	case errors.Is(err, dmarc.ErrNoPolicy):
		return
	case err != nil && dmarc.IsTempFail(err):
		res.DMARC = TempError
		return
	case err != nil:
		res.DMARC = PermError
		return
	}
	res.DMARCPolicy = string(rec.Policy)
	res.DMARC = Fail
	for _, s := range res.DKIMSignatures {
		if s.Verdict != Pass {
			continue
		}
		aligned := s.Domain == fromDomain
		if rec.DKIMAlignment != dmarc.AlignmentStrict {
			aligned = orgDomain(s.Domain) == orgDomain(fromDomain)
		}
		if aligned {
			res.DMARC = Pass
			return
		}
	}
}

func domainOf(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
}

func orgDomain(d string) string {
	labels := strings.Split(d, ".")
	if len(labels) <= 2 {
		return d
	}
	return strings.Join(labels[len(labels)-2:], ".")
}

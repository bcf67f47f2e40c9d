package domain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ErrLookup is wrapped by Verify's error when a DNS query failed (timeout,
// SERVFAIL, refused, unreachable server): nothing can be said about the
// records, so keep the previous status and retry later. A name that does
// not exist, or has no records of the type, is not an error: the record is
// Missing.
var ErrLookup = errors.New("dns lookup failed")

// State is what Verify found for one record.
type State string

// Record states.
const (
	// Found: the record is published as planned.
	Found State = "found"
	// Missing: no record of the type at the name.
	Missing State = "missing"
	// Mismatch: records exist at the name, but none is the planned one.
	Mismatch State = "mismatch"
)

// RecordStatus is the outcome for one planned record.
type RecordStatus struct {
	Record Record `json:"record"`
	State  State  `json:"state"`
	// Seen lists the relevant values DNS returned at the name (TXT strings
	// joined, MX hosts), to show the customer what is published.
	Seen []string `json:"seen,omitempty"`
	// Detail explains a Missing or Mismatch state to the customer.
	Detail string `json:"detail,omitempty"`
}

// Status is the outcome of one verification.
type Status struct {
	Domain  string         `json:"domain"`
	Records []RecordStatus `json:"records"`
	// Verified is true when every required record is Found.
	Verified bool `json:"verified"`
}

// Get returns the status of the record of kind k.
func (s *Status) Get(k Kind) (RecordStatus, bool) {
	for _, rs := range s.Records {
		if rs.Record.Kind == k {
			return rs, true
		}
	}
	return RecordStatus{}, false
}

// Verify looks up every record in recs through r and reports each one's
// state. A failed lookup returns an error wrapping ErrLookup and no status.
func Verify(ctx context.Context, r Resolver, recs *Records) (*Status, error) {
	l := &lookups{r: r, txt: map[string][]string{}}
	st := &Status{Domain: recs.Domain, Verified: true}
	for _, rec := range recs.Records {
		rs, err := l.check(ctx, recs, rec)
		if err != nil {
			return nil, fmt.Errorf("domain: verify %s: %w", recs.Domain, err)
		}
		rs.Record = rec
		if rec.Required && rs.State != Found {
			st.Verified = false
		}
		st.Records = append(st.Records, rs)
	}
	return st, nil
}

// lookups caches TXT answers within one Verify call.
type lookups struct {
	r   Resolver
	txt map[string][]string
}

func (l *lookups) check(ctx context.Context, recs *Records, rec Record) (RecordStatus, error) {
	switch rec.Kind {
	case Ownership:
		txt, err := l.lookupTXT(ctx, rec.Name)
		if err != nil {
			return RecordStatus{}, err
		}
		return checkOwnership(txt, recs.Token), nil
	case SPF:
		txt, err := l.lookupTXT(ctx, rec.Name)
		if err != nil {
			return RecordStatus{}, err
		}
		return checkSPF(txt, recs.SPFInclude), nil
	case DKIM:
		txt, err := l.lookupTXT(ctx, rec.Name)
		if err != nil {
			return RecordStatus{}, err
		}
		return checkDKIM(txt, rec.Value), nil
	case DMARC:
		txt, err := l.lookupTXT(ctx, rec.Name)
		if err != nil {
			return RecordStatus{}, err
		}
		return checkDMARC(txt), nil
	case Inbound:
		mx, err := l.lookupMX(ctx, rec.Name)
		if err != nil {
			return RecordStatus{}, err
		}
		return checkMX(mx, recs.MXHost), nil
	}
	return RecordStatus{}, fmt.Errorf("unknown record kind %q", rec.Kind)
}

func (l *lookups) lookupTXT(ctx context.Context, name string) ([]string, error) {
	if txt, ok := l.txt[name]; ok {
		return txt, nil
	}
	// The trailing dot makes the name absolute, so no search domain is tried.
	txt, err := l.r.LookupTXT(ctx, name+".")
	if err != nil && !notFound(err) {
		return nil, fmt.Errorf("%w: TXT %s: %w", ErrLookup, name, err)
	}
	l.txt[name] = txt
	return txt, nil
}

func (l *lookups) lookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	mx, err := l.r.LookupMX(ctx, name+".")
	// net.Resolver returns the valid records along with an error when some
	// records had invalid names; the valid ones are enough to judge.
	if err != nil && !notFound(err) && len(mx) == 0 {
		return nil, fmt.Errorf("%w: MX %s: %w", ErrLookup, name, err)
	}
	return mx, nil
}

// notFound reports whether err means NXDOMAIN or no records of the type.
func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func checkOwnership(txt []string, token string) RecordStatus {
	rs := RecordStatus{Seen: txt}
	for _, v := range txt {
		if strings.TrimSpace(v) == token {
			rs.State = Found
			return rs
		}
	}
	if len(txt) == 0 {
		rs.State, rs.Detail = Missing, "no TXT record found"
		return rs
	}
	rs.State, rs.Detail = Mismatch, "TXT records found, but none holds the token"
	return rs
}

func checkSPF(txt []string, include string) RecordStatus {
	var spf []string
	for _, v := range txt {
		if isSPF(v) {
			spf = append(spf, v)
		}
	}
	rs := RecordStatus{Seen: spf}
	switch {
	case len(spf) == 0:
		rs.State, rs.Detail = Missing, "no TXT record starting with v=spf1"
	case len(spf) > 1:
		rs.State, rs.Detail = Mismatch, fmt.Sprintf("%d SPF records found; a domain may have only one, so merge them into one record with include:%s", len(spf), include)
	case !spfIncludes(spf[0], include):
		rs.State, rs.Detail = Mismatch, "the SPF record does not contain include:"+include
	default:
		rs.State = Found
	}
	return rs
}

func isSPF(v string) bool {
	v = strings.TrimSpace(v)
	return len(v) >= 6 && strings.EqualFold(v[:6], "v=spf1") && (len(v) == 6 || v[6] == ' ' || v[6] == '\t')
}

// spfIncludes reports whether record has an include:<host> mechanism that
// passes (no qualifier or "+").
func spfIncludes(record, host string) bool {
	for _, term := range strings.Fields(record)[1:] {
		term = strings.TrimPrefix(term, "+")
		if len(term) > 8 && strings.EqualFold(term[:8], "include:") && sameHost(term[8:], host) {
			return true
		}
	}
	return false
}

func checkDKIM(txt []string, want string) RecordStatus {
	rs := RecordStatus{Seen: txt}
	if len(txt) == 0 {
		rs.State, rs.Detail = Missing, "no TXT record found"
		return rs
	}
	w := dkimTags(want)
	for _, v := range txt {
		if dkimMatches(dkimTags(v), w) {
			rs.State = Found
			return rs
		}
	}
	rs.State, rs.Detail = Mismatch, "a TXT record exists but does not hold comm's DKIM public key; replace it with the planned value"
	return rs
}

// dkimTags parses a DKIM key record's tag list, with whitespace removed
// from every value (RFC 6376 allows folding whitespace inside p=).
func dkimTags(v string) map[string]string {
	tags := map[string]string{}
	for _, part := range strings.Split(v, ";") {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		tags[strings.ToLower(strings.TrimSpace(k))] = strings.Join(strings.Fields(val), "")
	}
	return tags
}

// dkimMatches compares the tags that matter: the key, its type (default
// rsa) and the version if present.
func dkimMatches(got, want map[string]string) bool {
	if got["p"] == "" || got["p"] != want["p"] {
		return false
	}
	if v, ok := got["v"]; ok && v != "DKIM1" {
		return false
	}
	k := strings.ToLower(got["k"])
	return k == "" || k == strings.ToLower(want["k"])
}

func checkDMARC(txt []string) RecordStatus {
	rs := RecordStatus{Seen: txt}
	for _, v := range txt {
		f := strings.Fields(strings.ReplaceAll(v, ";", " "))
		if len(f) > 0 && strings.EqualFold(f[0], "v=DMARC1") {
			rs.State = Found
			return rs
		}
	}
	if len(txt) == 0 {
		rs.State, rs.Detail = Missing, "no DMARC record (recommended)"
		return rs
	}
	rs.State, rs.Detail = Mismatch, "TXT records found, but none starts with v=DMARC1"
	return rs
}

func checkMX(mx []*net.MX, host string) RecordStatus {
	rs := RecordStatus{}
	for _, m := range mx {
		rs.Seen = append(rs.Seen, m.Host)
	}
	for _, m := range mx {
		if sameHost(m.Host, host) {
			rs.State = Found
			return rs
		}
	}
	if len(mx) == 0 {
		rs.State, rs.Detail = Missing, "no MX record found"
		return rs
	}
	rs.State, rs.Detail = Mismatch, "MX records found, but none points to "+host
	return rs
}

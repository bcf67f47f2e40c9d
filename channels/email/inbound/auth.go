package inbound

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"golang.org/x/net/publicsuffix"
)

// Verdict is the outcome of one authentication method, with the names of
// RFC 8601 (Authentication-Results).
type Verdict string

// Verdicts. SoftFail and Neutral are SPF results only.
const (
	Pass      Verdict = "pass"
	Fail      Verdict = "fail"
	SoftFail  Verdict = "softfail"
	Neutral   Verdict = "neutral"
	None      Verdict = "none"
	TempError Verdict = "temperror"
	PermError Verdict = "permerror"
)

// Resolver looks up DNS TXT records. *net.Resolver satisfies it; tests use
// a map. A name that does not exist should give a *net.DNSError with
// IsNotFound set.
//
// The SPF check also needs MX, address and reverse lookups: it runs only
// when the Resolver has the methods of spf.DNSResolver too (LookupMX,
// LookupIPAddr and LookupAddr, as *net.Resolver does). Errors must be
// *net.DNSError, unwrapped, for SPF to tell "no such domain" and
// temporary failures from permanent ones.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// AuthResult is what comm could verify about the sender of a message, so an
// agent can tell a spoofed From.
type AuthResult struct {
	// SPF is the RFC 7208 verdict on the SMTP client's address for
	// SPFDomain: Pass, Fail, SoftFail, Neutral, None (no SPF record, or
	// no check possible, then Reason says why), TempError or PermError.
	SPF Verdict `json:"spf"`
	// SPFDomain is the domain SPF checked: the domain of the envelope
	// sender (MAIL FROM), or the HELO name for a bounce (empty MAIL FROM).
	// Empty when there was none to check.
	SPFDomain string `json:"spf_domain"`
	// DKIM summarises DKIMSignatures: Pass when any signature verifies,
	// None when the message is unsigned, else the first failure.
	DKIM           Verdict      `json:"dkim"`
	DKIMSignatures []DKIMResult `json:"dkim_signatures"`
	// DMARC is Pass when the From domain is authenticated by an aligned
	// identifier, a DKIM signature that verifies or an SPF pass for
	// SPFDomain; Fail when the From domain publishes a DMARC policy and
	// neither is aligned; None when it publishes none.
	DMARC Verdict `json:"dmarc"`
	// DMARCPolicy is the published policy ("none", "quarantine",
	// "reject"), empty without a record.
	DMARCPolicy string `json:"dmarc_policy"`
	// Reason explains a None or error verdict ("no resolver configured").
	// Explanations of several checks are joined by "; ".
	Reason string `json:"reason,omitempty"`
}

// DKIMResult is the verdict on one DKIM-Signature.
type DKIMResult struct {
	// Domain is the signing domain (d=).
	Domain  string  `json:"domain"`
	Verdict Verdict `json:"verdict"`
	// Reason is why it did not pass.
	Reason string `json:"reason,omitempty"`
}

// Envelope is the SMTP transaction a message arrived in, what SPF checks.
type Envelope struct {
	// ClientIP is the address of the SMTP client.
	ClientIP net.IP
	// Helo is the name the client gave in HELO or EHLO.
	Helo string
	// MailFrom is the envelope sender (MAIL FROM); empty for bounces.
	MailFrom string
}

// Bounds on the work the DKIM check of one message can ask for. The header
// section is already bounded (Parser.MaxHeaderBytes); these bound what
// go-msgauth does with it, which is not linear:
//   - it verifies the first maxDKIMSignatures signatures, the others get no
//     verdict;
//   - its header reader appends each continuation line to the field read so
//     far, copying it: a 2 MB folded Subject cost 12 s of CPU. dkimHeader
//     computes those copies beforehand and above maxDKIMHeaderCopy the
//     message's DKIM verdict is permerror (a 128 KiB field folded into
//     one-byte lines would copy 2.8 GB, 1.6 s of CPU; a 100 KB References
//     folded at 50 bytes copies 100 MB);
//   - it looks each name of a signature's h= tag up by walking every header
//     field: the names of the verified signatures times the fields of the
//     header may be at most maxDKIMPicks, and the names at most
//     maxDKIMSignedNames.
//
// The reads of the check stop at a deadline (Authenticator.Timeout).
const (
	maxDKIMSignatures  = 5
	maxDKIMHeaderCopy  = 256 << 20
	maxDKIMPicks       = 1_000_000
	maxDKIMSignedNames = 1000
	// maxDKIMHeaderRead caps what dkimHeader reads when the header
	// section was not bounded before.
	maxDKIMHeaderRead = 1 << 20
)

// Authenticator checks the SPF verdict, DKIM signatures and DMARC
// alignment of inbound mail.
type Authenticator struct {
	// Resolver answers the SPF, DKIM key and DMARC record lookups. When nil
	// no check runs and every verdict is None. SPF needs more than TXT
	// lookups (see Resolver); without them SPF is None.
	Resolver Resolver
	// Timeout bounds the reads of the DKIM check (the body hash and
	// go-msgauth's header reader stop at it, the verdict is then
	// temperror); DefaultParseTimeout when 0. DNS lookups are bounded by
	// the context given to Check.
	Timeout time.Duration
}

// Check verifies the raw message (read from raw) whose From address is
// from, received in the SMTP transaction env.
func (a Authenticator) Check(ctx context.Context, raw io.Reader, from string, env Envelope) AuthResult {
	res := AuthResult{SPF: None, DKIM: None, DMARC: None}
	if a.Resolver == nil {
		res.Reason = "no resolver configured"
		return res
	}
	var reasons []string
	lookup := func(name string) ([]string, error) { return a.Resolver.LookupTXT(ctx, name) }

	var spfReason string
	res.SPF, res.SPFDomain, spfReason = a.spf(ctx, env)
	if spfReason != "" {
		reasons = append(reasons, "spf: "+spfReason)
	}

	if reason := a.dkim(&res, raw, lookup); reason != "" {
		reasons = append(reasons, "dkim: "+reason)
	}
	a.dmarc(&res, lookup, domainOf(from))
	res.Reason = strings.Join(reasons, "; ")
	return res
}

// dkim verifies the DKIM signatures of the raw message within the bounds
// above, sets res.DKIM and res.DKIMSignatures and returns why a verdict is
// not Pass or None when the whole check failed.
func (a Authenticator) dkim(res *AuthResult, raw io.Reader, lookup func(string) ([]string, error)) string {
	h, rest, err := readDKIMHeader(raw)
	switch {
	case err != nil:
		res.DKIM = PermError
		return err.Error()
	case h.signatures == 0:
		return "" // unsigned: None, nothing for go-msgauth to read
	case h.copy > maxDKIMHeaderCopy:
		res.DKIM = PermError
		return fmt.Sprintf("not verified: the header is folded into too many lines (%d fields, %d lines)", h.fields, h.lines)
	case h.names > maxDKIMSignedNames || h.names*h.fields > maxDKIMPicks:
		res.DKIM = PermError
		return fmt.Sprintf("not verified: the signatures name %d header fields, the header has %d", h.names, h.fields)
	}
	dr := &deadlineReader{r: io.MultiReader(bytes.NewReader(h.raw), rest), deadline: time.Now().Add(orDur(a.Timeout, DefaultParseTimeout))}
	verifs, err := dkim.VerifyWithOptions(dr, &dkim.VerifyOptions{
		LookupTXT:        lookup,
		MaxVerifications: maxDKIMSignatures,
	})
	var reason string
	switch {
	case dr.expired:
		res.DKIM = TempError
		return fmt.Sprintf("not verified within %s", orDur(a.Timeout, DefaultParseTimeout))
	case errors.Is(err, dkim.ErrTooManySignatures):
		reason = fmt.Sprintf("%d signatures, the first %d verified", h.signatures, maxDKIMSignatures)
	case err != nil:
		res.DKIM = PermError
		return err.Error()
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
	return reason
}

// dkimHeader is what readDKIMHeader learnt about a header section.
type dkimHeader struct {
	raw        []byte // the header section as read, to be read again
	fields     int    // header fields, as go-msgauth splits them
	lines      int
	signatures int   // DKIM-Signature fields
	names      int   // the names in the h= tags of the first maxDKIMSignatures
	copy       int64 // bytes go-msgauth's header reader copies
}

// readDKIMHeader reads the header section of a message from r, splitting
// it into fields the way go-msgauth does (a line starting with a space or
// tab continues the field before it; the header ends at the first empty
// line), in time linear in its size. It reads at most maxDKIMHeaderRead
// bytes.
//
// It returns the rest of the message (after what it read) too.
func readDKIMHeader(r io.Reader) (dkimHeader, io.Reader, error) {
	var h dkimHeader
	br := bufio.NewReader(r)
	var buf bytes.Buffer
	var field int64   // length of the field being read, as go-msgauth holds it
	var sig []byte    // the DKIM-Signature field being read, if it is one
	var sigs [][]byte // the first maxDKIMSignatures of them
	endField := func() {
		if sig != nil && len(sigs) < maxDKIMSignatures {
			sigs = append(sigs, sig)
		}
		sig = nil
	}
	for {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) && buf.Len() <= maxDKIMHeaderRead {
			buf.Write(line)
			line, err = br.ReadSlice('\n')
		}
		buf.Write(line)
		if buf.Len() > maxDKIMHeaderRead {
			return h, nil, fmt.Errorf("not verified: the header is larger than %d bytes", maxDKIMHeaderRead)
		}
		// The line as go-msgauth reads it: without "\n" or "\r\n".
		text := buf.Bytes()[len(h.raw):]
		h.raw = buf.Bytes()
		text = bytes.TrimSuffix(bytes.TrimSuffix(text, []byte("\n")), []byte("\r"))
		if err != nil && len(text) == 0 {
			break // the end, without the empty line: go-msgauth says so
		}
		if len(text) == 0 && err == nil {
			break
		}
		h.lines++
		if h.fields > 0 && (text[0] == ' ' || text[0] == '\t') {
			field += int64(len(text)) + 2
			h.copy += field
			if sig != nil {
				sig = append(sig, text...)
			}
		} else {
			endField()
			h.fields++
			field = int64(len(text)) + 2
			name, value, _ := bytes.Cut(text, []byte(":"))
			if bytes.EqualFold(bytes.TrimSpace(name), []byte("DKIM-Signature")) {
				h.signatures++
				sig = append([]byte(nil), value...)
			}
		}
		if err != nil {
			break
		}
	}
	endField()
	for _, s := range sigs {
		for _, tag := range bytes.Split(s, []byte(";")) {
			k, v, _ := bytes.Cut(tag, []byte("="))
			if string(bytes.TrimSpace(k)) == "h" {
				h.names += bytes.Count(v, []byte(":")) + 1
			}
		}
	}
	return h, br, nil
}

// spf runs check_host (RFC 7208) for the client address and the MAIL FROM
// identity: the envelope sender, or postmaster@ the HELO name when the
// sender is empty (section 2.4). It returns the verdict, the domain checked
// and, when the check could not run or ended in an error, why.
func (a Authenticator) spf(ctx context.Context, env Envelope) (verdict Verdict, domain, reason string) {
	helo := strings.TrimSuffix(env.Helo, ".")
	local, domain := "postmaster", helo // a bounce: the HELO identity (section 2.4)
	if env.MailFrom != "" {
		at := strings.LastIndexByte(env.MailFrom, '@')
		if at < 0 {
			return None, "", fmt.Sprintf("MAIL FROM %q has no domain", env.MailFrom)
		}
		local, domain = env.MailFrom[:at], env.MailFrom[at+1:]
		// An empty local part is postmaster (section 4.3). So is a quoted
		// one holding an "@", which the library would split at the wrong
		// place; it only shows in %{l} macros.
		if local == "" || strings.Contains(local, "@") {
			local = "postmaster"
		}
	}
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if !validDomain(domain) {
		// Section 4.3: a malformed or single-label domain is None.
		if env.MailFrom == "" {
			return None, "", fmt.Sprintf("empty MAIL FROM and HELO %q is not a domain name", env.Helo)
		}
		return None, "", fmt.Sprintf("MAIL FROM domain %q is not a domain name", domain)
	}
	r, ok := a.Resolver.(spf.DNSResolver)
	if !ok {
		return None, domain, "the resolver cannot look up MX and address records"
	}
	ip := env.ClientIP
	if ip4 := ip.To4(); ip4 != nil {
		ip = ip4
	}
	if ip.To16() == nil {
		return None, domain, "no SMTP client address"
	}

	res, err := spf.CheckHostWithSender(ip, helo, local+"@"+domain, spf.WithContext(ctx), spf.WithResolver(r))
	switch res {
	case spf.Pass:
		return Pass, domain, ""
	case spf.Fail:
		return Fail, domain, ""
	case spf.SoftFail:
		return SoftFail, domain, ""
	case spf.Neutral:
		return Neutral, domain, ""
	case spf.None:
		return None, domain, ""
	case spf.TempError:
		return TempError, domain, errText(err)
	}
	if ctx.Err() != nil {
		// A lookup cut short by our own deadline is no verdict on the
		// record.
		return TempError, domain, errText(err)
	}
	return PermError, domain, errText(err)
}

// dmarc looks up the From domain's policy (falling back to its
// organisational domain) and checks whether a DKIM signature that verifies
// or an SPF pass is aligned with the From domain (RFC 7489 section 3.1):
// the same domain in strict mode, the same organisational domain in relaxed
// mode (the default).
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
		if s.Verdict == Pass && aligned(s.Domain, fromDomain, rec.DKIMAlignment) {
			res.DMARC = Pass
			return
		}
	}
	if res.SPF == Pass && aligned(res.SPFDomain, fromDomain, rec.SPFAlignment) {
		res.DMARC = Pass
	}
}

// aligned reports whether the authenticated domain d is aligned with the
// From domain under mode.
func aligned(d, fromDomain string, mode dmarc.AlignmentMode) bool {
	if d == "" {
		return false
	}
	if mode == dmarc.AlignmentStrict {
		return d == fromDomain
	}
	return orgDomain(d) == orgDomain(fromDomain)
}

func domainOf(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
}

// orgDomain is the organisational domain of d (RFC 7489 section 3.2): one
// label below its public suffix, by the list of golang.org/x/net/publicsuffix
// ("mail.example.co.uk" gives "example.co.uk"). A public suffix itself is
// its own organisational domain, so it aligns with nothing but itself.
func orgDomain(d string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return org
}

// validDomain reports whether d can be an SPF domain: a multi-label name
// with labels of 1 to 63 octets, not an address literal.
func validDomain(d string) bool {
	if len(d) > 253 || !strings.Contains(d, ".") || net.ParseIP(d) != nil {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || strings.ContainsFunc(l, func(r rune) bool {
			return r <= ' ' || r == 0x7f || r == '[' || r == ']' || r == '@'
		}) {
			return false
		}
	}
	return true
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

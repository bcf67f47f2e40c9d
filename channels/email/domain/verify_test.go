package domain

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/email/dnstest"
)

var (
	keyOnce  sync.Once
	testKeys [2]*rsa.PrivateKey
)

// keys returns two RSA-2048 keys shared by the tests (generation is slow
// under the race detector).
func keys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keyOnce.Do(func() {
		for i := range testKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			testKeys[i] = k
		}
	})
	return testKeys[0], testKeys[1]
}

func testConfig(t *testing.T) PlanConfig {
	k, _ := keys(t)
	return PlanConfig{
		SPFInclude:       "spf.comm.example",
		MXHost:           "mx.comm.example",
		InboundSubdomain: "in",
		DMARCReport:      "dmarc@comm.example",
		Key:              k,
	}
}

func plan(t *testing.T, domain string) *Records {
	t.Helper()
	recs, err := Plan(domain, testConfig(t))
	if err != nil {
		t.Fatalf("Plan(%q): %v", domain, err)
	}
	return recs
}

// line is the zone-file line of the planned record of kind k.
func line(t *testing.T, recs *Records, k Kind) string {
	t.Helper()
	rec, ok := recs.Get(k)
	if !ok {
		t.Fatalf("no %s record planned", k)
	}
	return rec.ZoneLine()
}

func verify(t *testing.T, f *dnstest.Server, recs *Records) *Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := Verify(ctx, NewResolver(f.Addr), recs)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return st
}

// checkStates compares every record's state with want (kinds not listed
// must be Missing) and Verified with verified.
func checkStates(t *testing.T, st *Status, want map[Kind]State, verified bool) {
	t.Helper()
	for _, rs := range st.Records {
		w, ok := want[rs.Record.Kind]
		if !ok {
			w = Missing
		}
		if rs.State != w {
			t.Errorf("%s (%s): state %s, want %s (seen %q, detail %q)", rs.Record.Kind, rs.Record.Name, rs.State, w, rs.Seen, rs.Detail)
		}
		if rs.State != Found && rs.Detail == "" {
			t.Errorf("%s: state %s without a detail for the customer", rs.Record.Kind, rs.State)
		}
	}
	if st.Verified != verified {
		t.Errorf("Verified = %v, want %v", st.Verified, verified)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	_, otherKey := keys(t)
	otherPub, _, err := encodeKey(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	required := func(recs *Records) []string {
		return []string{line(t, recs, Ownership), line(t, recs, SPF), line(t, recs, DKIM), line(t, recs, Inbound)}
	}
	dkimValue := func(recs *Records) string {
		rec, _ := recs.Get(DKIM)
		return rec.Value
	}
	allFound := map[Kind]State{Ownership: Found, SPF: Found, DKIM: Found, Inbound: Found}
	with := func(m map[Kind]State, k Kind, s State) map[Kind]State {
		out := map[Kind]State{}
		for kk, v := range m {
			out[kk] = v
		}
		out[k] = s
		return out
	}

	tests := []struct {
		name     string
		zone     func(recs *Records) []string
		want     map[Kind]State
		verified bool
	}{{
		name: "pending: nothing published",
		zone: func(*Records) []string { return nil },
		want: map[Kind]State{},
	}, {
		name: "partial: ownership and SPF only",
		zone: func(recs *Records) []string {
			return []string{line(t, recs, Ownership), line(t, recs, SPF)}
		},
		want: map[Kind]State{Ownership: Found, SPF: Found},
	}, {
		name: "mismatch: DKIM holds another key",
		zone: func(recs *Records) []string {
			return []string{
				line(t, recs, Ownership), line(t, recs, SPF), line(t, recs, Inbound),
				(Record{Type: TypeTXT, Name: recs.Selector + "._domainkey." + recs.Domain, Value: "v=DKIM1; k=rsa; p=" + otherPub}).ZoneLine(),
			}
		},
		want: with(allFound, DKIM, Mismatch),
	}, {
		name:     "verified: all required, no DMARC",
		zone:     required,
		want:     allFound,
		verified: true,
	}, {
		name: "verified with the recommended DMARC",
		zone: func(recs *Records) []string {
			return append(required(recs), `_dmarc.`+recs.Domain+`. 300 IN TXT "v=DMARC1; p=reject"`)
		},
		want:     with(allFound, DMARC, Found),
		verified: true,
	}, {
		name: "DKIM split into several strings at odd places, with folding whitespace",
		zone: func(recs *Records) []string {
			v := dkimValue(recs)
			i := strings.Index(v, "p=") + 2
			p := v[i:]
			return []string{
				line(t, recs, Ownership), line(t, recs, SPF), line(t, recs, Inbound),
				recs.Selector + "._domainkey." + recs.Domain + `. 300 IN TXT "v=DKIM1;" " k=rsa;  p=` + p[:100] + `" " ` + p[100:333] + `" "` + p[333:] + `;"`,
			}
		},
		want:     allFound,
		verified: true,
	}, {
		name: "SPF merged into an existing record, other TXT at the apex",
		zone: func(recs *Records) []string {
			return []string{
				line(t, recs, Ownership), line(t, recs, DKIM), line(t, recs, Inbound),
				recs.Domain + `. 300 IN TXT "google-site-verification=abc123"`,
				recs.Domain + `. 300 IN TXT "v=spf1 ip4:192.0.2.0/24 include:_spf.google.com +include:SPF.Comm.Example. -all"`,
			}
		},
		want:     allFound,
		verified: true,
	}, {
		name: "SPF without our include",
		zone: func(recs *Records) []string {
			return append(required(recs)[:1], line(t, recs, DKIM), line(t, recs, Inbound),
				recs.Domain+`. 300 IN TXT "v=spf1 include:_spf.google.com ~all"`)
		},
		want: with(allFound, SPF, Mismatch),
	}, {
		name: "two SPF records",
		zone: func(recs *Records) []string {
			return append(required(recs), recs.Domain+`. 300 IN TXT "v=spf1 include:_spf.google.com ~all"`)
		},
		want: with(allFound, SPF, Mismatch),
	}, {
		name: "MX with trailing dot and different case, among others",
		zone: func(recs *Records) []string {
			return []string{
				line(t, recs, Ownership), line(t, recs, SPF), line(t, recs, DKIM),
				recs.InboundDomain + `. 300 IN MX 20 backup.example.net.`,
				recs.InboundDomain + `. 300 IN MX 5 MX.Comm.EXAMPLE.`,
			}
		},
		want:     allFound,
		verified: true,
	}, {
		name: "MX pointing elsewhere",
		zone: func(recs *Records) []string {
			return append(required(recs)[:3], recs.InboundDomain+`. 300 IN MX 10 aspmx.l.google.com.`)
		},
		want: with(allFound, Inbound, Mismatch),
	}, {
		name: "ownership TXT holds a stale token",
		zone: func(recs *Records) []string {
			return append(required(recs)[1:], OwnershipPrefix+"."+recs.Domain+`. 300 IN TXT "comm-stale"`)
		},
		want: with(allFound, Ownership, Mismatch),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := dnstest.Start(t)
			recs := plan(t, "example.com")
			f.Publish(t, tc.zone(recs)...)
			checkStates(t, verify(t, f, recs), tc.want, tc.verified)
		})
	}
}

// TestVerifyLifecycle edits one zone between checks, as a customer does.
func TestVerifyLifecycle(t *testing.T) {
	t.Parallel()
	f := dnstest.Start(t)
	recs := plan(t, "Shop.Example.ORG.")
	if recs.Domain != "shop.example.org" || recs.InboundDomain != "in.shop.example.org" {
		t.Fatalf("domain %q inbound %q", recs.Domain, recs.InboundDomain)
	}

	checkStates(t, verify(t, f, recs), map[Kind]State{}, false)

	f.Publish(t, line(t, recs, Ownership), line(t, recs, SPF))
	checkStates(t, verify(t, f, recs), map[Kind]State{Ownership: Found, SPF: Found}, false)

	f.Publish(t, line(t, recs, DKIM), line(t, recs, Inbound))
	st := verify(t, f, recs)
	checkStates(t, st, map[Kind]State{Ownership: Found, SPF: Found, DKIM: Found, Inbound: Found}, true)
	if rs, _ := st.Get(Inbound); len(rs.Seen) != 1 || !sameHost(rs.Seen[0], "mx.comm.example") {
		t.Errorf("MX seen %q", rs.Seen)
	}

	// The customer rotates the DKIM record to something else: no longer verified.
	f.Remove(recs.Selector+"._domainkey."+recs.Domain, 16 /* TXT */)
	f.Publish(t, recs.Selector+"._domainkey."+recs.Domain+`. 300 IN TXT "v=DKIM1; k=rsa; p="`)
	checkStates(t, verify(t, f, recs), map[Kind]State{Ownership: Found, SPF: Found, DKIM: Mismatch, Inbound: Found}, false)
}

// TestVerifyOverTCP: a truncated UDP answer makes the resolver retry over
// TCP, to the same configured address.
func TestVerifyOverTCP(t *testing.T) {
	t.Parallel()
	f := dnstest.Start(t)
	recs := plan(t, "example.net")
	f.Publish(t, line(t, recs, Ownership), line(t, recs, SPF), line(t, recs, DKIM), line(t, recs, Inbound))
	f.SetTruncateUDP(true)
	checkStates(t, verify(t, f, recs), map[Kind]State{Ownership: Found, SPF: Found, DKIM: Found, Inbound: Found}, true)
	if f.Count("tcp") == 0 {
		t.Errorf("no query over TCP (udp %d)", f.Count("udp"))
	}
}

// TestVerifyResolverFailure: a server that is down or failing is an error
// to retry later, never "missing".
func TestVerifyResolverFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fail func(f *dnstest.Server)
	}{
		{"server down", func(f *dnstest.Server) { f.Stop() }},
		{"SERVFAIL", func(f *dnstest.Server) { f.SetServfail(true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := dnstest.Start(t)
			recs := plan(t, "example.com")
			f.Publish(t, line(t, recs, Ownership))
			tc.fail(f)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := Verify(ctx, NewResolver(f.Addr), recs)
			if !errors.Is(err, ErrLookup) {
				t.Fatalf("Verify: status %+v, err %v; want an error wrapping ErrLookup", st, err)
			}
			if st != nil {
				t.Errorf("status %+v returned with the error", st)
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestVerifyCancelled: a cancelled context is an error too.
func TestVerifyCancelled(t *testing.T) {
	t.Parallel()
	f := dnstest.Start(t)
	recs := plan(t, "example.com")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, NewResolver(f.Addr), recs); !errors.Is(err, ErrLookup) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want ErrLookup and context.Canceled", err)
	}
}

package inbound

import (
	"context"
	"encoding/base64"
	"net"
	"strings"

	"blitiri.com.ar/go/spf"
)

// crlf joins lines with CRLF, as messages travel.
func crlf(lines ...string) string {
	return strings.Join(lines, "\r\n") + "\r\n"
}

// fakeDNS is a Resolver over a map of TXT records; missing names are
// NXDOMAIN, a name whose record is servFail a temporary failure. It has the
// lookups SPF needs too, with no MX, address or PTR records at all.
type fakeDNS map[string][]string

// servFail as the only record of a name makes its lookup fail temporarily.
const servFail = "\x00SERVFAIL"

var _ spf.DNSResolver = fakeDNS(nil)

func (f fakeDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	txt, ok := f[strings.TrimSuffix(name, ".")]
	switch {
	case !ok:
		return nil, notFound(name)
	case len(txt) == 1 && txt[0] == servFail:
		return nil, &net.DNSError{Err: "server misbehaving", Name: name, IsTemporary: true}
	}
	return txt, nil
}

func (fakeDNS) LookupMX(_ context.Context, name string) ([]*net.MX, error) {
	return nil, notFound(name)
}

func (fakeDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	return nil, notFound(host)
}

func (fakeDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	return nil, notFound(addr)
}

func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// txtOnlyDNS has nothing but the TXT lookups of the Resolver interface, so
// no SPF check can run with it.
type txtOnlyDNS struct{ dns fakeDNS }

func (t txtOnlyDNS) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return t.dns.LookupTXT(ctx, name)
}

var (
	plainMsg = crlf(
		"From: Ann Example <ann@example.com>",
		"To: inbox@in.comm.test",
		"Subject: Hello there",
		"Message-ID: <plain-1@example.com>",
		"Date: Mon, 02 Jan 2006 15:04:05 -0700",
		"",
		"Just a plain note.",
	)

	attachmentData = []byte("%PDF-1.4 fake pdf bytes \x00\x01\x02")

	multipartMsg = crlf(
		"From: bob@example.org",
		"To: inbox@in.comm.test, other@in.comm.test",
		"Cc: Carol <carol@example.net>",
		"Subject: Report",
		"Message-ID: <multi-1@example.org>",
		"MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="outer"`,
		"",
		"--outer",
		`Content-Type: multipart/alternative; boundary="alt"`,
		"",
		"--alt",
		"Content-Type: text/plain; charset=utf-8",
		"",
		"See the report attached.",
		"--alt",
		"Content-Type: text/html; charset=utf-8",
		"",
		"<p>See the <b>report</b> attached.</p>",
		"--alt--",
		"--outer",
		`Content-Type: application/pdf; name="report.pdf"`,
		`Content-Disposition: attachment; filename="report.pdf"`,
		"Content-Transfer-Encoding: base64",
		"",
		base64.StdEncoding.EncodeToString(attachmentData),
		"--outer--",
	)

	// ISO-8859-1: RFC 2047 Q-encoded subject, quoted-printable body.
	latin1QPMsg = crlf(
		"From: =?ISO-8859-1?Q?Ren=E9?= <rene@example.fr>",
		"To: inbox@in.comm.test",
		"Subject: =?ISO-8859-1?Q?Caf=E9_cr=E8me?=",
		"MIME-Version: 1.0",
		"Content-Type: text/plain; charset=ISO-8859-1",
		"Content-Transfer-Encoding: quoted-printable",
		"",
		"D=E9j=E0 vu, gar=E7on.",
	)

	// ISO-8859-1: B-encoded subject, base64 body ("Grüße aus Köln").
	latin1B64Msg = crlf(
		"From: jo@example.de",
		"To: inbox@in.comm.test",
		"Subject: =?iso-8859-1?B?R3L832U=?=",
		"MIME-Version: 1.0",
		"Content-Type: text/plain; charset=iso-8859-1",
		"Content-Transfer-Encoding: base64",
		"",
		base64.StdEncoding.EncodeToString([]byte("Gr\xfc\xdfe aus K\xf6ln")),
	)

	// Shift_JIS body "こんにちは" in base64, subject B-encoded.
	sjisMsg = crlf(
		"From: taro@example.jp",
		"To: inbox@in.comm.test",
		"Subject: =?Shift_JIS?B?grGC8YLJgr+CzQ==?=",
		"MIME-Version: 1.0",
		"Content-Type: text/plain; charset=Shift_JIS",
		"Content-Transfer-Encoding: base64",
		"",
		base64.StdEncoding.EncodeToString([]byte("\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd")),
	)

	replyMsg = crlf(
		"From: ann@example.com",
		"To: inbox@in.comm.test",
		"Subject: Re: Hello there",
		"Message-ID: <reply-2@example.com>",
		"In-Reply-To: <out-1@in.comm.test>",
		"References: <root-0@example.com>",
		"  <out-1@in.comm.test>",
		"",
		"Sounds good, see you Tuesday.",
		"",
		"On Mon, Jan 2, 2006 at 3:04 PM Comm Agent <inbox@in.comm.test> wrote:",
		"> Shall we meet on Tuesday?",
		">",
		"> > Earlier text",
	)

	noFromMsg = crlf(
		"To: inbox@in.comm.test",
		"Subject: who am I",
		"",
		"body",
	)

	badFromMsg = crlf(
		"From: <<<not an address",
		"To: inbox@in.comm.test",
		"Subject: broken",
		"",
		"body",
	)
)

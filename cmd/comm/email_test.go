package main_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/jhillyerd/enmime/v2"
	miekgdns "github.com/miekg/dns"

	"github.com/comm-gateway/comm/channels/email/dnstest"
	"github.com/comm-gateway/comm/channels/email/smtptest"
)

// The email channel end to end, as a user meets it: the real binary, an
// independent SMTP client (net/smtp) talking to its listener, a real SMTP
// relay capturing what comm sends, and a DNS server the gateway verifies
// custom domains against.

// gw is a started gateway and one project's key.
type gw struct {
	*proc
	key string
}

func startGateway(t *testing.T, env ...string) *gw {
	t.Helper()
	p := start(t, binary(t), t.TempDir(), env...)
	if p.smtp == "" {
		t.Fatal("no SMTP listener line at start")
	}
	var sb struct {
		APIKey string `json:"api_key"`
	}
	do(t, p.base, "", "POST", "/v1/projects/sandbox", `{"name":"mail"}`, 201, &sb)
	return &gw{proc: p, key: sb.APIKey}
}

// do calls the REST API, checks the status and decodes the answer into out.
func do(t *testing.T, base, key, method, path, body string, want int, out any) {
	t.Helper()
	code, b := call(t, method, base+path, key, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func (g *gw) api(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	do(t, g.base, g.key, method, path, body, want, out)
}

type event struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type mailMessage struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversation_id"`
	ConnectionID   string  `json:"connection_id"`
	Channel        string  `json:"channel"`
	Sender         string  `json:"sender"`
	Recipient      string  `json:"recipient"`
	Subject        *string `json:"subject"`
	Text           string  `json:"text"`
	HTML           *string `json:"html"`
	Status         string  `json:"status"`
	Error          *string `json:"error"`
	Attachments    []struct {
		ID          string `json:"id"`
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Size        int64  `json:"size"`
	} `json:"attachments"`
	Details struct {
		MessageID string `json:"message_id"`
		FullText  string `json:"full_text"`
		Auth      struct {
			DKIM string `json:"dkim"`
		} `json:"auth"`
	} `json:"details"`
}

// events returns the project's events after seq (waiting up to 5 s for
// the first).
func (g *gw) events(t *testing.T, after int64) []event {
	t.Helper()
	var evs []event
	g.api(t, "GET", fmt.Sprintf("/v1/events?after_seq=%d&wait=5", after), "", 200, &evs)
	return evs
}

// next waits for the next event of type typ after *cursor, moving the
// cursor past it, and decodes its message.
func (g *gw) next(t *testing.T, cursor *int64, typ string) mailMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range g.events(t, *cursor) {
			*cursor = ev.Seq
			if ev.Type != typ {
				continue
			}
			var d struct {
				Message mailMessage `json:"message"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			return d.Message
		}
	}
	t.Fatalf("no %s event after seq %d", typ, *cursor)
	return mailMessage{}
}

// sendMail runs one SMTP session with net/smtp and returns the server's
// error, if any.
func sendMail(addr, from string, to []string, msg string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, strings.ReplaceAll(msg, "\n", "\r\n")); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// smtpCode is the reply code of an SMTP error (0 when err is not one).
func smtpCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

func TestEmailInboundSMTP(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "COMM_SMTP_MAX_BYTES=200000")
	var conn struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	}
	g.api(t, "POST", "/v1/connections", `{"channel":"email","config":{"address":"support"}}`, 201, &conn)
	if conn.Address != "support@comm.localhost" {
		t.Fatalf("address %q", conn.Address)
	}
	var cursor int64
	g.next(t, &cursor, "connection.active")

	t.Run("plain", func(t *testing.T) {
		err := sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, `From: Ann <ann@customer.test>
To: support@comm.localhost
Subject: Order 1234
Message-ID: <plain-1@customer.test>

Where is my order?

On Mon, Bob wrote:
> earlier text
`)
		if err != nil {
			t.Fatal(err)
		}
		m := g.next(t, &cursor, "message.received")
		if m.Channel != "email" || m.Sender != "ann@customer.test" || m.Subject == nil || *m.Subject != "Order 1234" ||
			m.Text != "Where is my order?" || m.ConnectionID != conn.ID {
			t.Fatalf("received %+v", m)
		}
		// The event leaves the full text out; the message has it.
		if m.Details.FullText != "" || m.Details.MessageID != "plain-1@customer.test" {
			t.Fatalf("event details %+v", m.Details)
		}
		var full mailMessage
		g.api(t, "GET", "/v1/messages/"+m.ID, "", 200, &full)
		if !strings.Contains(full.Details.FullText, "> earlier text") || full.Details.MessageID != "plain-1@customer.test" {
			t.Fatalf("details %+v", full.Details)
		}
	})

	t.Run("multipart html attachment", func(t *testing.T) {
		pdf := bytes.Repeat([]byte("%PDF-1.4 fake\x00\x01\x02"), 100)
		var b bytes.Buffer
		env := enmime.Builder().From("Ann", "ann@customer.test").To("", "support@comm.localhost").
			Subject("Invoice").Text([]byte("See attached.")).HTML([]byte("<p>See <b>attached</b>.</p>")).
			AddAttachment(pdf, "application/pdf", "invoice.pdf")
		part, err := env.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := part.Encode(&b); err != nil {
			t.Fatal(err)
		}
		if err := sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, strings.ReplaceAll(b.String(), "\r\n", "\n")); err != nil {
			t.Fatal(err)
		}
		m := g.next(t, &cursor, "message.received")
		if m.Text != "See attached." || m.HTML == nil || !strings.Contains(*m.HTML, "<b>attached</b>") {
			t.Fatalf("received %+v", m)
		}
		if len(m.Attachments) != 1 || m.Attachments[0].Filename != "invoice.pdf" || m.Attachments[0].Size != int64(len(pdf)) {
			t.Fatalf("attachments %+v", m.Attachments)
		}
		code, got := call(t, "GET", g.base+"/v1/messages/"+m.ID+"/attachments/"+m.Attachments[0].ID, g.key, "")
		if code != 200 || !bytes.Equal(got, pdf) {
			t.Fatalf("download: %d, %d bytes (want %d)", code, len(got), len(pdf))
		}
		// Another project cannot read it.
		var other struct {
			APIKey string `json:"api_key"`
		}
		do(t, g.base, "", "POST", "/v1/projects/sandbox", `{"name":"other"}`, 201, &other)
		if code, _ := call(t, "GET", g.base+"/v1/messages/"+m.ID+"/attachments/"+m.Attachments[0].ID, other.APIKey, ""); code != 404 {
			t.Fatalf("other project's download: %d, want 404", code)
		}
	})

	t.Run("latin-1", func(t *testing.T) {
		err := sendMail(g.smtp, "jurgen@customer.test", []string{"support@comm.localhost"}, "From: =?iso-8859-1?q?J=FCrgen?= <jurgen@customer.test>\n"+
			"To: support@comm.localhost\nSubject: =?iso-8859-1?q?Gr=FC=DFe?=\nMIME-Version: 1.0\n"+
			"Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nSch=F6ne Gr=FC=DFe\n")
		if err != nil {
			t.Fatal(err)
		}
		m := g.next(t, &cursor, "message.received")
		if m.Subject == nil || *m.Subject != "Grüße" || m.Text != "Schöne Grüße" {
			t.Fatalf("received subject %v text %q", m.Subject, m.Text)
		}
	})

	before := g.events(t, cursor)
	t.Run("unknown recipient", func(t *testing.T) {
		err := sendMail(g.smtp, "ann@customer.test", []string{"nobody@comm.localhost"}, "From: ann@customer.test\n\nhi\n")
		if smtpCode(err) != 550 {
			t.Fatalf("RCPT to an unknown inbox: %v, want 550", err)
		}
	})
	t.Run("oversize", func(t *testing.T) {
		big := "From: ann@customer.test\nTo: support@comm.localhost\nSubject: big\n\n" + strings.Repeat("0123456789abcdef\n", 20000)
		err := sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, big)
		if smtpCode(err) != 552 {
			t.Fatalf("oversize message: %v, want 552", err)
		}
	})
	t.Run("malformed headers", func(t *testing.T) {
		err := sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, "To: support@comm.localhost\nSubject: no from\n\nbody\n")
		if code := smtpCode(err); code != 554 {
			t.Fatalf("message without From: %v, want 554", err)
		}
		err = sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, "From: <<<not an address\nThis is not a header\n\nbody\n")
		if code := smtpCode(err); code != 554 {
			t.Fatalf("message with broken headers: %v, want 554", err)
		}
	})
	// The session still works, and nothing of the refused mail was stored.
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support@comm.localhost"}, "From: ann@customer.test\nSubject: after\n\nstill here\n"); err != nil {
		t.Fatal(err)
	}
	m := g.next(t, &cursor, "message.received")
	if m.Text != "still here" {
		t.Fatalf("after refusals: %+v", m)
	}
	if len(before) != 0 {
		t.Fatalf("events before the refused mail: %d", len(before))
	}
	if evs := g.events(t, cursor); len(evs) != 0 {
		t.Fatalf("refused mail left %d events", len(evs))
	}
}

func TestEmailBetweenInboxesWithoutRelay(t *testing.T) {
	t.Parallel()
	// Sandboxes may send to outside addresses here, so the failure for
	// want of a relay shows.
	g := startGateway(t, "COMM_SANDBOX_OUTBOUND_MAIL=true")
	var a, b struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	}
	g.api(t, "POST", "/v1/connections", `{"channel":"email","config":{"address":"alice"}}`, 201, &a)
	g.api(t, "POST", "/v1/connections", `{"channel":"email"}`, 201, &b)
	if !strings.HasPrefix(b.Address, "inbox-") || !strings.HasSuffix(b.Address, "@comm.localhost") {
		t.Fatalf("generated address %q", b.Address)
	}
	var cursor int64
	var sent mailMessage
	g.api(t, "POST", "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"subject":"Hi","text":"from alice"}`, a.ID, b.Address), 202, &sent)
	got := g.next(t, &cursor, "message.received")
	if got.ConnectionID != b.ID || got.Sender != "alice@comm.localhost" || got.Text != "from alice" {
		t.Fatalf("internal delivery: %+v", got)
	}
	// b answers; the answer lands in a's conversation with b.
	var reply mailMessage
	g.api(t, "POST", "/v1/messages/"+got.ID+"/reply", `{"text":"thanks"}`, 202, &reply)
	back := g.next(t, &cursor, "message.received")
	if back.ConnectionID != a.ID || back.ConversationID != sent.ConversationID || *back.Subject != "Re: Hi" {
		t.Fatalf("answer: %+v, want conversation %s", back, sent.ConversationID)
	}

	// Outside addresses fail clearly without a relay; an unknown local
	// inbox fails too.
	for _, to := range []string{"ann@customer.test", "nobody@comm.localhost"} {
		var m mailMessage
		g.api(t, "POST", "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"x"}`, a.ID, to), 202, &m)
		failed := g.next(t, &cursor, "message.failed")
		if failed.ID != m.ID || failed.Error == nil {
			t.Fatalf("to %s: %+v", to, failed)
		}
		want := "COMM_SMTP_RELAY"
		if strings.HasSuffix(to, "comm.localhost") {
			want = "no inbox"
		}
		if !strings.Contains(*failed.Error, want) {
			t.Fatalf("to %s: error %q does not mention %q", to, *failed.Error, want)
		}
	}
}

func TestEmailRelayThreadingAndCustomDomain(t *testing.T) {
	t.Parallel()
	relay := smtptest.StartRelay(t, smtptest.RelayOptions{})
	dns := dnstest.Start(t)
	g := startGateway(t, "COMM_SMTP_RELAY=smtp://"+relay.Addr, "COMM_DNS_RESOLVER="+dns.Addr,
		"COMM_MAIL_DOMAIN=mail.test", "COMM_MX_HOST=mx.mail.test", "COMM_SPF_INCLUDE=spf.mail.test")
	var cursor int64

	// A custom domain: pending, partial, verified, then the event.
	type record struct {
		Kind     string `json:"kind"`
		Type     string `json:"type"`
		Name     string `json:"name"`
		Value    string `json:"value"`
		Required bool   `json:"required"`
		State    string `json:"state"`
		Zone     string `json:"zone"`
	}
	type domainView struct {
		ID      string   `json:"id"`
		Status  string   `json:"status"`
		Records []record `json:"records"`
	}
	var d domainView
	g.api(t, "POST", "/v1/domains", `{"domain":"Example.COM"}`, 201, &d)
	if d.Status != "pending" || len(d.Records) < 4 {
		t.Fatalf("new domain %+v", d)
	}
	g.api(t, "POST", "/v1/domains", `{"domain":"example.com"}`, 409, nil)
	g.api(t, "POST", "/v1/domains", `{"domain":"not a domain"}`, 400, nil)
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &d)
	for _, r := range d.Records {
		if r.Required && r.State != "missing" {
			t.Fatalf("nothing published, but %s is %s", r.Kind, r.State)
		}
	}
	if _, err := json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	publish := func(kinds ...string) {
		for _, r := range d.Records {
			for _, k := range kinds {
				if r.Kind == k {
					dns.Publish(t, r.Zone)
				}
			}
		}
	}
	var kinds []string
	for _, r := range d.Records {
		if r.Required {
			kinds = append(kinds, r.Kind)
		}
	}
	publish(kinds[0])
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &d)
	if d.Status != "pending" || d.Records[0].State != "found" {
		t.Fatalf("partial: %+v", d)
	}
	publish(kinds[1:]...)
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &d)
	if d.Status != "verified" {
		t.Fatalf("all published: %+v", d)
	}
	var ev []event
	g.api(t, "GET", "/v1/events?type=domain.verified", "", 200, &ev)
	if len(ev) != 1 || !strings.Contains(string(ev[0].Data), d.ID) {
		t.Fatalf("domain.verified events: %+v", ev)
	}
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &d) // again: no second event
	g.api(t, "GET", "/v1/events?type=domain.verified", "", 200, &ev)
	if len(ev) != 1 {
		t.Fatalf("%d domain.verified events after a second verify", len(ev))
	}
	// A record removed later shows on the domain, which stays verified.
	var removed record
	for _, r := range d.Records {
		if r.Kind == "spf" {
			removed = r
		}
	}
	dns.Remove(removed.Name, miekgdns.TypeTXT)
	var later struct {
		domainView
		LastError *string `json:"last_error"`
	}
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &later)
	if later.Status != "verified" || later.LastError == nil || !strings.Contains(*later.LastError, "spf") {
		t.Fatalf("after removing the SPF record: %+v", later)
	}
	dns.Publish(t, removed.Zone)
	g.api(t, "POST", "/v1/domains/"+d.ID+"/verify", "", 200, &later)
	if later.LastError != nil {
		t.Fatalf("records back, but last_error %q", *later.LastError)
	}

	var conn struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	}
	g.api(t, "POST", "/v1/connections", `{"channel":"email","config":{"address":"support@example.com"}}`, 201, &conn)

	// Ann writes; the agent replies through the relay.
	mail1 := "From: Ann <ann@customer.test>\nTo: support@example.com\nSubject: Broken widget\nMessage-ID: <a1@customer.test>\n\nIt broke.\n"
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support@example.com"}, mail1); err != nil {
		t.Fatal(err)
	}
	in1 := g.next(t, &cursor, "message.received")
	var out1 mailMessage
	g.api(t, "POST", "/v1/messages/"+in1.ID+"/reply", `{"text":"Sorry! A new one is on its way.","html":"<p>Sorry!</p>"}`, 202, &out1)
	sent := g.next(t, &cursor, "message.sent")
	if sent.ID != out1.ID {
		t.Fatalf("message.sent for %s, want %s", sent.ID, out1.ID)
	}
	caps := relay.Messages()
	if len(caps) != 1 {
		t.Fatalf("relay captured %d messages", len(caps))
	}
	c := caps[0]
	if c.From != "support@example.com" || len(c.To) != 1 || c.To[0] != "ann@customer.test" {
		t.Fatalf("envelope %s -> %v", c.From, c.To)
	}
	env, err := enmime.ReadEnvelope(bytes.NewReader(c.Data))
	if err != nil {
		t.Fatal(err)
	}
	msgID := strings.Trim(env.GetHeader("Message-Id"), "<>")
	for h, want := range map[string]string{
		"From":        "support@example.com",
		"To":          "ann@customer.test",
		"Subject":     "Re: Broken widget",
		"In-Reply-To": "<a1@customer.test>",
		"References":  "<a1@customer.test>",
		"Reply-To":    "support+" + in1.ConversationID + "@example.com",
	} {
		if got := env.GetHeader(h); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if msgID != strings.ToLower(out1.ID)+"@example.com" {
		t.Errorf("Message-ID %q, want %s@example.com", msgID, out1.ID)
	}
	if env.Text != "Sorry! A new one is on its way." {
		t.Errorf("text %q", env.Text)
	}
	// The DKIM signature verifies against the key published in DNS.
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(c.Data), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			for _, r := range d.Records {
				if strings.EqualFold(r.Name, strings.TrimSuffix(name, ".")) && r.Type == "TXT" {
					return []string{r.Value}, nil
				}
			}
			return nil, fmt.Errorf("no TXT at %s", name)
		},
	})
	if err != nil || len(verifs) != 1 || verifs[0].Err != nil || verifs[0].Domain != "example.com" {
		t.Fatalf("dkim: %v %+v", err, verifs)
	}

	// Ann answers the reply: threaded by In-Reply-To/References.
	mail2 := fmt.Sprintf("From: ann@customer.test\nTo: support@example.com\nSubject: Re: Broken widget\nMessage-ID: <a2@customer.test>\nIn-Reply-To: <%s>\nReferences: <a1@customer.test> <%s>\n\nThanks!\n\n> Sorry! A new one is on its way.\n", msgID, msgID)
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support@example.com"}, mail2); err != nil {
		t.Fatal(err)
	}
	in2 := g.next(t, &cursor, "message.received")
	if in2.ConversationID != in1.ConversationID || in2.Text != "Thanks!" {
		t.Fatalf("second mail: %+v, want conversation %s", in2, in1.ConversationID)
	}
	// The same mail again (an MTA retry): stored once, no event.
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support@example.com"}, mail2); err != nil {
		t.Fatal(err)
	}
	// A mail client that drops the threading headers but answers the
	// Reply-To plus-address.
	mail3 := "From: ann@customer.test\nTo: support+" + in1.ConversationID + "@example.com\nSubject: one more thing\nMessage-ID: <a3@customer.test>\n\nAlso the box was wet.\n"
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support+" + in1.ConversationID + "@example.com"}, mail3); err != nil {
		t.Fatal(err)
	}
	in3 := g.next(t, &cursor, "message.received")
	if in3.ConversationID != in1.ConversationID || in3.Text != "Also the box was wet." {
		t.Fatalf("plus-address mail: %+v", in3)
	}
	var msgs []mailMessage
	g.api(t, "GET", "/v1/conversations/"+in1.ConversationID+"/messages", "", 200, &msgs)
	if len(msgs) != 4 { // a1, reply, a2 (once), a3
		t.Fatalf("conversation holds %d messages, want 4", len(msgs))
	}
	// The second reply carries the whole thread.
	g.api(t, "POST", "/v1/messages/"+in2.ID+"/reply", `{"text":"You are welcome."}`, 202, nil)
	g.next(t, &cursor, "message.sent")
	env2, err := enmime.ReadEnvelope(bytes.NewReader(relay.Messages()[1].Data))
	if err != nil {
		t.Fatal(err)
	}
	if got := env2.GetHeader("References"); got != fmt.Sprintf("<a1@customer.test> <%s> <a2@customer.test>", msgID) {
		t.Errorf("References of the second reply: %q", got)
	}
	// A new mail without references starts a new conversation.
	if err := sendMail(g.smtp, "ann@customer.test", []string{"support@example.com"}, "From: ann@customer.test\nSubject: New topic\nMessage-ID: <b1@customer.test>\n\nHello again\n"); err != nil {
		t.Fatal(err)
	}
	if in4 := g.next(t, &cursor, "message.received"); in4.ConversationID == in1.ConversationID {
		t.Fatal("a new topic joined the old conversation")
	}

	// Relay answers: 4xx is retried (queued, reason shown), 5xx fails.
	var busy, bad mailMessage
	g.api(t, "POST", "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"busy@customer.test","text":"x"}`, conn.ID), 202, &busy)
	g.api(t, "POST", "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":"nobody@customer.test","text":"x"}`, conn.ID), 202, &bad)
	failed := g.next(t, &cursor, "message.failed")
	if failed.ID != bad.ID || failed.Error == nil || !strings.Contains(*failed.Error, "550") {
		t.Fatalf("5xx: %+v", failed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var m mailMessage
		g.api(t, "GET", "/v1/messages/"+busy.ID, "", 200, &m)
		if m.Error != nil && strings.Contains(*m.Error, "451") && m.Status == "queued" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("4xx: %+v", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEmailSTARTTLS: with a certificate configured the listener offers
// STARTTLS, and mail sent over it arrives.
func TestEmailSTARTTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mx.comm.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"mx.comm.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)

	g := startGateway(t, "COMM_SMTP_TLS_CERT="+certFile, "COMM_SMTP_TLS_KEY="+keyFile)
	g.api(t, "POST", "/v1/connections", `{"channel":"email","config":{"address":"secure"}}`, 201, nil)
	var cursor int64
	g.next(t, &cursor, "connection.active")

	c, err := smtp.Dial(g.smtp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("the listener does not offer STARTTLS")
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	if err := c.StartTLS(&tls.Config{RootCAs: pool, ServerName: "mx.comm.test"}); err != nil {
		t.Fatal(err)
	}
	if st, ok := c.TLSConnectionState(); !ok || !st.HandshakeComplete {
		t.Fatal("no TLS after STARTTLS")
	}
	if err := c.Mail("ann@customer.test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("secure@comm.localhost"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "From: ann@customer.test\r\nSubject: over TLS\r\n\r\nencrypted hello\r\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	if m := g.next(t, &cursor, "message.received"); m.Text != "encrypted hello" {
		t.Fatalf("received %+v", m)
	}
}

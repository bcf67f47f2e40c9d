package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	miekgdns "github.com/miekg/dns"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/channels/email/dnstest"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/channels/email/inbound"
	"github.com/comm-gateway/comm/channels/email/outbound"
	"github.com/comm-gateway/comm/channels/email/smtptest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// startSMTP serves the gateway's inbound SMTP listener on a local port, as
// comm serve does, and returns its address.
func (g *gateway) startSMTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mx := &inbound.Server{Domain: "mail.test", Backend: g.Mail.Backend(), MaxMessageBytes: 32 << 20}
	done := make(chan struct{})
	go func() {
		if err := mx.Serve(ln); err != nil && !errors.Is(err, inbound.ErrServerClosed) {
			t.Errorf("smtp serve: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() { mx.Close(); <-done })
	return ln.Addr().String()
}

// smtpSend runs one SMTP session with net/smtp.
func smtpSend(addr, from string, to []string, msg []byte) error {
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
			return fmt.Errorf("RCPT %s: %w", r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// dbBytes is the size of the gateway's database: the pages SQLite uses, or
// the total size of the PostgreSQL schema's tables (with TOAST and indexes).
func (g *gateway) dbBytes(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	if g.DB.IsPostgres() {
		if err := g.DB.R.QueryRowContext(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
			FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = current_schema() AND c.relkind = 'r'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var pages, free, size int64
	for q, v := range map[string]*int64{"PRAGMA page_count": &pages, "PRAGMA freelist_count": &free, "PRAGMA page_size": &size} {
		if err := g.DB.R.QueryRowContext(ctx, q).Scan(v); err != nil {
			t.Fatal(err)
		}
	}
	return (pages - free) * size
}

// getAny fetches path and decodes a 200 answer into v, ignoring fields v
// does not name.
func (g *gateway) getAny(t *testing.T, key, path string, v any) {
	t.Helper()
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %.500s", path, resp.Status, resp.Body)
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// connectEmail connects an email inbox at address (a local part) and wants
// 201.
func (g *gateway) connectEmail(t *testing.T, key, address string) connection {
	t.Helper()
	resp := g.post(t, key, "/v1/connections", fmt.Sprintf(`{"channel":"email","config":{"address":%q}}`, address))
	if resp.Status != http.StatusCreated {
		t.Fatalf("connect email %s: status %d, body %s", address, resp.Status, resp.Body)
	}
	var c connection
	decodeJSON(t, resp.Body, &c)
	return c
}

// TestAttachmentStoredOnce (issue 12, item 6): one mail with a 1 MB
// attachment to 100 inboxes of two projects grows the database by about
// one copy of the attachment, not 100; every inbox's project downloads the
// bytes and a third project gets 404.
func TestAttachmentStoredOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		addr := g.startSMTP(t)
		a, b, c := g.newSandbox(t, "a"), g.newSandbox(t, "b"), g.newSandbox(t, "c")
		var rcpts []string
		owner := map[string]string{}
		for i := range 100 {
			key := a.APIKey
			if i%2 == 1 {
				key = b.APIKey
			}
			conn := g.connectEmail(t, key, fmt.Sprintf("box-%d", i))
			rcpts = append(rcpts, *conn.Address)
			owner[conn.ID] = key
		}
		data := make([]byte, 1<<20) // random: neither database compresses it
		rand.Read(data)
		raw := mimeMessage("box-0@mail.test", "big-1@example.org", "One attachment, 100 inboxes",
			mailAttachment{filename: "big.bin", contentType: "application/octet-stream", data: data})
		before := g.dbBytes(t)
		if err := smtpSend(addr, "alice@example.org", rcpts, raw); err != nil {
			t.Fatalf("send: %v", err)
		}
		grew := g.dbBytes(t) - before
		t.Logf("a %d-byte mail with a %d-byte attachment to %d inboxes grew the database by %d bytes (%.2f MB)",
			len(raw), len(data), len(rcpts), grew, float64(grew)/1e6)
		if grew > 3*int64(len(data)) {
			t.Errorf("the database grew by %d bytes for one %d-byte attachment", grew, len(data))
		}

		// Every inbox's project downloads it; the third project cannot.
		var msgs []message
		for _, key := range []string{a.APIKey, b.APIKey} {
			for _, ev := range g.events(t, key, "type=message.received&limit=100") {
				var d struct {
					Message message `json:"message"`
				}
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, d.Message)
			}
		}
		if len(msgs) != 100 {
			t.Fatalf("%d messages stored, want 100", len(msgs))
		}
		for _, m := range msgs {
			var full struct {
				Attachments []attachmentREST `json:"attachments"`
			}
			key := owner[m.ConnectionID]
			g.getAny(t, key, "/v1/messages/"+m.ID, &full)
			if len(full.Attachments) != 1 || full.Attachments[0].Size != int64(len(data)) {
				t.Fatalf("message %s attachments %+v", m.ID, full.Attachments)
			}
			url := "/v1/messages/" + m.ID + "/attachments/" + full.Attachments[0].ID
			resp := g.do(t, request{Path: url, Key: key})
			if resp.Status != http.StatusOK || !bytes.Equal(resp.Body, data) {
				t.Fatalf("GET %s: status %d, %d bytes", url, resp.Status, len(resp.Body))
			}
			wantError(t, g.do(t, request{Path: url, Key: c.APIKey}), http.StatusNotFound, "not_found", "")
		}
	})
}

// TestLargeEmailEvent (issue 12, item 4, the envelope): a 3.9 MB email's
// message.received event stays small: text and html cut to the cap with
// "truncated": true, never details.full_text; GET /v1/messages/{id}
// returns the whole text.
func TestLargeEmailEvent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		addr := g.startSMTP(t)
		a := g.newSandbox(t, "large")
		conn := g.connectEmail(t, a.APIKey, "large")
		// A new line of body, then a quoted history, so the text and the
		// full text differ and both are large; and an HTML part.
		line := "Ünïcödé text of a very long mail, line after line. "
		body := strings.Repeat(line, 1_300_000/len(line))
		quoted := strings.Repeat("> "+line+"\r\n", 1_300_000/len(line))
		html := "<p>" + strings.Repeat(line, 1_300_000/len(line)) + "</p>"
		var m bytes.Buffer
		fmt.Fprintf(&m, "From: Alice <alice@example.org>\r\nTo: %s\r\nSubject: large\r\nMessage-ID: <large-1@example.org>\r\n", *conn.Address)
		m.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"b\"\r\n\r\n")
		m.WriteString("--b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
		m.WriteString(wrap(body) + "\r\nOn Mon, Alice wrote:\r\n" + quoted)
		m.WriteString("--b\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
		m.WriteString(wrap(html) + "\r\n--b--\r\n")
		t.Logf("mail of %d bytes", m.Len())
		if err := smtpSend(addr, "alice@example.org", []string{*conn.Address}, m.Bytes()); err != nil {
			t.Fatalf("send: %v", err)
		}
		resp := g.do(t, request{Path: "/v1/events?type=message.received", Key: a.APIKey})
		if resp.Status != http.StatusOK {
			t.Fatalf("events: %d %s", resp.Status, resp.Body)
		}
		var evs []event
		decodeJSON(t, resp.Body, &evs)
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		t.Logf("the event of a %d-byte mail is %d bytes; the page %d bytes", m.Len(), len(evs[0].Data), len(resp.Body))
		if len(evs[0].Data) > 200<<10 {
			t.Errorf("event of %d bytes", len(evs[0].Data))
		}
		var ev struct {
			Message struct {
				ID        string          `json:"id"`
				Text      string          `json:"text"`
				HTML      *string         `json:"html"`
				Truncated bool            `json:"truncated"`
				Details   json.RawMessage `json:"details"`
			} `json:"message"`
		}
		if err := json.Unmarshal(evs[0].Data, &ev); err != nil {
			t.Fatal(err)
		}
		em := ev.Message
		if !em.Truncated || len(em.Text) == 0 || len(em.Text) > 64<<10 || em.HTML == nil || len(*em.HTML) > 64<<10 {
			t.Errorf("event message: truncated %v, text %d bytes, html %v", em.Truncated, len(em.Text), em.HTML != nil)
		}
		if !strings.HasPrefix(em.Text, line) || !utf8Valid(em.Text) || !utf8Valid(*em.HTML) {
			t.Errorf("event text is not the start of the body, or not valid UTF-8")
		}
		if bytes.Contains(em.Details, []byte("full_text")) || len(em.Details) == 0 {
			t.Errorf("event details %s", em.Details)
		}
		// Nine more such mails: the page of ten, as the issue measured it.
		for i := 2; i <= 10; i++ {
			next := bytes.Replace(m.Bytes(), []byte("<large-1@example.org>"), fmt.Appendf(nil, "<large-%d@example.org>", i), 1)
			if err := smtpSend(addr, "alice@example.org", []string{*conn.Address}, next); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		page := g.do(t, request{Path: "/v1/events?limit=100", Key: a.APIKey})
		t.Logf("GET /v1/events?limit=100 after ten %d-byte mails: %d bytes", m.Len(), len(page.Body))
		if len(page.Body) > 10*(200<<10) {
			t.Errorf("a page of ten such events is %d bytes", len(page.Body))
		}
		// Markup and control characters take six bytes each in the JSON
		// (\u003c ...): the cap counts the encoded bytes.
		var h bytes.Buffer
		fmt.Fprintf(&h, "From: alice@example.org\r\nTo: %s\r\nSubject: markup\r\nMessage-ID: <markup-1@example.org>\r\n", *conn.Address)
		h.WriteString("MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
		h.WriteString(wrap(strings.Repeat("<i>&amp;</i> <b>&lt;&gt;</b> ", 20_000)) + "\r\n")
		if err := smtpSend(addr, "alice@example.org", []string{*conn.Address}, h.Bytes()); err != nil {
			t.Fatal(err)
		}
		evs = g.events(t, a.APIKey, "type=message.received&after_seq="+fmt.Sprint(evs[0].Seq)+"&limit=100")
		last := evs[len(evs)-1]
		t.Logf("the event of a %d-byte mail of markup is %d bytes", h.Len(), len(last.Data))
		if len(last.Data) > 200<<10 || !strings.Contains(string(last.Data), `"truncated":true`) {
			t.Errorf("markup event of %d bytes", len(last.Data))
		}
		var full struct {
			Text    string  `json:"text"`
			HTML    *string `json:"html"`
			Details struct {
				FullText string `json:"full_text"`
			} `json:"details"`
		}
		g.getAny(t, a.APIKey, "/v1/messages/"+em.ID, &full)
		if len(full.Text) < len(body)-10 || full.HTML == nil || len(*full.HTML) < len(html)-10 ||
			len(full.Details.FullText) < len(body)+len(quoted)/2 {
			t.Errorf("GET message: text %d bytes (body %d), html %v, full text %d bytes",
				len(full.Text), len(body), full.HTML != nil, len(full.Details.FullText))
		}
	})
}

// wrap breaks s into lines of at most 900 bytes (SMTP allows 1000),
// between words.
func wrap(s string) string {
	var b strings.Builder
	for len(s) > 900 {
		i := strings.LastIndexByte(s[:900], ' ')
		b.WriteString(s[:i])
		b.WriteString("\r\n")
		s = s[i+1:]
	}
	b.WriteString(s)
	return b.String()
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }

// startEmailGatewayWith is startEmailGateway with more messaging options
// (a clock, mail settings); the DNS resolver answers nothing unless set.
func startEmailGatewayWith(t *testing.T, cfg store.Config, opts messaging.Options, mail mailhost.Options) *gateway {
	t.Helper()
	if mail.Resolver == nil {
		mail.Resolver = domain.NewResolver("127.0.0.1:1")
	}
	return startGateway(t, cfg, setup{outbox: true, email: true, svc: opts, mail: mail})
}

// TestRoleAddresses (issue 12, item 7): role addresses on the gateway's
// mail domain are refused with 409 naming config.address; a deleted
// inbox's address is held back from other projects for the quarantine
// period, while its own project may take it back at once.
func TestRoleAddresses(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		clk := &clock{}
		g := startEmailGatewayWith(t, cfg, messaging.Options{Now: clk.now}, mailhost.Options{AddressQuarantine: 48 * time.Hour})
		a, b := g.newSandbox(t, "a"), g.newSandbox(t, "b")
		for _, local := range []string{"postmaster", "Abuse", "admin", "administrator", "hostmaster", "webmaster",
			"root", "mailer-daemon", "noreply", "no-reply", "security", "ssl-admin", "postmaster@mail.test"} {
			resp := g.post(t, a.APIKey, "/v1/connections", fmt.Sprintf(`{"channel":"email","config":{"address":%q}}`, local))
			e := wantError(t, resp, http.StatusConflict, "conflict", "config.address")
			if !strings.Contains(e.Error.Message, "reserved") {
				t.Errorf("%s: %s", local, e.Error.Message)
			}
		}
		// GraphQL answers the same.
		res := g.gql(t, a.APIKey, `mutation { connect(input: {channel: "email", config: {address: "hostmaster"}}) { id } }`, nil)
		gqlFail(t, res, "connect", "conflict", "config.address")
		// Ordinary names are free.
		g.connectEmail(t, a.APIKey, "support")

		// Quarantine.
		c := g.connectEmail(t, a.APIKey, "desk")
		if resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + c.ID, Key: a.APIKey}); resp.Status != http.StatusNoContent && resp.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		resp := g.post(t, b.APIKey, "/v1/connections", `{"channel":"email","config":{"address":"desk"}}`)
		if e := wantError(t, resp, http.StatusConflict, "conflict", "config.address"); !strings.Contains(e.Error.Message, "released recently") {
			t.Errorf("quarantine: %s", e.Error.Message)
		}
		// Its own project takes it back, and releases it again.
		c = g.connectEmail(t, a.APIKey, "desk")
		g.do(t, request{Method: http.MethodDelete, Path: "/v1/connections/" + c.ID, Key: a.APIKey})
		clk.advance(47 * time.Hour)
		wantError(t, g.post(t, b.APIKey, "/v1/connections", `{"channel":"email","config":{"address":"desk"}}`),
			http.StatusConflict, "conflict", "config.address")
		clk.advance(2 * time.Hour)
		if got := g.connectEmail(t, b.APIKey, "desk"); *got.Address != "desk@mail.test" {
			t.Errorf("after the quarantine: %v", got.Address)
		}
	})
}

// TestSandboxOutboundMail (issue 12, item 8): a sandbox key cannot send
// mail from the gateway's mail domain to an outside address (403, naming
// "to"), but may answer (and write to) people who wrote to the inbox, and
// write to inboxes of the gateway without limit; mail to outside addresses
// has an hourly budget per project by the key's kind (429 with
// Retry-After); a signed-in key may send to anyone.
func TestSandboxOutboundMail(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGatewayWith(t, cfg, messaging.Options{}, mailhost.Options{SandboxMailPerHour: 3, SignedInMailPerHour: 5})
		addr := g.startSMTP(t)
		a, b := g.newSandbox(t, "a"), g.newSandbox(t, "b")
		desk := g.connectEmail(t, a.APIKey, "desk")
		other := g.connectEmail(t, b.APIKey, "other")
		send := func(key, connID, to string) response {
			return g.post(t, key, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"hello"}`, connID, to))
		}

		e := wantError(t, send(a.APIKey, desk.ID, "stranger@example.org"), http.StatusForbidden, "forbidden", "to")
		if !strings.Contains(e.Error.Message, "signed-in key") {
			t.Errorf("403 message: %s", e.Error.Message)
		}
		res := g.gql(t, a.APIKey, `mutation($c: ID!) { send(input: {connectionID: $c, to: "stranger@example.org", text: "x"}) { id } }`,
			map[string]any{"c": desk.ID})
		gqlFail(t, res, "send", "forbidden", "to")

		// Ann writes; the sandbox answers her and writes to her again.
		if err := smtpSend(addr, "ann@example.org", []string{*desk.Address},
			[]byte("From: Ann <ann@example.org>\r\nSubject: hi\r\nMessage-ID: <ann-1@example.org>\r\n\r\nHello\r\n")); err != nil {
			t.Fatal(err)
		}
		evs := g.events(t, a.APIKey, "type=message.received")
		var in struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(evs[len(evs)-1].Data, &in); err != nil {
			t.Fatal(err)
		}
		g.queue(t, a.APIKey, "/v1/messages/"+in.Message.ID+"/reply", `{"text":"thanks"}`)
		if resp := send(a.APIKey, desk.ID, "Ann <ANN@example.org>"); resp.Status != http.StatusAccepted {
			t.Fatalf("send to a writer: %d %s", resp.Status, resp.Body)
		}
		// Inboxes of the gateway are free, beyond any budget.
		for range 5 {
			if resp := send(a.APIKey, desk.ID, *other.Address); resp.Status != http.StatusAccepted {
				t.Fatalf("send to an inbox of the gateway: %d %s", resp.Status, resp.Body)
			}
		}
		// The third outside mail of the hour is the sandbox's last.
		if resp := send(a.APIKey, desk.ID, "ann@example.org"); resp.Status != http.StatusAccepted {
			t.Fatalf("third send: %d %s", resp.Status, resp.Body)
		}
		resp := send(a.APIKey, desk.ID, "ann@example.org")
		wantError(t, resp, http.StatusTooManyRequests, "rate_limited", "")
		if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("429 with Retry-After %q", ra)
		}
		wantError(t, g.post(t, a.APIKey, "/v1/messages/"+in.Message.ID+"/reply", `{"text":"again"}`),
			http.StatusTooManyRequests, "rate_limited", "")

		// A signed-in key sends to anyone, within its own budget.
		c := g.newSandbox(t, "c")
		cDesk := g.connectEmail(t, c.APIKey, "c-desk")
		signed := g.signIn(t, c, account.Identity{Issuer: "i", Subject: "mail-sender", Email: "s@example.org"})
		wantError(t, send(c.APIKey, cDesk.ID, "stranger@example.org"), http.StatusForbidden, "forbidden", "to")
		for i := range 5 {
			if resp := send(signed, cDesk.ID, fmt.Sprintf("stranger%d@example.org", i)); resp.Status != http.StatusAccepted {
				t.Fatalf("signed-in send %d: %d %s", i, resp.Status, resp.Body)
			}
		}
		wantError(t, send(signed, cDesk.ID, "stranger@example.org"), http.StatusTooManyRequests, "rate_limited", "")
	})
}

// addVerifiedDomain adds name to the project of key, publishes its
// required records on dns and verifies it.
func (g *gateway) addVerifiedDomain(t *testing.T, dns *dnstest.Server, key, name string) domainREST {
	t.Helper()
	resp := g.post(t, key, "/v1/domains", fmt.Sprintf(`{"domain":%q}`, name))
	if resp.Status != http.StatusCreated {
		t.Fatalf("add domain: %d %s", resp.Status, resp.Body)
	}
	var d domainREST
	decodeJSON(t, resp.Body, &d)
	for _, r := range d.Records {
		if r.Required {
			typ := miekgdns.TypeTXT
			if r.Type == "MX" {
				typ = miekgdns.TypeMX
			}
			dns.Remove(r.Name, typ) // what an earlier owner published
			dns.Publish(t, r.Zone)
		}
	}
	resp = g.post(t, key, "/v1/domains/"+d.ID+"/verify", "")
	decodeJSON(t, resp.Body, &d)
	if resp.Status != http.StatusOK || d.Status != "verified" {
		t.Fatalf("verify: %d %+v", resp.Status, d)
	}
	return d
}

// TestDomainTakenBack (issue 12, item 10): a verified domain whose
// ownership record stays missing past the grace period is unverified
// (domain.unverified; no signing or sending, no new inboxes) and verified
// again when the record is back; deleting a domain retires its inboxes
// (mail to them is refused with 550) and the next owner takes the domain
// and its addresses.
func TestDomainTakenBack(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		dns := dnstest.Start(t)
		clk := &clock{}
		g := startEmailGatewayWith(t, cfg, messaging.Options{Now: clk.now}, mailhost.Options{
			Resolver: domain.NewResolver(dns.Addr), Plan: domain.PlanConfig{MXHost: "mx.mail.test", SPFInclude: "spf.mail.test"},
			OwnershipGrace: 72 * time.Hour})
		addr := g.startSMTP(t)
		ctx := context.Background()
		a, b := g.newSandbox(t, "first owner"), g.newSandbox(t, "next owner")
		d := g.addVerifiedDomain(t, dns, a.APIKey, "example.com")
		support := g.connectEmail(t, a.APIKey, "support@example.com")
		local := g.connectEmail(t, a.APIKey, "local")
		hello := []byte("From: ann@example.org\r\nSubject: hi\r\nMessage-ID: <m1@example.org>\r\n\r\nHello\r\n")
		if err := smtpSend(addr, "ann@example.org", []string{"support@example.com"}, hello); err != nil {
			t.Fatalf("mail to the custom domain: %v", err)
		}

		// The ownership record goes; the first re-check notices, and the
		// grace runs from then.
		dns.Remove("_comm-verify.example.com", miekgdns.TypeTXT)
		get := func() domainREST {
			var v domainREST
			g.getAny(t, a.APIKey, "/v1/domains/"+d.ID, &v)
			return v
		}
		for i := range 4 {
			clk.advance(25 * time.Hour)
			if _, err := g.Mail.VerifyPending(ctx, 10*time.Minute, 20); err != nil {
				t.Fatal(err)
			}
			want := "verified"
			if i == 3 {
				want = "unverified"
			}
			if v := get(); v.Status != want || v.LastError == nil {
				t.Fatalf("after %d h: status %s, last error %v", 25*(i+1), v.Status, v.LastError)
			}
		}
		if evs := g.events(t, a.APIKey, "type=domain.unverified"); len(evs) != 1 || !strings.Contains(string(evs[0].Data), d.ID) {
			t.Fatalf("domain.unverified events: %+v", evs)
		}
		// No new inboxes, no more mail from it.
		resp := g.post(t, a.APIKey, "/v1/connections", `{"channel":"email","config":{"address":"sales@example.com"}}`)
		if e := wantError(t, resp, http.StatusBadRequest, "invalid_parameter", "config"); !strings.Contains(e.Error.Message, "not a verified domain") {
			t.Errorf("new inbox on an unverified domain: %s", e.Error.Message)
		}
		out := g.queue(t, a.APIKey, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"x"}`, support.ID, *local.Address))
		failed := g.waitMessage(t, a.APIKey, out.ID, "failed", func(m message) bool { return m.Status == "failed" })
		if failed.Error == nil || !strings.Contains(*failed.Error, "no longer a verified domain") {
			t.Errorf("send from an unverified domain: %+v", failed)
		}
		// The record is back: verified again.
		for _, r := range d.Records {
			if r.Kind == "ownership" {
				dns.Publish(t, r.Zone)
			}
		}
		clk.advance(11 * time.Minute)
		if _, err := g.Mail.VerifyPending(ctx, 10*time.Minute, 20); err != nil {
			t.Fatal(err)
		}
		if v := get(); v.Status != "verified" {
			t.Fatalf("record back: %+v", v)
		}
		if evs := g.events(t, a.APIKey, "type=domain.verified"); len(evs) != 2 {
			t.Fatalf("%d domain.verified events", len(evs))
		}

		// Deleting the domain retires its inboxes; the next owner takes it.
		if resp := g.do(t, request{Method: http.MethodDelete, Path: "/v1/domains/" + d.ID, Key: a.APIKey}); resp.Status != http.StatusNoContent {
			t.Fatalf("delete domain: %d %s", resp.Status, resp.Body)
		}
		wantError(t, g.do(t, request{Path: "/v1/connections/" + support.ID, Key: a.APIKey}), http.StatusNotFound, "not_found", "")
		g.getAny(t, a.APIKey, "/v1/connections/"+local.ID, &connection{}) // other inboxes stay
		err := smtpSend(addr, "ann@example.org", []string{"support@example.com"}, hello)
		var te *textproto.Error
		if !errors.As(err, &te) || te.Code != 550 {
			t.Fatalf("mail to a retired inbox: %v", err)
		}
		g.addVerifiedDomain(t, dns, b.APIKey, "example.com")
		if c := g.connectEmail(t, b.APIKey, "support@example.com"); *c.Address != "support@example.com" {
			t.Fatalf("next owner's inbox %v", c.Address)
		}
		if err := smtpSend(addr, "ann@example.org", []string{"support@example.com"}, hello); err != nil {
			t.Fatalf("mail to the next owner: %v", err)
		}
		if evs := g.events(t, b.APIKey, "type=message.received"); len(evs) != 1 {
			t.Fatalf("next owner received %d messages", len(evs))
		}
	})
}

// TestMailHeaderSanitised (issue 12, item 12): an inbound subject and name
// with encoded CR/LF are stored as one line, and answers to them (and to a
// subject stored with CR/LF before this fix) are sent, not failed.
func TestMailHeaderSanitised(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		addr := g.startSMTP(t)
		a, b := g.newSandbox(t, "a"), g.newSandbox(t, "b")
		desk := g.connectEmail(t, a.APIKey, "desk")
		writer := g.connectEmail(t, b.APIKey, "writer")
		// "a\r\nBcc: victim@example.org" and a name with a line break.
		raw := fmt.Sprintf("From: =?UTF-8?B?%s?= <%s>\r\nTo: %s\r\nSubject: =?UTF-8?B?%s?=\r\nMessage-ID: <crlf-1@mail.test>\r\n\r\nhello\r\n",
			base64.StdEncoding.EncodeToString([]byte("Eve\r\nBcc: x@example.org")), *writer.Address, *desk.Address,
			base64.StdEncoding.EncodeToString([]byte("a\r\nBcc: victim@example.org")))
		if err := smtpSend(addr, *writer.Address, []string{*desk.Address}, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		var in struct {
			Message struct {
				ID      string  `json:"id"`
				Subject *string `json:"subject"`
				Details struct {
					FromName string `json:"from_name"`
				} `json:"details"`
			} `json:"message"`
		}
		evs := g.events(t, a.APIKey, "type=message.received")
		if err := json.Unmarshal(evs[0].Data, &in); err != nil {
			t.Fatal(err)
		}
		if s := in.Message.Subject; s == nil || *s != "a Bcc: victim@example.org" || in.Message.Details.FromName != "Eve Bcc: x@example.org" {
			t.Fatalf("stored subject %q, name %q", *s, in.Message.Details.FromName)
		}
		out := g.queue(t, a.APIKey, "/v1/messages/"+in.Message.ID+"/reply", `{"text":"answer"}`)
		if m := g.waitMessage(t, a.APIKey, out.ID, "sent", func(m message) bool { return m.Status != "queued" && m.Status != "sending" }); m.Status != "sent" {
			t.Fatalf("reply: %+v (error %v)", m, m.Error)
		}
		// A subject stored with CR/LF (before this fix) is answered too.
		if _, err := g.DB.W.Exec(g.DB.Rebind("UPDATE messages SET subject = ? WHERE id = ?"), "b\r\nBcc: victim@example.org", in.Message.ID); err != nil {
			t.Fatal(err)
		}
		out = g.queue(t, a.APIKey, "/v1/messages/"+in.Message.ID+"/reply", `{"text":"again"}`)
		if m := g.waitMessage(t, a.APIKey, out.ID, "sent", func(m message) bool { return m.Status != "queued" && m.Status != "sending" }); m.Status != "sent" {
			t.Fatalf("reply to a stored CR/LF subject: %+v (error %v)", m, *m.Error)
		}
		var got []struct {
			Message struct {
				Subject *string `json:"subject"`
			} `json:"message"`
		}
		for _, ev := range g.events(t, b.APIKey, "type=message.received") {
			var e struct {
				Message struct {
					Subject *string `json:"subject"`
				} `json:"message"`
			}
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
		if len(got) != 2 || *got[1].Message.Subject != "Re: b Bcc: victim@example.org" {
			t.Fatalf("the writer received %+v", got)
		}
	})
}

// TestRelayErrorNeutral (issue 12, item 12): a relay failure shown on a
// message names no relay host, port or address; the operator's log has it.
func TestRelayErrorNeutral(t *testing.T) {
	t.Parallel()
	relay := smtptest.StartRelay(t, smtptest.RelayOptions{})
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close() // nothing answers here
	for _, tc := range []struct {
		name, relay, to, status, want string
	}{
		{"refused recipient", relay.Addr, "nobody@customer.test", "failed", "550"},
		{"relay down", downAddr, "ann@customer.test", "queued", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := outbound.ParseRelay("smtp://" + tc.relay)
			if err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, storetest.SQLite(t), setup{outbox: true, email: true, relay: r,
				mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1"), SandboxOutbound: true}})
			a := g.newSandbox(t, "a")
			desk := g.connectEmail(t, a.APIKey, "desk")
			out := g.queue(t, a.APIKey, "/v1/messages", fmt.Sprintf(`{"connection_id":%q,"to":%q,"text":"x"}`, desk.ID, tc.to))
			m := g.waitMessage(t, a.APIKey, out.ID, tc.status, func(m message) bool { return m.Error != nil })
			host, port, _ := net.SplitHostPort(tc.relay)
			if m.Status != tc.status || !strings.Contains(*m.Error, tc.want) || !strings.Contains(*m.Error, "the mail relay") ||
				strings.Contains(*m.Error, host) || strings.Contains(*m.Error, ":"+port) {
				t.Errorf("status %s, error %q", m.Status, *m.Error)
			}
		})
	}
}

// TestAttachmentInlineRows: attachment rows written before blobs existed
// (bytes inline, no blob_id) still download, after the schema upgrade.
func TestAttachmentInlineRows(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		a, b := g.newSandbox(t, "a"), g.newSandbox(t, "b")
		desk := g.connectEmail(t, a.APIKey, "desk")
		data := []byte("%PDF-1.4 an invoice from before blobs")
		raw := mimeMessage(*desk.Address, "old-1@example.org", "Old", mailAttachment{filename: "old.pdf", contentType: "application/pdf", data: data})
		if ok, err := g.Mail.DeliverLocal(context.Background(), "alice@example.org", *desk.Address, raw); err != nil || !ok {
			t.Fatalf("DeliverLocal: %v %v", ok, err)
		}
		// Make the row what an older gateway wrote: the bytes inline.
		for _, q := range []string{
			"UPDATE attachments SET data = (SELECT data FROM blobs WHERE blobs.id = attachments.blob_id), blob_id = NULL",
			"DELETE FROM blobs",
		} {
			if _, err := g.DB.W.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		evs := g.events(t, a.APIKey, "type=message.received")
		var in struct {
			Message struct {
				ID          string           `json:"id"`
				Attachments []attachmentREST `json:"attachments"`
			} `json:"message"`
		}
		if err := json.Unmarshal(evs[0].Data, &in); err != nil || len(in.Message.Attachments) != 1 {
			t.Fatalf("event %s: %v", evs[0].Data, err)
		}
		url := "/v1/messages/" + in.Message.ID + "/attachments/" + in.Message.Attachments[0].ID
		if resp := g.do(t, request{Path: url, Key: a.APIKey}); resp.Status != http.StatusOK || !bytes.Equal(resp.Body, data) {
			t.Fatalf("GET %s: %d %q", url, resp.Status, resp.Body)
		}
		wantError(t, g.do(t, request{Path: url, Key: b.APIKey}), http.StatusNotFound, "not_found", "")
	})
}

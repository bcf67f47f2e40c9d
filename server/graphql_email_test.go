package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// The fields the email tests select: all of them.
const (
	gqlDomainFields = `id domain inboundDomain status lastError checkedAt verifiedAt createdAt
		records { kind type name value priority required purpose state seen detail zone }`
	gqlAttachmentFields = `id filename contentType size inline contentID url`
)

// gqlDomain is a Domain as GraphQL shows it.
type gqlDomain struct {
	ID            string            `json:"id"`
	Domain        string            `json:"domain"`
	InboundDomain *string           `json:"inboundDomain"`
	Status        string            `json:"status"`
	Records       []gqlDomainRecord `json:"records"`
	LastError     *string           `json:"lastError"`
	CheckedAt     *time.Time        `json:"checkedAt"`
	VerifiedAt    *time.Time        `json:"verifiedAt"`
	CreatedAt     time.Time         `json:"createdAt"`
}

// gqlDomainRecord is a DomainRecord as GraphQL shows it.
type gqlDomainRecord struct {
	Kind     string   `json:"kind"`
	Type     string   `json:"type"`
	Name     string   `json:"name"`
	Value    string   `json:"value"`
	Priority *int     `json:"priority"`
	Required bool     `json:"required"`
	Purpose  string   `json:"purpose"`
	State    string   `json:"state"`
	Seen     []string `json:"seen"`
	Detail   *string  `json:"detail"`
	Zone     string   `json:"zone"`
}

// domainREST is a domain as REST shows it.
type domainREST = api.Domain

// domainRecordREST is a domain record as REST shows it.
type domainRecordREST = api.DomainRecord

// rest is the domain in the REST API's shape.
func (d gqlDomain) rest() domainREST {
	out := domainREST{ID: d.ID, Domain: d.Domain, InboundDomain: d.InboundDomain, Status: d.Status,
		LastError: d.LastError, CheckedAt: d.CheckedAt, VerifiedAt: d.VerifiedAt, CreatedAt: d.CreatedAt}
	for _, r := range d.Records {
		rr := domainRecordREST{Kind: r.Kind, Type: r.Type, Name: r.Name, Value: r.Value, Required: r.Required,
			Purpose: r.Purpose, State: r.State, Zone: r.Zone}
		if r.Priority != nil {
			rr.Priority = *r.Priority
		}
		if len(r.Seen) > 0 {
			rr.Seen = r.Seen
		}
		if r.Detail != nil {
			rr.Detail = *r.Detail
		}
		out.Records = append(out.Records, rr)
	}
	return out
}

// gqlAttachment is an Attachment as GraphQL shows it.
type gqlAttachment struct {
	ID          string  `json:"id"`
	Filename    string  `json:"filename"`
	ContentType string  `json:"contentType"`
	Size        int64   `json:"size"`
	Inline      bool    `json:"inline"`
	ContentID   *string `json:"contentID"`
	URL         string  `json:"url"`
}

// attachmentREST is an attachment as REST lists it on a message.
type attachmentREST = api.AttachmentInfo

// gqlMailMessage is the email side of a Message as GraphQL shows it.
type gqlMailMessage struct {
	ID          string          `json:"id"`
	Channel     string          `json:"channel"`
	Attachments []gqlAttachment `json:"attachments"`
	Details     json.RawMessage `json:"details"`
}

// startEmailGateway is start with the email channel bound to the service
// (inboxes on mail.test), as cmd/comm wires it, and a DNS resolver that
// fails at once (nothing answers on 127.0.0.1:1): domain verification
// finds nothing.
func startEmailGateway(t *testing.T, cfg store.Config) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{outbox: true, email: true,
		mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1")}})
}

// mailAttachment is a part of a test email.
type mailAttachment struct {
	filename, contentType, contentID string
	inline                           bool
	data                             []byte
}

// mimeMessage is an email from alice@example.org to rcpt with a text and
// an HTML body and the given parts: attachments in multipart/mixed,
// inline parts in multipart/related beside the HTML.
func mimeMessage(rcpt, messageID, subject string, parts ...mailAttachment) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\r\n", args...) }
	b64 := func(data []byte) {
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 76 {
			w("%s", enc[:76])
			enc = enc[76:]
		}
		w("%s", enc)
	}
	w("From: Alice Example <alice@example.org>")
	w("To: <%s>", rcpt)
	w("Subject: %s", subject)
	w("Message-ID: <%s>", messageID)
	w("Date: Mon, 02 Jun 2025 10:00:00 +0000")
	w("MIME-Version: 1.0")
	w(`Content-Type: multipart/mixed; boundary="mixed"`)
	w("")
	w("--mixed")
	w(`Content-Type: multipart/alternative; boundary="alt"`)
	w("")
	w("--alt")
	w("Content-Type: text/plain; charset=utf-8")
	w("")
	w("The invoice is attached.")
	w("--alt")
	w(`Content-Type: multipart/related; boundary="rel"`)
	w("")
	w("--rel")
	w("Content-Type: text/html; charset=utf-8")
	w("")
	w(`<p>The invoice is attached.</p>`)
	for _, p := range parts {
		if !p.inline {
			continue
		}
		w("--rel")
		w("Content-Type: %s", p.contentType)
		w("Content-Transfer-Encoding: base64")
		w("Content-ID: <%s>", p.contentID)
		w(`Content-Disposition: inline; filename="%s"`, p.filename)
		w("")
		b64(p.data)
	}
	w("--rel--")
	w("--alt--")
	for _, p := range parts {
		if p.inline {
			continue
		}
		w("--mixed")
		w(`Content-Type: %s; name="%s"`, p.contentType, p.filename)
		w("Content-Transfer-Encoding: base64")
		w(`Content-Disposition: attachment; filename="%s"`, p.filename)
		w("")
		b64(p.data)
	}
	w("--mixed--")
	return b.Bytes()
}

// TestGraphQLDomains: addDomain, domains, domain, verifyDomain and
// deleteDomain, each answer checked against REST, with their errors and
// the tenant boundary.
func TestGraphQLDomains(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		a := g.newSandbox(t, "domains a")
		b := g.newSandbox(t, "domains b")

		var added struct {
			AddDomain gqlDomain `json:"addDomain"`
		}
		g.gqlOK(t, a.APIKey, `mutation($d: String!) { addDomain(domain: $d) { `+gqlDomainFields+` } }`,
			map[string]any{"d": "Example.COM"}, &added)
		d := added.AddDomain
		if err := ident.Check(d.ID, ident.Domain); err != nil {
			t.Errorf("addDomain: id %q: %v", d.ID, err)
		}
		if d.Domain != "example.com" || d.Status != "pending" || d.LastError != nil || d.CheckedAt != nil ||
			d.VerifiedAt != nil || d.InboundDomain == nil || *d.InboundDomain != "example.com" || d.CreatedAt.IsZero() {
			t.Errorf("addDomain answered %+v", d)
		}
		var kinds []string
		for _, r := range d.Records {
			kinds = append(kinds, r.Kind)
			if r.State != "pending" || r.Seen == nil || len(r.Seen) != 0 || r.Detail != nil || r.Name == "" ||
				r.Value == "" || r.Purpose == "" || !strings.Contains(r.Zone, r.Name) {
				t.Errorf("record of a new domain: %+v", r)
			}
			switch r.Type {
			case "MX":
				if r.Priority == nil || *r.Priority <= 0 || r.Name != "example.com" || r.Value != "mx.mail.test" {
					t.Errorf("MX record %+v", r)
				}
			case "TXT":
				if r.Priority != nil {
					t.Errorf("TXT record with a priority: %+v", r)
				}
			default:
				t.Errorf("record of type %q: %+v", r.Type, r)
			}
		}
		for _, k := range []string{"ownership", "spf", "dkim", "dmarc", "mx"} {
			if !slices.Contains(kinds, k) {
				t.Errorf("records %v: no %s record", kinds, k)
			}
		}
		var rd domainREST
		g.get(t, a.APIKey, "/v1/domains/"+d.ID, &rd)
		if !same(d.rest(), rd) {
			t.Errorf("domain through GraphQL %+v, through REST %+v", d.rest(), rd)
		}

		// A second domain, for paging.
		var second struct {
			AddDomain gqlDomain `json:"addDomain"`
		}
		g.gqlOK(t, a.APIKey, `mutation { addDomain(domain: "example.net") { `+gqlDomainFields+` } }`, nil, &second)

		var list struct {
			Domains []gqlDomain `json:"domains"`
		}
		g.gqlOK(t, a.APIKey, `{ domains { `+gqlDomainFields+` } }`, nil, &list)
		if len(list.Domains) != 2 || list.Domains[0].ID != d.ID || list.Domains[1].ID != second.AddDomain.ID {
			t.Fatalf("domains: %+v", list.Domains)
		}
		var rlist []domainREST
		g.get(t, a.APIKey, "/v1/domains", &rlist)
		if len(rlist) != 2 || !same(list.Domains[0].rest(), rlist[0]) || !same(list.Domains[1].rest(), rlist[1]) {
			t.Errorf("domains through GraphQL %+v, through REST %+v", list.Domains, rlist)
		}
		g.gqlOK(t, a.APIKey, `query($after: ID) { domains(after: $after, limit: 1) { `+gqlDomainFields+` } }`,
			map[string]any{"after": d.ID}, &list)
		if len(list.Domains) != 1 || list.Domains[0].ID != second.AddDomain.ID {
			t.Errorf("domains after the first: %+v", list.Domains)
		}
		g.gqlOK(t, a.APIKey, `{ domains(limit: 1) { id } }`, nil, &list)
		if len(list.Domains) != 1 || list.Domains[0].ID != d.ID {
			t.Errorf("domains(limit: 1): %+v", list.Domains)
		}

		var one struct {
			Domain *gqlDomain `json:"domain"`
		}
		g.gqlOK(t, a.APIKey, `query($id: ID!) { domain(id: $id) { `+gqlDomainFields+` } }`, map[string]any{"id": d.ID}, &one)
		if one.Domain == nil || !same(one.Domain.rest(), rd) {
			t.Errorf("domain(id) = %+v, REST %+v", one.Domain, rd)
		}

		// Verification finds nothing (no DNS answers): the call succeeds,
		// the domain stays pending and says why.
		var verified struct {
			VerifyDomain gqlDomain `json:"verifyDomain"`
		}
		g.gqlOK(t, a.APIKey, `mutation($id: ID!) { verifyDomain(id: $id) { `+gqlDomainFields+` } }`,
			map[string]any{"id": d.ID}, &verified)
		v := verified.VerifyDomain
		if v.ID != d.ID || v.Status != "pending" || v.CheckedAt == nil || v.VerifiedAt != nil {
			t.Errorf("verifyDomain answered %+v", v)
		}
		found := 0
		for _, r := range v.Records {
			if r.State == "found" {
				found++
			}
		}
		if found == len(v.Records) || (v.LastError == nil && found > 0) {
			t.Errorf("verification without DNS: lastError %v, records %+v", v.LastError, v.Records)
		}
		g.get(t, a.APIKey, "/v1/domains/"+d.ID, &rd)
		if !same(v.rest(), rd) {
			t.Errorf("verified domain through GraphQL %+v, through REST %+v", v.rest(), rd)
		}

		// Errors carry the REST codes and parameters.
		addQ := `mutation($d: String!) { addDomain(domain: $d) { id } }`
		gqlFail(t, g.gql(t, a.APIKey, addQ, map[string]any{"d": "example.com"}), "addDomain", "conflict", "domain")
		gqlFail(t, g.gql(t, a.APIKey, addQ, map[string]any{"d": ""}), "addDomain", "invalid_parameter", "domain")
		gqlFail(t, g.gql(t, a.APIKey, addQ, map[string]any{"d": "not a domain"}), "addDomain", "invalid_parameter", "domain")
		gqlFail(t, g.gql(t, a.APIKey, addQ, map[string]any{"d": "mail.test"}), "addDomain", "invalid_parameter", "domain")
		gqlFail(t, g.gql(t, a.APIKey, `{ domains(limit: 0) { id } }`, nil), "domains", "invalid_parameter", "limit")
		gqlFail(t, g.gql(t, a.APIKey, `{ domains(limit: 501) { id } }`, nil), "domains", "invalid_parameter", "limit")
		gqlFail(t, g.gql(t, a.APIKey, `{ domains(after: "msg_x") { id } }`, nil), "domains", "invalid_parameter", "after")
		verifyQ := `mutation($id: ID!) { verifyDomain(id: $id) { id } }`
		gqlFail(t, g.gql(t, a.APIKey, verifyQ, map[string]any{"id": "dom_unknown"}), "verifyDomain", "not_found", "")

		// Another project sees none of it.
		g.gqlOK(t, b.APIKey, `{ domains { id } }`, nil, &list)
		if len(list.Domains) != 0 {
			t.Errorf("project b lists %+v", list.Domains)
		}
		one.Domain = &gqlDomain{}
		g.gqlOK(t, b.APIKey, `query($id: ID!) { domain(id: $id) { id } }`, map[string]any{"id": d.ID}, &one)
		if one.Domain != nil {
			t.Errorf("project b reads domain %+v", one.Domain)
		}
		gqlFail(t, g.gql(t, b.APIKey, verifyQ, map[string]any{"id": d.ID}), "verifyDomain", "not_found", "")
		deleteQ := `mutation($id: ID!) { deleteDomain(id: $id) }`
		gqlFail(t, g.gql(t, b.APIKey, deleteQ, map[string]any{"id": d.ID}), "deleteDomain", "not_found", "")
		// ... and may add the same domain: the first to verify it sends.
		g.gqlOK(t, b.APIKey, `mutation { addDomain(domain: "example.com") { id } }`, nil, &struct {
			AddDomain struct {
				ID string `json:"id"`
			} `json:"addDomain"`
		}{})

		var deleted struct {
			DeleteDomain bool `json:"deleteDomain"`
		}
		g.gqlOK(t, a.APIKey, deleteQ, map[string]any{"id": d.ID}, &deleted)
		if !deleted.DeleteDomain {
			t.Error("deleteDomain answered false")
		}
		one.Domain = &gqlDomain{}
		g.gqlOK(t, a.APIKey, `query($id: ID!) { domain(id: $id) { id } }`, map[string]any{"id": d.ID}, &one)
		if one.Domain != nil {
			t.Errorf("deleted domain reads %+v", one.Domain)
		}
		wantError(t, g.do(t, request{Path: "/v1/domains/" + d.ID, Key: a.APIKey}), http.StatusNotFound, "not_found", "")
		gqlFail(t, g.gql(t, a.APIKey, deleteQ, map[string]any{"id": d.ID}), "deleteDomain", "not_found", "")
		g.gqlOK(t, a.APIKey, `{ domains { id } }`, nil, &list)
		if len(list.Domains) != 1 || list.Domains[0].ID != second.AddDomain.ID {
			t.Errorf("domains after the delete: %+v", list.Domains)
		}
	})
}

// TestGraphQLMessageAttachments: an email with attachments shows them,
// with their download paths, and its details in GraphQL exactly as REST
// shows them; a message of a channel without either shows none.
func TestGraphQLMessageAttachments(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmailGateway(t, cfg)
		a := g.newSandbox(t, "attachments")
		b := g.newSandbox(t, "attachments b")

		var connected struct {
			Connect struct {
				ID      string  `json:"id"`
				Address *string `json:"address"`
			} `json:"connect"`
		}
		g.gqlOK(t, a.APIKey, `mutation { connect(input: {channel: "email", config: {address: "billing"}}) { id address } }`,
			nil, &connected)
		addr := connected.Connect.Address
		if addr == nil || *addr != "billing@mail.test" {
			t.Fatalf("email connection address %v", addr)
		}

		pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff, '\n'}, 200)...)
		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0x42, 0}, 50)...)
		raw := mimeMessage(*addr, "invoice-7@example.org", "Invoice 7",
			mailAttachment{filename: "invoice.pdf", contentType: "application/pdf", data: pdf},
			mailAttachment{filename: "logo.png", contentType: "image/png", contentID: "logo@example.org", inline: true, data: png})
		ok, err := g.Mail.DeliverLocal(context.Background(), "alice@example.org", *addr, raw)
		if err != nil || !ok {
			t.Fatalf("DeliverLocal: %v, %v", ok, err)
		}

		msgQ := `{ messages(first: 10) { edges { node { id channel attachments { ` + gqlAttachmentFields + ` } details } } } }`
		var page struct {
			Messages struct {
				Edges []struct {
					Node gqlMailMessage `json:"node"`
				} `json:"edges"`
			} `json:"messages"`
		}
		g.gqlOK(t, a.APIKey, msgQ, nil, &page)
		if len(page.Messages.Edges) != 1 {
			t.Fatalf("messages: %+v", page.Messages.Edges)
		}
		m := page.Messages.Edges[0].Node
		if m.Channel != "email" || len(m.Attachments) != 2 {
			t.Fatalf("message %+v", m)
		}
		want := map[string]struct {
			contentType string
			inline      bool
			contentID   *string
			data        []byte
		}{
			"invoice.pdf": {"application/pdf", false, nil, pdf},
			"logo.png":    {"image/png", true, addrOf("logo@example.org"), png},
		}
		for _, att := range m.Attachments {
			w, ok := want[att.Filename]
			if !ok {
				t.Errorf("unexpected attachment %+v", att)
				continue
			}
			delete(want, att.Filename)
			if err := ident.Check(att.ID, ident.Attachment); err != nil {
				t.Errorf("attachment id %q: %v", att.ID, err)
			}
			if att.ContentType != w.contentType || att.Inline != w.inline || !same(att.ContentID, w.contentID) ||
				att.Size != int64(len(w.data)) || att.URL != "/v1/messages/"+m.ID+"/attachments/"+att.ID {
				t.Errorf("attachment %+v", att)
			}
			// The url downloads the bytes, with the key.
			resp := g.do(t, request{Path: att.URL, Key: a.APIKey})
			if resp.Status != http.StatusOK || !bytes.Equal(resp.Body, w.data) ||
				resp.Header.Get("Content-Type") != w.contentType {
				t.Errorf("GET %s: status %d, Content-Type %q, %d bytes", att.URL, resp.Status,
					resp.Header.Get("Content-Type"), len(resp.Body))
			}
			wantError(t, g.do(t, request{Path: att.URL, Key: b.APIKey}), http.StatusNotFound, "not_found", "")
		}

		// The same message through node(id) and through REST.
		var node gqlMailMessage
		g.gqlNode(t, a.APIKey, m.ID, "Message", `id channel attachments { `+gqlAttachmentFields+` } details`, &node)
		if !same(node, m) {
			t.Errorf("node(id) %+v, messages %+v", node, m)
		}
		var rest api.Message
		resp := g.do(t, request{Path: "/v1/messages/" + m.ID, Key: a.APIKey})
		if resp.Status != http.StatusOK {
			t.Fatalf("GET message: status %d, body %s", resp.Status, resp.Body)
		}
		decodeJSON(t, resp.Body, &rest)
		var fromGQL []attachmentREST
		for _, att := range m.Attachments {
			fromGQL = append(fromGQL, attachmentREST{ID: att.ID, Filename: att.Filename, ContentType: att.ContentType,
				Size: att.Size, Inline: att.Inline, ContentID: att.ContentID})
		}
		if !same(fromGQL, rest.Attachments) {
			t.Errorf("attachments through GraphQL %+v, through REST %+v", fromGQL, rest.Attachments)
		}
		if len(rest.Details) == 0 || !jsonEqual(m.Details, string(rest.Details)) {
			t.Errorf("details through GraphQL %s, through REST %s", m.Details, rest.Details)
		}
		var details struct {
			MessageID string          `json:"message_id"`
			FromName  string          `json:"from_name"`
			MailFrom  string          `json:"mail_from"`
			To        []string        `json:"to"`
			Auth      json.RawMessage `json:"auth"`
		}
		if err := json.Unmarshal(m.Details, &details); err != nil {
			t.Fatalf("details %s: %v", m.Details, err)
		}
		if !strings.Contains(details.MessageID, "invoice-7@example.org") || details.FromName != "Alice Example" ||
			details.MailFrom != "alice@example.org" || !slices.Contains(details.To, *addr) || len(details.Auth) == 0 {
			t.Errorf("details %s", m.Details)
		}

		// A channel without attachments or details: an empty list and null.
		conn := g.connectTest(t, a.APIKey)
		var inj struct {
			InjectInbound struct {
				Message gqlMailMessage `json:"message"`
			} `json:"injectInbound"`
		}
		g.gqlOK(t, a.APIKey, `mutation($c: ID!) { injectInbound(connectionID: $c, input: {sender: "bob", text: "hi"}) {
			message { id channel attachments { `+gqlAttachmentFields+` } details } } }`, map[string]any{"c": conn.ID}, &inj)
		if tm := inj.InjectInbound.Message; tm.Channel != "test" || tm.Attachments == nil || len(tm.Attachments) != 0 ||
			(len(tm.Details) != 0 && string(tm.Details) != "null") {
			t.Errorf("test channel message %+v (details %s)", tm, tm.Details)
		}
	})
}

func addrOf[T any](v T) *T { return &v }

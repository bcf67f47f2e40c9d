package client_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/delivery"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// startEmail is start with the email channel bound to the service
// (inboxes on mail.test), as cmd/comm wires it, and a DNS resolver that
// fails at once (nothing answers on 127.0.0.1:1): domain verification
// finds nothing.
func startEmail(t *testing.T, cfg store.Config) *gateway {
	t.Helper()
	return gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config: gw.Config{Email: email.Options{MailDomain: "mail.test"},
			Mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1")}},
		Workers: &gw.Workers{Outbox: &delivery.Outbox{PollInterval: 100 * time.Millisecond}},
	})
}

// emailWithAttachment is an email from alice@example.org to rcpt with a
// text body and one attachment.
func emailWithAttachment(rcpt, filename, contentType string, data []byte) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\r\n", args...) }
	w("From: Alice Example <alice@example.org>")
	w("To: <%s>", rcpt)
	w("Subject: The report")
	w("Message-ID: <report-1@example.org>")
	w("MIME-Version: 1.0")
	w(`Content-Type: multipart/mixed; boundary="b1"`)
	w("")
	w("--b1")
	w("Content-Type: text/plain; charset=utf-8")
	w("")
	w("The report is attached.")
	w("--b1")
	w(`Content-Type: %s; name="%s"`, contentType, filename)
	w("Content-Transfer-Encoding: base64")
	w(`Content-Disposition: attachment; filename="%s"`, filename)
	w("")
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		w("%s", enc[:76])
		enc = enc[76:]
	}
	w("%s", enc)
	w("--b1--")
	return b.Bytes()
}

// TestDomains drives AddDomain, Domains, Domain, VerifyDomain and
// DeleteDomain against the real gateway.
func TestDomains(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmail(t, cfg)
		ctx := context.Background()
		p := newProject(t, g, "")

		d, err := p.AddDomain(ctx, "Example.COM")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(d.ID, "dom_") || d.Domain != "example.com" || d.Status != client.DomainPending ||
			d.InboundDomain == nil || *d.InboundDomain != "example.com" || d.LastError != nil || d.CheckedAt != nil ||
			d.VerifiedAt != nil || d.CreatedAt.IsZero() {
			t.Errorf("AddDomain: %+v", d)
		}
		var kinds []string
		for _, r := range d.Records {
			kinds = append(kinds, r.Kind)
			if r.State != client.RecordPending || len(r.Seen) != 0 || r.Detail != "" || r.Name == "" || r.Value == "" ||
				r.Zone == "" || (r.Type == "MX") != (r.Priority > 0) {
				t.Errorf("record of a new domain: %+v", r)
			}
		}
		for _, k := range []string{"ownership", "spf", "dkim", "dmarc", "mx"} {
			if !slices.Contains(kinds, k) {
				t.Errorf("records %v: no %s record", kinds, k)
			}
		}
		if _, err := p.AddDomain(ctx, "example.com"); !errors.Is(err, client.ErrConflict) {
			t.Errorf("AddDomain again: %v, want ErrConflict", err)
		}
		var apiErr *client.Error
		if _, err := p.AddDomain(ctx, "not a domain"); !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalid) ||
			apiErr.Param != "domain" {
			t.Errorf("AddDomain of a malformed name: %v", err)
		}

		d2, err := p.AddDomain(ctx, "example.net")
		if err != nil {
			t.Fatal(err)
		}
		ds, err := p.Domains(ctx, "", 0)
		if err != nil || len(ds) != 2 || ds[0].ID != d.ID || ds[1].ID != d2.ID {
			t.Fatalf("Domains: %+v, %v", ds, err)
		}
		if page, err := p.Domains(ctx, d.ID, 1); err != nil || len(page) != 1 || page[0].ID != d2.ID {
			t.Errorf("Domains after the first: %+v, %v", page, err)
		}
		if page, err := p.Domains(ctx, d2.ID, 10); err != nil || page == nil || len(page) != 0 {
			t.Errorf("Domains after the last: %+v, %v", page, err)
		}
		got, err := p.Domain(ctx, d.ID)
		if err != nil || got.ID != d.ID || !got.CreatedAt.Equal(d.CreatedAt) || len(got.Records) != len(d.Records) ||
			got.Records[0].Value != d.Records[0].Value {
			t.Errorf("Domain: %+v, %v", got, err)
		}

		// Without DNS answers, verification completes and finds nothing.
		v, err := p.VerifyDomain(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v.ID != d.ID || v.Status != client.DomainPending || v.CheckedAt == nil || v.VerifiedAt != nil {
			t.Errorf("VerifyDomain: %+v", v)
		}
		found := 0
		for _, r := range v.Records {
			if r.State == client.RecordFound {
				found++
			}
		}
		if found == len(v.Records) || (v.LastError == nil && found > 0) {
			t.Errorf("verification without DNS: last error %v, records %+v", v.LastError, v.Records)
		}
		if _, err := p.VerifyDomain(ctx, "dom_unknown"); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("VerifyDomain of an unknown id: %v", err)
		}

		// Another project sees none of it.
		other := newProject(t, g, "")
		if _, err := other.Domain(ctx, d.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("another project's Domain: %v", err)
		}
		if err := other.DeleteDomain(ctx, d.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("another project's DeleteDomain: %v", err)
		}

		if err := p.DeleteDomain(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Domain(ctx, d.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("Domain after DeleteDomain: %v", err)
		}
		if err := p.DeleteDomain(ctx, d.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("DeleteDomain again: %v", err)
		}
		if ds, err := p.Domains(ctx, "", 0); err != nil || len(ds) != 1 || ds[0].ID != d2.ID {
			t.Errorf("Domains after the delete: %+v, %v", ds, err)
		}
	})
}

// TestAttachment: an email's attachments are listed on the message, in
// the message.received event and on InboundMessage, and Attachment
// downloads their bytes.
func TestAttachment(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startEmail(t, cfg)
		ctx := context.Background()
		p := newProject(t, g, "")

		conn, err := p.Connect(ctx, client.ConnectRequest{Channel: "email", Config: map[string]string{"address": "reports"}})
		if err != nil {
			t.Fatal(err)
		}
		if conn.Address == nil || *conn.Address != "reports@mail.test" {
			t.Fatalf("email connection %+v", conn)
		}
		data := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0, 0xff, 0x10, '\r', '\n'}, 300)...)
		raw := emailWithAttachment(*conn.Address, "Q3 report.pdf", "application/pdf", data)
		if ok, err := g.Mail.DeliverLocal(ctx, "alice@example.org", *conn.Address, raw); err != nil || !ok {
			t.Fatalf("DeliverLocal: %v, %v", ok, err)
		}

		evs, err := p.Events(ctx, 0, 10, client.EventMessageReceived)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Events: %+v, %v", evs, err)
		}
		in, err := p.MessageOf(&evs[0])
		if err != nil {
			t.Fatal(err)
		}
		if in.Channel != "email" || len(in.Attachments) != 1 || len(in.Details) == 0 {
			t.Fatalf("inbound message %+v", in)
		}
		m, err := p.Message(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Attachments) != 1 || !reflect.DeepEqual(m.Attachments, in.Attachments) {
			t.Fatalf("message attachments %+v, event's %+v", m.Attachments, in.Attachments)
		}
		att := m.Attachments[0]
		if !strings.HasPrefix(att.ID, "att_") || att.Filename != "Q3 report.pdf" || att.ContentType != "application/pdf" ||
			att.Size != int64(len(data)) || att.Inline || att.ContentID != nil {
			t.Errorf("attachment %+v", att)
		}
		var details struct {
			MessageID string `json:"message_id"`
			FromName  string `json:"from_name"`
		}
		if err := json.Unmarshal(m.Details, &details); err != nil || !strings.Contains(details.MessageID, "report-1@example.org") ||
			details.FromName != "Alice Example" {
			t.Errorf("details %s: %v", m.Details, err)
		}

		f, err := p.Attachment(ctx, m.ID, att.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Data, data) || f.ContentType != "application/pdf" || f.Filename != "Q3 report.pdf" {
			t.Errorf("Attachment: %q %q, %d bytes (equal: %v)", f.Filename, f.ContentType, len(f.Data), bytes.Equal(f.Data, data))
		}
		if _, err := p.Attachment(ctx, m.ID, "att_unknown"); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("Attachment of an unknown id: %v", err)
		}
		other := newProject(t, g, "")
		if _, err := other.Attachment(ctx, m.ID, att.ID); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("another project's Attachment: %v", err)
		}

		// A message of a channel without attachments has none.
		tc := p.connectTest(t)
		plain := p.inject(t, tc.ID, "bob", "hi")
		if plain == nil || plain.Attachments != nil || plain.Details != nil {
			t.Errorf("test channel message %+v", plain)
		}
	})
}

// TestAttachmentRetries: a download is a GET, retried after a 503, and
// keeps the bytes of the answer that succeeded.
func TestAttachmentRetries(t *testing.T) {
	t.Parallel()
	data := []byte("\x00\x01binary\xff")
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.URL.Path != "/v1/messages/msg_1/attachments/att_1" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
			return
		}
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"try again"}}`))
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Disposition", `attachment; filename*=utf-8''%C3%A9t%C3%A9.png`)
		w.Write(data)
	}))
	defer hs.Close()
	c, err := client.New(client.WithAPIKey("k"), client.WithBaseURL(hs.URL), client.WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Attachment(context.Background(), "msg_1", "att_1")
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 || !bytes.Equal(f.Data, data) || f.ContentType != "image/png" || f.Filename != "été.png" {
		t.Errorf("after %d calls: %+v", n, f)
	}
}

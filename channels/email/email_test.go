package email

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/dkim"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/email/outbound"
	"github.com/comm-gateway/comm/channels/email/smtptest"
)

// testDomain is the mail domain of the channels under test.
const testDomain = "mail.test"

// customer is the outside address mail goes to.
const customer = "ann@customer.test"

// TestConformance runs the channel conformance suite against the email
// channel submitting to a real SMTP relay (smtptest), one relay per
// subtest.
//
// The suite provisions every subtest's adapter through the one Descriptor
// it is given, while each subtest has its own relay: the channel's
// Submitter is a relayRouter that hands each submission to the relay of
// the subtest whose inbox sent it (each fake's config names its own inbox,
// agent-N@mail.test). The submission itself is the real *outbound.Relay.
//
// Idempotent stays false: a retry of one Outbound.MessageID carries the
// same Message-ID (TestSendRetryKeepsMessageID), but it is a second SMTP
// transaction, so the relay holds two copies and the suite's "one provider
// message" does not hold; deduplication by Message-ID is the receiving
// mail client's business.
func TestConformance(t *testing.T) {
	t.Parallel()
	router := &relayRouter{relays: map[string]Submitter{}}
	ch := New(Options{MailDomain: testDomain, Relay: router})
	var n atomic.Int64
	channeltest.Run(t, channeltest.Harness{
		Descriptor: ch.Descriptor(),
		Fake: func(t *testing.T) *channeltest.Fake {
			relay := smtptest.StartRelay(t, smtptest.RelayOptions{})
			local := fmt.Sprintf("agent-%d", n.Add(1))
			router.add(t, local+"@"+testDomain, relayTo(t, relay))
			return &channeltest.Fake{
				Config: json.RawMessage(fmt.Sprintf(`{"address":%q}`, local)),
				To:     customer,
				Sent: func(t *testing.T, _ channels.Adapter) []channels.Outbound {
					var out []channels.Outbound
					for _, c := range relay.Messages() {
						m := parseCaptured(t, c)
						for _, rcpt := range c.To {
							out = append(out, channels.Outbound{To: rcpt, Subject: m.subject, Text: m.text, HTML: m.html})
						}
					}
					return out
				},
				Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
					switch kind {
					case channeltest.RateLimited:
						return "busy@customer.test", "451 4.3.0 mailbox busy, try later"
					case channeltest.Unavailable:
						return "down@customer.test", "421 4.3.2 service not available"
					case channeltest.Timeout:
						return "slow@customer.test", context.DeadlineExceeded.Error()
					case channeltest.Rejected:
						return "nobody@customer.test", "550 5.1.1 no such user"
					case channeltest.Unauthorized:
						return "unauthorized@customer.test", "530 5.7.0 authentication required"
					}
					return "", ""
				},
			}
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"address":"has space"}`),
			json.RawMessage(`{"address":"a+b"}`),
			json.RawMessage(`{"address":"x@not-verified.example"}`),
			json.RawMessage(`{"address":"@mail.test"}`),
			json.RawMessage(`{"address":"agent@"}`),
			json.RawMessage(`{"address":".agent"}`),
			json.RawMessage(`{"address":"a..b"}`),
			json.RawMessage(`{"address":"` + strings.Repeat("a", 33) + `"}`),
			json.RawMessage(`{"address":42}`),
			json.RawMessage(`{"unknown":1}`),
			json.RawMessage(`{"address":"agent"} {}`),
		},
		Subject: true,
		HTML:    true,
	})
}

// relayRouter is a Submitter that hands each submission to the relay
// registered for its envelope sender.
type relayRouter struct {
	mu     sync.Mutex
	relays map[string]Submitter
}

func (r *relayRouter) add(t *testing.T, from string, s Submitter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.relays[from] = s
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.relays, from)
	})
}

func (r *relayRouter) Send(ctx context.Context, from string, to []string, msg []byte) error {
	r.mu.Lock()
	s := r.relays[from]
	r.mu.Unlock()
	if s == nil {
		return fmt.Errorf("test relay router: no relay for sender %q: %w", from, channels.ErrPermanent)
	}
	return s.Send(ctx, from, to, msg)
}

// relayTo is the real submission client for relay, as COMM_SMTP_RELAY
// would configure it.
func relayTo(t *testing.T, relay *smtptest.Relay) *outbound.Relay {
	t.Helper()
	r, err := outbound.ParseRelay("smtp://" + relay.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// received is a message the relay captured, read back.
type received struct {
	header  gomail.Header
	subject *string // nil when the Subject is empty or absent
	text    string  // the text/plain part, LF line endings
	html    *string // the text/html part, LF line endings; nil without one
}

// parseCaptured reads a captured message the way a mail client would:
// decoded subject, text and HTML parts with line endings normalised to LF.
// The trailing CRLF that SMTP's DATA requires of the last line is not part
// of the content.
func parseCaptured(t *testing.T, c smtptest.Captured) received {
	t.Helper()
	raw := c.Data
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("bare LF in the message the relay received:\n%s", raw)
	}
	raw = bytes.TrimSuffix(raw, []byte("\r\n"))
	r, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read the message the relay received: %v\n%s", err, c.Data)
	}
	m := received{header: r.Header}
	if s, err := r.Header.Subject(); err != nil {
		t.Errorf("Subject: %v", err)
	} else if s != "" {
		m.subject = &s
	}
	to, err := r.Header.AddressList("To")
	if err != nil || len(to) != 1 || !slices.Equal([]string{to[0].Address}, c.To) {
		t.Errorf("To header %v (%v) does not match the envelope recipients %q", to, err, c.To)
	}
	from, err := r.Header.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Address != c.From {
		t.Errorf("From header %v (%v) does not match the envelope sender %q", from, err, c.From)
	}
	var haveText bool
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read part: %v\n%s", err, c.Data)
		}
		h, ok := p.Header.(*gomail.InlineHeader)
		if !ok {
			t.Errorf("unexpected attachment in\n%s", c.Data)
			continue
		}
		b, err := io.ReadAll(p.Body)
		if err != nil {
			t.Fatalf("read part body: %v", err)
		}
		body := strings.ReplaceAll(string(b), "\r\n", "\n")
		switch ct, _, _ := h.ContentType(); ct {
		case "text/plain":
			m.text, haveText = body, true
		case "text/html":
			m.html = &body
		default:
			t.Errorf("unexpected part %s in\n%s", ct, c.Data)
		}
	}
	if !haveText {
		t.Errorf("no text/plain part in\n%s", c.Data)
	}
	return m
}

// newRelayChannel is a channel on testDomain submitting to a fresh relay.
func newRelayChannel(t *testing.T, opts Options) (*Channel, *smtptest.Relay) {
	t.Helper()
	relay := smtptest.StartRelay(t, smtptest.RelayOptions{})
	opts.MailDomain = testDomain
	opts.Relay = relayTo(t, relay)
	return New(opts), relay
}

// connect provisions an adapter of ch with config.
func connect(t *testing.T, ch *Channel, config string) *Adapter {
	t.Helper()
	a, err := ch.Descriptor().New(t.Context(), channels.Connection{ID: "conn_1", ProjectID: "proj_1", Config: json.RawMessage(config)})
	if err != nil {
		t.Fatalf("connect %s: %v", config, err)
	}
	return a.(*Adapter)
}

// only returns the one message the relay captured.
func only(t *testing.T, relay *smtptest.Relay) smtptest.Captured {
	t.Helper()
	msgs := relay.Messages()
	if len(msgs) != 1 {
		t.Fatalf("the relay received %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func msgIDs(t *testing.T, h gomail.Header, key string) []string {
	t.Helper()
	ids, err := h.MsgIDList(key)
	if err != nil {
		t.Errorf("%s: %v", key, err)
	}
	return ids
}

func addresses(t *testing.T, h gomail.Header, key string) []string {
	t.Helper()
	list, err := h.AddressList(key)
	if err != nil {
		t.Errorf("%s: %v", key, err)
	}
	var out []string
	for _, a := range list {
		out = append(out, a.Address)
	}
	return out
}

func ptr(s string) *string { return &s }

// refs returns n distinct valid message ids.
func refs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ref%d@customer.test", i)
	}
	return out
}

func TestSendHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		out         channels.Outbound
		wantID      string // "" means generated on testDomain
		wantInReply []string
		wantRefs    []string
		wantReplyTo []string
	}{
		{
			name:   "new message",
			out:    channels.Outbound{MessageID: "msg_01HZX3K9ABCDEF", Text: "Hello."},
			wantID: "msg_01hzx3k9abcdef@mail.test",
		},
		{
			name:   "no message id",
			out:    channels.Outbound{Text: "Hello."},
			wantID: "",
		},
		{
			name: "reply in a conversation",
			out: channels.Outbound{
				MessageID: "msg_2", Text: "Answer.", ConversationID: "conv_01HZX3K9QRST",
				InReplyTo: "parent@customer.test", References: []string{"root@customer.test", "parent@customer.test"},
			},
			wantID:      "msg_2@mail.test",
			wantInReply: []string{"parent@customer.test"},
			wantRefs:    []string{"root@customer.test", "parent@customer.test"},
			wantReplyTo: []string{"agent+conv_01hzx3k9qrst@mail.test"},
		},
		{
			name: "in-reply-to missing from references",
			out: channels.Outbound{
				MessageID: "msg_3", Text: "Answer.",
				InReplyTo: "parent@customer.test", References: []string{"root@customer.test"},
			},
			wantID:      "msg_3@mail.test",
			wantInReply: []string{"parent@customer.test"},
			wantRefs:    []string{"root@customer.test", "parent@customer.test"},
		},
		{
			name:        "in-reply-to only",
			out:         channels.Outbound{MessageID: "msg_4", Text: "Answer.", InReplyTo: "parent@customer.test"},
			wantID:      "msg_4@mail.test",
			wantInReply: []string{"parent@customer.test"},
			wantRefs:    []string{"parent@customer.test"},
		},
		{
			name: "invalid ids dropped",
			out: channels.Outbound{
				MessageID: "msg_5", Text: "Answer.", InReplyTo: "not an id",
				References: []string{"root@customer.test", "no-at-sign", "<bracketed@customer.test>", "a@b@c", "two words@x", "", "mid@customer.test"},
			},
			wantID:   "msg_5@mail.test",
			wantRefs: []string{"root@customer.test", "mid@customer.test"},
		},
		{
			name:        "references at the limit",
			out:         channels.Outbound{MessageID: "msg_6", Text: "Answer.", InReplyTo: refs(MaxReferences)[MaxReferences-1], References: refs(MaxReferences)},
			wantID:      "msg_6@mail.test",
			wantInReply: []string{refs(MaxReferences)[MaxReferences-1]},
			wantRefs:    refs(MaxReferences),
		},
		{
			name:        "references over the limit keep the first",
			out:         channels.Outbound{MessageID: "msg_7", Text: "Answer.", InReplyTo: "parent@customer.test", References: refs(3 * MaxReferences)},
			wantID:      "msg_7@mail.test",
			wantInReply: []string{"parent@customer.test"},
			wantRefs:    append(append([]string{refs(1)[0]}, refs(3 * MaxReferences)[2*MaxReferences+2:]...), "parent@customer.test"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch, relay := newRelayChannel(t, Options{})
			a := connect(t, ch, `{"address":"agent"}`)
			out := tt.out
			out.To = "Ann Example <" + customer + ">"
			res, err := a.Send(t.Context(), out)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			c := only(t, relay)
			if c.From != "agent@mail.test" || !slices.Equal(c.To, []string{customer}) {
				t.Errorf("envelope from %q to %q, want agent@mail.test to %s", c.From, c.To, customer)
			}
			m := parseCaptured(t, c)
			if m.text != out.Text {
				t.Errorf("text = %q, want %q", m.text, out.Text)
			}
			id, err := m.header.MessageID()
			if err != nil {
				t.Fatalf("Message-ID: %v", err)
			}
			if tt.wantID != "" && id != tt.wantID {
				t.Errorf("Message-ID = <%s>, want <%s>", id, tt.wantID)
			}
			if tt.wantID == "" && (!strings.HasSuffix(id, "@"+testDomain) || len(id) < 20) {
				t.Errorf("generated Message-ID = <%s>, want <random@%s>", id, testDomain)
			}
			if res.ProviderID != id {
				t.Errorf("provider id %q, want the Message-ID %q", res.ProviderID, id)
			}
			if got := msgIDs(t, m.header, "In-Reply-To"); !slices.Equal(got, tt.wantInReply) {
				t.Errorf("In-Reply-To = %q, want %q", got, tt.wantInReply)
			}
			gotRefs := msgIDs(t, m.header, "References")
			if !slices.Equal(gotRefs, tt.wantRefs) {
				t.Errorf("References = %q, want %q", gotRefs, tt.wantRefs)
			}
			if len(gotRefs) > MaxReferences {
				t.Errorf("%d References, want at most %d", len(gotRefs), MaxReferences)
			}
			if got := addresses(t, m.header, "Reply-To"); !slices.Equal(got, tt.wantReplyTo) {
				t.Errorf("Reply-To = %q, want %q", got, tt.wantReplyTo)
			}
			if got := addresses(t, m.header, "To"); !slices.Equal(got, []string{customer}) {
				t.Errorf("To = %q, want %s", got, customer)
			}
			if got := addresses(t, m.header, "From"); !slices.Equal(got, []string{"agent@mail.test"}) {
				t.Errorf("From = %q, want agent@mail.test", got)
			}
			if m.header.Has("DKIM-Signature") {
				t.Error("signed without a DKIM key")
			}
		})
	}
}

func TestSendContent(t *testing.T) {
	t.Parallel()
	ch, relay := newRelayChannel(t, Options{})
	a := connect(t, ch, `{"address":"agent"}`)
	out := channels.Outbound{
		MessageID: "msg_rich", To: customer,
		Subject: ptr("Grüße – 会議の件 " + strings.Repeat("long subject ", 10)),
		Text:    "Line one,\nline two: ünïcödé & 100% =3D " + strings.Repeat("long line ", 20),
		HTML:    ptr("<p>Hello <b>Ann</b> &amp; ünïcödé</p>"),
	}
	if _, err := a.Send(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	c := only(t, relay)
	for _, line := range strings.Split(string(c.Data), "\r\n") {
		if len(line) > 998 {
			t.Errorf("line longer than 998 octets: %.60q...", line)
		}
	}
	m := parseCaptured(t, c)
	if m.subject == nil || *m.subject != *out.Subject {
		t.Errorf("Subject = %v, want %q", m.subject, *out.Subject)
	}
	if m.text != out.Text {
		t.Errorf("text = %q, want %q", m.text, out.Text)
	}
	if m.html == nil || *m.html != *out.HTML {
		t.Errorf("html = %v, want %q", m.html, *out.HTML)
	}
}

// A retried send of one Outbound.MessageID carries the same Message-ID and
// provider id, so a receiving client can tell the copies are one message;
// the relay, though, receives it twice (why the conformance harness does
// not claim Idempotent).
func TestSendRetryKeepsMessageID(t *testing.T) {
	t.Parallel()
	ch, relay := newRelayChannel(t, Options{})
	a := connect(t, ch, `{"address":"agent"}`)
	out := channels.Outbound{MessageID: "msg_Retry1", To: customer, Text: "Sent twice."}
	var ids []string
	for range 2 {
		res, err := a.Send(t.Context(), out)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ProviderID)
	}
	if ids[0] != "msg_retry1@mail.test" || ids[1] != ids[0] {
		t.Errorf("provider ids %q, want msg_retry1@mail.test twice", ids)
	}
	msgs := relay.Messages()
	if len(msgs) != 2 {
		t.Fatalf("the relay received %d messages, want 2", len(msgs))
	}
	for _, c := range msgs {
		m := parseCaptured(t, c)
		if id, err := m.header.MessageID(); err != nil || id != ids[0] {
			t.Errorf("Message-ID = <%s> (%v), want <%s>", id, err, ids[0])
		}
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	t.Run("no relay", func(t *testing.T) {
		t.Parallel()
		ch := New(Options{MailDomain: testDomain})
		a := connect(t, ch, `{"address":"agent"}`)
		_, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: customer, Text: "Hello."})
		checkPermanent(t, err)
		if err != nil && !strings.Contains(err.Error(), "COMM_SMTP_RELAY") {
			t.Errorf("error %q does not mention COMM_SMTP_RELAY", err)
		}
	})
	t.Run("no relay, no local inbox", func(t *testing.T) {
		t.Parallel()
		ch := New(Options{MailDomain: testDomain})
		gw := &fakeGateway{}
		ch.Bind(gw)
		a := connect(t, ch, `{"address":"agent"}`)
		_, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: customer, Text: "Hello."})
		checkPermanent(t, err)
		if err != nil && !strings.Contains(err.Error(), "COMM_SMTP_RELAY") {
			t.Errorf("error %q does not mention COMM_SMTP_RELAY", err)
		}
		if len(gw.delivered()) != 1 {
			t.Errorf("DeliverLocal called %d times, want 1", len(gw.delivered()))
		}
	})
	tests := []struct {
		name string
		out  channels.Outbound
	}{
		{"empty recipient", channels.Outbound{To: ""}},
		{"recipient not an address", channels.Outbound{To: "not an address"}},
		{"recipient without domain", channels.Outbound{To: "ann@"}},
		{"recipient with injected header", channels.Outbound{To: "ann@customer.test\r\nBcc: victim@example.org"}},
		{"message id that is no id", channels.Outbound{To: customer, MessageID: "msg 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch, relay := newRelayChannel(t, Options{})
			a := connect(t, ch, `{"address":"agent"}`)
			out := tt.out
			out.Text = "Hello."
			res, err := a.Send(t.Context(), out)
			checkPermanent(t, err)
			if res.ProviderID != "" {
				t.Errorf("failed send returned provider id %q", res.ProviderID)
			}
			if n := len(relay.Messages()); n != 0 {
				t.Errorf("the relay received %d messages", n)
			}
		})
	}
}

func checkPermanent(t *testing.T, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatal("Send succeeded, want an error wrapping channels.ErrPermanent")
	case !errors.Is(err, channels.ErrPermanent) || errors.Is(err, channels.ErrTransient):
		t.Errorf("error %q: want it to wrap channels.ErrPermanent only", err)
	case !strings.HasPrefix(err.Error(), "email: "):
		t.Errorf("error %q does not start with \"email: \"", err)
	}
}

func TestConnect(t *testing.T) {
	t.Parallel()
	ch := New(Options{MailDomain: "Mail.Test"})
	if ch.MailDomain() != testDomain {
		t.Errorf("MailDomain = %q, want %q", ch.MailDomain(), testDomain)
	}
	if got := New(Options{}).MailDomain(); got != DefaultMailDomain {
		t.Errorf("default MailDomain = %q, want %q", got, DefaultMailDomain)
	}
	for config, want := range map[string]string{
		`{"address":"agent"}`:             "agent@mail.test",
		`{"address":" Agent.Smith_1 "}`:   "agent.smith_1@mail.test",
		`{"address":"Support@MAIL.test"}`: "support@mail.test",
	} {
		if got := connect(t, ch, config).InboxAddress(); got != want {
			t.Errorf("connect %s: address %q, want %q", config, got, want)
		}
	}
	seen := map[string]bool{}
	for _, config := range []string{``, `null`, `{}`, `{"address":""}`} {
		got := connect(t, ch, config).InboxAddress()
		if !strings.HasPrefix(got, "inbox-") || !strings.HasSuffix(got, "@mail.test") || seen[got] {
			t.Errorf("connect %q: address %q, want a fresh inbox-...@mail.test", config, got)
		}
		seen[got] = true
	}
	// Without a gateway there are no custom domains.
	_, err := ch.Descriptor().New(t.Context(), channels.Connection{Config: json.RawMessage(`{"address":"support@example.com"}`)})
	if err == nil || !strings.Contains(err.Error(), "custom domains are not available") {
		t.Errorf("custom domain without a gateway: error %v", err)
	}
}

// fakeGateway is an email.Gateway: example.com is a verified domain signed
// with key under selector comm1; DeliverLocal records what it is handed and
// answers local, err.
type fakeGateway struct {
	key    *rsa.PrivateKey
	local  bool
	err    error
	keyErr error // SigningKey's answer for domains other than example.com; ErrNotVerified when nil

	mu  sync.Mutex
	got []localDelivery
}

type localDelivery struct {
	from, rcpt string
	raw        []byte
}

func (g *fakeGateway) SigningKey(_ context.Context, projectID, domain string) (*SigningKey, error) {
	if domain == "example.com" && g.key != nil {
		return &SigningKey{Domain: "example.com", Selector: "comm1", Key: g.key}, nil
	}
	if g.keyErr != nil {
		return nil, g.keyErr
	}
	return nil, fmt.Errorf("domain %s of %s: %w", domain, projectID, ErrNotVerified)
}

func (g *fakeGateway) DeliverLocal(_ context.Context, from, rcpt string, raw []byte) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, localDelivery{from, rcpt, append([]byte(nil), raw...)})
	return g.local, g.err
}

// Claim accepts every address but the reserved role names.
func (g *fakeGateway) Claim(_ context.Context, _, address string) error {
	if local, _, _ := strings.Cut(address, "@"); ReservedLocal(local) {
		return fmt.Errorf("%s is reserved", address)
	}
	return nil
}

// AllowSend allows every message.
func (g *fakeGateway) AllowSend(context.Context, channels.Connection, string, bool, string) error {
	return nil
}

func (g *fakeGateway) delivered() []localDelivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]localDelivery(nil), g.got...)
}

// dkimKey is one 2048-bit key for the package's tests: generating it is
// slow under -race.
var dkimKey = sync.OnceValues(outbound.GenerateKey)

func testKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	key, err := dkimKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// verifyDKIM verifies raw against key published for domain under
// selector comm1 and returns the one verification.
func verifyDKIM(t *testing.T, raw []byte, domain string, key *rsa.PrivateKey) *dkim.Verification {
	t.Helper()
	record, err := outbound.DKIMRecord(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	name := outbound.DKIMRecordName(domain, "comm1")
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT: func(n string) ([]string, error) {
			if n != name {
				return nil, fmt.Errorf("no TXT record for %s", n)
			}
			return []string{record}, nil
		},
	})
	if err != nil {
		t.Fatalf("dkim verify: %v", err)
	}
	if len(vs) != 1 {
		t.Fatalf("%d DKIM signatures, want 1", len(vs))
	}
	return vs[0]
}

func TestDKIMCustomDomain(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	ch, relay := newRelayChannel(t, Options{})
	gw := &fakeGateway{key: key}
	ch.Bind(gw)
	a := connect(t, ch, `{"address":"Support@Example.com"}`)
	if a.InboxAddress() != "support@example.com" {
		t.Fatalf("address %q, want support@example.com", a.InboxAddress())
	}
	out := channels.Outbound{
		MessageID: "msg_Signed", To: customer, Subject: ptr("Signed (é)"), Text: "Signed body.\nSecond line.",
		HTML: ptr("<p>Signed</p>"), ConversationID: "conv_9", InReplyTo: "parent@customer.test",
	}
	res, err := a.Send(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProviderID != "msg_signed@example.com" {
		t.Errorf("provider id %q, want msg_signed@example.com", res.ProviderID)
	}
	if d := gw.delivered(); len(d) != 1 || d[0].from != "support@example.com" || d[0].rcpt != customer {
		t.Errorf("DeliverLocal calls %+v, want one from support@example.com to %s", d, customer)
	}
	c := only(t, relay)
	if c.From != "support@example.com" {
		t.Errorf("envelope from %q, want support@example.com", c.From)
	}
	m := parseCaptured(t, c)
	if got := addresses(t, m.header, "Reply-To"); !slices.Equal(got, []string{"support+conv_9@example.com"}) {
		t.Errorf("Reply-To = %q, want support+conv_9@example.com", got)
	}
	v := verifyDKIM(t, c.Data, "example.com", key)
	if v.Err != nil {
		t.Fatalf("the relayed message's DKIM signature does not verify: %v\n%s", v.Err, c.Data)
	}
	if v.Domain != "example.com" {
		t.Errorf("d=%s, want example.com", v.Domain)
	}
	for _, h := range []string{"from", "to", "subject", "date", "message-id", "reply-to", "in-reply-to", "references", "content-type"} {
		if !slices.ContainsFunc(v.HeaderKeys, func(k string) bool { return strings.EqualFold(k, h) }) {
			t.Errorf("%s is not signed (h=%v)", h, v.HeaderKeys)
		}
	}
	// The verification means something: an altered subject fails it.
	tampered := bytes.Replace(c.Data, []byte("\r\nSubject: "), []byte("\r\nSubject: X"), 1)
	if bytes.Equal(tampered, c.Data) {
		t.Fatal("no Subject header to tamper with")
	}
	if v := verifyDKIM(t, tampered, "example.com", key); v.Err == nil {
		t.Error("a message with an altered subject still verifies")
	}
}

func TestDKIMMailDomain(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	ch, relay := newRelayChannel(t, Options{DKIM: &SigningKey{Domain: testDomain, Selector: "comm1", Key: key}})
	a := connect(t, ch, `{"address":"agent"}`)
	if _, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: customer, Text: "Signed."}); err != nil {
		t.Fatal(err)
	}
	if v := verifyDKIM(t, only(t, relay).Data, testDomain, key); v.Err != nil || v.Domain != testDomain {
		t.Errorf("signature d=%s: %v, want a valid signature of %s", v.Domain, v.Err, testDomain)
	}
}

func TestCustomDomainNotVerified(t *testing.T) {
	t.Parallel()
	ch := New(Options{MailDomain: testDomain})
	ch.Bind(&fakeGateway{key: testKey(t)})
	_, err := ch.Descriptor().New(t.Context(), channels.Connection{ProjectID: "proj_1", Config: json.RawMessage(`{"address":"support@other.example"}`)})
	if err == nil || !strings.Contains(err.Error(), ErrNotVerified.Error()) || !strings.HasPrefix(err.Error(), "email: ") {
		t.Errorf("unverified domain: error %v, want email: ... %v", err, ErrNotVerified)
	}

	lookup := errors.New("database unavailable")
	ch.Bind(&fakeGateway{keyErr: lookup})
	_, err = ch.Descriptor().New(t.Context(), channels.Connection{ProjectID: "proj_1", Config: json.RawMessage(`{"address":"support@other.example"}`)})
	if !errors.Is(err, lookup) {
		t.Errorf("SigningKey failure: error %v, want it wrapped", err)
	}
}

func TestDeliverLocal(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	t.Run("delivered", func(t *testing.T) {
		t.Parallel()
		ch, relay := newRelayChannel(t, Options{})
		gw := &fakeGateway{key: key, local: true}
		ch.Bind(gw)
		a := connect(t, ch, `{"address":"support@example.com"}`)
		res, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_Local", To: "Bob <bob@mail.test>", Text: "Between inboxes."})
		if err != nil {
			t.Fatal(err)
		}
		if res.ProviderID != "msg_local@example.com" {
			t.Errorf("provider id %q, want msg_local@example.com", res.ProviderID)
		}
		if n := len(relay.Messages()); n != 0 {
			t.Errorf("the relay received %d messages, want none", n)
		}
		d := gw.delivered()
		if len(d) != 1 {
			t.Fatalf("DeliverLocal called %d times, want 1", len(d))
		}
		if d[0].from != "support@example.com" || d[0].rcpt != "bob@mail.test" {
			t.Errorf("DeliverLocal(from %q, rcpt %q), want support@example.com, bob@mail.test", d[0].from, d[0].rcpt)
		}
		if v := verifyDKIM(t, d[0].raw, "example.com", key); v.Err != nil {
			t.Errorf("the locally delivered message's DKIM signature does not verify: %v", v.Err)
		}
		m := parseCaptured(t, smtptest.Captured{From: d[0].from, To: []string{d[0].rcpt}, Data: d[0].raw})
		if m.text != "Between inboxes." {
			t.Errorf("text = %q", m.text)
		}
	})
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		ch, relay := newRelayChannel(t, Options{})
		noInbox := fmt.Errorf("no inbox nobody@mail.test on this gateway: %w", channels.ErrPermanent)
		ch.Bind(&fakeGateway{err: noInbox})
		a := connect(t, ch, `{"address":"agent"}`)
		_, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_1", To: "nobody@mail.test", Text: "Lost."})
		if !errors.Is(err, noInbox) {
			t.Errorf("error %v, want DeliverLocal's error wrapped", err)
		}
		checkPermanent(t, err)
		if n := len(relay.Messages()); n != 0 {
			t.Errorf("the relay received %d messages, want none", n)
		}
	})
}

// The adapter is an inbox; inbound mail comes over SMTP, not webhooks.
var (
	_ channels.Inbox = (*Adapter)(nil)
	_ Gateway        = (*fakeGateway)(nil)
	_ Submitter      = (*outbound.Relay)(nil)
)

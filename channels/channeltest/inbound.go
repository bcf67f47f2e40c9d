package channeltest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels"
)

// request is a webhook request as the gateway hands it to an adapter: the
// body already read.
type request struct {
	r    *http.Request
	body []byte
}

// parse calls ParseWebhook the way the gateway does: the body is read,
// so r.Body is empty, and the adapter gets the bytes (a copy, so that one
// parse cannot change what the next one sees).
func (q request) parse(a channels.WebhookReceiver) ([]channels.Inbound, error) {
	r := q.r.Clone(q.r.Context())
	r.Body = http.NoBody
	return a.ParseWebhook(r, bytes.Clone(q.body))
}

// read turns a request from the fake into a request as the gateway sees
// it.
func read(t *testing.T, r *http.Request, what string) request {
	t.Helper()
	if r == nil {
		t.Fatalf("channeltest: Fake.%s returned a nil request", what)
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			t.Fatalf("channeltest: reading the body of the request from Fake.%s: %v", what, err)
		}
		_ = r.Body.Close()
	}
	return request{r: r, body: body}
}

func (f *Fake) sender() string {
	if f.Sender != "" {
		return f.Sender
	}
	return f.To
}

// request builds the provider's webhook request delivering m.
func (e *env) request(t *testing.T, m channels.Inbound) request {
	t.Helper()
	return read(t, e.fake.Inbound(t, m), "Inbound")
}

// rawRequest builds a webhook request carrying body.
func (e *env) rawRequest(t *testing.T, body []byte) request {
	t.Helper()
	if e.fake.Raw != nil {
		q := read(t, e.fake.Raw(t, body), "Raw")
		q.body = body
		return q
	}
	q := e.request(t, channels.Inbound{ProviderID: "ct-raw", Sender: e.fake.sender(), Text: "Replaced by a malformed body."})
	q.body = body
	return q
}

// parseOne parses q and fails the test unless it gives exactly one
// message.
func (e *env) parseOne(t *testing.T, a channels.WebhookReceiver, q request) channels.Inbound {
	t.Helper()
	ins, err := call(t, "ParseWebhook", func() ([]channels.Inbound, error) { return q.parse(a) })
	if err != nil {
		t.Fatalf("ParseWebhook of a correctly signed request: %v\nbody: %s", err, clip(q.body))
	}
	if len(ins) != 1 {
		t.Fatalf("ParseWebhook gave %d messages, want 1: %s\nbody: %s", len(ins), showInbounds(ins), clip(q.body))
	}
	return ins[0]
}

// receive builds and parses the request delivering m.
func (e *env) receive(t *testing.T, m channels.Inbound) channels.Inbound {
	t.Helper()
	a, ok := e.a.(channels.WebhookReceiver)
	if !ok {
		t.Fatal("channeltest: receive on an adapter that is not a WebhookReceiver")
	}
	return e.parseOne(t, a, e.request(t, m))
}

// threadOf is the conversation key of an inbound message, as messaging
// computes it.
func threadOf(in channels.Inbound) string {
	if in.ThreadKey != "" {
		return in.ThreadKey
	}
	return in.Sender
}

func testInbound(t *testing.T, h Harness) {
	e := setup(t, h)
	a, ok := e.a.(channels.WebhookReceiver)
	if !ok {
		t.Skip("the adapter is not a channels.WebhookReceiver")
	}
	sender := e.fake.sender()
	samples := []channels.Inbound{
		{ProviderID: "ct-in-1", Sender: sender, Text: sampleText},
		{ProviderID: "ct-in-2", Sender: sender, Text: "A second message from the same person."},
	}
	if h.Subject || h.HTML {
		rich := channels.Inbound{ProviderID: "ct-in-rich", Sender: sender, Text: "Plain part of a rich message."}
		if h.Subject {
			rich.Subject = ptr("Subject from channeltest (é)")
		}
		if h.HTML {
			rich.HTML = ptr("<p>Rich <b>part</b> &amp; more</p>")
		}
		samples = append(samples, rich)
	}

	var got []channels.Inbound
	for _, m := range samples {
		q := e.request(t, m)
		in := e.parseOne(t, a, q)
		if in.Sender != m.Sender {
			t.Errorf("message %s: Sender = %q, want %q", m.ProviderID, in.Sender, m.Sender)
		}
		if in.Text != m.Text {
			t.Errorf("message %s: Text = %q, want %q", m.ProviderID, in.Text, m.Text)
		}
		checkOptional(t, m.ProviderID, "Subject", h.Subject, in.Subject, m.Subject)
		checkOptional(t, m.ProviderID, "HTML", h.HTML, in.HTML, m.HTML)
		if in.ProviderID == "" {
			t.Errorf("message %s: empty ProviderID; inbound idempotency keys on it", m.ProviderID)
		}
		if threadOf(in) == "" {
			t.Errorf("message %s: empty ThreadKey and Sender", m.ProviderID)
		}
		// The gateway may parse one request more than once.
		if again := e.parseOne(t, a, q); !reflect.DeepEqual(again, in) {
			t.Errorf("message %s: parsing the same request twice gave %s, then %s", m.ProviderID, showInbound(in), showInbound(again))
		}
		// A provider retry is the same message: same provider id.
		if retry := e.parseOne(t, a, e.request(t, m)); retry.ProviderID != in.ProviderID {
			t.Errorf("message %s: a repeat delivery got ProviderID %q, the first %q; duplicates would be stored twice",
				m.ProviderID, retry.ProviderID, in.ProviderID)
		}
		got = append(got, in)
	}
	if got[0].ProviderID == got[1].ProviderID {
		t.Errorf("two different messages got the same ProviderID %q; the second would be dropped as a duplicate", got[0].ProviderID)
	}
	if threadOf(got[0]) != threadOf(got[1]) {
		t.Errorf("two messages from %q in the same thread got thread keys %q and %q", sender, threadOf(got[0]), threadOf(got[1]))
	}

	// A reply reaches the person who wrote.
	reply := channels.Outbound{MessageID: "msg_channeltest_reply", To: got[0].Sender, ThreadKey: threadOf(got[0]),
		InReplyTo: got[0].ProviderID, Text: "A reply to an inbound message."}
	e.mustSend(t, reply)
	e.checkDelivered(t, reply)
}

// checkOptional checks a field a channel may not carry: equal when it
// does, absent (null in the API) when it does not.
func checkOptional(t *testing.T, id, field string, carried bool, got, want *string) {
	t.Helper()
	switch {
	case carried && !equalPtr(got, want):
		t.Errorf("message %s: %s = %s, want %s", id, field, showPtr(got), showPtr(want))
	case !carried && got != nil:
		t.Errorf("message %s: %s = %s, want null: the harness says the channel does not carry it", id, field, showPtr(got))
	}
}

func testSignature(t *testing.T, h Harness) {
	e := setup(t, h)
	a, ok := e.a.(channels.WebhookReceiver)
	if !ok {
		t.Skip("the adapter is not a channels.WebhookReceiver")
	}
	if e.fake.Tamper == nil {
		if h.Unsigned == "" {
			t.Fatal("channeltest: Fake.Tamper is nil; set it, or set Harness.Unsigned to say why inbound requests carry no signature")
		}
		t.Skip(h.Unsigned)
	}
	m := channels.Inbound{ProviderID: "ct-sig", Sender: e.fake.sender(), Text: "Signed text: tamper-me."}
	good := e.request(t, m)
	e.parseOne(t, a, good)

	tampered := read(t, e.fake.Tamper(t, e.fake.Inbound(t, m)), "Tamper")
	expectSignatureError(t, a, tampered, "a request with a broken signature (Fake.Tamper)")

	if h.BodyUnsigned != "" {
		t.Logf("altered body not checked: %s", h.BodyUnsigned)
		return
	}
	altered := request{r: good.r, body: bytes.Replace(good.body, []byte("tamper-me"), []byte("tamper-us"), 1)}
	if bytes.Equal(altered.body, good.body) {
		altered.body = append(bytes.Clone(good.body), ' ')
	}
	expectSignatureError(t, a, altered, "a correctly signed request whose body was altered")
}

func expectSignatureError(t *testing.T, a channels.WebhookReceiver, q request, what string) {
	t.Helper()
	ins, err := call(t, "ParseWebhook", func() ([]channels.Inbound, error) { return q.parse(a) })
	switch {
	case err == nil:
		t.Errorf("ParseWebhook accepted %s: %s", what, showInbounds(ins))
	case !errors.Is(err, channels.ErrSignature):
		t.Errorf("ParseWebhook of %s: error %q does not wrap channels.ErrSignature", what, err)
	case len(ins) != 0:
		t.Errorf("ParseWebhook of %s returned messages with its error: %s", what, showInbounds(ins))
	}
}

// Malformed bodies. ParseWebhook must reject garbage; it may accept a
// well-formed payload that carries no message (a provider's status event)
// by returning none, but every message it returns must be complete.
var (
	garbage = [][]byte{
		{},
		[]byte("{"),
		[]byte(`{"message":`),
		[]byte("\x00\xff\xfe\xfd not a payload"),
	}
	oddShapes = [][]byte{
		[]byte("null"),
		[]byte("{}"),
		[]byte("[]"),
		[]byte("[{}]"),
		[]byte(`{"id":null,"text":null}`),
		[]byte(`{"message":{"text":123,"from":[],"chat":"x"},"entry":{},"data":7}`),
		[]byte("a=1&b=%zz&c"),
		[]byte(strings.Repeat("[", 100000)),
		[]byte(`{"text":"` + strings.Repeat("a", 1<<20) + `"}`),
	}
)

func testMalformed(t *testing.T, h Harness) {
	e := setup(t, h)
	a, ok := e.a.(channels.WebhookReceiver)
	if !ok {
		t.Skip("the adapter is not a channels.WebhookReceiver")
	}
	if e.fake.Raw == nil {
		t.Log("Fake.Raw is nil: malformed bodies go in requests signed for another body")
	}
	for _, body := range garbage {
		ins, err := call(t, fmt.Sprintf("ParseWebhook(%s)", clip(body)), func() ([]channels.Inbound, error) {
			return e.rawRequest(t, body).parse(a)
		})
		if err == nil {
			t.Errorf("ParseWebhook accepted the garbage body %s: %s", clip(body), showInbounds(ins))
		}
	}
	for _, body := range oddShapes {
		ins, err := call(t, fmt.Sprintf("ParseWebhook(%s)", clip(body)), func() ([]channels.Inbound, error) {
			return e.rawRequest(t, body).parse(a)
		})
		if err != nil {
			continue
		}
		for _, in := range ins {
			if in.ProviderID == "" || in.Sender == "" {
				t.Errorf("ParseWebhook of the malformed body %s returned an incomplete message %s", clip(body), showInbound(in))
			}
		}
	}
}

// clip shortens a body for a message.
func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q... (%d bytes)", b[:n], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func showInbound(in channels.Inbound) string {
	return fmt.Sprintf("{ProviderID:%q ThreadKey:%q Sender:%q Subject:%s Text:%q HTML:%s}",
		in.ProviderID, in.ThreadKey, in.Sender, showPtr(in.Subject), in.Text, showPtr(in.HTML))
}

func showInbounds(ins []channels.Inbound) string {
	parts := make([]string, len(ins))
	for i, in := range ins {
		parts[i] = showInbound(in)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Package channeltest is the conformance suite every channel adapter passes.
//
// An adapter's test fills in a Harness that points the adapter at a fake
// provider (an httptest server speaking the provider's documented protocol,
// signatures included) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		channeltest.Run(t, channeltest.Harness{
//			Descriptor: telegram.Descriptor(),
//			Fake: func(t *testing.T) *channeltest.Fake {
//				p := newFakeTelegram(t) // httptest server, closed by t.Cleanup
//				return &channeltest.Fake{Config: p.config(), To: "4242", Sent: p.sent, ...}
//			},
//		})
//	}
//
// Every subtest provisions its own adapter against its own fake, and the
// subtests run in parallel, so Fake must be safe to call concurrently and
// must not share mutable state between the fakes it returns.
//
// The suite checks what the rest of comm relies on: the descriptor is sane
// and New rejects a malformed configuration clearly; Send delivers what it
// is given and returns the provider's id; a repeated MessageID makes one
// provider message where the adapter claims idempotency; Typing reaches the
// provider; ParseWebhook maps every field, gives a provider id that is
// stable across repeat deliveries (what makes inbound idempotent
// downstream), rejects a broken signature with channels.ErrSignature and
// never panics on garbage; a reply to a parsed message reaches its sender;
// provider failures come back wrapping channels.ErrTransient or
// channels.ErrPermanent with a message naming the channel (and the
// provider's retry delay, where the fake names one); concurrent use is safe
// (run with -race); Close releases.
//
// Where an adapter has the optional abilities, the suite checks them too:
// Provision sets the connection up with the fake's credentials, the
// configuration it returns is accepted by New and works (sends, verifies
// the provider's webhooks), and a credential the provider rejects is a
// *channels.ConfigError naming the field; Deprovision undoes the setup and
// may be repeated; a Poller emits what the provider queued once, returns a
// retryable error when emit fails and hands the same message (same
// provider id) to the next session, and returns nil once its context ends.
//
// A Responder answers the fake's handshake as the provider expects,
// refuses a tampered one with channels.ErrSignature, lets an ordinary
// inbound request go on to ParseWebhook (nil), never answers an unsigned
// request and never panics on garbage. Where the descriptor has an
// app-level webhook (Descriptor.App), Route verifies (a tampered or
// altered request is channels.ErrSignature; an unverified one chooses no
// tenant), names the routing key the provisioned connection registered,
// answers its handshake, and the connection's ParseWebhook returns its own
// message while another tenant's connection returns none. Typing reaches
// the provider with the message it answers (InReplyTo) where the provider
// needs it, and a TypingRefresher refreshes well within comm's typing
// lease.
//
// ParseWebhook is called the way the gateway calls it: the body has been
// read, so r.Body is empty and the bytes are in body. An adapter that reads
// r.Body or r.ParseForm sees nothing.
//
// channeltest's own tests hold a worked example: a small HTTP adapter, its
// fake provider and its Harness (example_test.go).
package channeltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Harness describes an adapter under test.
type Harness struct {
	// Descriptor is the adapter's descriptor; New must be set.
	Descriptor channels.Descriptor

	// Fake starts a fresh fake provider for one subtest and says how to
	// reach and drive it. Stop the fake with t.Cleanup. Required.
	Fake func(t *testing.T) *Fake

	// BadConfigs are connection configurations New must reject, besides
	// the suite's own (broken JSON, JSON that is not an object): a
	// required field missing, a base URL that is not a URL ...
	BadConfigs []json.RawMessage

	// Idempotent claims that sending the same Outbound.MessageID twice
	// makes one provider message and returns the same provider id (the
	// provider takes an idempotency key, or the adapter remembers). The
	// suite checks the claim; without it the check is skipped.
	Idempotent bool

	// Subject and HTML say the channel carries a subject and an HTML body
	// both ways (email). When false the suite neither sends nor expects
	// them.
	Subject, HTML bool

	// Unsigned says why the channel's inbound requests carry no signature
	// (the test channel: the REST API has authenticated the caller). It is
	// required when the adapter is a WebhookReceiver and Fake.Tamper is
	// nil, and is the reason the signature subtest is skipped.
	Unsigned string

	// BodyUnsigned says why the provider's authenticity check does not
	// cover the body (Telegram sends a shared secret in a header). It skips
	// the check that an altered body fails the signature.
	BodyUnsigned string
}

// Fake is one fake provider, as a subtest sees it. Functions get the
// subtest's t (report problems with t.Fatal) and the adapter under test
// (for adapters that record what they do themselves, like the test
// channel; fakes of real providers ignore it).
type Fake struct {
	// Config is the connection configuration that points the adapter at
	// this fake (base URLs, credentials the fake accepts).
	Config json.RawMessage

	// To is a recipient the provider accepts. Sender is the sender of the
	// inbound messages Inbound builds; it defaults to To.
	To, Sender string

	// Sent returns the messages the provider accepted so far, in order, as
	// the provider saw them: To (or ThreadKey, when the protocol addresses
	// threads) is where it delivered, Text, Subject and HTML what it
	// delivered. Failed sends are not in it. Required.
	Sent func(t *testing.T, a channels.Adapter) []channels.Outbound

	// Typings returns the typing indicators the provider was asked to
	// show, in order. Required when the adapter is a channels.Typer.
	Typings func(t *testing.T, a channels.Adapter) []channels.Typing

	// Inbound builds the provider's webhook request delivering m,
	// correctly signed. m.ProviderID is a token chosen by the suite: the
	// same token must give the provider's same message id (a provider
	// retry), different tokens different ids; use it verbatim where the
	// protocol allows. m.ThreadKey is empty: use the sender's natural
	// thread. Required when the adapter is a channels.WebhookReceiver.
	Inbound func(t *testing.T, m channels.Inbound) *http.Request

	// Raw builds a correctly signed webhook request carrying body as it
	// is, so that malformed bodies reach the parser behind the signature
	// check. Optional: without it the malformed bodies are put in a
	// request built by Inbound, and a signing adapter stops them at the
	// signature.
	Raw func(t *testing.T, body []byte) *http.Request

	// Tamper returns r with its authenticity broken: a wrong or missing
	// signature header, a wrong secret in the URL, a stale timestamp.
	// Nil when the channel signs nothing (see Harness.Unsigned).
	Tamper func(t *testing.T, r *http.Request) *http.Request

	// WebhookURL is the connection's public ingress URL
	// (channels.Connection.WebhookURL) the adapter is built with; empty
	// when the gateway has none.
	WebhookURL string

	// Queue makes the provider hold m for the adapter's inbound session
	// (a message a person sent, waiting in getUpdates or on a gateway
	// socket). m is as for Inbound. Required when the adapter is a
	// channels.Poller.
	Queue func(t *testing.T, m channels.Inbound)

	// BadCredential is a configuration New accepts but whose credential
	// the provider rejects (a revoked token): Provision must fail with a
	// *channels.ConfigError naming the field. Optional: without it the
	// check is skipped.
	BadCredential json.RawMessage

	// Provisioned reports whether the provider has the connection's setup
	// in place (a webhook registered, an app subscribed). The suite checks
	// it is true after Provision and false after Deprovision. Optional.
	Provisioned func(t *testing.T) bool

	// RetryAfter is the delay the fake's RateLimited failure asks for (a
	// retry_after, a Retry-After header); when not 0, the send error must
	// carry it (channels.RetryAfter).
	RetryAfter time.Duration

	// TypingNeedsMessage says the provider shows typing on a message
	// (WhatsApp, Twilio) or in its thread (Slack), so the adapter needs
	// channels.Typing.InReplyTo. The suite then shows typing in answer to
	// a message it received (through Inbound, or Queue for a Poller) and
	// checks that Typings reports that message: InReplyTo in the form of
	// the adapter's Inbound.ProviderID (the fake maps its own form back).
	TypingNeedsMessage bool

	// Handshake builds a correctly signed provider request to the
	// connection's ingress that carries no message (a challenge, a
	// verification, a ping; GET or POST) and the answer the provider
	// expects: Status (0 is 200), Body exactly, and each header in Header.
	// Tamper must break it as it breaks Inbound's requests. Required when
	// the adapter is a channels.Responder.
	Handshake func(t *testing.T) (*http.Request, channels.Response)

	// AppInbound builds the provider's request to the channel's app-level
	// webhook (/hooks/<channel>) delivering m for the tenant of the
	// routing key key, signed with the app's secret (the one
	// Harness.Descriptor.App verifies with). m is as for Inbound; the
	// suite sets m.Text to include "tamper-me". Required when
	// Descriptor.App is set.
	AppInbound func(t *testing.T, key string, m channels.Inbound) *http.Request

	// AppHandshake builds a correctly signed app-level request the app
	// answers itself (Slack url_verification, a Meta hub.challenge GET, an
	// X CRC) and the answer the provider expects, as for Handshake.
	// Optional.
	AppHandshake func(t *testing.T) (*http.Request, channels.Response)

	// AppTamper returns an app-level request with its authenticity broken
	// (a wrong app signature). Optional when Tamper does that too.
	AppTamper func(t *testing.T, r *http.Request) *http.Request

	// RouteKey is the routing key Provision must register for Config (the
	// id of the workspace or page the fake's credentials belong to).
	// Optional: without it the suite only checks that the key is not
	// empty.
	RouteKey string

	// OtherTenant is the configuration of another tenant of the same
	// provider app (another workspace, another page) at this fake, whose
	// Provision registers a different routing key. The suite checks that
	// the events of one tenant never reach the other. Required when
	// Descriptor.App is set.
	OtherTenant json.RawMessage

	// Fail arranges for the next send to fail as kind and returns the
	// recipient to send it to, and a detail the adapter's error must
	// contain (the provider's description or status; "" checks nothing).
	// An empty to means the fake cannot simulate kind, and that check is
	// skipped. Failures after the next send are the fake's business; the
	// suite sends to Fake.To afterwards and expects success. Optional.
	Fail func(t *testing.T, kind Failure) (to, detail string)
}

// Failure is a way a provider fails a send.
type Failure int

// Failures the suite asks a fake to simulate.
const (
	// RateLimited: 429 Too Many Requests. Transient.
	RateLimited Failure = iota + 1
	// Unavailable: a 5xx answer. Transient.
	Unavailable
	// Timeout: no answer until the caller gives up (hold the request until
	// its context ends). The suite sends with a short deadline. Transient.
	Timeout
	// Rejected: a 4xx answer about the message (unknown recipient, text
	// too long). Permanent.
	Rejected
	// Unauthorized: 401/403, credentials revoked. Permanent.
	Unauthorized
)

// failures lists every Failure, in order.
var failures = []Failure{RateLimited, Unavailable, Timeout, Rejected, Unauthorized}

func (f Failure) String() string {
	switch f {
	case RateLimited:
		return "rate-limited"
	case Unavailable:
		return "unavailable"
	case Timeout:
		return "timeout"
	case Rejected:
		return "rejected"
	case Unauthorized:
		return "unauthorized"
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// Class is the error a send failing as f must wrap: channels.ErrTransient
// or channels.ErrPermanent.
func (f Failure) Class() error {
	if f == Rejected || f == Unauthorized {
		return channels.ErrPermanent
	}
	return channels.ErrTransient
}

// Run runs the conformance suite against h, one parallel subtest per
// property.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Descriptor.New == nil {
		t.Fatalf("channeltest: Harness.Descriptor.New is nil (channel %q)", h.Descriptor.Channel)
	}
	if h.Fake == nil {
		t.Fatal("channeltest: Harness.Fake is nil")
	}
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"descriptor", testDescriptor},
		{"send", testSend},
		{"idempotent", testIdempotent},
		{"typing", testTyping},
		{"inbound", testInbound},
		{"signature", testSignature},
		{"malformed", testMalformed},
		{"errors", testErrors},
		{"concurrent", testConcurrent},
		{"close", testClose},
		{"provision", testProvision},
		{"deprovision", testDeprovision},
		{"poll", testPoll},
		{"respond", testRespond},
		{"app", testApp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// env is one subtest's adapter and fake.
type env struct {
	h    Harness
	fake *Fake
	a    channels.Adapter
	// close closes a Closer adapter once; it is also registered with
	// t.Cleanup.
	close func() error
}

// setup starts a fake and provisions an adapter against it, checking that
// the fake provides what the adapter's abilities need.
func setup(t *testing.T, h Harness) *env {
	t.Helper()
	f := h.Fake(t)
	if f == nil {
		t.Fatal("channeltest: Harness.Fake returned nil")
	}
	if f.Sent == nil {
		t.Fatal("channeltest: Fake.Sent is nil")
	}
	if f.To == "" {
		t.Fatal("channeltest: Fake.To is empty")
	}
	a, err := call(t, "New", func() (channels.Adapter, error) {
		return h.Descriptor.New(t.Context(), connection(f.Config, f.WebhookURL))
	})
	if err != nil {
		t.Fatalf("New with Fake.Config %s: %v", f.Config, err)
	}
	if a == nil {
		t.Fatal("New returned a nil adapter and no error")
	}
	e := &env{h: h, fake: f, a: a, close: func() error { return nil }}
	if c, ok := a.(channels.Closer); ok {
		e.close = sync.OnceValue(c.Close)
		t.Cleanup(func() { _ = e.close() })
	}
	if _, ok := a.(channels.Typer); ok && f.Typings == nil {
		t.Fatal("channeltest: the adapter is a channels.Typer but Fake.Typings is nil")
	}
	if _, ok := a.(channels.WebhookReceiver); ok && f.Inbound == nil {
		t.Fatal("channeltest: the adapter is a channels.WebhookReceiver but Fake.Inbound is nil")
	}
	if _, ok := a.(channels.Poller); ok && f.Queue == nil {
		t.Fatal("channeltest: the adapter is a channels.Poller but Fake.Queue is nil")
	}
	if _, ok := a.(channels.Responder); ok && f.Handshake == nil {
		t.Fatal("channeltest: the adapter is a channels.Responder but Fake.Handshake is nil")
	}
	return e
}

func connection(config json.RawMessage, webhookURL string) channels.Connection {
	return channels.Connection{ID: "conn_channeltest", ProjectID: "proj_channeltest", Config: config, WebhookURL: webhookURL}
}

// call runs f, turning a panic into a test failure with the stack.
func call[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	v, err := safe(what, f)
	var p *panicked
	if errors.As(err, &p) {
		t.Fatal(p)
	}
	return v, err
}

// safe is call for goroutines other than the test's: a panic becomes a
// *panicked error.
func safe[T any](what string, f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicked{what: what, value: r, stack: debug.Stack()}
		}
	}()
	return f()
}

// panicked is a panic of the adapter, caught.
type panicked struct {
	what  string
	value any
	stack []byte
}

func (p *panicked) Error() string {
	return fmt.Sprintf("%s panicked: %v\n%s", p.what, p.value, p.stack)
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func testDescriptor(t *testing.T, h Harness) {
	d := h.Descriptor
	if !nameRE.MatchString(d.Channel) {
		t.Errorf("Channel = %q, want a lowercase name like \"telegram\"", d.Channel)
	}
	if d.Provider != "" && !nameRE.MatchString(d.Provider) {
		t.Errorf("Provider = %q, want empty or a lowercase name like \"twilio\"", d.Provider)
	}
	if d.Tier != channels.Free && d.Tier != channels.Paid {
		t.Errorf("Tier = %q, want %q or %q", d.Tier, channels.Free, channels.Paid)
	}
	e := setup(t, h) // New accepts the fake's config

	bad := []json.RawMessage{
		json.RawMessage(`{`),
		json.RawMessage(`{"a":`),
		json.RawMessage(`[1,2]`),
		json.RawMessage(`"config"`),
		json.RawMessage(`42`),
	}
	bad = append(bad, h.BadConfigs...)
	for _, c := range bad {
		a, err := call(t, fmt.Sprintf("New(%s)", c), func() (channels.Adapter, error) {
			return d.New(t.Context(), connection(c, e.fake.WebhookURL))
		})
		if err == nil {
			if cl, ok := a.(channels.Closer); ok {
				_ = cl.Close()
			}
			t.Errorf("New accepted the malformed config %s", c)
			continue
		}
		if !namesChannel(d, err) {
			t.Errorf("New(%s) error %q does not name the channel (%s)", c, err, channelNames(d))
		}
	}
}

// namesChannel reports whether err's message names d's channel or
// provider, as "telegram: send message: ..." does.
func namesChannel(d channels.Descriptor, err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, d.Channel) || (d.Provider != "" && strings.Contains(msg, d.Provider))
}

func channelNames(d channels.Descriptor) string {
	if d.Provider == "" {
		return fmt.Sprintf("%q", d.Channel)
	}
	return fmt.Sprintf("%q or %q", d.Channel, d.Provider)
}

// className is how a failure class is spelled in Go.
func className(class error) string {
	if class == channels.ErrPermanent {
		return "channels.ErrPermanent"
	}
	return "channels.ErrTransient"
}

// isClass reports whether err wraps class and not the other class.
func isClass(err, class error) bool {
	other := channels.ErrPermanent
	if class == channels.ErrPermanent {
		other = channels.ErrTransient
	}
	return errors.Is(err, class) && !errors.Is(err, other)
}

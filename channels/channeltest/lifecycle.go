package channeltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// pollWait bounds how long the suite waits for a Poller to emit what the
// fake queued, or to return. It is a safety net against a hung test, not a
// speed requirement.
const pollWait = 30 * time.Second

// provision calls Provision and fails the test on an error.
func (e *env) provision(t *testing.T) channels.Provisioned {
	t.Helper()
	p := e.a.(channels.Provisioner)
	res, err := call(t, "Provision", func() (channels.Provisioned, error) { return p.Provision(t.Context()) })
	if err != nil {
		t.Fatalf("Provision with Fake.Config: %v", err)
	}
	return res
}

// renew builds the adapter the gateway builds after Provision: New with
// the configuration Provision returned.
func (e *env) renew(t *testing.T, res channels.Provisioned) *env {
	t.Helper()
	cfg := e.fake.Config
	if res.Config != nil {
		cfg = res.Config
	}
	a, err := call(t, "New", func() (channels.Adapter, error) {
		return e.h.Descriptor.New(t.Context(), connection(cfg, e.fake.WebhookURL))
	})
	if err != nil {
		t.Fatalf("New does not accept the configuration Provision returned: %v", err)
	}
	if a == nil {
		t.Fatal("New returned a nil adapter and no error")
	}
	n := &env{h: e.h, fake: e.fake, a: a, close: func() error { return nil }}
	if c, ok := a.(channels.Closer); ok {
		n.close = sync.OnceValue(c.Close)
		t.Cleanup(func() { _ = n.close() })
	}
	return n
}

func testProvision(t *testing.T, h Harness) {
	e := setup(t, h)
	if _, ok := e.a.(channels.Provisioner); !ok {
		t.Skip("the adapter is not a channels.Provisioner")
	}
	res := e.provision(t)
	if e.fake.Provisioned != nil && !e.fake.Provisioned(t) {
		t.Error("Provision succeeded but the provider shows no setup of the connection (Fake.Provisioned)")
	}

	// The provisioned connection works.
	n := e.renew(t, res)
	out := n.outbound("provisioned", "Sent by a provisioned connection.")
	n.mustSend(t, out)
	n.checkDelivered(t, out)
	if _, ok := n.a.(channels.WebhookReceiver); ok {
		in := n.receive(t, channels.Inbound{ProviderID: "ct-provisioned", Sender: n.fake.sender(), Text: "Received by a provisioned connection."})
		if in.Text != "Received by a provisioned connection." {
			t.Errorf("the provisioned adapter parsed Text %q", in.Text)
		}
	}

	if e.fake.BadCredential == nil {
		t.Log("Fake.BadCredential is nil: a credential the provider rejects is not checked")
		return
	}
	bad, err := call(t, "New", func() (channels.Adapter, error) {
		return h.Descriptor.New(t.Context(), connection(e.fake.BadCredential, e.fake.WebhookURL))
	})
	if err != nil {
		t.Fatalf("New rejected Fake.BadCredential (%v); it must accept it, so that Provision asks the provider", err)
	}
	if c, ok := bad.(channels.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	p, ok := bad.(channels.Provisioner)
	if !ok {
		t.Fatal("New with Fake.BadCredential gave an adapter that is not a channels.Provisioner")
	}
	_, err = call(t, "Provision", func() (channels.Provisioned, error) { return p.Provision(t.Context()) })
	var ce *channels.ConfigError
	switch {
	case err == nil:
		t.Error("Provision accepted a credential the provider rejects (Fake.BadCredential)")
	case !errors.As(err, &ce) || ce.Field == "":
		t.Errorf("Provision with a rejected credential: error %q is not a *channels.ConfigError naming the field; the caller must hear what to fix", err)
	case !namesChannel(h.Descriptor, err):
		t.Errorf("Provision error %q does not name the channel (%s)", err, channelNames(h.Descriptor))
	}
}

func testDeprovision(t *testing.T, h Harness) {
	e := setup(t, h)
	if _, ok := e.a.(channels.Deprovisioner); !ok {
		t.Skip("the adapter is not a channels.Deprovisioner")
	}
	if _, ok := e.a.(channels.Provisioner); ok {
		// The gateway deprovisions with the adapter of the stored
		// configuration.
		e = e.renew(t, e.provision(t))
	}
	d, ok := e.a.(channels.Deprovisioner)
	if !ok {
		t.Fatal("the adapter built from the provisioned configuration is not a channels.Deprovisioner")
	}
	deprovision := func() error {
		_, err := call(t, "Deprovision", func() (struct{}, error) { return struct{}{}, d.Deprovision(t.Context()) })
		return err
	}
	if err := deprovision(); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if e.fake.Provisioned != nil && e.fake.Provisioned(t) {
		t.Error("after Deprovision the provider still has the connection's setup (Fake.Provisioned)")
	}
	if err := deprovision(); err != nil {
		t.Errorf("a second Deprovision failed (the gateway may repeat a delete that timed out): %v", err)
	}
}

// session is one running Poll.
type session struct {
	cancel context.CancelFunc
	done   chan error // Poll's result

	mu      sync.Mutex
	emitted []channels.Inbound // accepted or not
	news    chan struct{}      // a value per emit
}

// startPoll runs Poll with emit deciding about each message.
func (e *env) startPoll(t *testing.T, p channels.Poller, decide func(channels.Inbound) error) *session {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &session{cancel: cancel, done: make(chan error, 1), news: make(chan struct{}, 1024)}
	go func() {
		_, err := safe("Poll", func() (struct{}, error) {
			return struct{}{}, p.Poll(ctx, func(ins ...channels.Inbound) error {
				for _, in := range ins {
					s.mu.Lock()
					s.emitted = append(s.emitted, in)
					s.mu.Unlock()
					select {
					case s.news <- struct{}{}:
					default:
					}
					if err := decide(in); err != nil {
						return err
					}
				}
				return nil
			})
		})
		s.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(pollWait):
		}
	})
	return s
}

// all returns the messages emitted so far.
func (s *session) all() []channels.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]channels.Inbound(nil), s.emitted...)
}

// with returns the emitted messages with text.
func (s *session) with(text string) []channels.Inbound {
	var out []channels.Inbound
	for _, in := range s.all() {
		if in.Text == text {
			out = append(out, in)
		}
	}
	return out
}

// wait waits until a message with text was emitted and returns it. Poll
// returning meanwhile fails the test.
func (s *session) wait(t *testing.T, text string) channels.Inbound {
	t.Helper()
	timeout := time.After(pollWait)
	for {
		if got := s.with(text); len(got) > 0 {
			return got[0]
		}
		select {
		case <-s.news:
		case err := <-s.done:
			s.done <- err // for end
			t.Fatalf("Poll returned (%v) before emitting the message %q the provider queued", err, text)
		case <-timeout:
			t.Fatalf("Poll had not emitted the message %q the provider queued after %s", text, pollWait)
		}
	}
}

// end waits for Poll to return and returns its error.
func (s *session) end(t *testing.T, what string) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		var p *panicked
		if errors.As(err, &p) {
			t.Fatal(p)
		}
		return err
	case <-time.After(pollWait):
		t.Fatalf("Poll had not returned %s after %s", what, pollWait)
		return nil
	}
}

func testPoll(t *testing.T, h Harness) {
	e := setup(t, h)
	p, ok := e.a.(channels.Poller)
	if !ok {
		t.Skip("the adapter is not a channels.Poller")
	}
	sender := e.fake.sender()
	first := channels.Inbound{ProviderID: "ct-poll-1", Sender: sender, Text: "Polled message one."}
	second := channels.Inbound{ProviderID: "ct-poll-2", Sender: sender, Text: "Polled message two: its first emit fails."}

	// Session one: the first message is emitted once; the emit of the
	// second fails, which ends the session with a retryable error.
	var failed sync.Once
	s1 := e.startPoll(t, p, func(in channels.Inbound) error {
		err := error(nil)
		if in.Text == second.Text {
			failed.Do(func() { err = errors.New("channeltest: the store failed on purpose") })
		}
		return err
	})
	e.fake.Queue(t, first)
	got := s1.wait(t, first.Text)
	if got.Sender != first.Sender {
		t.Errorf("polled message: Sender = %q, want %q", got.Sender, first.Sender)
	}
	if got.ProviderID == "" {
		t.Error("polled message: empty ProviderID; inbound idempotency keys on it")
	}
	if threadOf(got) == "" {
		t.Error("polled message: empty ThreadKey and Sender")
	}
	e.fake.Queue(t, second)
	err := s1.end(t, "after emit failed")
	switch {
	case err == nil:
		t.Error("Poll returned nil after emit failed; want an error (nil means its context ended), so that the gateway starts a new session")
	case errors.Is(err, channels.ErrPermanent):
		t.Errorf("Poll returned %q after emit failed: it wraps channels.ErrPermanent, which stops the connection's session for good; a failed store is retryable", err)
	}
	if n := len(s1.with(first.Text)); n != 1 {
		t.Errorf("the first session emitted the first message %d times, want once", n)
	}
	attempt := s1.with(second.Text)
	if len(attempt) != 1 {
		t.Fatalf("the first session emitted the second message %d times, want once (its emit failed)", len(attempt))
	}

	// Session two: the message whose emit failed comes again, the same.
	s2 := e.startPoll(t, p, func(channels.Inbound) error { return nil })
	again := s2.wait(t, second.Text)
	if again.ProviderID != attempt[0].ProviderID {
		t.Errorf("the message whose emit failed came again with ProviderID %q, first %q; it would be stored twice", again.ProviderID, attempt[0].ProviderID)
	}
	for _, in := range s2.with(first.Text) {
		if in.ProviderID != got.ProviderID {
			t.Errorf("the first message came again with ProviderID %q, first %q; it would be stored twice", in.ProviderID, got.ProviderID)
		}
	}
	s2.cancel()
	if err := s2.end(t, "after its context ended"); err != nil {
		t.Errorf("Poll returned %q after its context ended; want nil", err)
	}
}

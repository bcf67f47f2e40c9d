package channeltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// sampleText exercises the encodings providers use (JSON, forms, MIME):
// quotes, markup, an ampersand, a newline and characters outside ASCII.
const sampleText = "Hello from channeltest: \"quotes\", <b>tags</b> & ampersands,\nnew lines, accents (é), emoji (👋) & 100% percent+plus"

// TimeoutWait is how long the suite gives a send to a fake that never
// answers before it gives up, through the send's context.
const TimeoutWait = 300 * time.Millisecond

// returnWait bounds how long Send may take to return once its context has
// expired before the suite reports it stuck. It is a safety net against a
// hung test, not a speed requirement.
const returnWait = 10 * time.Second

func (e *env) send(t *testing.T, out channels.Outbound) (channels.SendResult, error) {
	t.Helper()
	return call(t, "Send", func() (channels.SendResult, error) { return e.a.Send(t.Context(), out) })
}

// mustSend sends out and fails the test unless the provider accepted it
// with an id.
func (e *env) mustSend(t *testing.T, out channels.Outbound) channels.SendResult {
	t.Helper()
	res, err := e.send(t, out)
	if err != nil {
		t.Fatalf("Send(%s): %v", describe(out), err)
	}
	if res.ProviderID == "" {
		t.Fatalf("Send(%s) returned an empty provider id", describe(out))
	}
	return res
}

// deliveries returns what the fake accepted with out's text.
func (e *env) deliveries(t *testing.T, out channels.Outbound) []channels.Outbound {
	t.Helper()
	var got []channels.Outbound
	for _, d := range e.fake.Sent(t, e.a) {
		if d.Text == out.Text {
			got = append(got, d)
		}
	}
	return got
}

// checkDelivered checks that the provider received out exactly once, at
// the right address, with its content.
func (e *env) checkDelivered(t *testing.T, out channels.Outbound) {
	t.Helper()
	got := e.deliveries(t, out)
	if len(got) != 1 {
		t.Errorf("the provider received %d messages with the text of %s, want 1 (all it received: %s)",
			len(got), describe(out), describeAll(e.fake.Sent(t, e.a)))
		return
	}
	d := got[0]
	if !sameAddress(d.To, d.ThreadKey, out.To, out.ThreadKey) {
		t.Errorf("the provider delivered %s to to=%q thread=%q, want to=%q or thread=%q",
			describe(out), d.To, d.ThreadKey, out.To, out.ThreadKey)
	}
	if e.h.Subject && !equalPtr(d.Subject, out.Subject) {
		t.Errorf("the provider received subject %s, want %s", showPtr(d.Subject), showPtr(out.Subject))
	}
	if e.h.HTML && !equalPtr(d.HTML, out.HTML) {
		t.Errorf("the provider received html %s, want %s", showPtr(d.HTML), showPtr(out.HTML))
	}
}

func sameAddress(gotTo, gotThread, wantTo, wantThread string) bool {
	return (wantTo != "" && gotTo == wantTo) || (wantThread != "" && gotThread == wantThread)
}

// outbound is a message to the fake's recipient in a conversation started
// by comm, as the outbox builds it (the thread key of such a conversation
// is the recipient).
func (e *env) outbound(id, text string) channels.Outbound {
	return channels.Outbound{MessageID: "msg_channeltest_" + id, To: e.fake.To, ThreadKey: e.fake.To, Text: text}
}

func testSend(t *testing.T, h Harness) {
	e := setup(t, h)
	first := e.outbound("send_1", sampleText)
	second := e.outbound("send_2", "A second message, to check provider ids differ.")
	r1 := e.mustSend(t, first)
	r2 := e.mustSend(t, second)
	if r1.ProviderID == r2.ProviderID {
		t.Errorf("two different messages got the same provider id %q", r1.ProviderID)
	}
	e.checkDelivered(t, first)
	e.checkDelivered(t, second)

	if h.Subject || h.HTML {
		rich := e.outbound("send_rich", "Plain part of a rich message.")
		if h.Subject {
			rich.Subject = ptr("Subject from channeltest (é)")
		}
		if h.HTML {
			rich.HTML = ptr("<p>Rich <b>part</b> &amp; more</p>")
		}
		e.mustSend(t, rich)
		e.checkDelivered(t, rich)
	}
}

func testIdempotent(t *testing.T, h Harness) {
	if !h.Idempotent {
		t.Skip("Harness.Idempotent is false: the adapter does not claim idempotent sends")
	}
	e := setup(t, h)
	out := e.outbound("idem", "Sent twice under one message id, delivered once.")
	r1 := e.mustSend(t, out)
	r2 := e.mustSend(t, out)
	if r1.ProviderID != r2.ProviderID {
		t.Errorf("sending message id %q twice gave provider ids %q and %q, want one", out.MessageID, r1.ProviderID, r2.ProviderID)
	}
	if got := e.deliveries(t, out); len(got) != 1 {
		t.Errorf("sending message id %q twice made %d provider messages, want 1", out.MessageID, len(got))
	}
}

// typingLease is how long one typing call of comm's API shows the
// indicator (messaging.TypingLease); a TypingRefresher must show it again
// well before it fades.
const typingLease = 10 * time.Second

func testTyping(t *testing.T, h Harness) {
	e := setup(t, h)
	typer, ok := e.a.(channels.Typer)
	if !ok {
		t.Skip("the adapter is not a channels.Typer")
	}
	if r, ok := e.a.(channels.TypingRefresher); ok {
		if every := r.TypingEvery(); every <= 0 || every >= typingLease {
			t.Errorf("TypingEvery() = %s, want more than 0 and less than comm's typing lease of %s, so that the indicator stays on while the lease lasts", every, typingLease)
		}
	}
	type typing struct {
		channels.Typing
		onMessage bool // the provider must see InReplyTo
	}
	var want []typing
	if e.fake.TypingNeedsMessage {
		// In a conversation comm started there is no message to show
		// typing on: the adapter may fail, but must not panic.
		w := channels.Typing{ThreadKey: e.fake.To, To: e.fake.To}
		_, err := call(t, "Typing", func() (struct{}, error) { return struct{}{}, typer.Typing(t.Context(), w) })
		t.Logf("Typing without a message (Fake.TypingNeedsMessage): %v", err)
	} else {
		want = append(want, typing{Typing: channels.Typing{ThreadKey: e.fake.To, To: e.fake.To}})
	}
	if in, ok := e.someInbound(t, channels.Inbound{ProviderID: "ct-typing", Sender: e.fake.sender(), Text: "Are you there?"}); ok {
		// Typing in a conversation a person started, as the API does it:
		// on the message being answered.
		want = append(want, typing{Typing: channels.Typing{ThreadKey: threadOf(in), To: in.Sender, InReplyTo: in.ProviderID},
			onMessage: e.fake.TypingNeedsMessage})
	} else if e.fake.TypingNeedsMessage {
		t.Fatal("channeltest: Fake.TypingNeedsMessage is set but the adapter receives no messages (neither a channels.WebhookReceiver nor a channels.Poller)")
	}
	for _, w := range want {
		if _, err := call(t, "Typing", func() (struct{}, error) { return struct{}{}, typer.Typing(t.Context(), w.Typing) }); err != nil {
			t.Fatalf("Typing(to=%q thread=%q in_reply_to=%q): %v", w.To, w.ThreadKey, w.InReplyTo, err)
		}
	}
	got := e.fake.Typings(t, e.a)
	for _, w := range want {
		found, onMessage := false, false
		for _, g := range got {
			if sameAddress(g.To, g.ThreadKey, w.To, w.ThreadKey) {
				found = true
				onMessage = onMessage || g.InReplyTo == w.InReplyTo
			}
		}
		switch {
		case !found:
			t.Errorf("the provider saw no typing indicator for to=%q thread=%q (it saw %+v)", w.To, w.ThreadKey, got)
		case w.onMessage && !onMessage:
			t.Errorf("the provider saw no typing indicator on message %q (Typing.InReplyTo); it shows typing on a message (Fake.TypingNeedsMessage), and saw %+v",
				w.InReplyTo, got)
		}
	}
}

// someInbound has the fake deliver m to the adapter the way it receives
// messages (a webhook, or its inbound session) and returns the parsed
// message; false when the adapter receives none.
func (e *env) someInbound(t *testing.T, m channels.Inbound) (channels.Inbound, bool) {
	t.Helper()
	if _, ok := e.a.(channels.WebhookReceiver); ok {
		return e.receive(t, m), true
	}
	p, ok := e.a.(channels.Poller)
	if !ok {
		return channels.Inbound{}, false
	}
	s := e.startPoll(t, p, func(channels.Inbound) error { return nil })
	e.fake.Queue(t, m)
	in := s.wait(t, m.Text)
	s.cancel()
	if err := s.end(t, "after its context ended"); err != nil {
		t.Errorf("Poll returned %q after its context ended; want nil", err)
	}
	return in, true
}

func testErrors(t *testing.T, h Harness) {
	t.Run("no-recipient", func(t *testing.T) {
		t.Parallel()
		e := setup(t, h)
		out := e.outbound("norcpt", "A message to nobody.")
		out.To, out.ThreadKey = "", ""
		_, err := e.send(t, out)
		e.checkFailure(t, out, err, channels.ErrPermanent, "")
	})
	for _, kind := range failures {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			e := setup(t, h)
			if e.fake.Fail == nil {
				t.Skip("Fake.Fail is nil: the fake simulates no provider failures")
			}
			to, detail := e.fake.Fail(t, kind)
			if to == "" {
				t.Skipf("the fake cannot simulate %s", kind)
			}
			out := e.outbound("fail_"+kind.String(), "This send fails: "+kind.String()+".")
			out.To, out.ThreadKey = to, to
			var err error
			if kind == Timeout {
				err = e.sendTimingOut(t, out)
			} else {
				_, err = e.send(t, out)
			}
			e.checkFailure(t, out, err, kind.Class(), detail)
			if want := e.fake.RetryAfter; kind == RateLimited && want != 0 {
				if got := channels.RetryAfter(err); got != want {
					t.Errorf("Send error %q: channels.RetryAfter(err) = %s, want %s (the provider's retry delay; the outbox waits that long)", err, got, want)
				}
			}

			// The adapter still works after the failure.
			next := e.outbound("after_"+kind.String(), "Sent after a "+kind.String()+" failure.")
			e.mustSend(t, next)
			e.checkDelivered(t, next)
		})
	}
}

// sendTimingOut sends with a short deadline, to a fake that does not
// answer.
func (e *env) sendTimingOut(t *testing.T, out channels.Outbound) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := safe("Send", func() (channels.SendResult, error) {
			ctx, cancel := context.WithTimeout(t.Context(), TimeoutWait)
			defer cancel()
			return e.a.Send(ctx, out)
		})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(TimeoutWait + returnWait):
		t.Fatalf("Send to a provider that does not answer had not returned %s after its context expired", returnWait)
		return nil
	}
}

// checkFailure checks that a failed send is reported as class, clearly,
// and delivered nothing.
func (e *env) checkFailure(t *testing.T, out channels.Outbound, err, class error, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Send(%s) succeeded, want an error wrapping %s", describe(out), className(class))
	}
	if !isClass(err, class) {
		t.Errorf("Send(%s) error %q: errors.Is(err, %s) = %t, want it to wrap %[3]s and only it (the outbox retries ErrTransient and gives up on ErrPermanent)",
			describe(out), err, className(class), errors.Is(err, class))
	}
	if !namesChannel(e.h.Descriptor, err) {
		t.Errorf("Send error %q does not name the channel (%s); the message is shown to the user as the failure reason",
			err, channelNames(e.h.Descriptor))
	}
	if msg := err.Error(); msg == class.Error() || strings.TrimSuffix(msg, ": "+class.Error()) == "" {
		t.Errorf("Send error %q says nothing beyond its class", msg)
	}
	if detail != "" && !strings.Contains(err.Error(), detail) {
		t.Errorf("Send error %q does not carry the provider's detail %q", err, detail)
	}
	if got := e.deliveries(t, out); len(got) != 0 {
		t.Errorf("the failed send of %s was delivered %d times", describe(out), len(got))
	}
}

func testConcurrent(t *testing.T, h Harness) {
	const n = 8
	e := setup(t, h)
	typer, _ := e.a.(channels.Typer)
	receiver, _ := e.a.(channels.WebhookReceiver)
	var hooks []request
	if receiver != nil {
		for i := range n {
			hooks = append(hooks, e.request(t, channels.Inbound{
				ProviderID: fmt.Sprintf("ct-concurrent-%d", i), Sender: e.fake.sender(), Text: fmt.Sprintf("Concurrent inbound %d.", i),
			}))
		}
	}
	outs := make([]channels.Outbound, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		outs[i] = e.outbound(fmt.Sprintf("concurrent_%d", i), fmt.Sprintf("Concurrent send %d.", i))
		wg.Go(func() {
			res, err := safe("Send", func() (channels.SendResult, error) { return e.a.Send(t.Context(), outs[i]) })
			if err != nil {
				t.Errorf("concurrent Send %d: %v", i, err)
			}
			ids[i] = res.ProviderID
		})
		if typer != nil {
			wg.Go(func() {
				w := channels.Typing{ThreadKey: e.fake.To, To: e.fake.To}
				if _, err := safe("Typing", func() (struct{}, error) { return struct{}{}, typer.Typing(t.Context(), w) }); err != nil {
					t.Errorf("concurrent Typing %d: %v", i, err)
				}
			})
		}
		if receiver != nil {
			wg.Go(func() {
				ins, err := safe("ParseWebhook", func() ([]channels.Inbound, error) { return hooks[i].parse(receiver) })
				if err != nil || len(ins) != 1 {
					t.Errorf("concurrent ParseWebhook %d: %d messages, error %v; want 1 message", i, len(ins), err)
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[string]int{}
	for i, id := range ids {
		if j, dup := seen[id]; dup {
			t.Errorf("concurrent sends %d and %d got the same provider id %q", j, i, id)
		}
		seen[id] = i
	}
	for _, out := range outs {
		e.checkDelivered(t, out)
	}
}

func testClose(t *testing.T, h Harness) {
	e := setup(t, h)
	if _, ok := e.a.(channels.Closer); !ok {
		t.Skip("the adapter is not a channels.Closer")
	}
	e.mustSend(t, e.outbound("close", "Sent before closing."))
	if _, err := call(t, "Close", func() (struct{}, error) { return struct{}{}, e.close() }); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func describe(out channels.Outbound) string {
	return fmt.Sprintf("message %q to=%q thread=%q", out.MessageID, out.To, out.ThreadKey)
}

func describeAll(outs []channels.Outbound) string {
	if len(outs) == 0 {
		return "nothing"
	}
	parts := make([]string, len(outs))
	for i, o := range outs {
		parts[i] = fmt.Sprintf("{to=%q thread=%q text=%q}", o.To, o.ThreadKey, o.Text)
	}
	return strings.Join(parts, ", ")
}

func ptr(s string) *string { return &s }

func equalPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func showPtr(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

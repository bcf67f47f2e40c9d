package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// listening is a Listen running in the background.
type listening struct {
	cancel context.CancelFunc
	done   chan error
}

func listen(p project, h client.MessageHandler, opts ...client.ListenOption) *listening {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listening{cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- p.Listen(ctx, h, opts...) }()
	return l
}

// stop cancels the listener and returns Listen's error.
func (l *listening) stop(t *testing.T) error {
	t.Helper()
	l.cancel()
	select {
	case err := <-l.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Listen did not return 20 s after its context was canceled")
		return nil
	}
}

// savedCursor reads a cursor file.
func savedCursor(t *testing.T, path string) int64 {
	t.Helper()
	seq, err := client.NewFileCursorStore(path).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// errorLog collects what Listen reports.
type errorLog struct {
	mu     sync.Mutex
	byText map[string]error
	other  []error
}

func (e *errorLog) add(ev *client.Event, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev == nil {
		e.other = append(e.other, err)
		return
	}
	if e.byText == nil {
		e.byText = map[string]error{}
	}
	var d client.MessageEvent
	ev.Decode(&d)
	e.byText[d.Message.Text] = err
}

// TestListen: every message is handled once while the typing indicator
// shows, replies go out, and handler errors and panics are reported
// without stopping the listener.
func TestListen(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	ctx := context.Background()
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	texts := []string{"hello", "panic now", "where is my order", "error please", "thanks", "panic again", "bye", "error again"}
	for i, text := range texts {
		p.inject(t, conn.ID, fmt.Sprintf("person%d@example.com", i%3), text)
	}

	var (
		handled ids
		typing  atomic.Int32
		replies atomic.Int32
		errs    errorLog
	)
	cursorFile := filepath.Join(t.TempDir(), "cursor")
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		handled.add(m.ID)
		switch {
		case strings.HasPrefix(m.Text, "panic"):
			panic("handler bug: " + m.Text)
		case strings.HasPrefix(m.Text, "error"):
			return errors.New("handler failed: " + m.Text)
		}
		// The indicator shows while the handler runs.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			conv, err := p.Conversation(ctx, m.ConversationID)
			if err != nil {
				return err
			}
			if conv.Typing {
				typing.Add(1)
				break
			}
		}
		if m.Channel != "test" || m.ConnectionID != conn.ID || m.CustomerID != p.Sandbox.CustomerID || m.Event == nil {
			t.Errorf("inbound message %+v", m)
		}
		if err := m.Reply(ctx, "echo: "+m.Text); err != nil {
			return err
		}
		replies.Add(1)
		return nil
	}, client.WithCursorFile(cursorFile), client.WithErrorHandler(errs.add), client.WithPollInterval(100*time.Millisecond),
		// The gateway clears a conversation's indicator when an earlier
		// reply of it goes out, even one queued before the indicator was
		// set: refresh often so the handler sees it again quickly.
		client.WithTypingInterval(300*time.Millisecond))

	eventually(t, "the backlog handled", func() bool { return handled.len() == len(texts) })
	// Messages arriving while listening are handled too.
	for i := range 3 {
		p.inject(t, conn.ID, "late@example.com", "late "+strconv.Itoa(i))
	}
	eventually(t, "the late messages handled", func() bool { return handled.len() == len(texts)+3 })
	eventually(t, "every reply sent", func() bool {
		evs, err := p.Events(ctx, 0, 1000, client.EventMessageSent)
		return err == nil && len(evs) == int(replies.Load()) && replies.Load() == 7
	})
	if err := l.stop(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Listen returned %v, want context.Canceled", err)
	}

	if r := handled.repeats(); len(r) > 0 {
		t.Errorf("handled more than once: %v", r)
	}
	if n := typing.Load(); n != 7 {
		t.Errorf("typing shown during %d of 7 handlers", n)
	}
	errs.mu.Lock()
	for _, text := range []string{"panic now", "panic again"} {
		var pe *client.PanicError
		if err := errs.byText[text]; !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), text) || len(pe.Stack) == 0 {
			t.Errorf("panic of %q reported as %v", text, err)
		}
	}
	for _, text := range []string{"error please", "error again"} {
		if err := errs.byText[text]; err == nil || !strings.Contains(err.Error(), text) {
			t.Errorf("error of %q reported as %v", text, err)
		}
	}
	if len(errs.byText) != 4 || len(errs.other) != 0 {
		t.Errorf("reported %v and %v, want the 4 handler failures only", errs.byText, errs.other)
	}
	errs.mu.Unlock()
	received, err := p.Events(ctx, 0, 1000, client.EventMessageReceived)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := savedCursor(t, cursorFile), received[len(received)-1].Seq; got != want {
		t.Errorf("saved cursor %d, want %d (the last message.received)", got, want)
	}
}

// TestListenResumes: a listener stopped mid-stream and started again on
// the same cursor file handles every message exactly once, on both
// engines; a third run finds nothing to do.
func TestListenResumes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := start(t, cfg, gwOptions{})
		p := newProject(t, g, "")
		conn := p.connectTest(t)
		const convs, perConv, later = 5, 8, 10
		for i := range perConv {
			for c := range convs {
				p.inject(t, conn.ID, fmt.Sprintf("p%d", c), fmt.Sprintf("m%d", i))
			}
		}
		cursorFile := filepath.Join(t.TempDir(), ".comm-cursor")
		var (
			handled ids
			dozen   = make(chan struct{})
			once    sync.Once
		)
		h := func(ctx context.Context, m *client.InboundMessage) error {
			// Conversations take different times, so they finish out of
			// seq order.
			n, _ := strconv.Atoi(strings.TrimPrefix(m.Sender, "p"))
			time.Sleep(time.Duration(5+7*n) * time.Millisecond)
			handled.add(m.ID)
			if handled.len() >= 12 {
				once.Do(func() { close(dozen) })
			}
			return nil
		}
		opts := []client.ListenOption{client.WithCursorFile(cursorFile), client.WithConcurrency(4), client.WithoutTyping()}

		// Run 1: stop with handlers running.
		l := listen(p, h, opts...)
		select {
		case <-dozen:
		case <-time.After(15 * time.Second):
			t.Fatal("run 1 did not handle a dozen messages")
		}
		if err := l.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("run 1: %v", err)
		}
		first := handled.len()
		cursor := savedCursor(t, cursorFile)
		if first >= convs*perConv || cursor < 12 {
			t.Logf("run 1 handled %d, cursor %d", first, cursor)
		}
		// The cursor never passes an unhandled event, and nothing is left
		// handled above it: every event up to it is handled, none after.
		evs, err := p.Events(context.Background(), 0, 1000, client.EventMessageReceived)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			m, _ := p.MessageOf(&e)
			handled.mu.Lock()
			n := handled.n[m.ID]
			handled.mu.Unlock()
			if (e.Seq <= cursor) != (n == 1) {
				t.Errorf("event %d handled %d times with the cursor at %d", e.Seq, n, cursor)
			}
		}

		// More arrive while the agent is down.
		for i := range later {
			p.inject(t, conn.ID, "p-late", fmt.Sprintf("late %d", i))
		}

		// Run 2 resumes.
		l = listen(p, h, opts...)
		eventually(t, "all handled", func() bool { return handled.len() == convs*perConv+later })
		if err := l.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("run 2: %v", err)
		}
		head, _ := p.Project(context.Background())
		if c := savedCursor(t, cursorFile); c != head.LastSeq {
			t.Errorf("cursor %d after everything was handled, want the head %d", c, head.LastSeq)
		}

		// Run 3 has nothing to do.
		l = listen(p, h, opts...)
		time.Sleep(300 * time.Millisecond)
		if err := l.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("run 3: %v", err)
		}
		if r := handled.repeats(); len(r) > 0 {
			t.Errorf("handled more than once across restarts: %v", r)
		}
		if n := handled.len(); n != convs*perConv+later {
			t.Errorf("handled %d of %d", n, convs*perConv+later)
		}
	})
}

// TestListenGraceExpired: a handler that outlives the shutdown grace and
// fails because of it is not counted as handled: the next run handles its
// message again (at-least-once), and nothing is skipped.
func TestListenGraceExpired(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	stuck := p.inject(t, conn.ID, "a", "stuck")
	p.inject(t, conn.ID, "a", "after")
	cursorFile := filepath.Join(t.TempDir(), "cursor")
	var handled ids
	entered := make(chan struct{}, 1)
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		if m.Text == "stuck" {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		handled.add(m.ID)
		return nil
	}, client.WithCursorFile(cursorFile), client.WithShutdownGrace(50*time.Millisecond), client.WithoutTyping(),
		client.WithErrorHandler(func(*client.Event, error) {}))
	<-entered
	l.stop(t)
	if c := savedCursor(t, cursorFile); c != 0 {
		t.Errorf("cursor %d, want 0: the interrupted message is not handled", c)
	}
	var again atomic.Bool
	l = listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		if m.ID == stuck.ID {
			again.Store(true)
		}
		handled.add(m.ID)
		return nil
	}, client.WithCursorFile(cursorFile), client.WithoutTyping())
	eventually(t, "the interrupted message handled again", again.Load)
	eventually(t, "both handled", func() bool { return handled.len() == 2 })
	l.stop(t)
}

// TestListenOrdering: within a conversation handlers run one at a time in
// seq order; across conversations they run in parallel, at most
// WithConcurrency at once.
func TestListenOrdering(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	const convs, perConv, conc = 4, 10, 3
	want := map[string][]string{}
	for i := range perConv {
		for c := range convs {
			sender := fmt.Sprintf("c%d", c)
			m := p.inject(t, conn.ID, sender, strconv.Itoa(i))
			want[sender] = append(want[sender], m.ID)
		}
	}
	var (
		mu      sync.Mutex
		got     = map[string][]string{}
		busy    = map[string]bool{}
		active  int
		maxSeen int
		total   atomic.Int32
	)
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		mu.Lock()
		if busy[m.Sender] {
			t.Errorf("two handlers at once in conversation %s", m.ConversationID)
		}
		busy[m.Sender] = true
		active++
		maxSeen = max(maxSeen, active)
		mu.Unlock()
		time.Sleep(15 * time.Millisecond)
		mu.Lock()
		got[m.Sender] = append(got[m.Sender], m.ID)
		busy[m.Sender] = false
		active--
		mu.Unlock()
		total.Add(1)
		return nil
	}, client.WithoutCursorStore(), client.WithConcurrency(conc), client.WithoutTyping())
	eventually(t, "all handled", func() bool { return total.Load() == convs*perConv })
	l.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for sender, ids := range want {
		if fmt.Sprint(got[sender]) != fmt.Sprint(ids) {
			t.Errorf("conversation of %s handled in order %v, want %v", sender, got[sender], ids)
		}
	}
	if maxSeen < 2 || maxSeen > conc {
		t.Errorf("at most %d handlers ran at once, want 2..%d", maxSeen, conc)
	}
}

// TestListenDedupe: pages that repeat events already received (here a
// proxy moves after_seq back) are deduplicated within a run.
func TestListenDedupe(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	px := newProxy(t, g.URL)
	p := newProject(t, g, px.URL)
	conn := p.connectTest(t)
	px.set(func(r *http.Request) {
		if r.URL.Path != "/v1/events" {
			return
		}
		q := r.URL.Query()
		after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
		q.Set("after_seq", strconv.FormatInt(max(after-3, 0), 10))
		r.URL.RawQuery = q.Encode()
	}, nil)
	var handled ids
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		handled.add(m.ID)
		return nil
	}, client.WithoutCursorStore(), client.WithoutTyping(), client.WithBatchSize(4), client.WithPollInterval(50*time.Millisecond))
	for i := range 12 {
		p.inject(t, conn.ID, fmt.Sprintf("s%d", i%2), strconv.Itoa(i))
	}
	eventually(t, "all handled", func() bool { return handled.len() == 12 })
	polls := px.Count("GET /v1/events")
	time.Sleep(300 * time.Millisecond)
	l.stop(t)
	if r := handled.repeats(); len(r) > 0 {
		t.Errorf("repeated events handled again: %v", r)
	}
	// Pages of repeats only count as empty polls: paced, not a busy loop.
	if n := px.Count("GET /v1/events") - polls; n > 10 {
		t.Errorf("%d polls in 300 ms of repeats", n)
	}
}

// TestListenEventHandlers: other event types go to their handlers;
// typ "" catches the rest.
func TestListenEventHandlers(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	p.inject(t, conn.ID, "a", "hi")
	var (
		mu    sync.Mutex
		types []string
		sent  atomic.Int32
	)
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		mu.Lock()
		types = append(types, "message:"+m.Text)
		mu.Unlock()
		return m.Reply(ctx, "ho")
	}, client.WithoutCursorStore(), client.WithoutTyping(),
		client.WithEventHandler(client.EventMessageSent, func(ctx context.Context, e *client.Event) error {
			var d client.MessageEvent
			if err := e.Decode(&d); err != nil || d.Message.Text != "ho" {
				t.Errorf("message.sent %s: %v", e.Data, err)
			}
			sent.Add(1)
			return nil
		}),
		client.WithEventHandler("", func(ctx context.Context, e *client.Event) error {
			mu.Lock()
			types = append(types, e.Type)
			mu.Unlock()
			return nil
		}))
	eventually(t, "message.sent handled", func() bool { return sent.Load() == 1 })
	l.stop(t)
	mu.Lock()
	defer mu.Unlock()
	// The two belong to different lanes (no conversation, and alice's):
	// their order is free.
	slices.Sort(types)
	if fmt.Sprint(types) != "[connection.active message:hi]" {
		t.Errorf("handled %v", types)
	}
}

// TestListenCursorChecks: a cursor file of another project, or a cursor
// beyond the stream's head, stops Listen with an explanation instead of
// silently skipping events; WithStartSeq(StartAtHead) starts at the head
// and saves it.
func TestListenCursorChecks(t *testing.T) {
	t.Parallel()
	g := start(t, storetest.SQLite(t), gwOptions{})
	p := newProject(t, g, "")
	conn := p.connectTest(t)
	old := p.inject(t, conn.ID, "a", "before the agent started")
	dir := t.TempDir()
	nop := func(context.Context, *client.InboundMessage) error { return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	foreign := filepath.Join(dir, "foreign")
	writeFile(t, foreign, `{"project_id":"proj_someoneelse","seq":1}`)
	if err := p.Listen(ctx, nop, client.WithCursorFile(foreign)); err == nil || !strings.Contains(err.Error(), "proj_someoneelse") {
		t.Errorf("Listen with another project's cursor file: %v", err)
	}
	ahead := filepath.Join(dir, "ahead")
	writeFile(t, ahead, "99\n")
	if err := p.Listen(ctx, nop, client.WithCursorFile(ahead)); err == nil || !strings.Contains(err.Error(), "ahead") {
		t.Errorf("Listen with a cursor beyond the head: %v", err)
	}

	headFile := filepath.Join(dir, "head")
	var handled ids
	l := listen(p, func(ctx context.Context, m *client.InboundMessage) error {
		handled.add(m.Text)
		return nil
	}, client.WithCursorFile(headFile), client.WithStartSeq(client.StartAtHead), client.WithoutTyping())
	eventually(t, "the start saved", func() bool {
		b, err := os.ReadFile(headFile)
		return err == nil && json.Valid(b)
	})
	p.inject(t, conn.ID, "a", "after")
	eventually(t, "the new message handled", func() bool { return handled.len() == 1 })
	l.stop(t)
	if handled.n["after"] != 1 || handled.n[old.Text] != 0 {
		t.Errorf("handled %v; want only the message after the start", handled.n)
	}
}

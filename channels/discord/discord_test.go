package discord_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/discord/discordtest"
)

// waitLimit is a safety net against a hung test, not a speed requirement.
const waitLimit = 20 * time.Second

type rig struct {
	srv *discordtest.Server
	bot *discordtest.Bot
	a   *discord.Adapter
}

func newRig(t *testing.T, opts discord.Options) *rig {
	t.Helper()
	srv := discordtest.NewServer()
	t.Cleanup(srv.Close)
	bot := srv.NewBot("comm_bot")
	opts.APIURL = srv.URL
	if opts.ReidentifyDelay == 0 {
		opts.ReidentifyDelay = 10 * time.Millisecond
	}
	return &rig{srv: srv, bot: bot, a: newAdapter(t, opts, bot.Token)}
}

func newAdapter(t *testing.T, opts discord.Options, token string) *discord.Adapter {
	t.Helper()
	cfg, _ := json.Marshal(map[string]string{"bot_token": token})
	a, err := discord.New(t.Context(), opts, channels.Connection{ID: "conn_1", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// poll is a running Poll.
type poll struct {
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	got     []channels.Inbound
	arrived chan struct{}
	fail    func(channels.Inbound) error
}

func startPoll(t *testing.T, a *discord.Adapter, fail func(channels.Inbound) error) *poll {
	ctx, cancel := context.WithCancel(t.Context())
	p := &poll{cancel: cancel, done: make(chan error, 1), arrived: make(chan struct{}, 100), fail: fail}
	go func() {
		p.done <- a.Poll(ctx, func(ins ...channels.Inbound) error {
			for _, in := range ins {
				if p.fail != nil {
					if err := p.fail(in); err != nil {
						return err
					}
				}
			}
			p.mu.Lock()
			p.got = append(p.got, ins...)
			p.mu.Unlock()
			select {
			case p.arrived <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

func (p *poll) count(text string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, in := range p.got {
		if in.Text == text {
			n++
		}
	}
	return n
}

func (p *poll) find(text string) (channels.Inbound, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.got {
		if in.Text == text {
			return in, true
		}
	}
	return channels.Inbound{}, false
}

// wait waits until a message with text was emitted.
func (p *poll) wait(t *testing.T, text string) channels.Inbound {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		if in, ok := p.find(text); ok {
			return in
		}
		select {
		case <-p.arrived:
		case err := <-p.done:
			t.Fatalf("Poll returned %v before emitting %q", err, text)
		case <-deadline:
			t.Fatalf("%q not emitted after %s", text, waitLimit)
		}
	}
}

func (p *poll) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(waitLimit):
		t.Fatalf("Poll had not returned after %s", waitLimit)
		return nil
	}
}

// until waits for cond (checked as the fake's sessions get ready).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestResumeAfterDropLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	p := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "before the drop"))
	p.wait(t, "before the drop")
	r.bot.Drop()
	r.bot.Dispatch(r.bot.DM(person, "during the drop")) // logged; replayed by RESUME
	p.wait(t, "during the drop")
	r.bot.Dispatch(r.bot.DM(person, "after the drop"))
	p.wait(t, "after the drop")
	for _, text := range []string{"before the drop", "during the drop", "after the drop"} {
		if n := p.count(text); n != 1 {
			t.Errorf("%q emitted %d times, want once", text, n)
		}
	}
	if n := r.bot.Identifies(); n != 1 {
		t.Errorf("identifies = %d, want 1 (the drop must resume)", n)
	}
	if r.bot.Resumes() < 1 {
		t.Error("no RESUME after the drop")
	}
}

func TestEmitFailureResumesBeforeTheMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	var once sync.Once
	p := startPoll(t, r.a, func(in channels.Inbound) error {
		var err error
		if in.Text == "second" {
			once.Do(func() { err = errors.New("store failed") })
		}
		return err
	})
	r.bot.Dispatch(r.bot.DM(person, "first"))
	p.wait(t, "first")
	r.bot.Dispatch(r.bot.DM(person, "second"))
	err := p.end(t)
	if !errors.Is(err, channels.ErrTransient) {
		t.Fatalf("Poll after a failed emit = %v, want transient", err)
	}
	p2 := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "third"))
	p2.wait(t, "second")
	p2.wait(t, "third")
	if n := p2.count("first"); n != 0 {
		t.Errorf("the acknowledged message came again %d times", n)
	}
	if n := r.bot.Identifies(); n != 1 {
		t.Errorf("identifies = %d, want 1 (the second session resumes)", n)
	}
}

func TestZombieConnectionResumes(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{Jitter: func() float64 { return 0 }})
	r.srv.SetHeartbeatInterval(20 * time.Millisecond)
	p := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "one"))
	p.wait(t, "one")
	r.bot.SetAck(false)
	until(t, "resume after missing heartbeat ACKs", func() bool { return r.bot.Resumes() >= 1 })
	r.bot.SetAck(true)
	r.bot.Dispatch(r.bot.DM(person, "two"))
	p.wait(t, "two")
	if n := r.bot.Identifies(); n != 1 {
		t.Errorf("identifies = %d, want 1 (a zombie connection resumes)", n)
	}
	if n := p.count("one"); n != 1 {
		t.Errorf("\"one\" emitted %d times", n)
	}
}

// A store slower than the gateway is no zombie: heartbeat ACKs are read
// while a batch is stored, the backlog is stored in order in batches (one
// emit for what queued up), and nothing is resumed, lost or doubled.
func TestSlowStoreBatchesBacklogWithoutZombie(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{Jitter: func() float64 { return 0 }})
	r.srv.SetHeartbeatInterval(20 * time.Millisecond)
	var mu sync.Mutex
	var got []string
	biggest := 0
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- r.a.Poll(ctx, func(ins ...channels.Inbound) error {
			time.Sleep(100 * time.Millisecond) // five heartbeat intervals per commit
			mu.Lock()
			defer mu.Unlock()
			for _, in := range ins {
				got = append(got, in.Text)
			}
			biggest = max(biggest, len(ins))
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	until(t, "the session", r.bot.Connected)
	const n = 600
	for i := range n {
		r.bot.Dispatch(r.bot.DM(person, fmt.Sprintf("m%03d", i)))
	}
	until(t, "every message stored", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n })
	mu.Lock()
	defer mu.Unlock()
	for i, text := range got {
		if want := fmt.Sprintf("m%03d", i); text != want {
			t.Fatalf("message %d is %q, want %q (order kept, nothing doubled)", i, text, want)
		}
	}
	if len(got) != n {
		t.Errorf("%d messages stored, want %d", len(got), n)
	}
	if biggest < 2 {
		t.Errorf("the largest batch held %d message(s): the backlog was not stored in batches", biggest)
	}
	if r.bot.Resumes() != 0 || r.bot.Identifies() != 1 {
		t.Errorf("resumes = %d, identifies = %d: a slow store was taken for a zombie connection", r.bot.Resumes(), r.bot.Identifies())
	}
}

func TestReconnectOp7Resumes(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	p := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "one"))
	p.wait(t, "one")
	r.bot.Reconnect()
	until(t, "resume after op 7", func() bool { return r.bot.Resumes() >= 1 })
	r.bot.Dispatch(r.bot.DM(person, "two"))
	p.wait(t, "two")
	if n := r.bot.Identifies(); n != 1 {
		t.Errorf("identifies = %d, want 1", n)
	}
}

func TestInvalidSessionReidentifies(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	p := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "one"))
	p.wait(t, "one")
	r.bot.InvalidSession(false)
	until(t, "identify after op 9", func() bool { return r.bot.Identifies() == 2 })
	r.bot.Dispatch(r.bot.DM(person, "two"))
	p.wait(t, "two")
}

func TestAuthenticationFailedIsRevoked(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	p := startPoll(t, r.a, nil)
	r.bot.Dispatch(r.bot.DM(person, "one"))
	p.wait(t, "one")
	r.bot.CloseWith(4004, "Authentication failed.")
	err := p.end(t)
	if !errors.Is(err, channels.ErrRevoked) {
		t.Fatalf("Poll after close 4004 = %v, want channels.ErrRevoked", err)
	}
}

func TestDisallowedIntentsIsPermanent(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	r.bot.DenyIntents(discordtest.IntentMessageContent)
	p := startPoll(t, r.a, nil)
	err := p.end(t)
	if !errors.Is(err, channels.ErrPermanent) || errors.Is(err, channels.ErrRevoked) || !strings.Contains(err.Error(), "MESSAGE CONTENT") {
		t.Fatalf("Poll with a disallowed intent = %v, want a permanent error naming the MESSAGE CONTENT intent", err)
	}
}

// noSessions is a State that loses the gateway sessions saved in it.
type noSessions struct{ channels.MemState }

func (s *noSessions) Put(ctx context.Context, key string, value []byte) error {
	if strings.HasPrefix(key, "session/") {
		return nil
	}
	return s.MemState.Put(ctx, key, value)
}

// TestTakeoverResumes: the session's progress is in State, so another
// process (a replica taking over) resumes it where the first left off:
// what was dispatched in between arrives, nothing is identified again.
func TestTakeoverResumes(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer()
	t.Cleanup(srv.Close)
	bot := srv.NewBot("shared")
	opts := discord.Options{APIURL: srv.URL, State: &channels.MemState{}}
	p1 := startPoll(t, newAdapter(t, opts, bot.Token), nil)
	bot.Dispatch(bot.DM(person, "before"))
	p1.wait(t, "before")
	p1.cancel()
	if err := p1.end(t); err != nil {
		t.Fatal(err)
	}
	bot.Dispatch(bot.DM(person, "while nobody ran the session"))
	p2 := startPoll(t, newAdapter(t, opts, bot.Token), nil)
	p2.wait(t, "while nobody ran the session")
	if p2.count("before") != 0 {
		t.Errorf("the new owner got again what the first had stored")
	}
	if bot.Identifies() != 1 || bot.Resumes() != 1 {
		t.Errorf("identifies = %d, resumes = %d; want 1 and 1", bot.Identifies(), bot.Resumes())
	}
}

func TestIdentifyBudgetInACrashLoop(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer()
	t.Cleanup(srv.Close)
	bot := srv.NewBot("crashy")
	// The budget is kept in State, which every process shares; a crash
	// before the session was saved leaves nothing to resume.
	opts := discord.Options{APIURL: srv.URL, IdentifyBudget: 3, State: &noSessions{}}
	for i := range 5 {
		// A crash: a new adapter (another process) each time.
		a := newAdapter(t, opts, bot.Token)
		p := startPoll(t, a, nil)
		if i < 3 {
			until(t, fmt.Sprintf("identify %d", i), func() bool { return bot.Identifies() == i+1 })
			p.cancel()
			if err := p.end(t); err != nil {
				t.Fatalf("Poll %d after cancel = %v", i, err)
			}
			continue
		}
		err := p.end(t)
		if !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) < time.Hour {
			t.Fatalf("Poll %d past the identify budget = %v (retry after %s), want transient with a long RetryAfter", i, err, channels.RetryAfter(err))
		}
	}
	if n := bot.Identifies(); n != 3 {
		t.Errorf("identifies = %d, want 3 (the budget)", n)
	}
}

func TestSessionStartLimitRespected(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	r.bot.SetSessionStartsRemaining(0)
	err := startPoll(t, r.a, nil).end(t)
	if !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) < time.Hour {
		t.Fatalf("Poll with no session starts left = %v, want transient with a long RetryAfter", err)
	}
	if n := r.bot.Identifies(); n != 0 {
		t.Errorf("identifies = %d, want 0", n)
	}
}

func TestGuildFiltering(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	p := startPoll(t, r.a, nil)
	guild, ch := r.srv.Snowflake(), r.bot.AddChannel()
	plain := r.bot.Mention(guild, ch, person, "not for the bot")
	plain.Content, plain.Mentions = "not for the bot", nil
	r.bot.Dispatch(plain)
	other := r.bot.DM(person, "from a bot")
	other.Author.Bot = true
	r.bot.Dispatch(other)
	m := r.bot.Mention(guild, ch, person, "hello bot")
	r.bot.Dispatch(m)
	in := p.wait(t, "hello bot")
	if in.ThreadKey != ch || in.Sender != person || in.ProviderID != m.ID {
		t.Errorf("mention parsed as %+v", in)
	}
	reply := r.bot.Mention(guild, ch, person, "")
	reply.Content, reply.Mentions, reply.Type = "answering you", nil, 19
	reply.MessageReference = &discordtest.Reference{MessageID: "1100000000000000777", ChannelID: ch}
	reply.Referenced = &discordtest.Message{ID: "1100000000000000777", Author: discordtest.User{ID: r.bot.ID, Bot: true}}
	r.bot.Dispatch(reply)
	got := p.wait(t, "answering you")
	if len(got.References) != 1 || got.References[0] != "1100000000000000777" {
		t.Errorf("reply References = %v", got.References)
	}
	// Everything dispatched before the reply was handled in order.
	if p.count("not for the bot")+p.count("from a bot") != 0 {
		t.Error("a message not for the bot, or a bot's, was emitted")
	}
}

func TestAttachmentDownloaded(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{MaxAttachment: 10})
	p := startPoll(t, r.a, nil)
	m := r.bot.DM(person, "with files")
	m.Attachments = []discordtest.Attachment{
		{ID: "1", Filename: "a.txt", ContentType: "text/plain", Size: 5, URL: r.srv.AddFile("a.txt", []byte("hello"))},
		{ID: "2", Filename: "big.bin", Size: 11, URL: r.srv.AddFile("big.bin", make([]byte, 11))},
		{ID: "3", Filename: "elsewhere.txt", Size: 1, URL: "http://169.254.169.254/latest/meta-data"},
	}
	r.bot.Dispatch(m)
	in := p.wait(t, "with files")
	if len(in.Attachments) != 1 || string(in.Attachments[0].Data) != "hello" || in.Attachments[0].Filename != "a.txt" {
		t.Errorf("attachments = %+v", in.Attachments)
	}
	if !strings.Contains(string(in.Details), "big.bin") || !strings.Contains(string(in.Details), "elsewhere.txt") {
		t.Errorf("details %s do not list the file left out", in.Details)
	}
}

func TestNonceIdempotency(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	for _, id := range []string{"msg_short", "msg_01JABCDEFGHJKMNPQRSTVWXYZ0123456789"} {
		out := channels.Outbound{MessageID: id, To: person, ThreadKey: person, Text: "once " + id}
		r1, err := r.a.Send(t.Context(), out)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := r.a.Send(t.Context(), out)
		if err != nil {
			t.Fatal(err)
		}
		if r1.ProviderID != r2.ProviderID {
			t.Errorf("%s: provider ids %s and %s", id, r1.ProviderID, r2.ProviderID)
		}
	}
	if n := len(r.bot.Sent()); n != 2 {
		t.Errorf("sent %d messages, want 2", n)
	}
	for _, m := range r.bot.Sent() {
		if m.Nonce == "" || len(m.Nonce) > 25 {
			t.Errorf("nonce %q", m.Nonce)
		}
	}
}

func TestSplitAt2000(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	text := strings.Repeat("héllo wörld ", 400) + "\n" + strings.Repeat("ü", 2100) // 4800+ characters
	res, err := r.a.Send(t.Context(), channels.Outbound{MessageID: "msg_long", To: person, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	sent := r.bot.Sent()
	if len(sent) < 3 {
		t.Fatalf("sent %d parts, want at least 3", len(sent))
	}
	var joined strings.Builder
	for _, m := range sent {
		if n := utf8.RuneCountInString(m.Content); n > 2000 {
			t.Errorf("a part has %d characters", n)
		}
		joined.WriteString(m.Content)
	}
	if joined.String() != text {
		t.Error("the parts do not make the text")
	}
	if res.ProviderID != sent[0].ID {
		t.Errorf("provider id %s, want the first part's %s", res.ProviderID, sent[0].ID)
	}
}

func TestRateLimitHonouredInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	r.bot.SetRateLimit(2, 200*time.Millisecond)
	for i := range 6 {
		text := "rate " + string(rune('a'+i))
		if _, err := r.a.Send(t.Context(), channels.Outbound{MessageID: "msg_rate_" + text[5:], To: person, Text: text}); err != nil {
			t.Fatalf("send %d: %v (the adapter must wait for the bucket instead of hitting 429)", i, err)
		}
	}
	sent := r.bot.Sent()
	if len(sent) != 6 {
		t.Fatalf("sent %d", len(sent))
	}
	for i, m := range sent {
		if m.Content != "rate "+string(rune('a'+i)) {
			t.Errorf("message %d is %q: out of order", i, m.Content)
		}
	}
}

func TestRateLimited429CarriesRetryAfter(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	r.bot.FailNext("messages", discordtest.TooManyRequests(1.5))
	_, err := r.a.Send(t.Context(), channels.Outbound{MessageID: "m1", To: person, Text: "x"})
	if !errors.Is(err, channels.ErrTransient) || channels.RetryAfter(err) != 1500*time.Millisecond {
		t.Fatalf("429: %v (retry after %s)", err, channels.RetryAfter(err))
	}
}

func TestReplyCarriesMessageReference(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	ch := r.bot.DMChannel(person)
	_, err := r.a.Send(t.Context(), channels.Outbound{MessageID: "m_reply", To: person, ThreadKey: ch, Text: "an answer",
		InReplyTo: "1100000000000000555", References: []string{"1100000000000000555"}})
	if err != nil {
		t.Fatal(err)
	}
	sent := r.bot.Sent()
	if len(sent) != 1 || sent[0].ChannelID != ch {
		t.Fatalf("sent %+v", sent)
	}
	ref := sent[0].MessageReference
	if ref == nil || ref.MessageID != "1100000000000000555" || ref.FailIfNotExists == nil || *ref.FailIfNotExists {
		t.Errorf("message_reference = %+v", ref)
	}
}

func TestTypingInThread(t *testing.T) {
	t.Parallel()
	r := newRig(t, discord.Options{})
	ch := r.bot.AddChannel()
	if err := r.a.Typing(t.Context(), channels.Typing{ThreadKey: ch, To: person}); err != nil {
		t.Fatal(err)
	}
	if ty := r.bot.Typings(); len(ty) != 1 || ty[0].ChannelID != ch {
		t.Errorf("typings %+v", ty)
	}
	if r.a.TypingEvery() >= 10*time.Second {
		t.Error("TypingEvery must be under Discord's 10 s")
	}
}

func TestInstallOperatorApp(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer()
	t.Cleanup(srv.Close)
	op := srv.NewBot("operator_bot")
	opts := discord.Options{APIURL: srv.URL, ClientID: srv.ClientID, ClientSecret: srv.ClientSecret, BotToken: op.Token}
	a, err := discord.New(t.Context(), opts, channels.Connection{ID: "conn_op", Config: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !a.NeedsInstall() {
		t.Fatal("config {} with the operator's app must need an install")
	}
	u, err := url.Parse(a.AuthorizeURL("st4te", "https://comm.example/oauth/discord/callback"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("client_id") != srv.ClientID || q.Get("scope") != "bot" || q.Get("state") != "st4te" || q.Get("response_type") != "code" ||
		q.Get("redirect_uri") != "https://comm.example/oauth/discord/callback" || q.Get("permissions") == "" {
		t.Errorf("authorize url %s", u)
	}
	if _, err := a.Install(t.Context(), "not-a-code", "https://comm.example/oauth/discord/callback"); err == nil {
		t.Error("Install accepted an unknown code")
	} else if ce, ok := errors.AsType[*channels.ConfigError](err); !ok || ce.Field != "code" {
		t.Errorf("Install with a refused code: %v, want a ConfigError on code", err)
	}
	code := srv.Authorize(discordtest.Guild{ID: "1300000000000000001", Name: "Friends"})
	res, err := a.Install(t.Context(), code, "https://comm.example/oauth/discord/callback")
	if err != nil {
		t.Fatal(err)
	}
	if res.Address != "Friends" || res.RouteKey != "1300000000000000001" {
		t.Errorf("installed %+v", res)
	}
	b, err := discord.New(t.Context(), opts, channels.Connection{ID: "conn_op", Config: res.Config})
	if err != nil {
		t.Fatalf("New with the installed config %s: %v", res.Config, err)
	}
	defer b.Close()
	if b.NeedsInstall() {
		t.Error("the installed connection still needs an install")
	}
	// It sends with the operator's bot and receives its guild only.
	ch := op.AddChannel()
	if _, err := b.Send(t.Context(), channels.Outbound{MessageID: "m_op", To: person, ThreadKey: ch, Text: "from the operator's bot"}); err != nil {
		t.Fatal(err)
	}
	if len(op.Sent()) != 1 {
		t.Errorf("the operator's bot sent %d", len(op.Sent()))
	}
	p := startPoll(t, b, nil)
	op.Dispatch(op.Mention("1300000000000000999", ch, person, "other guild"))
	op.Dispatch(op.Mention("1300000000000000001", ch, person, "our guild"))
	p.wait(t, "our guild")
	if p.count("other guild") != 0 {
		t.Error("another guild's message reached this connection")
	}
}

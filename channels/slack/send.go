package slack

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// MaxText is the most characters (runes) one posted message carries.
// Slack truncates a text beyond 40,000 characters and may refuse a long
// one with msg_too_long; a longer text goes out as several messages.
const MaxText = 12000

var (
	channelRE = regexp.MustCompile(`^[A-Z0-9]{1,32}$`)
	tsRE      = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
)

// target is where a message goes: the channel and thread of ThreadKey
// ("<channel>" or "<channel>:<thread_ts>"), else the recipient (a
// channel id, or a user id: Slack posts to the app's DM with the user).
func target(op, thread, to string) (channel, threadTS string, err error) {
	s := thread
	if s == "" {
		s = to
	}
	channel, threadTS, _ = strings.Cut(s, ":")
	if !channelRE.MatchString(channel) {
		return "", "", channels.Permanent("slack: %s: %q is not a slack channel or user id", op, channel)
	}
	if threadTS != "" && !tsRE.MatchString(threadTS) {
		return "", "", channels.Permanent("slack: %s: %q is not a slack thread ts", op, threadTS)
	}
	return channel, threadTS, nil
}

// posted is chat.postMessage's answer.
type posted struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Send posts msg.Text with chat.postMessage, in the thread its ThreadKey
// names. A text longer than MaxText goes out as several messages; the
// provider id is the first's. When a later part fails, the error is
// returned and a retry sends every part again.
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if a.NeedsInstall() {
		return channels.SendResult{}, channels.Permanent("slack: send message: the connection waits for the install of the gateway's Slack app")
	}
	channel, threadTS, err := target("send message", msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("slack: send message: the message has no text")
	}
	var first string
	for i, part := range channels.Split(msg.Text, MaxText, channels.Runes) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		params := map[string]any{"channel": channel, "text": part}
		if threadTS != "" {
			params["thread_ts"] = threadTS
		}
		if err := a.paced(ctx, channel); err != nil {
			return channels.SendResult{}, err
		}
		var p posted
		err := a.call(ctx, "send message", "chat.postMessage", a.cfg.BotToken, params, &p)
		// Slack counts from when the post arrived, which is after the
		// slot began: the next one waits a whole interval from now (or
		// Slack's Retry-After).
		if a.opts.PostInterval > 0 {
			holdOff(a.conn.ID+"/"+channel, time.Now(), max(a.opts.PostInterval, channels.RetryAfter(err)))
		}
		if err != nil {
			return channels.SendResult{}, err
		}
		if i == 0 {
			if p.TS == "" {
				return channels.SendResult{}, channels.Transient(0, "slack: send message: the answer has no ts")
			}
			c := channel
			if channelRE.MatchString(p.Channel) {
				c = p.Channel
			}
			first = c + ":" + p.TS
		}
	}
	return channels.SendResult{ProviderID: first}, nil
}

// TypingStatus is the status shown while an agent prepares an answer.
const TypingStatus = "is typing..."

// Typing shows TypingStatus in the thread of the conversation
// (assistant.threads.setStatus), which needs a thread: the ThreadKey's
// thread_ts, else the message answered (InReplyTo "<channel>:<ts>").
// Without one it does nothing. Slack clears the status when the app posts
// in the thread, or after two minutes, longer than comm's typing lease,
// so the adapter is no channels.TypingRefresher.
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	if a.NeedsInstall() {
		return nil
	}
	channel, threadTS, err := target("typing", t.ThreadKey, t.To)
	if err != nil {
		return err
	}
	if threadTS == "" {
		if c, ts, ok := strings.Cut(t.InReplyTo, ":"); ok && c == channel && tsRE.MatchString(ts) {
			threadTS = ts
		}
	}
	if threadTS == "" {
		return nil
	}
	return a.call(ctx, "typing", "assistant.threads.setStatus", a.cfg.BotToken,
		map[string]any{"channel_id": channel, "thread_ts": threadTS, "status": TypingStatus}, nil)
}

// maxPaceWait is the longest Send waits for its channel's turn itself;
// beyond it the send is handed back to the outbox with the wait as its
// RetryAfter.
const maxPaceWait = 5 * time.Second

// pacer spaces the posts to one channel Options.PostInterval apart across
// every send of this process, so that replies queued together go out at
// Slack's pace instead of earning a 429 each.
var pacer = struct {
	mu   sync.Mutex
	next map[string]time.Time // connection/channel -> earliest next post
}{next: map[string]time.Time{}}

// turn reserves key's next post slot when it comes within maxPaceWait and
// returns how long to wait for it; a longer wait reserves nothing.
func turn(key string, now time.Time, interval time.Duration) time.Duration {
	pacer.mu.Lock()
	defer pacer.mu.Unlock()
	at := now
	if next := pacer.next[key]; next.After(now) {
		at = next
	}
	if wait := at.Sub(now); wait > maxPaceWait {
		return wait
	}
	if len(pacer.next) > 10000 { // bound: forget channels idle for a while
		for k, t := range pacer.next {
			if now.Sub(t) > time.Minute {
				delete(pacer.next, k)
			}
		}
	}
	pacer.next[key] = at.Add(interval)
	return at.Sub(now)
}

// holdOff moves key's next slot to at least now+d (Slack's Retry-After).
func holdOff(key string, now time.Time, d time.Duration) {
	pacer.mu.Lock()
	defer pacer.mu.Unlock()
	if until := now.Add(d); until.After(pacer.next[key]) {
		pacer.next[key] = until
	}
}

// paced waits for channel's turn to post (at most maxPaceWait, else a
// transient error carrying the wait).
func (a *Adapter) paced(ctx context.Context, channel string) error {
	if a.opts.PostInterval < 0 {
		return nil
	}
	wait := turn(a.conn.ID+"/"+channel, time.Now(), a.opts.PostInterval)
	if wait <= 0 {
		return nil
	}
	if wait > maxPaceWait {
		return channels.Transient(wait, "slack: send message: channel %s is at Slack's pace of one message a second; next turn in %s", channel, wait.Round(time.Millisecond))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return channels.Transient(0, "slack: send message: %v", ctx.Err())
	}
}

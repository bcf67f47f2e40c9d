package imessage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// MaxText is the most characters (UTF-16 code units) of one message comm
// sends; a longer text goes out as several. iMessage itself has no small
// limit, but the relay types long texts through AppleScript slowly.
const MaxText = 4000

// Methods of sending (POST /api/v1/message/text "method").
const (
	MethodAppleScript = "apple-script"
	MethodPrivateAPI  = "private-api"
)

// isChatGUID reports whether s is a chat guid: "<service>;-;<handle>" for
// a person, "<service>;+;<chat id>" for a group.
func isChatGUID(s string) bool {
	svc, rest, ok := strings.Cut(s, ";")
	return ok && svc != "" && len(s) <= 512 && (strings.HasPrefix(rest, "-;") || strings.HasPrefix(rest, "+;")) && len(rest) > 2
}

// chatGUID is the chat a message goes to: a group's chat guid as the
// thread names it; for a person (the thread is their address, or a
// one-to-one chat guid) the chat this relay last saw them in, else
// "iMessage;-;<address>". Through AppleScript a person's chat is always
// addressed "iMessage;-;<address>" (or the SMS chat it is): BlueBubbles'
// AppleScript cannot send to the "any;-;" chats macOS 26 makes.
func (c *channel) chatGUID(r *relay, op, thread, to string, private bool) (chat, addr string, err error) {
	if isChatGUID(thread) && strings.Contains(thread, ";+;") {
		return thread, "", nil
	}
	who := to
	if isChatGUID(thread) {
		_, who, _ = strings.Cut(thread, ";-;")
	} else if thread != "" {
		who = thread
	}
	addr, aerr := Address(who)
	if aerr != nil {
		return "", "", channels.Permanent("imessage: %s: %v", op, aerr)
	}
	known := r.chats.get(addr)
	switch {
	case known != "" && (private || strings.HasPrefix(known, "SMS;-;")):
		return known, addr, nil
	case isChatGUID(thread) && (private || strings.HasPrefix(thread, "SMS;-;")):
		return thread, addr, nil
	}
	return "iMessage;-;" + addr, addr, nil
}

// noChat reports whether err is the relay saying a chat does not exist.
func noChat(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "chat does not exist")
}

// Send delivers msg.Text through the adapter's relay
// (POST /api/v1/message/text). The relay's answer is the sent message;
// its guid is the provider id. A text over MaxText goes out as several
// messages (the first's guid names the message). A message id this
// process sent already returns the same guid without sending again, and
// a retry after a later part failed sends only the rest (BlueBubbles'
// tempGuid only refuses a duplicate while the first is in flight).
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	return a.ch.send(ctx, a.relay, msg)
}

func (c *channel) send(ctx context.Context, r *relay, msg channels.Outbound) (channels.SendResult, error) {
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("imessage: send message: the message has no text")
	}
	prog := r.sent.get(msg.MessageID)
	if prog.complete {
		return channels.SendResult{ProviderID: prog.first}, nil
	}
	info, err := c.serverInfo(ctx, r, false)
	if err != nil {
		return channels.SendResult{}, err
	}
	chat, addr, err := c.chatGUID(r, "send message", msg.ThreadKey, msg.To, info.privateAPI())
	if err != nil {
		return channels.SendResult{}, err
	}
	temp := msg.MessageID
	if temp == "" {
		temp = randomID()
	}
	first := prog.first
	for i, part := range channels.Split(msg.Text, MaxText, channels.UTF16Units) {
		if i < prog.done || (i > 0 && strings.TrimSpace(part) == "") {
			continue // sent by an earlier attempt of this process, or blank
		}
		body := map[string]any{"chatGuid": chat, "tempGuid": temp, "message": part, "method": MethodAppleScript}
		if i > 0 {
			body["tempGuid"] = temp + "." + strconv.Itoa(i+1)
		}
		if info.privateAPI() {
			body["method"] = MethodPrivateAPI
			if i == 0 && msg.InReplyTo != "" && len(msg.InReplyTo) <= 512 {
				body["selectedMessageGuid"], body["partIndex"] = msg.InReplyTo, 0
			}
		}
		var m message
		err := c.call(ctx, r, "send message", http.MethodPost, "/api/v1/message/text", nil, body, &m)
		if noChat(err) && i == 0 && addr != "" && strings.HasPrefix(chat, "iMessage;-;") && info.privateAPI() {
			// macOS 26 names a person's chat "any;-;<address>".
			chat = "any;-;" + addr
			body["chatGuid"] = chat
			err = c.call(ctx, r, "send message", http.MethodPost, "/api/v1/message/text", nil, body, &m)
			if err == nil {
				r.chats.put(addr, chat)
			}
		}
		if err != nil {
			if info.privateAPI() && strings.Contains(err.Error(), "Private API") {
				r.forgetInfo() // the helper went away: ask server/info again
			}
			return channels.SendResult{}, err
		}
		guid := m.GUID
		if guid == "" || len(guid) > 512 {
			// Sent, but unnamed: the temporary guid names it (receipts
			// will not match it).
			c.opts.Logger.Warn("imessage: the relay answered a send without a message guid", "relay", r.Address)
			guid = body["tempGuid"].(string)
		}
		if i == 0 {
			first = guid
		}
		r.sent.put(msg.MessageID, progress{first: first, done: i + 1})
	}
	r.sent.put(msg.MessageID, progress{first: first, complete: true})
	return channels.SendResult{ProviderID: first}, nil
}

// Typing shows the typing indicator in the chat
// (POST /api/v1/chat/{guid}/typing) and takes it down after TypingHold
// (DELETE) unless Typing comes again: iMessage keeps it up until told.
// It needs the relay's Private API; without it Typing does nothing.
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	info, err := a.ch.serverInfo(ctx, a.relay, false)
	if err != nil {
		return err
	}
	if !info.privateAPI() {
		return nil
	}
	chat, _, err := a.ch.chatGUID(a.relay, "typing", t.ThreadKey, t.To, true)
	if err != nil {
		return err
	}
	if err := a.ch.call(ctx, a.relay, "typing", http.MethodPost, "/api/v1/chat/"+url.PathEscape(chat)+"/typing", nil, nil, nil); err != nil {
		return err
	}
	a.ch.holdTyping(a.relay, chat)
	return nil
}

// maxTyping bounds the chats whose indicators a relay keeps up at once.
const maxTyping = 1000

// holdTyping takes chat's indicator down after TypingHold, unless Typing
// is called for it again meanwhile.
func (c *channel) holdTyping(r *relay, chat string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.typing[chat]; ok {
		t.Reset(c.opts.TypingHold)
		return
	}
	if r.typing == nil {
		r.typing = map[string]*time.Timer{}
	}
	if len(r.typing) >= maxTyping {
		return
	}
	r.typing[chat] = time.AfterFunc(c.opts.TypingHold, func() {
		r.mu.Lock()
		delete(r.typing, chat)
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.CallTimeout)
		defer cancel()
		if err := c.call(ctx, r, "stop typing", http.MethodDelete, "/api/v1/chat/"+url.PathEscape(chat)+"/typing", nil, nil, nil); err != nil {
			c.opts.Logger.Debug("imessage: taking a typing indicator down failed", "relay", r.Address, "err", err)
		}
	})
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sentMemo remembers how far this process got with each comm message
// id: a repeated send of a message sent whole returns the first part's
// guid without sending again, and a retry of a split message whose later
// part failed sends only the parts not sent yet. Bounded: the newest
// maxSent ids.
type sentMemo struct {
	mu    sync.Mutex
	m     map[string]progress
	order []string
}

// progress is a message's parts sent so far.
type progress struct {
	first    string // the first part's guid
	done     int    // parts sent
	complete bool
}

const maxSent = 10000

func newSentMemo() *sentMemo { return &sentMemo{m: map[string]progress{}} }

func (s *sentMemo) get(id string) progress {
	if id == "" {
		return progress{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

func (s *sentMemo) put(id string, p progress) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok {
		if len(s.order) >= maxSent {
			delete(s.m, s.order[0])
			s.order = s.order[1:]
		}
		s.order = append(s.order, id)
	}
	s.m[id] = p
}

// chatMemo remembers the chat guid a relay last saw each person in
// (macOS 26 makes "any;-;<address>", older macOS "iMessage;-;<address>"
// or "SMS;-;<address>"). Bounded: the newest maxChats people.
type chatMemo struct {
	mu    sync.Mutex
	m     map[string]string
	order []string
}

const maxChats = 10000

func newChatMemo() *chatMemo { return &chatMemo{m: map[string]string{}} }

func (c *chatMemo) get(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[addr]
}

func (c *chatMemo) put(addr, chat string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[addr]; !ok {
		if len(c.order) >= maxChats {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, addr)
	}
	c.m[addr] = chat
}

// forgetInfo makes the next call ask server/info again.
func (r *relay) forgetInfo() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infoAt = time.Time{}
}

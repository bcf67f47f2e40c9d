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

// chatGUID is the chat a message goes to: the thread's, else the
// one-to-one iMessage chat with to.
func chatGUID(op, thread, to string) (string, error) {
	if isChatGUID(thread) {
		return thread, nil
	}
	if thread != "" && to == "" {
		to = thread
	}
	addr, err := Address(to)
	if err != nil {
		return "", channels.Permanent("imessage: %s: %v", op, err)
	}
	return "iMessage;-;" + addr, nil
}

// Send delivers msg.Text through the adapter's relay
// (POST /api/v1/message/text). The relay's answer is the sent message;
// its guid is the provider id. A text over MaxText goes out as several
// messages (the first's guid names the message). A message id this
// process sent already returns the same guid without sending again
// (BlueBubbles' tempGuid only refuses a duplicate while the first is in
// flight).
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	return a.ch.send(ctx, a.relay, msg)
}

func (c *channel) send(ctx context.Context, r *relay, msg channels.Outbound) (channels.SendResult, error) {
	chat, err := chatGUID("send message", msg.ThreadKey, msg.To)
	if err != nil {
		return channels.SendResult{}, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return channels.SendResult{}, channels.Permanent("imessage: send message: the message has no text")
	}
	if guid, ok := r.sent.get(msg.MessageID); ok {
		return channels.SendResult{ProviderID: guid}, nil
	}
	info, err := c.serverInfo(ctx, r, false)
	if err != nil {
		return channels.SendResult{}, err
	}
	temp := msg.MessageID
	if temp == "" {
		temp = randomID()
	}
	first := ""
	for i, part := range channels.Split(msg.Text, MaxText, channels.UTF16Units) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
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
		if err := c.call(ctx, r, "send message", http.MethodPost, "/api/v1/message/text", nil, body, &m); err != nil {
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
	}
	r.sent.put(msg.MessageID, first)
	return channels.SendResult{ProviderID: first}, nil
}

// Typing shows the typing indicator in the chat
// (POST /api/v1/chat/{guid}/typing) and takes it down after TypingHold
// (DELETE) unless Typing comes again: iMessage keeps it up until told.
// It needs the relay's Private API; without it Typing does nothing.
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	chat, err := chatGUID("typing", t.ThreadKey, t.To)
	if err != nil {
		return err
	}
	info, err := a.ch.serverInfo(ctx, a.relay, false)
	if err != nil {
		return err
	}
	if !info.privateAPI() {
		return nil
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

// sentMemo remembers the guids of the messages this process sent, by comm
// message id, so that a repeated send returns the first's guid. Bounded:
// the newest maxSent.
type sentMemo struct {
	mu    sync.Mutex
	m     map[string]string
	order []string
}

const maxSent = 10000

func newSentMemo() *sentMemo { return &sentMemo{m: map[string]string{}} }

func (s *sentMemo) get(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.m[id]
	return g, ok
}

func (s *sentMemo) put(id, guid string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		return
	}
	if len(s.order) >= maxSent {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	s.m[id] = guid
	s.order = append(s.order, id)
}

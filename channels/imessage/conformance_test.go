package imessage_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/imessage/bluebubblestest"
)

const (
	password = "relay-password-1"
	address  = "agent@icloud.com"
	person   = "+15551230000"
)

// TestConformance runs the suite on the adapter (send, idempotent
// sends, typing, provision with the webhook registration, errors,
// concurrency) against a relay whose Private API is on. Inbound does not
// go through the adapter on this shared channel (Shared.Receive and the
// Session are tested in imessage_test.go), so the descriptor's App and
// Session are left out of the harness; the AppleScript path (no typing,
// no reply reference) is tested there too.
func TestConformance(t *testing.T) {
	t.Parallel()
	p := &pool{fakes: map[string]channels.Descriptor{}}
	d := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: "http://127.0.0.1:1", Password: password, Address: address}}})
	d.App, d.Session, d.Shared = nil, nil, nil
	base := d.New
	d.New = func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
		if fd, cfg, ok := p.lookup(conn.Config); ok {
			conn.Config = cfg
			return fd.New(ctx, conn)
		}
		return base(ctx, conn)
	}
	channeltest.Run(t, channeltest.Harness{
		Descriptor: d,
		Idempotent: true,
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"relay":"x"}`),
			json.RawMessage(`{"address":"agent@icloud.com"}`),
		},
		Fake: p.fake,
	})
}

// pool gives each subtest a fake relay of its own: the descriptor's
// relays are fixed when it is built, so the suite's descriptor finds the
// subtest's descriptor by a tag in the connection's configuration
// ({"fake": <its URL>}), which it takes off before New sees it.
type pool struct {
	mu    sync.Mutex
	fakes map[string]channels.Descriptor
}

func (p *pool) lookup(raw json.RawMessage) (channels.Descriptor, json.RawMessage, bool) {
	var tag struct {
		Fake string `json:"fake"`
	}
	if json.Unmarshal(raw, &tag) != nil || tag.Fake == "" {
		return channels.Descriptor{}, nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.fakes[tag.Fake]
	return d, json.RawMessage(`{}`), ok
}

func (p *pool) fake(t *testing.T) *channeltest.Fake {
	srv := bluebubblestest.NewServer(password, address)
	srv.SetPrivateAPI(true)
	t.Cleanup(srv.Close)
	d := imessage.Descriptor(imessage.Options{Relays: []imessage.Relay{{URL: srv.URL, Password: password, Address: address}},
		CallTimeout: 5 * time.Second})
	p.mu.Lock()
	p.fakes[srv.URL] = d
	p.mu.Unlock()
	cfg, _ := json.Marshal(map[string]string{"fake": srv.URL})
	return &channeltest.Fake{
		Config:     cfg,
		To:         person,
		WebhookURL: "https://comm.example/hooks/imessage/conn_channeltest",
		RetryAfter: time.Minute,
		Provisioned: func(*testing.T) bool {
			for _, w := range srv.Webhooks() {
				if strings.HasPrefix(w.URL, "https://comm.example/hooks/imessage?") {
					return true
				}
			}
			return false
		},
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, s := range srv.Sent() {
				to := strings.TrimPrefix(s.ChatGUID, "iMessage;-;")
				out = append(out, channels.Outbound{To: to, ThreadKey: to, Text: s.Text})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			for _, c := range srv.Typings() {
				to := strings.TrimPrefix(c, "iMessage;-;")
				out = append(out, channels.Typing{To: to, ThreadKey: to})
			}
			return out
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			switch kind {
			case channeltest.RateLimited:
				srv.FailNext(bluebubblestest.RateLimited)
				return person, "429"
			case channeltest.Unavailable:
				srv.FailNext(bluebubblestest.ServerError)
				return person, "HTTP 500"
			case channeltest.Timeout:
				srv.FailNext(bluebubblestest.Hang)
				return person, ""
			case channeltest.Rejected:
				srv.FailNext(bluebubblestest.BadRequest)
				return person, "Invalid chat GUID"
			case channeltest.Unauthorized:
				srv.FailNext(bluebubblestest.WrongPassword)
				return person, "refused the password"
			}
			return "", ""
		},
	}
}

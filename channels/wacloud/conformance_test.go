package wacloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
)

// conformanceNumbers is how many numbers the suite's fake has: one per
// subtest that builds an adapter, with room to spare.
const conformanceNumbers = 64

// hookBase is the connection ingress URL the suite's connections get; its
// last segment names the line (the suite's connections carry no Line, so
// the test's New takes it from there).
const hookBase = "https://comm.example/hooks/whatsapp/"

// lineConn is a connection on its line as the gateway composes it:
// inbound requests are verified by the descriptor's App and read by its
// SharedApp.Receive, and the messages that came to the line are the
// connection's (the routing by sender is the gateway's, tested in
// server). It lets the suite's inbound, typing and signature checks run
// against the shared-line path.
type lineConn struct {
	*wacloud.Adapter
	app    channels.AppWebhook
	shared channels.SharedApp
	line   string
}

func (c *lineConn) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if _, resp, err := c.app.Route(r, body); err != nil || resp != nil {
		return nil, err
	}
	lis, err := c.shared.Receive(r, body)
	if err != nil {
		return nil, err
	}
	var out []channels.Inbound
	for _, li := range lis {
		if li.Line == c.line {
			out = append(out, li.Inbound)
		}
	}
	return out, nil
}

// TestConformance runs channeltest against the adapter of a connection on
// one of the fake's numbers.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := wacloudtest.NewServer()
	t.Cleanup(srv.Close)
	var numbers []*wacloudtest.Number
	var opts []wacloud.Number
	for i := range conformanceNumbers {
		n := srv.AddNumber(fmt.Sprintf("+1555000%04d", i))
		numbers = append(numbers, n)
		opts = append(opts, wacloud.Number{PhoneNumberID: n.PhoneNumberID, DisplayNumber: n.DisplayNumber, AccessToken: n.AccessToken})
	}
	d := wacloud.Descriptor(wacloud.Options{GraphURL: srv.GraphURL, AppSecret: srv.AppSecret, VerifyToken: srv.VerifyToken, Numbers: opts})
	h := channels.Descriptor{Channel: d.Channel, Provider: d.Provider, Tier: d.Tier,
		New: func(ctx context.Context, conn channels.Connection) (channels.Adapter, error) {
			conn.Line = strings.TrimPrefix(conn.WebhookURL, hookBase)
			a, err := d.New(ctx, conn)
			if err != nil {
				return nil, err
			}
			return &lineConn{Adapter: a.(*wacloud.Adapter), app: d.App, shared: d.Shared, line: conn.Line}, nil
		}}
	var next atomic.Int64
	channeltest.Run(t, channeltest.Harness{
		Descriptor: h,
		Fake: func(t *testing.T) *channeltest.Fake {
			i := next.Add(1) - 1
			if i >= conformanceNumbers {
				t.Fatal("wacloud conformance: more subtests than numbers; raise conformanceNumbers")
			}
			return newFake(srv, numbers[i])
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"dedicated":"yes"}`),
			json.RawMessage(`{"phone_number_id":"1"}`),
		},
	})
}

func newFake(srv *wacloudtest.Server, n *wacloudtest.Number) *channeltest.Fake {
	const person = "15557654321"
	var mu sync.Mutex
	senders := map[string]string{} // wamid -> who wrote it
	hook := hookBase + n.PhoneNumberID
	body := func(m channels.Inbound) []byte {
		id := "wamid." + strings.NewReplacer("-", "", "_", "").Replace(m.ProviderID)
		mu.Lock()
		senders[id] = m.Sender
		mu.Unlock()
		return wacloudtest.Payload(wacloudtest.Value{Number: n, Messages: []wacloudtest.Message{{From: m.Sender, Name: "Ada", ID: id, Text: m.Text}}})
	}
	return &channeltest.Fake{
		Config:             json.RawMessage(`{}`),
		WebhookURL:         hook,
		To:                 person,
		RetryAfter:         time.Minute,
		TypingNeedsMessage: true,
		Sent: func(*testing.T, channels.Adapter) []channels.Outbound {
			var out []channels.Outbound
			for _, s := range n.Sent() {
				to := s.To
				if to == "" {
					to = s.Recipient
				}
				out = append(out, channels.Outbound{To: to, ThreadKey: to, Text: s.Text})
			}
			return out
		},
		Typings: func(*testing.T, channels.Adapter) []channels.Typing {
			var out []channels.Typing
			mu.Lock()
			defer mu.Unlock()
			for _, ty := range n.Typings() {
				if ty.Indicator == "text" {
					who := senders[ty.MessageID]
					out = append(out, channels.Typing{To: who, ThreadKey: who, InReplyTo: ty.MessageID})
				}
			}
			return out
		},
		Inbound: func(_ *testing.T, m channels.Inbound) *http.Request {
			return wacloudtest.SignedRequest(hook, srv.AppSecret, body(m))
		},
		Raw: func(_ *testing.T, b []byte) *http.Request {
			return wacloudtest.SignedRequest(hook, srv.AppSecret, b)
		},
		Tamper: func(_ *testing.T, r *http.Request) *http.Request {
			r.Header.Set(meta.SignatureHeader, "sha256="+strings.Repeat("0", 64))
			return r
		},
		Fail: func(_ *testing.T, kind channeltest.Failure) (string, string) {
			var f wacloudtest.Failure
			detail := ""
			switch kind {
			case channeltest.RateLimited:
				f, detail = wacloudtest.RateLimited(130429, 60), "130429"
			case channeltest.Unavailable:
				f, detail = wacloudtest.Unavailable, "131000"
			case channeltest.Timeout:
				f = wacloudtest.Hang
			case channeltest.Rejected:
				f, detail = wacloudtest.InvalidParameter, "Invalid parameter"
			case channeltest.Unauthorized:
				f, detail = wacloudtest.TokenExpired, "code 190"
			default:
				return "", ""
			}
			n.FailNext(f)
			return person, detail
		},
	}
}

package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

// TestRetentionOvertakesWebhook: an endpoint whose cursor retention
// overtook (the events after it were deleted before delivery) is disabled
// with the reason, last_error cursor_expired and webhook.disabled, and
// nothing is delivered past the gap; replay and registration from an
// expired from_seq answer 410 cursor_expired with earliest_seq; a
// registration from earliest_seq-1 resumes, in order.
func TestRetentionOvertakesWebhook(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		ctx := context.Background()
		g := startGateway(t, cfg, gwOptions{AllowPrivate: true})
		rcv := newReceiver(t)
		p := g.newProject(t)
		secret := randomWhsec()
		appendN(t, g.Log, p.ID, 10)
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/r", "secret": secret, "from_seq": 0})
		// Two hours later (an injected clock) with a retention of one: all
		// but the head event are gone before the worker ran.
		r := &stream.Retention{Log: g.Log, Keep: time.Hour, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
		if n, err := r.Pass(ctx); err != nil || n != 9 {
			t.Fatalf("retention pass: %d, %v; want 9 deleted", n, err)
		}

		startWorker(t, &delivery.Webhooks{Hooks: g.Hooks, Client: rcv.client(true, 0)})
		waitFor(t, "the endpoint disabled", 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Status == "disabled" })
		w := g.getWebhook(t, p.Key)
		if w.DisabledReason == nil || !strings.Contains(*w.DisabledReason, "cursor_expired") || !strings.Contains(*w.DisabledReason, "earliest_seq is 10") {
			t.Errorf("disabled_reason %v, want cursor_expired with earliest_seq 10", ptrText(w.DisabledReason))
		}
		if w.LastError == nil || *w.LastError != "cursor_expired: earliest_seq 10" {
			t.Errorf("last_error %v", ptrText(w.LastError))
		}
		if w.Cursor != 0 {
			t.Errorf("cursor %d moved; want 0 (nothing skipped)", w.Cursor)
		}
		if n := rcv.count(); n != 0 {
			t.Errorf("the receiver got %d deliveries past the gap", n)
		}
		var disabled []event
		for _, raw := range g.events(t, p.Key, 9) { // from earliest_seq-1: from 0 is 410 now
			if e := eventOf(t, raw); e.Type == stream.WebhookDisabled {
				disabled = append(disabled, e)
			}
		}
		if len(disabled) != 1 || !strings.Contains(string(disabled[0].Data), "cursor_expired") {
			t.Fatalf("webhook.disabled events: %+v", disabled)
		}

		// Replay and registration from an expired cursor: 410.
		for _, c := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/webhook/replay", `{"from_seq":8}`},
			{http.MethodPut, "/v1/webhook", fmt.Sprintf(`{"url":%q,"secret":%q,"from_seq":0}`, rcv.URL()+"/r", secret)},
		} {
			resp := g.do(t, c.method, c.path, p.Key, c.body)
			wantError(t, c.path, resp, http.StatusGone, "from_seq")
			var e struct {
				Error struct {
					Code        string `json:"code"`
					EarliestSeq int64  `json:"earliest_seq"`
				} `json:"error"`
			}
			if err := json.Unmarshal(resp.Body, &e); err != nil || e.Error.Code != "cursor_expired" || e.Error.EarliestSeq != 10 {
				t.Errorf("%s %s: %s, want cursor_expired with earliest_seq 10", c.method, c.path, resp.Body)
			}
		}
		// From earliest_seq-1: delivered from 10 on, in order.
		g.putWebhook(t, p.Key, map[string]any{"url": rcv.URL() + "/r", "secret": secret, "from_seq": 9})
		head := g.head(t, p.ID)
		waitFor(t, "deliveries after re-registration", 20*time.Second, func() bool { return g.getWebhook(t, p.Key).Cursor == head })
		checkInOrder(t, g, rcv, "/r", p, secret, 9, head)
		if w := g.getWebhook(t, p.Key); w.Status != "active" {
			t.Errorf("status %q after re-registration", w.Status)
		}
	})
}

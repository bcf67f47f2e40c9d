package x

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// maxPollPages bounds the dm_events pages read in one poll.
const maxPollPages = 5

// Poll is the connection's session: it keeps the access token fresh
// (refreshing it RefreshMargin before it expires and saving the rotated
// tokens) and, in polling mode, reads new DMs every PollInterval. A
// refresh X refuses returns a channels.ErrRevoked error.
func (a *Adapter) Poll(ctx context.Context, emit channels.Emit) error {
	if a.NeedsInstall() {
		return channels.Permanent("x: the connection waits for the install of the gateway's X app")
	}
	// This process may hold an old copy: another replica may have
	// refreshed (and spent the refresh token this copy knows).
	if _, err := a.reload(ctx); err != nil {
		return channels.Transient(0, "x: load the stored tokens: %v", err)
	}
	for {
		if due, _ := a.refreshDue(); due {
			if err := a.refresh(ctx); err != nil {
				return err
			}
		}
		if !a.webhookMode() {
			if err := a.pollOnce(ctx, emit); err != nil {
				return err
			}
		} else if err := a.checkWebhook(ctx); err != nil {
			a.opts.Logger.Warn("x: check the app's webhook", "connection", a.conn.ID, "err", err)
		}
		wait := a.opts.PollInterval
		if a.webhookMode() {
			wait = time.Hour
		}
		if _, until := a.refreshDue(); until >= 0 && until < wait {
			wait = max(until, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-a.closed.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// dmEventsPage is an answer of GET /2/dm_events.
type dmEventsPage struct {
	Data []struct {
		ID             string `json:"id"`
		EventType      string `json:"event_type"`
		Text           string `json:"text"`
		SenderID       string `json:"sender_id"`
		ConversationID string `json:"dm_conversation_id"`
		CreatedAt      string `json:"created_at"`
	} `json:"data"`
	Meta struct {
		NextToken string `json:"next_token"`
	} `json:"meta"`
}

// pollOnce reads the DM events newer than the cursor (newest first, at
// most maxPollPages pages), emits those written to the account by others,
// oldest first, and moves the cursor past them once emit accepted them.
func (a *Adapter) pollOnce(ctx context.Context, emit channels.Emit) error {
	cfg := a.config()
	var fresh []channels.Inbound
	newest := ""
	next := ""
	for page := 0; page < maxPollPages; page++ {
		q := url.Values{"event_types": {"MessageCreate"}, "dm_event.fields": {"id,text,sender_id,created_at,dm_conversation_id"},
			"max_results": {strconv.Itoa(a.opts.PollPage)}}
		if next != "" {
			q.Set("pagination_token", next)
		}
		var p dmEventsPage
		err := a.withToken(ctx, func(token string) error {
			return a.call(ctx, "read direct messages", http.MethodGet, "/2/dm_events", token, q, nil, &p)
		})
		if err != nil {
			return err
		}
		done := false
		for _, ev := range p.Data {
			if !idRE.MatchString(ev.ID) {
				continue
			}
			if cfg.Cursor != "" && !idLess(cfg.Cursor, ev.ID) {
				done = true
				break
			}
			at, _ := time.Parse(time.RFC3339, ev.CreatedAt)
			if !cfg.Since.IsZero() && !at.IsZero() && at.Before(cfg.Since) {
				done = true
				break
			}
			if newest == "" || idLess(newest, ev.ID) {
				newest = ev.ID
			}
			if ev.EventType != "" && ev.EventType != "MessageCreate" || !idRE.MatchString(ev.SenderID) || ev.SenderID == cfg.UserID {
				continue
			}
			thread := ev.ConversationID
			if thread == "" || len(thread) > 64 {
				thread = Conversation(ev.SenderID, cfg.UserID)
			}
			details := map[string]any{"dm_event_id": ev.ID}
			if !at.IsZero() {
				details["created_at"] = at.UTC().Format(time.RFC3339Nano)
			}
			raw, _ := json.Marshal(details)
			fresh = append(fresh, channels.Inbound{ProviderID: ev.ID, Sender: ev.SenderID, ThreadKey: thread, Text: ev.Text, Details: raw})
		}
		next = p.Meta.NextToken
		if done || next == "" || len(next) > 512 {
			break
		}
	}
	if newest == "" {
		return nil
	}
	slices.Reverse(fresh)
	if len(fresh) > 0 {
		if err := emit(fresh...); err != nil {
			return channels.Transient(0, "x: store polled messages: %v", err)
		}
	}
	a.mu.Lock()
	if a.cfg.Cursor == "" || idLess(a.cfg.Cursor, newest) {
		a.cfg.Cursor = newest
	}
	a.mu.Unlock()
	if err := a.save(ctx); err != nil {
		// Stored messages are not stored twice (inbound is idempotent by
		// provider id): the cursor is saved with the next poll.
		a.opts.Logger.Warn("x: save the dm_events cursor", "connection", a.conn.ID, "err", err)
	}
	return nil
}

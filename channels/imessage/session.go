package imessage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Session follows the relays when they cannot reach the gateway: every
// PollInterval it asks each relay for the messages after its cursor
// (POST /api/v1/message/query, sorted by date, with their chats and
// attachments) and emits the people's messages with the relay's address
// as the key. The cursor (the date of the newest message handed over, and
// the guids at that date, as the query's "after" is inclusive) is kept in
// Options.State once emit committed, so another replica's session goes on
// where this one stopped. A relay met for the first time is followed from
// its newest message on: its history is not replayed.
//
// This polls rather than following the relay's Socket.IO stream: the
// query endpoint is plain HTTP, what a restart missed is read again from
// the cursor, and a fake relay for tests needs no Socket.IO server.
// Receipts are not seen this way.
type Session struct{ ch *channel }

// pageSize is the messages asked per query (BlueBubbles allows 1000).
const pageSize = 100

// maxPages bounds the queries of one relay per round.
const maxPages = 20

// cursor is where a followed relay was left.
type cursor struct {
	// After is the dateCreated (ms) of the newest message handed over.
	After int64 `json:"after"`
	// Seen are the guids of the messages at After handed over.
	Seen []string `json:"seen,omitempty"`
}

const maxSeen = 1000

// emitError is emit failing: the session ends with it, to be started
// again.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// Run follows every relay until ctx ends (nil) or emit fails (an error to
// start again from the cursors). A relay that fails is asked again after
// a growing pause (up to a minute); the others go on.
func (s *Session) Run(ctx context.Context, emit func(key string, ins ...channels.Inbound) error) error {
	c := s.ch
	relays := c.opts.relays
	next := make([]time.Time, len(relays))
	fails := make([]int, len(relays))
	for {
		for i, r := range relays {
			if c.opts.Now().Before(next[i]) {
				continue
			}
			err := c.follow(ctx, r, emit)
			if ctx.Err() != nil {
				return nil
			}
			var ee *emitError
			if errors.As(err, &ee) {
				return fmt.Errorf("imessage: relay %s: store the messages: %w", r.Address, ee.err)
			}
			if err != nil {
				fails[i]++
				pause := min(time.Duration(1<<min(fails[i], 6))*time.Second, time.Minute)
				next[i] = c.opts.Now().Add(pause)
				c.opts.Logger.Warn("imessage: following the relay failed", "relay", r.Address, "retry_in", pause, "err", err)
				continue
			}
			fails[i] = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval()):
		}
	}
}

func cursorKey(r *relay) string { return "cursor/" + r.id }

// follow hands over what r has after its cursor.
func (c *channel) follow(ctx context.Context, r *relay, emit func(key string, ins ...channels.Inbound) error) error {
	raw, err := c.opts.State.Get(ctx, cursorKey(r))
	if err != nil {
		return err
	}
	var cur cursor
	if raw == nil {
		return c.startCursor(ctx, r)
	}
	if err := json.Unmarshal(raw, &cur); err != nil {
		return fmt.Errorf("imessage: relay %s: the saved cursor is malformed: %w", r.Address, err)
	}
	offset := 0
	for range maxPages {
		body := map[string]any{"limit": pageSize, "sort": "ASC", "after": cur.After, "offset": offset,
			"with": []string{"chat", "attachment"}}
		var list []message
		if err := c.call(ctx, r, "query messages", http.MethodPost, "/api/v1/message/query", nil, body, &list); err != nil {
			return err
		}
		next := cur
		var ins []channels.Inbound
		for _, m := range list {
			if m.GUID == "" || m.DateCreated < cur.After || (m.DateCreated == cur.After && slices.Contains(cur.Seen, m.GUID)) {
				continue
			}
			if in, ok := c.message(ctx, r, m); ok {
				ins = append(ins, in)
			}
			if m.DateCreated > next.After {
				next = cursor{After: m.DateCreated}
			}
			if m.DateCreated == next.After && len(next.Seen) < maxSeen {
				next.Seen = append(slices.Clip(next.Seen), m.GUID)
			}
		}
		if len(ins) > 0 {
			if err := emit(r.Address, ins...); err != nil {
				return &emitError{err}
			}
		}
		if next.After != cur.After || len(next.Seen) != len(cur.Seen) {
			if err := c.saveCursor(ctx, r, next); err != nil {
				return err
			}
		}
		if len(list) < pageSize {
			return nil
		}
		if next.After == cur.After {
			offset += len(list) // a full page at one date: page on
		} else {
			offset = 0
		}
		cur = next
	}
	return nil
}

// startCursor puts a relay met for the first time's cursor at its newest
// message (now, when it has none), so that its history is not replayed.
func (c *channel) startCursor(ctx context.Context, r *relay) error {
	var newest []message
	body := map[string]any{"limit": 1, "sort": "DESC"}
	if err := c.call(ctx, r, "query messages", http.MethodPost, "/api/v1/message/query", nil, body, &newest); err != nil {
		return err
	}
	cur := cursor{After: c.opts.Now().UnixMilli()}
	if len(newest) > 0 && newest[0].DateCreated > 0 {
		cur = cursor{After: newest[0].DateCreated, Seen: []string{newest[0].GUID}}
	}
	return c.saveCursor(ctx, r, cur)
}

func (c *channel) saveCursor(ctx context.Context, r *relay, cur cursor) error {
	raw, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return c.opts.State.Put(ctx, cursorKey(r), raw)
}

// interval is the pause between rounds: PollInterval when following the
// relays, CatchUpInterval when their webhooks deliver.
func (c *channel) interval() time.Duration {
	if c.opts.Follow {
		return c.opts.PollInterval
	}
	return c.opts.CatchUpInterval
}

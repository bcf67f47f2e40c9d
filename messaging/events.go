package messaging

import (
	"context"
	"time"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/stream"
)

// Paging limits of the event stream.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
	MaxEventWait      = 60 * time.Second
)

// EventQuery selects a page of the caller's event stream.
type EventQuery struct {
	AfterSeq int64
	Limit    int
	Type     string
	// Wait, if positive, holds the request until an event arrives or the
	// wait runs out (long polling); an empty page is returned then.
	Wait time.Duration
}

// Validate checks the query and fills defaults.
func (q *EventQuery) Validate() error {
	if q.AfterSeq < 0 {
		return Invalid("after_seq", "must be a non-negative integer")
	}
	if q.Limit == 0 {
		q.Limit = DefaultEventLimit
	}
	if q.Limit < 1 || q.Limit > MaxEventLimit {
		return Invalid("limit", "must be between 1 and %d", MaxEventLimit)
	}
	if q.Type != "" && !stream.KnownType(q.Type) {
		return fault.Invalid("type", "%s", stream.UnknownTypeError(q.Type).Error())
	}
	if q.Wait < 0 || q.Wait > MaxEventWait {
		return Invalid("wait", "must be between 0 and %d seconds", int(MaxEventWait/time.Second))
	}
	return nil
}

// Events returns a page of the caller's stream: events with seq after
// q.AfterSeq, in order, at most q.Limit of them and within the log's byte
// budget of a page (fewer events when their bytes would pass it; an event
// larger than the budget comes alone). Only the principal's project is ever read.
func (s *Service) Events(ctx context.Context, q EventQuery) ([]stream.Event, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	return page(ctx, s, p, q, func() ([]stream.Event, bool, error) {
		evs, err := s.log.Read(ctx, p.ProjectID, q.AfterSeq, q.Limit, q.Type)
		return evs, len(evs) > 0, err
	})
}

// EventsPage is Events without waiting, also telling whether more events
// follow the page (for cursor-paged front doors such as GraphQL's).
func (s *Service) EventsPage(ctx context.Context, q EventQuery) ([]stream.Event, bool, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := q.Validate(); err != nil {
		return nil, false, err
	}
	// One more than asked tells whether there is a next page; so does a
	// page cut short by the byte budget.
	evs, cut, err := s.log.ReadPage(ctx, p.ProjectID, q.AfterSeq, q.Limit+1, q.Type)
	if err != nil {
		return nil, false, err
	}
	if len(evs) > q.Limit {
		return evs[:q.Limit], true, nil
	}
	return evs, cut, nil
}

// EventsJSON is Events with the page encoded as the REST API's JSON array.
func (s *Service) EventsJSON(ctx context.Context, q EventQuery) ([]byte, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	return page(ctx, s, p, q, func() ([]byte, bool, error) {
		b, err := s.log.ReadJSON(ctx, p.ProjectID, q.AfterSeq, q.Limit, q.Type)
		return b, len(b) > 2, err
	})
}

// page validates q and reads a page, long-polling when q.Wait is set.
func page[T any](ctx context.Context, s *Service, p *Principal, q EventQuery, read func() (T, bool, error)) (T, error) {
	if err := q.Validate(); err != nil {
		var zero T
		return zero, err
	}
	if q.Wait == 0 {
		v, _, err := read()
		return v, err
	}
	// Follow before reading, so a commit between the read and the wait
	// still wakes us. Wake-ups are hints: re-read at least once a second, so
	// events committed by another replica are seen too. The long-poll's
	// deadline ends the wait, not a read under way: reads keep the caller's
	// ctx.
	f := s.log.Hub().Follow(p.ProjectID, time.Second)
	defer f.Close()
	wait, cancel := context.WithTimeout(ctx, q.Wait)
	defer cancel()
	for {
		v, found, err := read()
		if err != nil || found {
			return v, err
		}
		if f.Wait(wait, nil) == stream.WakeDone {
			return v, nil
		}
	}
}

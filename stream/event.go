// Package stream is the per-project event log: every change in a project
// appends events, in the same transaction as the change, and readers follow
// the log by seq.
//
// Ordering (design.md invariant 1): seq comes from the project's counter row
// (projects.last_seq), advanced by UPDATE ... RETURNING in the transaction
// that inserts the events. The row lock is held until commit, so seq k+1 is
// never committed before k, and a reader never sees k+1 without k.
//
// Speed: Log.Write queues the caller's work; a writer goroutine runs
// whatever queued while its last commit ran in one transaction (group
// commit), each piece of work inside its own savepoint so one failure does
// not undo the others. Projects are sharded over writers, so one project's
// writes run in submission order.
package stream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/comm-gateway/comm/api"
)

// Event is one entry of a project's stream, in the spec's shape.
type Event = api.Event

// The stored form of an event is its JSON envelope, exactly as every front
// door serves it: {"seq":N,"type":"T","data":D}. It is encoded once, at
// append, and read pages are concatenations of stored envelopes.

// appendEnvelope appends e's JSON envelope to b. Types are plain ASCII
// (KnownType) and Data is valid JSON, so no escaping is needed.
func appendEnvelope(b []byte, e *Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"type":"`...)
	b = append(b, e.Type...)
	b = append(b, `","data":`...)
	b = append(b, e.Data...)
	return append(b, '}')
}

// unwrapEnvelope returns the data of a stored envelope.
func unwrapEnvelope(body []byte, seq int64, typ string) (json.RawMessage, error) {
	prefix := len(`{"seq":`) + len(strconv.FormatInt(seq, 10)) + len(`,"type":"`) + len(typ) + len(`","data":`)
	if len(body) < prefix+1 || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("stream: event %d: malformed stored envelope", seq)
	}
	return json.RawMessage(body[prefix : len(body)-1]), nil
}

// Event types.
const (
	MessageReceived      = api.EventMessageReceived
	MessageSent          = api.EventMessageSent
	MessageFailed        = api.EventMessageFailed
	ConnectionActive     = api.EventConnectionActive
	ConnectionAuthorized = api.EventConnectionAuthorized
	ConnectionDegraded   = api.EventConnectionDegraded
	ConnectionRevoked    = api.EventConnectionRevoked
	DomainVerified       = api.EventDomainVerified
	DomainUnverified     = api.EventDomainUnverified
	WebhookDisabled      = api.EventWebhookDisabled
	WebhookEnabled       = api.EventWebhookEnabled
	AccountBalanceLow    = api.EventAccountBalanceLow
)

// Types lists every event type, sorted.
var Types = []string{
	AccountBalanceLow, ConnectionActive, ConnectionAuthorized, ConnectionDegraded, ConnectionRevoked, DomainUnverified, DomainVerified,
	MessageFailed, MessageReceived, MessageSent,
	WebhookDisabled, WebhookEnabled,
}

// KnownType reports whether t is an event type.
func KnownType(t string) bool {
	_, found := slices.BinarySearch(Types, t)
	return found
}

// UnknownTypeError names an unknown event type and the known ones.
func UnknownTypeError(t string) error {
	return fmt.Errorf("unknown event type %q; known types: %s", t, strings.Join(Types, ", "))
}

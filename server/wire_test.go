package server_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/comm-gateway/comm/api"
)

// apiPkg is the package path of the wire types.
var apiPkg = reflect.TypeFor[api.Connection]().PkgPath()

// wireRoundTrip is the rule every REST answer the tests read obeys when
// they read it into a type of package api (decodeJSON calls it): the answer
// decoded without unknown fields (decodeJSON's DisallowUnknownFields), and
// the decoded value encodes back to the very bytes the gateway sent. So a
// field the gateway writes that the api type lacks fails the decode, and a
// field of the api type the gateway does not write (or writes in another
// form, order or null-ness) fails the comparison: the server and the
// client, which both use package api, cannot drift apart silently.
func wireRoundTrip(t *testing.T, b []byte, v any) {
	t.Helper()
	if !isWireType(reflect.TypeOf(v)) {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the gateway's writeJSON
	if err := enc.Encode(v); err != nil {
		t.Fatalf("re-encode %T: %v", v, err)
	}
	got, want := bytes.TrimSpace(buf.Bytes()), bytes.TrimSpace(b)
	if !bytes.Equal(got, want) {
		t.Errorf("%T does not round-trip the gateway's JSON:\n gateway: %s\n api:     %s", v, want, got)
	}
	switch evs := v.(type) {
	case *[]api.Event:
		for _, e := range *evs {
			eventRoundTrip(t, e)
		}
	case *api.Event:
		eventRoundTrip(t, *evs)
	}
}

// eventRoundTrip holds an event's data to the same rule, by the event's
// type: the data decodes strictly into the api type the gateway writes it
// with and encodes back to the same bytes (the stream stores data as
// json.Marshal wrote it). A message event's data also decodes strictly
// into api.MessageEvent, the type readers use for all three. Events that
// tests append straight into the log carry data of their own, without the
// object the gateway's event of that type carries; they are left alone.
func eventRoundTrip(t *testing.T, e api.Event) {
	t.Helper()
	var top map[string]json.RawMessage
	if json.Unmarshal(e.Data, &top) != nil {
		return
	}
	object := map[string]string{
		api.EventMessageReceived: "message", api.EventMessageSent: "message", api.EventMessageFailed: "message",
		api.EventConnectionActive: "connection", api.EventConnectionAuthorized: "connection",
		api.EventConnectionDegraded: "connection", api.EventConnectionRevoked: "connection",
		api.EventDomainVerified: "domain", api.EventDomainUnverified: "domain",
		api.EventWebhookDisabled: "webhook", api.EventWebhookEnabled: "webhook",
	}[e.Type]
	if _, ok := top[object]; !ok {
		return
	}
	switch e.Type {
	case api.EventMessageReceived:
		dataRoundTrip(t, e, &struct {
			CustomerID string              `json:"customer_id"`
			AgentID    string              `json:"agent_id"`
			Message    api.ReceivedMessage `json:"message"`
		}{})
		strictDecode(t, e, &api.MessageEvent{})
	case api.EventMessageSent, api.EventMessageFailed:
		dataRoundTrip(t, e, &struct {
			CustomerID string          `json:"customer_id"`
			AgentID    string          `json:"agent_id"`
			Message    api.SentMessage `json:"message"`
		}{})
		strictDecode(t, e, &api.MessageEvent{})
	case api.EventConnectionActive, api.EventConnectionAuthorized, api.EventConnectionDegraded, api.EventConnectionRevoked:
		dataRoundTrip(t, e, &api.ConnectionEvent{})
	case api.EventDomainVerified, api.EventDomainUnverified:
		dataRoundTrip(t, e, &api.DomainEvent{})
	case api.EventWebhookDisabled, api.EventWebhookEnabled:
		dataRoundTrip(t, e, &api.WebhookEvent{})
	}
}

func strictDecode(t *testing.T, e api.Event, v any) bool {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("event %d (%s): data does not decode into %T: %v\n%s", e.Seq, e.Type, v, err, e.Data)
		return false
	}
	return true
}

func dataRoundTrip(t *testing.T, e api.Event, v any) {
	t.Helper()
	if !strictDecode(t, e, v) {
		return
	}
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode %T: %v", v, err)
	}
	if !bytes.Equal(got, e.Data) {
		t.Errorf("event %d (%s): %T does not round-trip the data:\n gateway: %s\n api:     %s", e.Seq, e.Type, v, e.Data, got)
	}
}

// isWireType reports whether t is (a pointer to, a slice or map of) a
// type of package api.
func isWireType(t reflect.Type) bool {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
			continue
		}
		return t.PkgPath() == apiPkg
	}
	return false
}

// TestWireRoundTripCatchesDrift checks the rule itself: an answer with a
// field the api type lacks, or without a field it has, is caught.
func TestWireRoundTripCatchesDrift(t *testing.T) {
	t.Parallel()
	ok := []byte(`{"conversation_id":"conv_1","typing_until":"2026-01-02T03:04:05Z"}`)
	var ts api.TypingState
	if err := json.Unmarshal(ok, &ts); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(&ts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(buf.Bytes()), ok) {
		t.Fatalf("a faithful answer does not round-trip: %s", buf.Bytes())
	}

	// A field the gateway no longer writes: decoding succeeds, re-encoding
	// adds it back.
	short := []byte(`{"conversation_id":"conv_1"}`)
	var ts2 api.TypingState
	if err := json.Unmarshal(short, &ts2); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := json.NewEncoder(&buf).Encode(&ts2); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(bytes.TrimSpace(buf.Bytes()), short) {
		t.Errorf("a missing field went unnoticed: %s", buf.Bytes())
	}

	// A field the api type lacks: the strict decode refuses it.
	long := []byte(`{"conversation_id":"conv_1","typing_until":"2026-01-02T03:04:05Z","extra":1}`)
	dec := json.NewDecoder(bytes.NewReader(long))
	dec.DisallowUnknownFields()
	if err := dec.Decode(new(api.TypingState)); err == nil {
		t.Error("an unknown field went unnoticed")
	}

	for _, v := range []any{&ts, []api.Connection{}, &[]*api.Message{}, map[string]api.Key{}} {
		if !isWireType(reflect.TypeOf(v)) {
			t.Errorf("%T is not recognised as a wire type", v)
		}
	}
	if isWireType(reflect.TypeOf(&struct{}{})) {
		t.Error("an anonymous struct is recognised as a wire type")
	}
}

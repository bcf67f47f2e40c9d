package testchan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/channeltest"
	"github.com/comm-gateway/comm/channels/testchan"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	channeltest.Run(t, channeltest.Harness{
		Descriptor: testchan.Descriptor(),
		Fake:       fake,
		BadConfigs: []json.RawMessage{json.RawMessage(`{"token":"x"}`), json.RawMessage(`[]`)},
		Idempotent: true,
		Subject:    true,
		HTML:       true,
		Unsigned:   "the test channel's inbound comes through the REST API, which has authenticated the caller's key",
	})
}

// fake drives the test channel, which is its own provider: it records
// what it delivers, and its magic recipients fail.
func fake(t *testing.T) *channeltest.Fake {
	return &channeltest.Fake{
		To:     "bob",
		Sender: "alice",
		Sent: func(t *testing.T, a channels.Adapter) []channels.Outbound {
			return a.(*testchan.Adapter).Sent()
		},
		Typings: func(t *testing.T, a channels.Adapter) []channels.Typing {
			return a.(*testchan.Adapter).Typings()
		},
		Inbound: func(t *testing.T, m channels.Inbound) *http.Request {
			body, err := json.Marshal(testchan.Inject{Sender: m.Sender, Text: m.Text, Subject: m.Subject, HTML: m.HTML, ID: m.ProviderID})
			if err != nil {
				t.Fatal(err)
			}
			return injectRequest(body)
		},
		Raw: func(t *testing.T, body []byte) *http.Request { return injectRequest(body) },
		Fail: func(t *testing.T, kind channeltest.Failure) (string, string) {
			switch kind {
			case channeltest.RateLimited:
				return testchan.FailTransient, testchan.FailTransient
			case channeltest.Unavailable:
				return testchan.Flaky, testchan.Flaky
			case channeltest.Rejected:
				return testchan.FailPermanent, testchan.FailPermanent
			}
			return "", "" // no network, no credentials
		},
	}
}

func injectRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/connections/conn_channeltest/inbound", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func newAdapter(t *testing.T) *testchan.Adapter {
	t.Helper()
	a, err := testchan.New(t.Context(), channels.Connection{ID: "conn_1", ProjectID: "proj_1"})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*testchan.Adapter)
}

func TestNewConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"", "null", "{}", "{ }", " {}\n", " null "} {
		if _, err := testchan.New(t.Context(), channels.Connection{Config: json.RawMessage(c)}); err != nil {
			t.Errorf("New(%q): %v", c, err)
		}
	}
	for _, c := range []string{`{"a":1}`, `[]`, `"x"`, `{`, `0`, `{} {}`} {
		_, err := testchan.New(t.Context(), channels.Connection{Config: json.RawMessage(c)})
		if err == nil || !strings.HasPrefix(err.Error(), "test: ") {
			t.Errorf("New(%q) = %v, want an error naming the test channel", c, err)
		}
	}
}

func TestParseWebhook(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("a", n) }
	obj := func(fields string) string { return "{" + fields + "}" }
	tests := []struct {
		name  string
		body  string
		field string // the FieldError's field; "" for an error of another kind
		ok    bool
	}{
		{"minimal", `{"sender":"alice","text":"hi"}`, "", true},
		{"all fields", `{"sender":"alice","text":"hi","subject":"S","html":"<p>hi</p>","id":"p1"}`, "", true},
		{"html only", `{"sender":"alice","html":"<p>hi</p>"}`, "", true},
		{"trailing whitespace", "{\"sender\":\"alice\",\"text\":\"hi\"}\n \t", "", true},
		{"longest sender", obj(`"sender":"` + long(testchan.MaxSender) + `","text":"hi"`), "", true},
		{"longest text", obj(`"sender":"alice","text":"` + long(testchan.MaxText) + `"`), "", true},
		{"longest subject", obj(`"sender":"alice","text":"hi","subject":"` + long(testchan.MaxSubject) + `"`), "", true},
		{"longest id", obj(`"sender":"alice","text":"hi","id":"` + long(testchan.MaxID) + `"`), "", true},

		{"missing sender", `{"text":"hi"}`, "sender", false},
		{"blank sender", `{"sender":" \t","text":"hi"}`, "sender", false},
		{"sender with a newline", `{"sender":"alice\nbob","text":"hi"}`, "sender", false},
		{"long sender", obj(`"sender":"` + long(testchan.MaxSender+1) + `","text":"hi"`), "sender", false},
		{"no text no html", `{"sender":"alice"}`, "text", false},
		{"empty text no html", `{"sender":"alice","text":""}`, "text", false},
		{"empty text null html", `{"sender":"alice","text":"","html":null}`, "text", false},
		{"empty text empty html", `{"sender":"alice","text":"","html":""}`, "text", false},
		{"long text", obj(`"sender":"alice","text":"` + long(testchan.MaxText+1) + `"`), "text", false},
		{"long html", obj(`"sender":"alice","html":"` + long(testchan.MaxText+1) + `"`), "html", false},
		{"long subject", obj(`"sender":"alice","text":"hi","subject":"` + long(testchan.MaxSubject+1) + `"`), "subject", false},
		{"two-line subject", `{"sender":"alice","text":"hi","subject":"a\r\nBcc: x"}`, "subject", false},
		{"long id", obj(`"sender":"alice","text":"hi","id":"` + long(testchan.MaxID+1) + `"`), "id", false},
		{"invalid UTF-8 text", "{\"sender\":\"alice\",\"text\":\"h\xffi\"}", "text", false},
		{"invalid UTF-8 sender", "{\"sender\":\"al\xc3ice\",\"text\":\"hi\"}", "sender", false},
		{"invalid UTF-8 html", "{\"sender\":\"alice\",\"html\":\"\xed\xa0\x80\"}", "html", false},
		{"invalid UTF-8 subject", "{\"sender\":\"alice\",\"text\":\"hi\",\"subject\":\"\xfe\"}", "subject", false},
		{"invalid UTF-8 outside fields", "{\"sender\":\"alice\",\"text\":\"hi\"}\xff", "", false},

		{"unknown field", `{"sender":"alice","text":"hi","from":"bob"}`, "", false},
		{"trailing object", `{"sender":"alice","text":"hi"} {}`, "", false},
		{"trailing garbage", `{"sender":"alice","text":"hi"}x`, "", false},
		{"wrong type", `{"sender":1,"text":"hi"}`, "", false},
		{"not an object", `["alice","hi"]`, "", false},
		{"empty", ``, "", false},
		{"truncated", `{"sender":"alice","text":`, "", false},
	}
	a := newAdapter(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ins, err := a.ParseWebhook(&http.Request{}, []byte(tt.body))
			if tt.ok {
				if err != nil || len(ins) != 1 {
					t.Fatalf("ParseWebhook = %+v, %v; want one message", ins, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseWebhook accepted %q: %+v", clip(tt.body), ins)
			}
			var fe *testchan.FieldError
			switch {
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("error %v (%T), want a FieldError on %q", err, err, tt.field)
			case tt.field == "" && errors.As(err, &fe):
				t.Errorf("error %v is a FieldError on %q, want a body error", err, fe.Field)
			case tt.field == "" && !strings.HasPrefix(err.Error(), "test: inbound: "):
				t.Errorf("error %q does not say it is the test channel's inbound", err)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

func TestParseWebhookFields(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	ins, err := a.ParseWebhook(&http.Request{}, []byte(`{"sender":"alice","text":"hi","subject":"S","html":"<p>hi</p>","id":"p1"}`))
	if err != nil {
		t.Fatal(err)
	}
	subject, html := "S", "<p>hi</p>"
	want := channels.Inbound{ProviderID: "p1", ThreadKey: "alice", Sender: "alice", Subject: &subject, Text: "hi", HTML: &html}
	if got := ins[0]; got.ProviderID != want.ProviderID || got.ThreadKey != want.ThreadKey || got.Sender != want.Sender ||
		got.Text != want.Text || *got.Subject != *want.Subject || *got.HTML != *want.HTML {
		t.Errorf("got %+v, want %+v", got, want)
	}

	// Without an id, each injection is a new message.
	body := []byte(`{"sender":"alice","text":"hi"}`)
	one, err := a.ParseWebhook(&http.Request{}, body)
	if err != nil {
		t.Fatal(err)
	}
	two, err := a.ParseWebhook(&http.Request{}, body)
	if err != nil {
		t.Fatal(err)
	}
	if one[0].ProviderID == "" || one[0].ProviderID == two[0].ProviderID {
		t.Errorf("made-up provider ids %q and %q, want two distinct ones", one[0].ProviderID, two[0].ProviderID)
	}
	if one[0].Subject != nil || one[0].HTML != nil {
		t.Errorf("absent subject and html parsed as %v, %v; want nil", one[0].Subject, one[0].HTML)
	}
}

func TestMagicRecipients(t *testing.T) {
	t.Parallel()
	send := func(a *testchan.Adapter, id, to string) (channels.SendResult, error) {
		return a.Send(t.Context(), channels.Outbound{MessageID: id, To: to, Text: "hi"})
	}
	t.Run("flaky", func(t *testing.T) {
		t.Parallel()
		a := newAdapter(t)
		if _, err := send(a, "msg_1", testchan.Flaky); !errors.Is(err, channels.ErrTransient) {
			t.Fatalf("first attempt: %v, want ErrTransient", err)
		}
		res, err := send(a, "msg_1", testchan.Flaky)
		if err != nil || res.ProviderID == "" {
			t.Fatalf("second attempt: %+v, %v; want success", res, err)
		}
		again, err := send(a, "msg_1", testchan.Flaky)
		if err != nil || again.ProviderID != res.ProviderID {
			t.Errorf("third attempt: %+v, %v; want the same provider id %q", again, err, res.ProviderID)
		}
		if _, err := send(a, "msg_2", testchan.Flaky); !errors.Is(err, channels.ErrTransient) {
			t.Errorf("another message's first attempt: %v, want ErrTransient", err)
		}
		if n := len(a.Sent()); n != 1 {
			t.Errorf("%d deliveries, want 1", n)
		}
	})
	for _, tt := range []struct {
		to    string
		class error
	}{
		{testchan.FailTransient, channels.ErrTransient},
		{testchan.FailPermanent, channels.ErrPermanent},
		{"", channels.ErrPermanent},
	} {
		t.Run(fmt.Sprintf("to %q", tt.to), func(t *testing.T) {
			t.Parallel()
			a := newAdapter(t)
			for i := range 3 {
				if _, err := send(a, "msg_1", tt.to); !errors.Is(err, tt.class) {
					t.Errorf("attempt %d: %v, want %v", i+1, err, tt.class)
				}
			}
			if n := len(a.Sent()); n != 0 {
				t.Errorf("%d deliveries, want none", n)
			}
		})
	}
}

func TestSendWithoutMessageID(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	r1, err1 := a.Send(t.Context(), channels.Outbound{To: "bob", Text: "one"})
	r2, err2 := a.Send(t.Context(), channels.Outbound{To: "bob", Text: "two"})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if r1.ProviderID == r2.ProviderID {
		t.Errorf("two messages without a message id got one provider id %q", r1.ProviderID)
	}
	if n := len(a.Sent()); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}
}

func TestRecordsAreBounded(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	const n = testchan.MaxRecorded + 5
	for i := range n {
		if _, err := a.Send(t.Context(), channels.Outbound{MessageID: fmt.Sprint("msg_", i), To: "bob", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if err := a.Typing(t.Context(), channels.Typing{To: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	sent, typings := a.Sent(), a.Typings()
	if len(sent) != testchan.MaxRecorded || len(typings) != testchan.MaxRecorded {
		t.Fatalf("recorded %d sends and %d typings, want %d each", len(sent), len(typings), testchan.MaxRecorded)
	}
	first, last := fmt.Sprint(n-testchan.MaxRecorded), fmt.Sprint(n-1)
	if sent[0].Text != first || sent[len(sent)-1].Text != last || typings[0].To != first || typings[len(typings)-1].To != last {
		t.Errorf("kept sends %q..%q and typings %q..%q, want the last ones %q..%q",
			sent[0].Text, sent[len(sent)-1].Text, typings[0].To, typings[len(typings)-1].To, first, last)
	}
}

// TestInjectReceipt: a receipt is the provider's report on a sent message,
// named by comm's id (mapped to the provider id Send gave) or by the
// provider id; it comes alone and its fields are checked.
func TestInjectReceipt(t *testing.T) {
	t.Parallel()
	a := newAdapter(t)
	res, err := a.Send(t.Context(), channels.Outbound{MessageID: "msg_01jd0000000000000000000000", To: "bob", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ProviderID != testchan.ProviderID("msg_01jd0000000000000000000000") || res.ProviderID != "test_01jd0000000000000000000000" {
		t.Errorf("provider id %q", res.ProviderID)
	}
	for _, id := range []string{"msg_01jd0000000000000000000000", res.ProviderID} {
		ins, err := a.Inject([]byte(`{"receipt":{"message_id":"` + id + `","state":"failed","code":"30007","reason":"filtered","at":"2026-11-26T12:00:00Z"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(ins) != 1 || ins[0].Receipt == nil {
			t.Fatalf("Inject = %+v", ins)
		}
		r := *ins[0].Receipt
		if r.MessageID != res.ProviderID || r.State != channels.ReceiptFailed || r.Code != "30007" || r.Reason != "filtered" ||
			r.At.Format(time.RFC3339) != "2026-11-26T12:00:00Z" || ins[0].ProviderID != "" || ins[0].Sender != "" {
			t.Errorf("receipt by %s: %+v", id, ins[0])
		}
	}
	for body, field := range map[string]string{
		`{"receipt":{"message_id":"m","state":"read"},"text":"hi"}`:  "receipt",
		`{"receipt":{"state":"read"}}`:                               "receipt.message_id",
		`{"receipt":{"message_id":"m\u0000","state":"read"}}`:        "receipt.message_id",
		`{"receipt":{"message_id":"m","state":"Read"}}`:              "receipt.state",
		`{"receipt":{"message_id":"m","state":"read","reason":"x"}}`: "receipt.code",
	} {
		_, err := a.Inject([]byte(body))
		var fe *testchan.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("Inject(%s) = %v, want an error on %s", body, err, field)
		}
	}
	if _, err := a.Inject([]byte(`{"receipt":{"message_id":"m","state":"read","extra":1}}`)); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("unknown receipt field: %v", err)
	}
}

// TestMemoryDoesNotGrowWithSends: a test connection keeps nothing per
// message sent (a free key may send for as long as it likes), flaky
// first attempts never tried again included.
func TestMemoryDoesNotGrowWithSends(t *testing.T) {
	a := newAdapter(t)
	send := func(i int, to string) {
		a.Send(t.Context(), channels.Outbound{MessageID: fmt.Sprintf("msg_%026d", i), To: to, Text: "x"}) //nolint:errcheck // flaky fails first
	}
	for i := range 1000 { // warm up: the recorded lists are full
		send(i, "bob")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 1000; i < 60000; i++ {
		to := "bob"
		if i%2 == 0 {
			to = testchan.Flaky
		}
		send(i, to)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Fatalf("heap grew %d KiB over 59,000 sends; want nothing kept per message", grew>>10)
	}
	// Behaviour kept: a flaky message fails once, then goes out, and a
	// repeat of a sent message goes out with the same provider id.
	m := channels.Outbound{MessageID: "msg_flaky", To: testchan.Flaky, Text: "x"}
	if _, err := a.Send(t.Context(), m); err == nil {
		t.Fatal("first attempt to flaky succeeded")
	}
	for range 2 {
		r, err := a.Send(t.Context(), m)
		if err != nil || r.ProviderID != testchan.ProviderID("msg_flaky") {
			t.Fatalf("flaky again: %+v %v", r, err)
		}
	}
}

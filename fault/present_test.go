package fault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/comm-gateway/comm/fault"
)

func TestPresent(t *testing.T) {
	t.Parallel()
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want fault.Problem
	}{
		{"invalid", live, fault.Invalid("limit", "must be between 1 and %d", 500),
			fault.Problem{Status: 400, Code: "invalid_parameter", Message: "must be between 1 and 500", Param: "limit"}},
		{"not found", live, fault.NotFound("connection", "conn_1"),
			fault.Problem{Status: 404, Code: "not_found", Message: `no connection "conn_1"`}},
		{"not found in words", live, fault.NotFoundf("no webhook registered"),
			fault.Problem{Status: 404, Code: "not_found", Message: "no webhook registered"}},
		{"unauthenticated", live, fault.Unauthenticated("missing API key"),
			fault.Problem{Status: 401, Code: "unauthenticated", Message: "missing API key"}},
		{"payment required", live, fault.PaymentRequired("channel %s needs a signed-in account", "sms"),
			fault.Problem{Status: 402, Code: "payment_required", Message: "channel sms needs a signed-in account"}},
		{"forbidden with param", live, fault.Forbidden("not yours").WithParam("to"),
			fault.Problem{Status: 403, Code: "forbidden", Message: "not yours", Param: "to"}},
		{"conflict", live, fault.Conflict("a project has at most %d live keys", 20),
			fault.Problem{Status: 409, Code: "conflict", Message: "a project has at most 20 live keys"}},
		{"rate limited", live, fault.RateLimited(1500*time.Millisecond, "slow down"),
			fault.Problem{Status: 429, Code: "rate_limited", Message: "slow down", RetryAfter: 1500 * time.Millisecond}},
		{"idempotency key reused", live, fault.IdempotencyKeyReused("Idempotency-Key", "used with another request"),
			fault.Problem{Status: 422, Code: "idempotency_key_reused", Message: "used with another request", Param: "Idempotency-Key"}},
		{"not implemented", live, fault.NotImplemented("not yet"),
			fault.Problem{Status: 501, Code: "not_implemented", Message: "not yet"}},
		{"malformed json", live, fault.MalformedJSON("body is empty"),
			fault.Problem{Status: 400, Code: "malformed_json", Message: "body is empty"}},
		{"unsupported media", live, fault.UnsupportedMedia("send application/json"),
			fault.Problem{Status: 415, Code: "unsupported_media_type", Message: "send application/json"}},
		{"too large", live, fault.TooLarge("body is larger than %d bytes", 10),
			fault.Problem{Status: 413, Code: "payload_too_large", Message: "body is larger than 10 bytes"}},
		{"route not found", live, fault.RouteNotFound("no route GET /x"),
			fault.Problem{Status: 404, Code: "route_not_found", Message: "no route GET /x"}},
		{"method not allowed", live, fault.MethodNotAllowed("PUT is not allowed"),
			fault.Problem{Status: 405, Code: "method_not_allowed", Message: "PUT is not allowed"}},
		{"internal, said", live, fault.Internal("internal error"),
			fault.Problem{Status: 500, Code: "internal_error", Message: "internal error"}},
		{"unavailable", live, fault.Unavailable("database unreachable"),
			fault.Problem{Status: 503, Code: "unavailable", Message: "database unreachable"}},
		{"wrapped", live, fmt.Errorf("creating: %w", fault.Conflict("taken").WithParam("domain")),
			fault.Problem{Status: 409, Code: "conflict", Message: "taken", Param: "domain"}},
		{"code without a status", live, &fault.Error{Code: "made_up", Message: "m"},
			fault.Problem{Status: 500, Code: "made_up", Message: "m"}},
		{"unknown error", live, errors.New("pq: connection reset"),
			fault.Problem{Status: 500, Code: "internal_error", Message: fault.InternalMessage, Internal: true}},
		{"deadline", live, context.DeadlineExceeded,
			fault.Problem{Status: 500, Code: "internal_error", Message: fault.InternalMessage, Internal: true}},
		{"canceled, caller still there", live, context.Canceled,
			fault.Problem{Status: 500, Code: "internal_error", Message: fault.InternalMessage, Internal: true}},
		{"canceled, caller gone", gone, fmt.Errorf("query: %w", context.Canceled),
			fault.Problem{Status: 500, Code: "internal_error", Message: fault.InternalMessage, Internal: true, Gone: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := fault.Present(c.ctx, c.err); got != c.want {
				t.Errorf("Present(%v) = %+v, want %+v", c.err, got, c.want)
			}
		})
	}
}

func TestRetrySeconds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 2}, {1500 * time.Millisecond, 2}, {59 * time.Second, 60}} {
		if got := (fault.Problem{RetryAfter: c.d}).RetrySeconds(); got != c.want {
			t.Errorf("RetrySeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", fault.NotFound("key", "key_1"))
	if !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("%v is not ErrNotFound", err)
	}
	if errors.Is(err, fault.ErrRouteNotFound) || errors.Is(err, fault.ErrInvalid) {
		t.Errorf("%v matches another code", err)
	}
	e := fault.Invalid("", "bad")
	if p := e.WithParam("name"); p.Param != "name" || e.Param != "" || p.Error() != "invalid_parameter: name: bad" {
		t.Errorf("WithParam: %+v from %+v", p, e)
	}
	// A message is always a format: %% is a percent sign, as fmt says.
	if e := fault.Conflict("100%% used"); e.Message != "100% used" {
		t.Errorf("Conflict message %q", e.Message)
	}
}

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/comm-gateway/comm/client"
)

// fakeDevice speaks the spec's device flow: start, then token answering
// with the statuses in script, one per poll.
func fakeDevice(t *testing.T, script ...string) (*httptest.Server, *atomic.Int32, *[]time.Time) {
	var polls atomic.Int32
	var at []time.Time
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/auth/device/start", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		if in["api_key"] != "comm_sandbox_key" {
			t.Errorf("start without the sandbox key: %v", in)
		}
		json.NewEncoder(w).Encode(map[string]any{"user_code": "BCDF-GHJK", "device_code": "dev_x",
			"verification_uri_complete": "http://gateway/device?code=BCDF-GHJK", "interval": 1})
	})
	mux.HandleFunc("POST /v1/auth/device/token", func(w http.ResponseWriter, r *http.Request) {
		at = append(at, time.Now())
		n := int(polls.Add(1)) - 1
		st := script[min(n, len(script)-1)]
		out := map[string]any{"status": st}
		if st == "approved" {
			out["api_key"], out["base_url"] = "comm_signedin", "http://gateway"
		}
		json.NewEncoder(w).Encode(out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &polls, &at
}

func TestLoginFlow(t *testing.T) {
	t.Parallel()
	srv, polls, at := fakeDevice(t, "pending", "slow_down", "approved")
	var prompt client.LoginPrompt
	res, err := client.Login(context.Background(), srv.URL, "comm_sandbox_key", func(p client.LoginPrompt) { prompt = p })
	if err != nil {
		t.Fatal(err)
	}
	if prompt.Code != "BCDF-GHJK" || prompt.URL != "http://gateway/device?code=BCDF-GHJK" || prompt.Interval != time.Second {
		t.Fatalf("prompt %+v", prompt)
	}
	if res.APIKey != "comm_signedin" || res.BaseURL != "http://gateway" || polls.Load() != 3 {
		t.Fatalf("result %+v after %d polls", res, polls.Load())
	}
	// slow_down raised the interval by 5 s before the third poll.
	if gap := (*at)[2].Sub((*at)[1]); gap < 5*time.Second {
		t.Errorf("poll after slow_down came %s later", gap)
	}
}

func TestLoginEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		want   error
	}{{"denied", client.ErrLoginDenied}, {"expired", client.ErrLoginExpired}} {
		srv, _, _ := fakeDevice(t, tc.status)
		_, err := client.Login(context.Background(), srv.URL, "comm_sandbox_key", func(client.LoginPrompt) {})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v", tc.status, err)
		}
	}
	srv, _, _ := fakeDevice(t, "pending")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := client.Login(ctx, srv.URL, "comm_sandbox_key", func(client.LoginPrompt) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled login: %v", err)
	}
}

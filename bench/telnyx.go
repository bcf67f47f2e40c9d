package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/telnyx/telnyxtest"
)

// TelnyxConnection is a sandbox project with an SMS connection through an
// account of the fake Telnyx.
type TelnyxConnection struct {
	Key, ConnectionID string
	Account           *telnyxtest.Account
	// Hook is the connection's ingress (the profile's webhook_url).
	Hook string
}

// NewTelnyxConnections makes n sandbox projects, each connected to an
// account of its own on fake (the gateway points the account's messaging
// profile at the connection's ingress).
func NewTelnyxConnections(ctx context.Context, a *API, fake *telnyxtest.Server, n int) ([]TelnyxConnection, error) {
	out := make([]TelnyxConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		acct := fake.NewAccount()
		var c struct {
			ID         string `json:"id"`
			WebhookURL string `json:"webhook_url"`
		}
		in := map[string]any{"channel": "sms", "provider": "telnyx",
			"config": map[string]string{"api_key": acct.APIKey, "public_key": acct.PublicKey, "from": acct.Number}}
		if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, in, &c); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("connect telnyx: %d %v", code, err)
		}
		if acct.Webhook() != c.WebhookURL {
			return nil, fmt.Errorf("connect telnyx: the profile's webhook_url is %q, not the connection's %q", acct.Webhook(), c.WebhookURL)
		}
		out[i] = TelnyxConnection{Key: sb.APIKey, ConnectionID: c.ID, Account: acct, Hook: c.WebhookURL}
	}
	return out, nil
}

// postTelnyx POSTs body to the connection's ingress, signed now with the
// account's key, as Telnyx does.
func postTelnyx(ctx context.Context, client *http.Client, c TelnyxConnection, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.Hook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(telnyxtest.TimestampHeader, ts)
	req.Header.Set(telnyxtest.SignatureHeader, telnyxtest.Sign(c.Account.Key, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /hooks/sms: %s", resp.Status)
	}
	return nil
}

// smsEvent is a message.received delivery of an SMS from sender with a
// message id of its own.
func smsEvent(c TelnyxConnection, id, sender, text string) []byte {
	return c.Account.Event(telnyx.EventReceived, c.Account.Received(&telnyxtest.Inbound{ID: id, From: sender, Text: text}), 1)
}

// TelnyxIngress runs `workers` clients playing Telnyx: each POSTs
// Ed25519-signed message.received events (one SMS each, signed when sent)
// to a connection's /hooks/sms/{id}, spread over conns, for d. The gateway
// answers 200 once message.received is committed. Senders rotate over 50
// numbers per worker, so conversations are both new and reused.
func TelnyxIngress(ctx context.Context, base string, conns []TelnyxConnection, workers int, d time.Duration) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		c := conns[w%len(conns)]
		i := 0
		return func() error {
			i++
			sender := fmt.Sprintf("+1555%03d%04d", w%1000, i%50)
			return postTelnyx(ctx, client, c, smsEvent(c, fmt.Sprintf("bench-%d-%d", w, i), sender,
				"Hello! Could you tell me when my order ships? It was placed on Monday."))
		}
	})
	r.Note = fmt.Sprintf("%d account(s), %d concurrent clients", len(conns), workers)
	if err != nil {
		return r, err
	}
	keys := make([]string, len(conns))
	for i, c := range conns {
		keys[i] = c.Key
	}
	// connection.active comes first.
	return r, checkStored(ctx, NewAPI(base, 1), keys, int64(len(conns)), r.Ops)
}

// TelnyxSendLatency measures, n times in sequence, the time from sending
// POST /v1/messages/{id}/reply (to an SMS that came in through the
// connection's webhook) to the fake Telnyx receiving its POST
// /v2/messages.
func TelnyxSendLatency(ctx context.Context, a *API, c TelnyxConnection, n int) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if err := postTelnyx(ctx, client, c, smsEvent(c, "bench-ping", "+15550104242", "ping")); err != nil {
		return Result{}, err
	}
	var evs []struct {
		Data struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		} `json:"data"`
	}
	if _, err := a.Do(ctx, "GET", "/v1/events?type=message.received", c.Key, nil, &evs); err != nil || len(evs) != 1 {
		return Result{}, fmt.Errorf("the ping did not arrive: %v", err)
	}
	msg := evs[0].Data.Message.ID
	var lat latencies
	start := time.Now()
	total := c.Account.SentTotal()
	for range n {
		t0 := time.Now()
		var out struct {
			ID string `json:"id"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/messages/"+msg+"/reply", c.Key, map[string]string{"text": "pong"}, &out); err != nil {
			return Result{}, err
		}
		total++
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Account.WaitSent(wctx, total)
		if err == nil {
			lat.add([]time.Duration{time.Since(t0)})
			// Untimed: the next reply in the conversation is due once this
			// one is recorded as sent (the outbox sends a conversation's
			// messages in order).
			err = waitStatus(wctx, a, c.Key, out.ID, "sent")
		}
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("POST /v2/messages %d: %w", total, err)
		}
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: n, Elapsed: time.Since(start), P50: p50, P99: p99, Note: "sequential, idle outbox; each waits until the previous is recorded sent (untimed)"}, nil
}

// waitStatus polls message id until its status is status.
func waitStatus(ctx context.Context, a *API, key, id, status string) error {
	for {
		var m struct {
			Status string `json:"status"`
		}
		if _, err := a.Do(ctx, "GET", "/v1/messages/"+id, key, nil, &m); err != nil {
			return err
		}
		if m.Status == status {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("message %s is %s, not %s: %w", id, m.Status, status, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

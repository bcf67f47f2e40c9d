package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels/twilio/twiliotest"
)

// TwilioConnection is a sandbox project with an SMS connection on an
// account and number of its own at the fake Twilio.
type TwilioConnection struct {
	Key, ConnectionID string
	Account           *twiliotest.Account
	Number            string
	// Hook is the connection's public webhook URL: what Twilio was given
	// and signs.
	Hook string
}

// NewTwilioConnections makes n sandbox projects, each connecting "sms"
// (provider twilio) with an account and number of its own on fake. The
// gateway's public base URL need not be reachable: the fake records the
// SmsUrl and does not call it.
func NewTwilioConnections(ctx context.Context, a *API, fake *twiliotest.Server, n int) ([]TwilioConnection, error) {
	out := make([]TwilioConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		acct := fake.NewAccount()
		num := fmt.Sprintf("+1555%07d", i)
		acct.AddNumber(num)
		var c struct {
			ID         string `json:"id"`
			WebhookURL string `json:"webhook_url"`
		}
		in := map[string]any{"channel": "sms", "provider": "twilio",
			"config": map[string]string{"account_sid": acct.SID, "auth_token": acct.AuthToken, "from": num}}
		if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, in, &c); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("connect twilio: %d %v", code, err)
		}
		out[i] = TwilioConnection{Key: sb.APIKey, ConnectionID: c.ID, Account: acct, Number: num, Hook: c.WebhookURL}
	}
	return out, nil
}

// twilioParams are the webhook parameters of an inbound SMS.
func twilioParams(c TwilioConnection, sid, from, body string) url.Values {
	return url.Values{"MessageSid": {sid}, "SmsMessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {c.Account.SID},
		"From": {from}, "To": {c.Number}, "Body": {body}, "NumMedia": {"0"}, "NumSegments": {"1"},
		"SmsStatus": {"received"}, "ApiVersion": {"2010-04-01"}, "FromCountry": {"US"}, "ToCountry": {"US"}}
}

// postTwilio POSTs a webhook to a connection's ingress on base, signed
// for its public URL (as Twilio signs the URL it was given, and a proxy
// forwards), and wants 200.
func postTwilio(ctx context.Context, client *http.Client, base string, c TwilioConnection, p url.Values) error {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/hooks/sms/"+c.ConnectionID, strings.NewReader(p.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", twiliotest.Sign(c.Account.AuthToken, c.Hook, p))
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

// TwilioIngress runs `workers` clients playing Twilio: each POSTs signed
// SMS webhooks (X-Twilio-Signature over the connection's public URL and
// the sorted parameters) to a connection's /hooks/sms/{id}, spread over
// conns, for d. The gateway answers 200 (empty TwiML) once
// message.received is committed. Senders rotate over 50 per worker, so
// conversations are both new and reused.
func TwilioIngress(ctx context.Context, base string, conns []TwilioConnection, workers int, d time.Duration) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		c := conns[w%len(conns)]
		i := int64(0)
		return func() error {
			i++
			sid := fmt.Sprintf("SM%016x%016x", w, i)
			from := fmt.Sprintf("+1444%03d%04d", w%1000, i%50)
			return postTwilio(ctx, client, base, c, twilioParams(c, sid, from,
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

// TwilioReplyLatency measures, n times in sequence, the time from sending
// POST /v1/messages/{id}/reply (to a message that came in through the
// connection's webhook) to the fake Twilio receiving its Messages.json.
func TwilioReplyLatency(ctx context.Context, a *API, base string, c TwilioConnection, n int) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if err := postTwilio(ctx, client, base, c, twilioParams(c, "SM"+strings.Repeat("0", 31)+"1", "+14440000000", "ping")); err != nil {
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
		if _, err := a.Do(ctx, "POST", "/v1/messages/"+msg+"/reply", c.Key, map[string]string{"text": "pong"}, nil); err != nil {
			return Result{}, err
		}
		total++
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Account.WaitSent(wctx, total)
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("twilio Messages.json %d did not come: %w", total, err)
		}
		lat.add([]time.Duration{time.Since(t0)})
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: n, Elapsed: time.Since(start), P50: p50, P99: p99, Note: "sequential, idle outbox"}, nil
}

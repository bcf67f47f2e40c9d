package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/comm-gateway/comm/channels/meta/metatest"
)

// MetaConnection is a sandbox project with a Facebook Page connected
// through the operator's Meta app at the fake Graph API.
type MetaConnection struct {
	Key, ConnectionID string
	Page              *metatest.Page
}

// NewMetaConnections makes n sandbox projects and connects a Page of its
// own to each through the gateway's login flow (the fake approves at
// once).
func NewMetaConnections(ctx context.Context, a *API, fake *metatest.Server, n int) ([]MetaConnection, error) {
	out := make([]MetaConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		var c struct {
			ID           string  `json:"id"`
			AuthorizeURL *string `json:"authorize_url"`
		}
		if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, map[string]string{"channel": "facebook"}, &c); err != nil || code != http.StatusCreated || c.AuthorizeURL == nil {
			return nil, fmt.Errorf("connect facebook: %d %v", code, err)
		}
		user := fake.NewUser(fmt.Sprintf("bench %d", i))
		page := user.NewPage(fmt.Sprintf("Bench Page %d", i))
		redirect, err := fake.Authorize(*c.AuthorizeURL, user)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(redirect)
		if err != nil {
			return nil, err
		}
		if code, err := a.Do(ctx, "GET", u.RequestURI(), "", nil, nil); err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("login callback: %d %v", code, err)
		}
		out[i] = MetaConnection{Key: sb.APIKey, ConnectionID: c.ID, Page: page}
	}
	return out, nil
}

// MetaIngress runs `workers` clients playing Meta: each POSTs signed
// webhook batches of perPost messages to /hooks/facebook, spread over the
// Pages of conns (one entry per Page, several messaging events per entry
// when there are fewer Pages), for d. The gateway answers 200 once every
// message of the batch and its message.received are committed. Ops are
// messages; p50 and p99 are per POST.
func MetaIngress(ctx context.Context, base, secret string, conns []MetaConnection, workers, perPost int, d time.Duration) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		hook := &metatest.Webhook{URL: base + "/hooks/facebook", Secret: secret, Client: client}
		i := 0
		return func() error {
			byPage := map[int][]metatest.Event{}
			var order []int
			for k := range perPost {
				i++
				p := (w + k) % len(conns)
				if _, ok := byPage[p]; !ok {
					order = append(order, p)
				}
				page := conns[p].Page
				byPage[p] = append(byPage[p], metatest.Message{Sender: fmt.Sprintf("7%05d%04d", w, i%50), Recipient: page.ID,
					MID: fmt.Sprintf("m_bench_%d_%d", w, i), Text: "Hello! Could you tell me when my order ships? It was placed on Monday."}.Event())
			}
			var entries []metatest.Entry
			for _, p := range order {
				entries = append(entries, metatest.Entry{ID: conns[p].Page.ID, Messaging: byPage[p]})
			}
			status, err := hook.PostOnce(ctx, metatest.Batch("page", entries...))
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("POST /hooks/facebook: %d", status)
			}
			return nil
		}
	})
	if err != nil {
		return r, err
	}
	r.Ops *= perPost
	r.Note = fmt.Sprintf("%d Page(s), %d messages per signed POST, %d concurrent clients; p50/p99 per POST", len(conns), perPost, workers)
	keys := make([]string, len(conns))
	for i, c := range conns {
		keys[i] = c.Key
	}
	// connection.authorized and connection.active come first.
	return r, checkStored(ctx, NewAPI(base, 1), keys, int64(2*len(conns)), r.Ops)
}

// MetaReplyLatency measures reply -> Send API call at the fake, n times
// one after the other, on a conversation a person started.
func MetaReplyLatency(ctx context.Context, a *API, base, secret string, c MetaConnection, fake *metatest.Server, n int) (Result, error) {
	hook := &metatest.Webhook{URL: base + "/hooks/facebook", Secret: secret}
	body := metatest.Batch("page", metatest.Entry{ID: c.Page.ID, Messaging: []metatest.Event{
		metatest.Message{Sender: "123456789", Recipient: c.Page.ID, MID: "m_ping", Text: "ping"}.Event()}})
	if _, _, err := hook.Post(ctx, body); err != nil {
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
	total := fake.SentTotal()
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
		err := fake.WaitSent(wctx, total)
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("the Send API call %d did not come: %w", total, err)
		}
		lat.add([]time.Duration{time.Since(t0)})
		// The outbox sends a conversation's replies in order: the next
		// one is queued once this one is recorded sent (not timed).
		for {
			var m struct {
				Status string `json:"status"`
			}
			if _, err := a.Do(ctx, "GET", "/v1/messages/"+out.ID, c.Key, nil, &m); err != nil {
				return Result{}, err
			}
			if m.Status == "sent" {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: n, Elapsed: time.Since(start), P50: p50, P99: p99, Note: "sequential, idle outbox; reply accepted -> the fake saw the Send API call"}, nil
}

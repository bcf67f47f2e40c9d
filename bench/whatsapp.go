package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/comm-gateway/comm/channels/wacloud/wacloudtest"
)

// WhatsAppHostedConnection is a project's hosted WhatsApp connection on one
// of the operator's shared numbers, and the people who joined it.
type WhatsAppHostedConnection struct {
	Key, ConnectionID, JoinCode string
	Number                      *wacloudtest.Number
	People                      []string
}

// NewWhatsAppHostedConnections connects a hosted WhatsApp connection with
// each of keys (signed-in keys: the channel is paid), on whichever of
// numbers the gateway gives it, and has people people join each
// ("join <code>" POSTed, signed, to /hooks/whatsapp).
func NewWhatsAppHostedConnections(ctx context.Context, a *API, secret string, keys []string, numbers []*wacloudtest.Number, people int) ([]WhatsAppHostedConnection, error) {
	byID := map[string]*wacloudtest.Number{}
	for _, n := range numbers {
		byID[n.PhoneNumberID] = n
	}
	hook := &wacloudtest.Webhook{URL: a.Base + "/hooks/whatsapp", Secret: secret, Client: a.Client}
	out := make([]WhatsAppHostedConnection, len(keys))
	for i, key := range keys {
		var c struct {
			ID       string  `json:"id"`
			Line     *string `json:"line"`
			JoinCode *string `json:"join_code"`
		}
		code, err := a.Do(ctx, "POST", "/v1/connections", key, map[string]string{"channel": "whatsapp", "provider": "hosted"}, &c)
		if err != nil || code != http.StatusCreated || c.Line == nil || c.JoinCode == nil || byID[*c.Line] == nil {
			return nil, fmt.Errorf("connect whatsapp (hosted): %d %v", code, err)
		}
		wc := WhatsAppHostedConnection{Key: key, ConnectionID: c.ID, JoinCode: *c.JoinCode, Number: byID[*c.Line]}
		var joins []wacloudtest.Message
		for p := range people {
			who := fmt.Sprintf("49151%04d%04d", i, p)
			wc.People = append(wc.People, who)
			joins = append(joins, wacloudtest.Message{From: who, Name: "Bench", ID: fmt.Sprintf("wamid.join_%d_%d", i, p), Text: "join " + wc.JoinCode})
		}
		for len(joins) > 0 {
			batch := joins[:min(len(joins), 50)]
			joins = joins[len(batch):]
			if _, _, err := hook.Post(ctx, wacloudtest.Payload(wacloudtest.Value{Number: wc.Number, Messages: batch})); err != nil {
				return nil, fmt.Errorf("join: %w", err)
			}
		}
		out[i] = wc
	}
	return out, nil
}

// lastSeqs is the sum of the projects' last seq.
func lastSeqs(ctx context.Context, a *API, keys []string) (int64, error) {
	var total int64
	for _, k := range keys {
		var p struct {
			LastSeq int64 `json:"last_seq"`
		}
		if _, err := a.Do(ctx, "GET", "/v1/project", k, nil, &p); err != nil {
			return 0, err
		}
		total += p.LastSeq
	}
	return total, nil
}

// WhatsAppHostedIngress runs `workers` clients playing Meta: each POSTs
// signed Cloud API webhooks of perPost messages from people who joined
// conns (one change per number, as Meta batches them) to /hooks/whatsapp,
// for d. The gateway answers 200 once every message is routed to its
// connection and stored with its message.received. Ops are messages; p50
// and p99 are per POST.
func WhatsAppHostedIngress(ctx context.Context, base, secret string, conns []WhatsAppHostedConnection, workers, perPost int, d time.Duration) (Result, error) {
	keys := make([]string, len(conns))
	for i, c := range conns {
		keys[i] = c.Key
	}
	heads, err := lastSeqs(ctx, NewAPI(base, 1), keys)
	if err != nil {
		return Result{}, err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		hook := &wacloudtest.Webhook{URL: base + "/hooks/whatsapp", Secret: secret, Client: client}
		i := 0
		return func() error {
			byNumber := map[*wacloudtest.Number]*wacloudtest.Value{}
			var order []*wacloudtest.Number
			for k := range perPost {
				i++
				c := conns[(w+k)%len(conns)]
				v, ok := byNumber[c.Number]
				if !ok {
					v = &wacloudtest.Value{Number: c.Number}
					byNumber[c.Number] = v
					order = append(order, c.Number)
				}
				v.Messages = append(v.Messages, wacloudtest.Message{From: c.People[i%len(c.People)], Name: "Bench",
					ID: fmt.Sprintf("wamid.bench_%d_%d", w, i), Text: "Hello! Could you tell me when my order ships? It was placed on Monday."})
			}
			values := make([]wacloudtest.Value, len(order))
			for j, n := range order {
				values[j] = *byNumber[n]
			}
			status, err := hook.PostOnce(ctx, wacloudtest.Payload(values...))
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("POST /hooks/whatsapp: %d", status)
			}
			return nil
		}
	})
	if err != nil {
		return r, err
	}
	r.Ops *= perPost
	r.Note = fmt.Sprintf("%d connection(s) on shared numbers, %d messages per signed POST, %d concurrent clients; p50/p99 per POST", len(conns), perPost, workers)
	return r, checkStored(ctx, NewAPI(base, 1), keys, heads, r.Ops)
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telegram/telegramtest"
)

// TelegramConnection is a sandbox project with a Telegram connection in
// webhook mode on a bot of the fake Bot API.
type TelegramConnection struct {
	Key, ConnectionID string
	Bot               *telegramtest.Bot
	// Secret is the secret_token the gateway gave setWebhook: Telegram
	// sends it back with every update.
	Secret string
}

// NewTelegramConnections makes n sandbox projects, each connected to a
// bot of its own on fake. The gateway must have a public https base URL
// (webhook mode); the fake records the webhook and does not call it.
func NewTelegramConnections(ctx context.Context, a *API, fake *telegramtest.Server, n int) ([]TelegramConnection, error) {
	out := make([]TelegramConnection, n)
	for i := range out {
		var sb struct {
			APIKey string `json:"api_key"`
		}
		if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": fmt.Sprint("bench ", i)}, &sb); err != nil {
			return nil, err
		}
		bot := fake.NewBot(fmt.Sprintf("bench%d_bot", i))
		var c struct {
			ID string `json:"id"`
		}
		in := map[string]any{"channel": "telegram", "config": map[string]string{"bot_token": bot.Token, "mode": telegram.ModeWebhook}}
		if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, in, &c); err != nil || code != http.StatusCreated {
			return nil, fmt.Errorf("connect telegram: %d %v", code, err)
		}
		out[i] = TelegramConnection{Key: sb.APIKey, ConnectionID: c.ID, Bot: bot, Secret: bot.Webhook().SecretToken}
	}
	return out, nil
}

// update is a Telegram Update carrying a private text message.
func update(id, chat, msg int64, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"update_id": id,
		"message": map[string]any{
			"message_id": msg, "date": time.Now().Unix(), "text": text,
			"from": map[string]any{"id": chat, "is_bot": false, "first_name": "Person"},
			"chat": map[string]any{"id": chat, "type": "private", "first_name": "Person"},
		},
	})
	return b
}

// postHook POSTs an update to a connection's ingress as Telegram does.
func postHook(ctx context.Context, client *http.Client, base string, c TelegramConnection, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/hooks/telegram/"+c.ConnectionID, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(telegram.SecretHeader, c.Secret)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /hooks/telegram: %s", resp.Status)
	}
	return nil
}

// TelegramIngress runs `workers` clients playing Telegram: each POSTs
// updates (one private text message each, the secret header set) to a
// connection's /hooks/telegram/{id}, spread over conns, for d. The gateway
// answers 200 once message.received is committed. Chats rotate over 50 per
// worker, so conversations are both new and reused.
func TelegramIngress(ctx context.Context, base string, conns []TelegramConnection, workers int, d time.Duration) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	r, err := load(workers, d, func(w int) func() error {
		c := conns[w%len(conns)]
		i := int64(0)
		return func() error {
			i++
			chat := int64(1000000 + w*100 + int(i%50))
			return postHook(ctx, client, base, c, update(int64(w)<<32|i, chat, int64(w)<<32|i,
				"Hello! Could you tell me when my order ships? It was placed on Monday."))
		}
	})
	r.Note = fmt.Sprintf("%d bot(s), %d concurrent clients", len(conns), workers)
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

// TelegramReplyLatency measures, n times in sequence, the time from
// sending POST /v1/messages/{id}/reply (to a message that came in through
// the connection's webhook) to the fake Bot API receiving its sendMessage.
func TelegramReplyLatency(ctx context.Context, a *API, base string, c TelegramConnection, n int) (Result, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if err := postHook(ctx, client, base, c, update(1, 4242, 1<<40, "ping")); err != nil {
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
	total := c.Bot.SentTotal()
	for range n {
		t0 := time.Now()
		if _, err := a.Do(ctx, "POST", "/v1/messages/"+msg+"/reply", c.Key, map[string]string{"text": "pong"}, nil); err != nil {
			return Result{}, err
		}
		total++
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Bot.WaitSent(wctx, total)
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("sendMessage %d did not come: %w", total, err)
		}
		lat.add([]time.Duration{time.Since(t0)})
	}
	p50, p99 := lat.percentiles()
	return Result{Ops: n, Elapsed: time.Since(start), P50: p50, P99: p99, Note: "sequential, idle outbox"}, nil
}

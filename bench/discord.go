package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/comm-gateway/comm/channels/discord/discordtest"
)

// DiscordDispatch measures the Discord gateway path: a project connects a
// bot of its own (the gateway session runs on the session worker), the
// fake gateway dispatches n MESSAGE_CREATE events (DMs from 50 people) as
// fast as it can, and the result is the rate at which they are stored as
// message.received, from the first dispatch to the last event committed.
func DiscordDispatch(ctx context.Context, a *API, fake *discordtest.Server, n int) (Result, error) {
	bot := fake.NewBot("bench_bot")
	key, _, err := NewDiscordConnection(ctx, a, bot)
	if err != nil {
		return Result{}, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !bot.Connected() {
		if time.Now().After(deadline) {
			return Result{}, fmt.Errorf("the gateway session did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	people := make([]string, 50)
	for i := range people {
		people[i] = fmt.Sprintf("30000000000000%04d", i)
	}
	start := time.Now()
	for i := range n {
		bot.Dispatch(bot.DM(people[i%len(people)], "Hello! Could you tell me when my order ships? It was placed on Monday."))
	}
	want := int64(n + 1) // connection.active first
	for {
		var p struct {
			LastSeq int64 `json:"last_seq"`
		}
		if _, err := a.Do(ctx, "GET", "/v1/project", key, nil, &p); err != nil {
			return Result{}, err
		}
		if p.LastSeq >= want {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return Result{}, fmt.Errorf("only %d of %d events stored after 5 minutes", p.LastSeq-1, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	el := time.Since(start)
	return Result{Ops: n, Elapsed: el, Note: fmt.Sprintf("%d MESSAGE_CREATE dispatches through one gateway session, first dispatch -> last message.received committed; %d identify, %d resume(s)",
		n, bot.Identifies(), bot.Resumes())}, nil
}

// NewDiscordConnection makes a sandbox project that connects bot as its
// own Discord bot; it returns the project's key and the connection id.
func NewDiscordConnection(ctx context.Context, a *API, bot *discordtest.Bot) (key, connID string, err error) {
	var sb struct {
		APIKey string `json:"api_key"`
	}
	if _, err := a.Do(ctx, "POST", "/v1/projects/sandbox", "", map[string]string{"name": "discord bench"}, &sb); err != nil {
		return "", "", err
	}
	var c struct {
		ID string `json:"id"`
	}
	in := map[string]any{"channel": "discord", "config": map[string]string{"bot_token": bot.Token}}
	if code, err := a.Do(ctx, "POST", "/v1/connections", sb.APIKey, in, &c); err != nil || code != http.StatusCreated {
		return "", "", fmt.Errorf("connect discord: %d %v", code, err)
	}
	return sb.APIKey, c.ID, nil
}

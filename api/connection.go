package api

import "time"

// Connection is a channel connection (an inbox, a bot, an app).
type Connection struct {
	ID         string  `json:"id"`
	Channel    string  `json:"channel"`
	Provider   *string `json:"provider"`
	Status     string  `json:"status"`
	CustomerID string  `json:"customer_id"`
	AgentID    string  `json:"agent_id"`
	Name       *string `json:"name"`
	// Address is the connection's own address on its channel: an inbox
	// address, a bot's @username.
	Address *string `json:"address"`
	// WebhookURL is where the provider sends this connection's events,
	// for the channels where it is given to the provider by hand.
	WebhookURL *string `json:"webhook_url"`
	// AuthorizeURL, while the connection is pending an install of the
	// operator's app (Slack, Discord), is where the person approves it.
	AuthorizeURL *string   `json:"authorize_url"`
	CreatedAt    time.Time `json:"created_at"`
}

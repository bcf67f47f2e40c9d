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
	// address, a bot's @username, the operator's number or relay address
	// a shared channel's connection is on.
	Address *string `json:"address"`
	// Line is the id of the operator's line the connection is on, on a
	// channel whose lines projects share (hosted WhatsApp, iMessage).
	Line *string `json:"line"`
	// JoinCode is what a person sends ("join <code>") to the line to
	// reach this connection; null on a dedicated line and on other
	// channels.
	JoinCode *string `json:"join_code"`
	// JoinLink opens the join message to the line
	// (https://wa.me/<number>?text=join%20<code>); null when the channel
	// has none.
	JoinLink *string `json:"join_link"`
	// WebhookURL is where the provider sends this connection's events,
	// for the channels where it is given to the provider by hand.
	WebhookURL *string `json:"webhook_url"`
	// AuthorizeURL, while the connection is pending an install of the
	// operator's app (Slack, Discord), is where the person approves it.
	AuthorizeURL *string   `json:"authorize_url"`
	CreatedAt    time.Time `json:"created_at"`
}

// Binding is a person bound to a connection on its shared line: they sent
// the connection's join code, their messages on the line come to it, and
// it may write to them.
type Binding struct {
	// ID is the binding's id: the cursor of the next page (after).
	ID string `json:"id"`
	// Person is the sender's id on the channel (a WhatsApp user id or
	// number, an iMessage handle).
	Person    string    `json:"person"`
	CreatedAt time.Time `json:"created_at"`
}

package channels

import (
	"context"
	"encoding/json"
	"net/http"
)

// Line is one of the operator's own addresses on a channel that many
// projects share: a hosted WhatsApp number, the address an iMessage relay
// sends from. People write to the line; the gateway finds the connection
// a message is for by who wrote it (a binding made when the person sent
// "join <code>"), or by the line alone when a connection has it to itself
// (dedicated).
type Line struct {
	// ID names the line in routing and in the connection's record: the
	// Cloud API phone_number_id, a relay's address.
	ID string
	// Address is what people write to: "+15550001111", "agent@icloud.com".
	Address string
	// JoinLink returns a link that opens a message "join <code>" to the
	// line (https://wa.me/<number>?text=join%20<code>); nil when the
	// channel has none.
	JoinLink func(code string) string
}

// SharedApp is the operator's side of a channel whose lines the operator
// owns and shares among projects (Descriptor.Shared). The gateway assigns
// each new connection a line (Connection.Line) and, unless the connection
// has the line to itself, a join code; it keeps the bindings of people to
// connections per line.
//
// Its requests come to the channel's app-level webhook (/hooks/<channel>):
// Descriptor.App verifies them and answers handshakes (its routing keys
// are not used), then Receive returns their messages by line. An
// AppSession of the channel (a relay's event stream followed when the
// relay cannot reach the gateway) emits with the line as the key. Either
// way the gateway routes each message by its line and its Sender (the
// person): to the line's dedicated connection, else to the connection the
// person is bound to, else "join <code>" binds the person, else the person
// gets one answer (Answer) saying how to join and nothing is stored.
// Receipt items are routed to the line's connection that sent the message.
type SharedApp interface {
	// Lines lists the operator's lines of the channel, in the operator's
	// order (shared connections are put on the first line no connection
	// has to itself).
	Lines() []Line
	// Receive returns the messages and receipts of a request
	// Descriptor.App verified, each with the line it came to. Inbound.Sender
	// is the person (a stable id: a WhatsApp business-scoped user id, else
	// the wa_id; an iMessage handle).
	Receive(r *http.Request, body []byte) ([]LineInbound, error)
	// Answer sends text from line to the person outside any connection:
	// how to join, a join's confirmation. It is not stored.
	Answer(ctx context.Context, line, to, text string) error
}

// LineInbound is an inbound message (or receipt) that came to a line.
type LineInbound struct {
	Line string
	Inbound
}

// Credentials keeps what an adapter rotates (OAuth access and refresh
// tokens) in its connection's stored configuration, sealed at rest like
// the rest of it and shared by every process and replica: the one that
// refreshed saves, the others load the new value when theirs stops
// working. The gateway hands one to every adapter (Connection.Credentials).
type Credentials interface {
	// Load returns the connection's stored configuration as it is now.
	Load(ctx context.Context) (json.RawMessage, error)
	// Save replaces the connection's stored configuration.
	Save(ctx context.Context, config json.RawMessage) error
}

// LineFields are the configuration keys the gateway itself reads on a
// channel of shared lines, to choose the connection's line: "dedicated"
// and "line" (lineExample is an address of a line, "+15550001111"). The
// channel's adapters accept and ignore them.
func LineFields(lineExample string) []Field {
	return []Field{
		{Name: "dedicated", Label: "Dedicated line", Kind: KindBool,
			Help:    "Take a line of the connection's own, where the operator has one to spare: everyone who writes to it reaches the connection, with no join code.",
			Example: "false"},
		{Name: "line", Label: "Line", Kind: KindString,
			Help:    "The operator's line to use, by its address or id; the first one free when empty.",
			Example: lineExample},
	}
}

package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Connection states.
const (
	StatusPending = "pending"
	StatusActive  = "active"
)

// Connection is a connection as the API shows it.
type Connection struct {
	ID         string    `json:"id"`
	Channel    string    `json:"channel"`
	Provider   *string   `json:"provider"`
	Status     string    `json:"status"`
	CustomerID string    `json:"customer_id"`
	AgentID    string    `json:"agent_id"`
	Name       *string   `json:"name"`
	Address    *string   `json:"address"`
	CreatedAt  time.Time `json:"created_at"`
}

func connectionOf(c *ent.Connection) *Connection {
	return &Connection{
		ID: c.ID, Channel: c.Channel, Provider: nonEmpty(c.Provider), Status: c.Status,
		CustomerID: c.CustomerID, AgentID: c.AgentID, Name: nonEmpty(c.Name), Address: nonEmpty(c.Address),
		CreatedAt: c.CreatedAt.UTC(),
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ConnectInput is the body of POST /v1/connections.
type ConnectInput struct {
	Channel    string          `json:"channel"`
	Provider   string          `json:"provider"`
	CustomerID string          `json:"customer_id"`
	AgentID    string          `json:"agent_id"`
	Name       string          `json:"name"`
	Config     json.RawMessage `json:"config"`
}

// Connect makes a connection on a channel. The tier is checked from the
// key's row before any provider is contacted: a paid channel with an
// anonymous key is ErrPaymentRequired.
func (s *Service) Connect(ctx context.Context, p *Principal, in ConnectInput) (*Connection, error) {
	if in.Channel == "" {
		return nil, Invalid("channel", "required; known channels: %s", strings.Join(s.channels.Channels(), ", "))
	}
	d, err := s.channels.Lookup(in.Channel, in.Provider)
	if err != nil {
		var ue *channels.UnknownError
		if errors.As(err, &ue) {
			return nil, fault.Invalid(ue.Param, "%s", ue.Msg)
		}
		return nil, err
	}
	if d.Tier == channels.Paid && !p.SignedIn() {
		return nil, fault.PaymentRequired(
			"channel %s is a paid channel and needs a signed-in key: run `comm login` (or POST /v1/auth/device/start with this key), then repeat this request with the signed-in key", label(d))
	}
	if d.New == nil {
		return nil, fault.NotImplemented("channel %s is not available in this gateway yet", label(d))
	}
	if in.CustomerID != "" {
		if err := ident.Check(in.CustomerID, ident.Customer); err != nil {
			return nil, Invalid("customer_id", "%v", err)
		}
	}
	if in.AgentID != "" {
		if err := ident.Check(in.AgentID, ident.Agent); err != nil {
			return nil, Invalid("agent_id", "%v", err)
		}
	}
	if utf8.RuneCountInString(in.Name) > MaxNameLen || strings.ContainsFunc(in.Name, isControl) {
		return nil, Invalid("name", "at most %d characters, no control characters", MaxNameLen)
	}
	pr, err := s.read.Project.Get(ctx, p.ProjectID)
	if err != nil {
		return nil, err
	}
	if in.CustomerID == "" {
		in.CustomerID = pr.CustomerID
	}
	if in.AgentID == "" {
		in.AgentID = pr.AgentID
	}
	if pr.AccountID == nil && s.sandboxConnections > 0 {
		n, err := s.read.Connection.Query().Where(entconn.DeletedAtIsNil()).Count(ctx)
		if err != nil {
			return nil, err
		}
		if n >= s.sandboxConnections {
			return nil, fault.Conflict(
				"a sandbox project holds at most %d connections: delete one, or sign in (`comm login`) to move this project into an account", s.sandboxConnections)
		}
	}
	id := ident.New(ident.Connection)
	adapter, err := d.New(ctx, channels.Connection{ID: id, ProjectID: p.ProjectID, Config: in.Config})
	if err != nil {
		return nil, Invalid("config", "%v", err)
	}
	var created *ent.Connection
	var address string
	if ib, ok := adapter.(channels.Inbox); ok {
		address = ib.InboxAddress()
	}
	now := s.now()
	if address != "" {
		if err := s.claimable(ctx, p, d.Channel, address, now); err != nil {
			if c, ok := adapter.(channels.Closer); ok {
				c.Close()
			}
			return nil, err
		}
	}
	_, err = s.write(ctx, p, func(tx *stream.Tx) error {
		create := tx.Client().Connection.Create().SetID(id).SetChannel(d.Channel).SetProvider(d.Provider).
			SetStatus(StatusActive).SetCustomerID(in.CustomerID).SetAgentID(in.AgentID).
			SetName(in.Name).SetConfig(in.Config).SetCreatedAt(now)
		if address != "" {
			create.SetAddress(address).SetInboxKey(inboxKey(d.Channel, address))
		}
		created, err = create.Save(tx.Context())
		if err != nil {
			return err
		}
		return tx.Append(stream.ConnectionActive, connectionEvent{
			CustomerID: in.CustomerID, AgentID: in.AgentID, Connection: connectionOf(created),
		})
	})
	if err != nil {
		if c, ok := adapter.(channels.Closer); ok {
			c.Close()
		}
		if address != "" && ent.IsConstraintError(err) {
			return nil, fault.Conflict("the address %s is taken; choose another", address).WithParam("config.address")
		}
		return nil, err
	}
	s.adapters.put(id, adapter)
	return connectionOf(created), nil
}

// DefaultAddressQuarantine is how long a deleted inbox's address on the
// gateway's mail domain stays out of reach of other projects.
const DefaultAddressQuarantine = 30 * 24 * time.Hour

// claimable refuses an inbox address on the gateway's shared mail domain
// that is a reserved role name, or that another project's inbox released
// within the quarantine period. The project that released an address may
// take it back at once. Custom domains are their owners' to arrange.
func (s *Service) claimable(ctx context.Context, p *Principal, channel, address string, now time.Time) error {
	local, dom, _ := strings.Cut(address, "@")
	if channel != "email" || dom != s.mail.Domain {
		return nil
	}
	if email.ReservedLocal(local) {
		return fault.Conflict(
			"%s is a role address reserved for the operator of this gateway (RFC 2142, CA/Browser Forum domain validation); choose another local part", address).WithParam("config.address")
	}
	q := s.mail.AddressQuarantine
	if q <= 0 {
		return nil
	}
	last, err := s.read.Connection.Query().
		Where(entconn.Channel(channel), entconn.Address(address), entconn.DeletedAtGT(now.Add(-q)),
			entconn.ProjectIDNEQ(p.ProjectID)).
		Order(ent.Desc(entconn.FieldDeletedAt)).First(tenant.System(ctx))
	if ent.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fault.Conflict(
		"the address %s was released recently and is held back until %s; choose another",
		address, last.DeletedAt.Add(q).UTC().Format(time.RFC3339)).WithParam("config.address")
}

// connectionEvent is the data of connection.active: the scope, like
// message.received, and the connection as GET /v1/connections/{id} shows it.
type connectionEvent struct {
	CustomerID string      `json:"customer_id"`
	AgentID    string      `json:"agent_id"`
	Connection *Connection `json:"connection"`
}

func label(d channels.Descriptor) string {
	if d.Provider != "" {
		return d.Channel + " (" + d.Provider + ")"
	}
	return d.Channel
}

// Connections lists the caller's live connections, oldest first, after
// the given id.
func (s *Service) Connections(ctx context.Context, p *Principal, pg Page) ([]*Connection, error) {
	if err := pg.validate(ident.Connection); err != nil {
		return nil, err
	}
	q := s.read.Connection.Query().Where(entconn.DeletedAtIsNil()).Order(ent.Asc(entconn.FieldID)).Limit(pg.Limit)
	if pg.After != "" {
		q = q.Where(entconn.IDGT(pg.After))
	}
	cs, err := q.Select(ListedConnectionColumns...).All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Connection, len(cs))
	for i, c := range cs {
		out[i] = connectionOf(c)
	}
	return out, nil
}

// ListedConnectionColumns are the columns a list of connections reads:
// all but the provider configuration, which a list does not show and
// whose size the caller sets (within the request body limit).
var ListedConnectionColumns = func() []string {
	var cols []string
	for _, c := range entconn.Columns {
		if c != entconn.FieldConfig {
			cols = append(cols, c)
		}
	}
	return cols
}()

// Connection returns one live connection of the caller.
func (s *Service) Connection(ctx context.Context, p *Principal, id string) (*Connection, error) {
	c, err := s.connection(ctx, id)
	if err != nil {
		return nil, err
	}
	return connectionOf(c), nil
}

func (s *Service) connection(ctx context.Context, id string) (*ent.Connection, error) {
	if ident.Check(id, ident.Connection) != nil {
		return nil, NotFound("connection", id)
	}
	c, err := s.read.Connection.Query().Where(entconn.ID(id), entconn.DeletedAtIsNil()).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, NotFound("connection", id)
	}
	return c, err
}

// DeleteConnection removes a connection: it stops receiving and sending;
// its conversations and messages stay readable.
func (s *Service) DeleteConnection(ctx context.Context, p *Principal, id string) error {
	if _, err := s.connection(ctx, id); err != nil {
		return err
	}
	now := s.now()
	_, err := s.write(ctx, p, func(tx *stream.Tx) error {
		n, err := tx.Client().Connection.Update().Where(entconn.ID(id), entconn.DeletedAtIsNil()).
			SetDeletedAt(now).SetStatus("deleted").ClearInboxKey().Save(tx.Context())
		if err == nil && n == 0 {
			return NotFound("connection", id)
		}
		return err
	})
	if err != nil {
		return err
	}
	if a, ok := s.adapters.take(id); ok {
		if c, ok := a.(channels.Closer); ok {
			c.Close()
		}
	}
	return nil
}

// adapter returns the provisioned adapter of a connection, provisioning it
// from the stored configuration when this process has none yet (after a
// restart, or on another replica).
func (s *Service) adapter(ctx context.Context, c *ent.Connection) (channels.Adapter, error) {
	if a, ok := s.adapters.get(c.ID); ok {
		return a, nil
	}
	d, err := s.channels.Lookup(c.Channel, c.Provider)
	if err != nil || d.New == nil {
		return nil, fmt.Errorf("connection %s: channel %s is not available", c.ID, c.Channel)
	}
	a, err := d.New(ctx, channels.Connection{ID: c.ID, ProjectID: c.ProjectID, Config: c.Config})
	if err != nil {
		return nil, fmt.Errorf("connection %s: provision: %w", c.ID, err)
	}
	return s.adapters.putIfAbsent(c.ID, a), nil
}

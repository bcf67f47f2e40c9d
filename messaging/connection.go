package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/comm-gateway/comm/api"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entbinding "github.com/comm-gateway/comm/ent/binding"
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
type Connection = api.Connection

func connectionOf(c *ent.Connection) *Connection {
	return &Connection{
		ID: c.ID, Channel: c.Channel, Provider: nonEmpty(c.Provider), Status: c.Status,
		CustomerID: c.CustomerID, AgentID: c.AgentID, Name: nonEmpty(c.Name), Address: nonEmpty(c.Address),
		WebhookURL: nonEmpty(c.WebhookURL), AuthorizeURL: nonEmpty(c.AuthorizeURL), CreatedAt: c.CreatedAt.UTC(),
		Line: c.Line, JoinCode: c.JoinCode, JoinLink: c.JoinLink,
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
// anonymous key is ErrPaymentRequired (connectable).
func (s *Service) Connect(ctx context.Context, in ConnectInput) (*Connection, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
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
	if err := s.connectable(d, p); err != nil {
		return nil, err
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
		n, err := s.read.Connection.Query().Count(ctx)
		if err != nil {
			return nil, err
		}
		if n >= s.sandboxConnections {
			return nil, fault.Conflict(
				"a sandbox project holds at most %d connections: delete one, or sign in (`comm login`) to move this project into an account", s.sandboxConnections)
		}
	}
	var place *linePlace
	if d.Shared != nil {
		if place, err = s.placeOnLine(ctx, d, in.Config); err != nil {
			return nil, err
		}
	}
	id := ident.New(ident.Connection)
	conn := channels.Connection{ID: id, ProjectID: p.ProjectID, Config: in.Config, WebhookURL: s.webhookURL(d.Channel, id)}
	if place != nil {
		conn.Line = place.line.ID
	}
	adapter, err := d.New(ctx, conn)
	if err != nil {
		return nil, configError(err)
	}
	if inst, ok := adapter.(channels.Installer); ok && inst.NeedsInstall() {
		return s.pendingInstall(ctx, d, conn, in, inst, adapter)
	}
	config, address, route := in.Config, "", ""
	if pv, ok := adapter.(channels.Provisioner); ok {
		got, err := pv.Provision(ctx)
		if err != nil {
			closeAdapter(adapter)
			return nil, provisionError(d, err)
		}
		if got.Config != nil {
			// The adapter this process keeps is built from what is stored,
			// as every other process builds it.
			config = got.Config
			conn.Config = config
			fresh, err := d.New(ctx, conn)
			if err != nil {
				closeAdapter(adapter)
				return nil, configError(err)
			}
			closeAdapter(adapter)
			adapter = fresh
		}
		address, route = got.Address, got.RouteKey
	}
	inbox := ""
	if ib, ok := adapter.(channels.Inbox); ok {
		address = ib.InboxAddress()
		inbox = InboxKey(d.Channel, address)
	}
	if place != nil {
		// The line decides the address and the routing; what the
		// adapter's Provision named is not used for either.
		address, route = place.line.Address, ""
		if place.dedicated {
			route = place.line.ID
		}
	}
	now := s.now()
	var created *ent.Connection
	for attempt := 0; ; attempt++ {
		var code string
		if place != nil && !place.dedicated {
			code = newJoinCode()
		}
		_, err = s.write(ctx, func(tx *stream.Tx) error {
			create := tx.Client().Connection.Create().SetID(id).SetChannel(d.Channel).SetProvider(d.Provider).
				SetStatus(StatusActive).SetCustomerID(in.CustomerID).SetAgentID(in.AgentID).
				SetName(in.Name).SetConfig(s.sealConfig(config)).SetCreatedAt(now)
			if place != nil {
				if err := s.checkLineFree(tx, d, place, id); err != nil {
					return err
				}
				create.SetLine(place.line.ID)
				if code != "" {
					create.SetJoinCode(code).SetJoinKey(joinKey(d, place.line.ID, code))
					if place.line.JoinLink != nil {
						create.SetJoinLink(place.line.JoinLink(code))
					}
				}
			}
			var err error
			created, err = s.createConnection(tx, create, d, adapter, in, newConnection{conn: conn, address: address,
				inbox: inbox, route: route, onLine: place != nil})
			return err
		})
		if err != nil && code != "" && ent.IsConstraintError(err) && attempt < 5 {
			continue // the join code is taken on this line: draw another
		}
		break
	}
	if err != nil {
		if dp, ok := adapter.(channels.Deprovisioner); ok {
			if derr := dp.Deprovision(context.WithoutCancel(ctx)); derr != nil {
				s.logger.Warn("connect: undo provider setup", "connection", id, "err", derr)
			}
		}
		closeAdapter(adapter)
		if route != "" && ent.IsConstraintError(err) {
			if place != nil {
				return nil, lineTaken(d, place)
			}
			return nil, fault.Conflict("%s is connected already (%s); delete that connection first", label(d), route).WithParam("config")
		}
		if inbox != "" && ent.IsConstraintError(err) {
			return nil, fault.Conflict("the address %s is taken; choose another", address).WithParam("config.address")
		}
		return nil, err
	}
	s.adapters.put(id, adapter)
	return connectionOf(created), nil
}

// newConnection is what Connect stores beside the caller's input.
type newConnection struct {
	conn                  channels.Connection
	address, inbox, route string
	// onLine: the connection is on one of the operator's shared lines,
	// whose events come to the channel's app-level webhook.
	onLine bool
}

// createConnection stores a new connection (create, with the line set
// already) and appends connection.active.
func (s *Service) createConnection(tx *stream.Tx, create *ent.ConnectionCreate, d channels.Descriptor, adapter channels.Adapter,
	in ConnectInput, nc newConnection) (*ent.Connection, error) {
	if nc.address != "" {
		create.SetAddress(nc.address)
	}
	if nc.inbox != "" {
		create.SetInboxKey(nc.inbox)
	}
	if nc.route != "" {
		create.SetRouteKey(RouteKey(d.Channel, nc.route))
	}
	if receivesHooks(adapter) && !nc.onLine {
		create.SetWebhookURL(nc.conn.WebhookURL)
	}
	if _, ok := adapter.(channels.Poller); ok && !(d.Session != nil && (nc.route != "" || nc.onLine)) {
		// Due at once: a replica's session worker takes it. (One of
		// the operator's app is served by the app's session.)
		create.SetSessionUntil(time.Unix(0, 0).UTC())
	}
	c, err := create.Save(tx.Context())
	if err != nil {
		return nil, err
	}
	return c, tx.Append(stream.ConnectionActive, api.ConnectionEvent{
		CustomerID: in.CustomerID, AgentID: in.AgentID, Connection: connectionOf(c),
	})
}

// RouteKey is the gateway-wide key of a connection's app-level routing key
// (channels.Provisioned.RouteKey): unique among live connections.
func RouteKey(channel, key string) string { return channel + ":" + key }

// InboxKey is the gateway-wide key of an address a connection receives at
// on this gateway (channels.Inbox): unique among live connections.
func InboxKey(channel, address string) string {
	return channel + ":" + strings.ToLower(address)
}

// configError turns an adapter's refusal of a configuration into the
// caller's error, naming the field when the adapter did.
func configError(err error) error {
	var ce *channels.ConfigError
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &ce) && (ce.Field == "" || ce.Field == "config"):
		return Invalid("config", "%s", ce.Msg)
	case errors.As(err, &ce):
		return Invalid("config."+ce.Field, "%s", ce.Msg)
	}
	return Invalid("config", "%v", err)
}

// provisionError is configError for Provision, which also talks to the
// provider: a provider that cannot be reached is not the caller's fault.
func provisionError(d channels.Descriptor, err error) error {
	var ce *channels.ConfigError
	var e *Error
	if !errors.As(err, &ce) && !errors.As(err, &e) && errors.Is(err, channels.ErrTransient) {
		return fault.ProviderUnavailable("%s did not answer the connection set-up; try again: %v", label(d), err)
	}
	return configError(err)
}

// receivesHooks reports whether the provider calls the connection's
// ingress (the test channel's inbound comes through the API instead).
func receivesHooks(a channels.Adapter) bool {
	if _, ok := a.(channels.Injector); ok {
		return false
	}
	_, wr := a.(channels.WebhookReceiver)
	_, rs := a.(channels.Responder)
	return wr || rs
}

func closeAdapter(a channels.Adapter) {
	if c, ok := a.(channels.Closer); ok {
		c.Close()
	}
}

// sealConfig seals a connection's configuration (it holds credentials)
// for storage.
func (s *Service) sealConfig(config []byte) []byte {
	if len(config) == 0 {
		return nil
	}
	return s.box.Seal(config)
}

// openConfig opens a stored configuration. Connections made before
// configurations were sealed hold plain JSON, which reads as it is.
func (s *Service) openConfig(c *ent.Connection) ([]byte, error) {
	if len(c.Config) == 0 || c.Config[0] == '{' || c.Config[0] == 'n' {
		return c.Config, nil
	}
	b, err := s.box.Open(c.Config)
	if err != nil {
		return nil, fmt.Errorf("connection %s: open config: %w", c.ID, err)
	}
	return b, nil
}

// webhookURL is the public URL of a connection's provider ingress, from the
// operator's base URL; empty without one.
func (s *Service) webhookURL(channel, id string) string {
	if s.baseURL == "" {
		return ""
	}
	return s.baseURL + "/hooks/" + channel + "/" + id
}

func label(d channels.Descriptor) string {
	if d.Provider != "" {
		return d.Channel + " (" + d.Provider + ")"
	}
	return d.Channel
}

// Connections lists the caller's live connections, oldest first, after
// the given id.
func (s *Service) Connections(ctx context.Context, pg Page) ([]*Connection, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
	if err := pg.validate(ident.Connection); err != nil {
		return nil, err
	}
	q := s.read.Connection.Query().Order(ent.Asc(entconn.FieldID)).Limit(pg.Limit)
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
func (s *Service) Connection(ctx context.Context, id string) (*Connection, error) {
	if _, err := principal(ctx); err != nil {
		return nil, err
	}
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
	c, err := s.read.Connection.Query().Where(entconn.ID(id)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, NotFound("connection", id)
	}
	return c, err
}

// receiving returns the connection of the caller's project that a message
// is received on: from memory when it was read in the last
// connectionTTL, as this is read on every inbound request, and the
// rows a message needs (its project, channel, address, scope) do not
// change; deleting the connection removes it from every replica's memory
// (ConnectionDeletedSignal).
func (s *Service) receiving(ctx context.Context, id string) (*ent.Connection, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := s.conns.get(id); ok && c.ProjectID == p.ProjectID {
		return c, nil
	}
	gen := s.conns.generation()
	c, err := s.connection(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(c.Config) <= maxCachedConfig {
		s.conns.putAt(id, c, gen)
	}
	return c, nil
}

// maxCachedConfig bounds the (sealed) configuration of a connection kept
// in memory, so the cache's bytes are bounded as well as its entries: a
// test connection's is empty, a provider's a few hundred bytes.
const maxCachedConfig = 4 << 10

// ConnectionDeletedSignal is the stream signal announcing that the
// connection whose id is its value was deleted.
const ConnectionDeletedSignal = "connection.deleted"

// DeleteConnection removes a connection: it stops receiving and sending;
// its conversations and messages stay readable.
func (s *Service) DeleteConnection(ctx context.Context, id string) error {
	if _, err := principal(ctx); err != nil {
		return err
	}
	if _, err := s.connection(ctx, id); err != nil {
		return err
	}
	now := s.now()
	_, err := s.write(ctx, func(tx *stream.Tx) error {
		n, err := tx.Client().Connection.Update().Where(entconn.ID(id), entconn.DeletedAtIsNil()).
			SetDeletedAt(now).SetStatus("deleted").ClearInboxKey().ClearRouteKey().ClearJoinKey().Save(tx.Context())
		if err == nil && n == 0 {
			return NotFound("connection", id)
		}
		if err != nil {
			return err
		}
		_, err = tx.Client().Binding.Delete().Where(entbinding.ConnectionID(id)).Exec(tx.Context())
		return err
	})
	if err != nil {
		return err
	}
	s.release(ctx, id)
	return nil
}

// Release lets go of the adapters of deleted connections: what each set
// up at its provider is undone (Deprovision), then it is closed. Features
// that delete connections (a custom domain's inboxes) call it after
// their transaction.
func (s *Service) Release(ctx context.Context, ids ...string) {
	for _, id := range ids {
		s.release(ctx, id)
	}
}

func (s *Service) release(ctx context.Context, id string) {
	// Receiving stops here at once, and on other replicas when they hear
	// the signal.
	s.log.Signal(ConnectionDeletedSignal, id)
	a, ok := s.adapters.take(id)
	if !ok {
		c, err := s.read.Connection.Query().Where(entconn.ID(id)).Only(IncludeDeleted(tenant.System(ctx)))
		if err != nil {
			return
		}
		if a, err = s.provision(ctx, c); err != nil {
			s.logger.Warn("deleted connection: cannot undo its provider setup", "connection", id, "err", err)
			return
		}
	}
	if dp, ok := a.(channels.Deprovisioner); ok {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err := dp.Deprovision(dctx); err != nil {
			s.logger.Warn("deleted connection: undo its provider setup", "connection", id, "err", err)
		}
		cancel()
	}
	closeAdapter(a)
}

// adapter returns the provisioned adapter of a connection, provisioning it
// from the stored configuration when this process has none yet (after a
// restart, or on another replica).
func (s *Service) adapter(ctx context.Context, c *ent.Connection) (channels.Adapter, error) {
	if a, ok := s.adapters.get(c.ID); ok {
		return a, nil
	}
	a, err := s.provision(ctx, c)
	if err != nil {
		return nil, err
	}
	return s.adapters.putIfAbsent(c.ID, a), nil
}

// provision builds an adapter of a stored connection.
func (s *Service) provision(ctx context.Context, c *ent.Connection) (channels.Adapter, error) {
	d, err := s.channels.Lookup(c.Channel, c.Provider)
	if err != nil || d.New == nil {
		return nil, fmt.Errorf("connection %s: channel %s is not available", c.ID, c.Channel)
	}
	config, err := s.openConfig(c)
	if err != nil {
		return nil, err
	}
	a, err := d.New(ctx, channels.Connection{ID: c.ID, ProjectID: c.ProjectID, Config: config, WebhookURL: s.webhookURL(c.Channel, c.ID),
		Line: deref(c.Line), Credentials: s.credentials(c.ProjectID, c.ID)})
	if err != nil {
		return nil, fmt.Errorf("connection %s: provision: %w", c.ID, err)
	}
	return a, nil
}

package messaging

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// An install of the operator's app (channels.Installer) goes: Connect
// answers the connection as pending with its authorize_url, whose OAuth
// state is bound to the connection; the person approves at the provider,
// which redirects to <base>/oauth/<channel>/callback; Callback exchanges
// the code (Installer.Install), stores the credentials sealed, appends
// connection.authorized, provisions the adapter built from them, and
// appends connection.active.

// redirectURL is where a provider sends the person back after an install.
func (s *Service) redirectURL(channel string) string {
	return s.baseURL + "/oauth/" + channel + "/callback"
}

// pendingInstall stores a connection waiting for an install of the
// operator's app, with the URL the person approves it at.
func (s *Service) pendingInstall(ctx context.Context, d channels.Descriptor, conn channels.Connection, in ConnectInput,
	inst channels.Installer, adapter channels.Adapter) (*Connection, error) {
	defer closeAdapter(adapter)
	if err := s.installable(d); err != nil {
		return nil, err
	}
	b := make([]byte, 24)
	rand.Read(b)
	state := base64.RawURLEncoding.EncodeToString(b)
	authorize := inst.AuthorizeURL(state, s.redirectURL(d.Channel))
	var created *ent.Connection
	_, err := s.write(ctx, func(tx *stream.Tx) error {
		var err error
		created, err = tx.Client().Connection.Create().SetID(conn.ID).SetChannel(d.Channel).SetProvider(d.Provider).
			SetStatus(StatusPending).SetCustomerID(in.CustomerID).SetAgentID(in.AgentID).SetName(in.Name).
			SetConfig(s.sealConfig(in.Config)).SetAuthorizeURL(authorize).SetOauthState(state).
			SetCreatedAt(s.now()).Save(tx.Context())
		return err
	})
	if err != nil {
		return nil, err
	}
	return connectionOf(created), nil
}

// ErrInstallDenied is the error of a callback for an install the person
// refused at the provider; the connection stays pending.
var ErrInstallDenied = errors.New("the install was not approved")

// Callback completes an install of the operator's app: the provider sent
// the person back with the state bound to a pending connection and a code
// (or an error, when they refused). There is no API key: the state
// chooses the connection, and is good once. It returns the connection,
// active.
func (s *Service) Callback(ctx context.Context, channel, state, code, denied string) (*Connection, error) {
	sys := tenant.System(ctx)
	if state == "" {
		return nil, fault.Invalid("state", "missing: open the authorize_url of a pending connection again")
	}
	c, err := s.read.Connection.Query().Where(entconn.OauthState(state), entconn.Channel(channel),
		entconn.StatusEQ(StatusPending)).Only(sys)
	if ent.IsNotFound(err) {
		return nil, fault.Invalid("state", "no pending %s install has this state (it was used already, or the connection was deleted): start again with POST /v1/connections", channel)
	}
	if err != nil {
		return nil, err
	}
	if denied != "" {
		return nil, fmt.Errorf("%w in %s (%s): connection %s stays pending; open its authorize_url again to retry",
			ErrInstallDenied, channel, denied, c.ID)
	}
	if code == "" {
		return nil, fault.Invalid("code", "missing")
	}
	d, err := s.channels.Lookup(c.Channel, c.Provider)
	if err != nil || d.New == nil {
		return nil, fmt.Errorf("connection %s: channel %s is not available", c.ID, c.Channel)
	}
	a, err := s.provision(ctx, c)
	if err != nil {
		return nil, err
	}
	defer closeAdapter(a)
	inst, ok := a.(channels.Installer)
	if !ok {
		return nil, fmt.Errorf("connection %s: channel %s takes no install", c.ID, c.Channel)
	}
	got, err := inst.Install(ctx, code, s.redirectURL(channel))
	if err != nil {
		return nil, provisionError(d, err)
	}
	pctx := tenant.WithProject(ctx, c.ProjectID)
	_, err = s.log.Write(pctx, c.ProjectID, func(tx *stream.Tx) error {
		upd := tx.Client().Connection.UpdateOneID(c.ID).Where(entconn.OauthState(state), entconn.StatusEQ(StatusPending)).
			SetStatus(StatusAuthorized).ClearOauthState().ClearAuthorizeURL().SetConfig(s.sealConfig(got.Config))
		if got.Address != "" {
			upd.SetAddress(got.Address)
		}
		if got.RouteKey != "" {
			upd.SetRouteKey(RouteKey(c.Channel, got.RouteKey))
		}
		done, err := upd.Save(tx.Context())
		if err != nil {
			return err
		}
		return tx.Append(stream.ConnectionAuthorized, api.ConnectionEvent{CustomerID: done.CustomerID, AgentID: done.AgentID, Connection: connectionOf(done)})
	})
	if ent.IsNotFound(err) {
		return nil, fault.Invalid("state", "the install was completed already")
	}
	if got.RouteKey != "" && ent.IsConstraintError(err) {
		return nil, fault.Conflict("%s %s is connected already; delete that connection first", label(d), got.RouteKey)
	}
	if err != nil {
		return nil, err
	}
	return s.activate(ctx, d, c.ID)
}

// activate provisions an authorized connection with the adapter built from
// its stored credentials and makes it active (connection.active).
func (s *Service) activate(ctx context.Context, d channels.Descriptor, id string) (*Connection, error) {
	sys := tenant.System(ctx)
	c, err := s.read.Connection.Get(sys, id)
	if err != nil {
		return nil, err
	}
	a, err := s.provision(ctx, c)
	if err != nil {
		return nil, err
	}
	if pv, ok := a.(channels.Provisioner); ok {
		got, err := pv.Provision(ctx)
		if err != nil {
			closeAdapter(a)
			if serr := s.SetConnectionStatus(ctx, c, StatusDegraded, err.Error()); serr != nil {
				s.logger.Warn("connection status", "connection", id, "err", serr)
			}
			return nil, provisionError(d, err)
		}
		if got.Config != nil {
			closeAdapter(a)
			_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
				return tx.Client().Connection.UpdateOneID(id).SetConfig(s.sealConfig(got.Config)).Exec(tx.Context())
			})
			if err != nil {
				return nil, err
			}
			if c, err = s.read.Connection.Get(sys, id); err != nil {
				return nil, err
			}
			if a, err = s.provision(ctx, c); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := a.(channels.Poller); ok && !(d.Session != nil && c.RouteKey != nil) {
		// (A connection of the operator's app is served by the app's
		// session, routed by its key: no session of its own.)
		_, err := s.log.Write(tenant.WithProject(ctx, c.ProjectID), c.ProjectID, func(tx *stream.Tx) error {
			return tx.Client().Connection.UpdateOneID(id).SetSessionUntil(time.Unix(0, 0).UTC()).Exec(tx.Context())
		})
		if err != nil {
			closeAdapter(a)
			return nil, err
		}
	}
	s.adapters.put(id, a)
	if err := s.SetConnectionStatus(ctx, c, StatusActive, ""); err != nil {
		return nil, err
	}
	c, err = s.read.Connection.Get(sys, id)
	if err != nil {
		return nil, err
	}
	return connectionOf(c), nil
}

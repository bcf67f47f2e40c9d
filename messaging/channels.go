package messaging

import (
	"context"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/fault"
)

// ChannelInfo is a channel of the gateway as the caller may connect it.
type ChannelInfo = api.ChannelInfo

// Channels lists the gateway's channels in the registry's order, each with
// its connect form and whether the caller can connect it now: the checks
// Connect makes before it contacts any provider (connectable), and, for a
// channel connected only by an install, that installs can come back.
func (s *Service) Channels(ctx context.Context) ([]*ChannelInfo, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ds := s.channels.Descriptors()
	out := make([]*ChannelInfo, len(ds))
	for i, d := range ds {
		c := &ChannelInfo{Channel: d.Channel, Provider: nonEmpty(d.Provider), Tier: string(d.Tier),
			OAuth: d.OAuth && s.baseURL != "", Summary: d.Summary, Fields: make([]api.ChannelField, len(d.Fields))}
		for j, f := range d.Fields {
			c.Fields[j] = api.ChannelField{Name: f.Name, Label: f.Label, Help: f.Help, Secret: f.Secret,
				Required: f.Required, Kind: f.Kind, Example: f.Example}
		}
		refused := s.connectable(d, p)
		if refused == nil && d.OAuth && len(d.Fields) == 0 {
			refused = s.installable(d)
		}
		if refused != nil {
			c.Reason = nonEmpty(refused.Message)
		}
		c.Available = refused == nil
		out[i] = c
	}
	return out, nil
}

// connectable refuses a channel the caller may not connect, before any
// provider is contacted: a paid channel with a sandbox key
// (ErrPaymentRequired), a channel this gateway has no adapter for, or
// whose operator settings are missing (ErrNotImplemented).
func (s *Service) connectable(d channels.Descriptor, p *Principal) *fault.Error {
	if d.Tier == channels.Paid && !p.SignedIn() {
		return fault.PaymentRequired(
			"channel %s is a paid channel and needs a signed-in key: run `comm login` (or POST /v1/auth/device/start with this key) and use the signed-in key", label(d))
	}
	if d.New == nil {
		if d.Settings != "" {
			return fault.NotImplemented("channel %s is not configured on this gateway: its operator sets %s", label(d), d.Settings)
		}
		return fault.NotImplemented("channel %s is not available in this gateway yet", label(d))
	}
	return nil
}

// installable refuses an install of the operator's app when the provider
// cannot send the person back: the gateway has no public URL.
func (s *Service) installable(d channels.Descriptor) *fault.Error {
	if s.baseURL == "" {
		return fault.NotImplemented("installing the %s app needs the gateway's public URL (--base-url)", label(d))
	}
	return nil
}

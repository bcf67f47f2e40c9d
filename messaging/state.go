package messaging

import (
	"context"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entstate "github.com/comm-gateway/comm/ent/providerstate"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// providerState is channels.State over the provider_states table, for one
// channel (its keys are stored as <channel>/<key>).
type providerState struct {
	log     *stream.Log
	channel string
}

// ProviderState returns the channels.State of channel's adapters, kept in
// log's database.
func ProviderState(log *stream.Log, channel string) channels.State {
	return providerState{log: log, channel: channel}
}

func (p providerState) id(key string) (string, error) {
	if key == "" || len(key) > 250 {
		return "", fmt.Errorf("provider state: key of %d bytes (1 to 250)", len(key))
	}
	return p.channel + "/" + key, nil
}

// Get returns key's value, or nil when there is none.
func (p providerState) Get(ctx context.Context, key string) ([]byte, error) {
	id, err := p.id(key)
	if err != nil {
		return nil, err
	}
	st, err := p.log.DB().Ent.ProviderState.Get(tenant.System(ctx), id)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("provider state %s: %w", id, err)
	}
	return st.Value, nil
}

// Put sets key's value (nil deletes it), through the log's one writer.
func (p providerState) Put(ctx context.Context, key string, value []byte) error {
	id, err := p.id(key)
	if err != nil {
		return err
	}
	if len(value) > channels.MaxStateBytes {
		return fmt.Errorf("provider state %s: %d bytes (at most %d)", id, len(value), channels.MaxStateBytes)
	}
	sys := tenant.System(ctx)
	_, err = p.log.Write(sys, id, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		if value == nil {
			_, err := cl.ProviderState.Delete().Where(entstate.ID(id)).Exec(tctx)
			return err
		}
		return cl.ProviderState.Create().SetID(id).SetValue(value).SetUpdatedAt(time.Now().UTC()).
			OnConflictColumns(entstate.FieldID).UpdateNewValues().Exec(tctx)
	})
	if err != nil {
		return fmt.Errorf("provider state %s: %w", id, err)
	}
	return nil
}

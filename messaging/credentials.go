package messaging

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/comm-gateway/comm/channels"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// credentials is a connection's channels.Credentials: its configuration,
// sealed in its row, read and replaced through the log's one writer.
type credentials struct {
	s         *Service
	id        string
	projectID string
}

func (s *Service) credentials(projectID, id string) channels.Credentials {
	return &credentials{s: s, id: id, projectID: projectID}
}

// Load returns the stored configuration.
func (c *credentials) Load(ctx context.Context) (json.RawMessage, error) {
	row, err := c.s.read.Connection.Query().Where(entconn.ID(c.id)).Only(tenant.System(ctx))
	if err != nil {
		return nil, fmt.Errorf("connection %s: load credentials: %w", c.id, err)
	}
	return c.s.openConfig(row)
}

// Save replaces the stored configuration (of a connection not deleted).
func (c *credentials) Save(ctx context.Context, config json.RawMessage) error {
	if !json.Valid(config) {
		return fmt.Errorf("connection %s: save credentials: not JSON", c.id)
	}
	sealed := c.s.sealConfig(config)
	_, err := c.s.log.Write(tenant.WithProject(ctx, c.projectID), c.projectID, func(tx *stream.Tx) error {
		return tx.Client().Connection.Update().Where(entconn.ID(c.id), entconn.DeletedAtIsNil()).
			SetConfig(sealed).Exec(tx.Context())
	})
	if err != nil {
		return fmt.Errorf("connection %s: save credentials: %w", c.id, err)
	}
	return nil
}

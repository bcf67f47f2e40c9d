package mailhost

import (
	"context"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/tenant"
)

// Claim refuses an inbox address on the gateway's shared mail domain
// that is a reserved role name, or that another project's inbox released
// within the quarantine period. The project that released an address may
// take it back at once. Custom domains are their owners' to arrange.
func (h *Host) Claim(ctx context.Context, projectID, address string) error {
	now := h.now()
	local, dom, _ := strings.Cut(address, "@")
	if dom != h.mail.Domain {
		return nil
	}
	if email.ReservedLocal(local) {
		return fault.Conflict(
			"%s is a role address reserved for the operator of this gateway (RFC 2142, CA/Browser Forum domain validation); choose another local part", address).WithParam("config.address")
	}
	q := h.mail.AddressQuarantine
	if q <= 0 {
		return nil
	}
	last, err := h.read.Connection.Query().
		Where(entconn.Channel("email"), entconn.Address(address), entconn.DeletedAtGT(now.Add(-q)),
			entconn.ProjectIDNEQ(projectID)).
		Order(ent.Desc(entconn.FieldDeletedAt)).First(messaging.IncludeDeleted(tenant.System(ctx)))
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

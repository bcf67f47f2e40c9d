package mailhost

import (
	"context"
	"net/mail"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/tenant"
)

// Default budgets of outbound mail to addresses outside the gateway, per
// project and hour, by the kind of the key that sends.
const (
	DefaultSandboxMailPerHour  = 100
	DefaultSignedInMailPerHour = 1000
)

// sendBudgets are the hourly outbound mail budgets per project, one token
// bucket for sandbox keys and one for signed-in keys (ratelimit, as every
// other limit), shared with the other replicas by ShareLimits.
type sendBudgets struct{ sandbox, signedIn *ratelimit.Bucket }

func newSendBudgets(o Options) sendBudgets {
	return sendBudgets{
		sandbox:  ratelimit.New(o.SandboxMailPerHour, time.Hour, o.SandboxMailPerHour),
		signedIn: ratelimit.New(o.SignedInMailPerHour, time.Hour, o.SignedInMailPerHour),
	}
}

// OnRefusal has f called with the budget's name (mail_sandbox,
// mail_signed_in) each time a budget refuses mail, for metrics. Call it
// before the host is used.
func (h *Host) OnRefusal(f func(bucket string)) {
	h.sends.sandbox.OnRefusal(func() { f("mail_sandbox") })
	h.sends.signedIn.OnRefusal(func() { f("mail_signed_in") })
}

// ShareLimits shares the hourly mail budgets with the other replicas
// through sh (nil: each replica grants the whole budget). Call it before
// the host is used.
func (h *Host) ShareLimits(sh *ratelimit.Shared) {
	sh.Add("mail_sandbox", h.sends.sandbox)
	sh.Add("mail_signed_in", h.sends.signedIn)
}

// AllowSend decides whether mail may be queued from the inbox address
// from (of connection conn) to to (email.Gateway). Mail to an inbox of
// this gateway (its mail domain or a verified custom domain) is free. Mail
// to an outside address goes through the operator's relay: from the
// gateway's shared mail domain it needs a signed-in key, unless the
// operator allows sandboxes to send, or to wrote to this inbox first; and
// every project has an hourly budget of it, by the key's kind.
func (h *Host) AllowSend(ctx context.Context, conn channels.Connection, from string, signedIn bool, to string) error {
	addr := strings.TrimSpace(to)
	if a, err := mail.ParseAddress(to); err == nil {
		addr = a.Address
	}
	addr = strings.ToLower(addr)
	inside, err := h.hostsMailDomain(ctx, addr)
	if err != nil {
		return err
	}
	if inside {
		return nil
	}
	_, fromDomain, _ := strings.Cut(strings.ToLower(from), "@")
	if !signedIn && !h.mail.SandboxOutbound && fromDomain == h.mail.Domain {
		wrote, err := h.read.Message.Query().Where(entmsg.ConnectionID(conn.ID),
			entmsg.DirectionEQ(entmsg.DirectionInbound), entmsg.SenderEqualFold(addr)).Exist(tenant.WithProject(ctx, conn.ProjectID))
		if err != nil {
			return err
		}
		if !wrote {
			return fault.Forbidden(
				"%s is outside this gateway: a sandbox key may send mail from @%s only to inboxes of this gateway and to people who wrote to this inbox; sending to anyone needs a signed-in key (run `comm login`)",
				addr, h.mail.Domain).WithParam("to")
		}
	}
	limit, budget := h.mail.SandboxMailPerHour, h.sends.sandbox
	if signedIn {
		limit, budget = h.mail.SignedInMailPerHour, h.sends.signedIn
	}
	if ok, wait := budget.Allow(conn.ProjectID); !ok {
		return fault.RateLimited(wait,
			"this project has sent its %d emails an hour to outside addresses; try again in %d s",
			limit, int(wait.Seconds())+1)
	}
	return nil
}

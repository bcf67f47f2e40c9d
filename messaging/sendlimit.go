package messaging

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/ent"
	entmsg "github.com/comm-gateway/comm/ent/message"
)

// Default budgets of outbound mail to addresses outside the gateway, per
// project and hour, by the kind of the key that sends.
const (
	DefaultSandboxMailPerHour  = 100
	DefaultSignedInMailPerHour = 1000
)

// sendWindow is the period the outbound mail budgets count over.
const sendWindow = time.Hour

// sendCounter counts a project's outbound mail to outside addresses in
// fixed windows of sendWindow. It is per process: with several replicas
// each grants the budget.
type sendCounter struct {
	mu sync.Mutex
	m  map[string]*sendCount
}

type sendCount struct {
	start time.Time
	n     int
}

// take counts one send of project against limit, or says how long until
// the window ends.
func (c *sendCounter) take(project string, limit int, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*sendCount{}
	}
	e := c.m[project]
	if e == nil || now.Sub(e.start) >= sendWindow {
		if len(c.m) > 10_000 {
			for k, v := range c.m {
				if now.Sub(v.start) >= sendWindow {
					delete(c.m, k)
				}
			}
		}
		e = &sendCount{start: now}
		c.m[project] = e
	}
	if e.n >= limit {
		return false, e.start.Add(sendWindow).Sub(now)
	}
	e.n++
	return true, 0
}

// checkOutboundMail decides whether p may queue mail from connection c to
// to. Mail to an inbox of this gateway (its mail domain or a verified
// custom domain) is free. Mail to an outside address goes through the
// operator's relay: from the gateway's shared mail domain it needs a
// signed-in key, unless the operator allows sandboxes to send, or to wrote
// to this inbox first; and every project has an hourly budget of it, by
// the key's kind.
func (s *Service) checkOutboundMail(ctx context.Context, p *Principal, c *ent.Connection, to string) error {
	if c.Channel != "email" {
		return nil
	}
	addr := strings.TrimSpace(to)
	if a, err := mail.ParseAddress(to); err == nil {
		addr = a.Address
	}
	addr = strings.ToLower(addr)
	inside, err := s.hostsMailDomain(ctx, addr)
	if err != nil {
		return err
	}
	if inside {
		return nil
	}
	_, fromDomain, _ := strings.Cut(strings.ToLower(c.Address), "@")
	if !p.SignedIn() && !s.mail.SandboxOutbound && fromDomain == s.mail.Domain {
		wrote, err := s.read.Message.Query().Where(entmsg.ConnectionID(c.ID),
			entmsg.DirectionEQ(entmsg.DirectionInbound), entmsg.SenderEqualFold(addr)).Exist(p.Context(ctx))
		if err != nil {
			return err
		}
		if !wrote {
			return &Error{Code: ErrForbidden.Code, Param: "to", Message: fmt.Sprintf(
				"%s is outside this gateway: a sandbox key may send mail from @%s only to inboxes of this gateway and to people who wrote to this inbox; sending to anyone needs a signed-in key (run `comm login`)",
				addr, s.mail.Domain)}
		}
	}
	limit := s.mail.SandboxMailPerHour
	if p.SignedIn() {
		limit = s.mail.SignedInMailPerHour
	}
	if ok, wait := s.sends.take(p.ProjectID, limit, s.now()); !ok {
		return &Error{Code: ErrRateLimited.Code, RetryAfter: wait, Message: fmt.Sprintf(
			"this project has sent its %d emails to outside addresses for this hour; try again in %d s",
			limit, int(wait.Seconds())+1)}
	}
	return nil
}

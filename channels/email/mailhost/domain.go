package mailhost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"entgo.io/ent/dialect/sql"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/ent"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entdomain "github.com/comm-gateway/comm/ent/domain"
	"github.com/comm-gateway/comm/ent/predicate"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Domain is a custom email domain as the API shows it.
type Domain = api.Domain

// DomainRecord is one DNS record to publish and what verification found.
type DomainRecord = api.DomainRecord

// planOf reads the records a domain was planned with.
func planOf(d *ent.Domain) (*domain.Records, error) {
	var plan domain.Records
	if err := json.Unmarshal(d.Plan, &plan); err != nil {
		return nil, fmt.Errorf("domain %s: plan: %w", d.ID, err)
	}
	return &plan, nil
}

func domainOf(d *ent.Domain) (*Domain, error) {
	plan, err := planOf(d)
	if err != nil {
		return nil, err
	}
	var checks domain.Status
	if len(d.Checks) > 0 {
		if err := json.Unmarshal(d.Checks, &checks); err != nil {
			return nil, fmt.Errorf("domain %s: checks: %w", d.ID, err)
		}
	}
	out := &Domain{
		ID: d.ID, Domain: d.Domain, InboundDomain: nonEmpty(d.InboundDomain), Status: string(d.Status),
		LastError: d.LastError, CheckedAt: utcPtr(d.CheckedAt), VerifiedAt: utcPtr(d.VerifiedAt), CreatedAt: d.CreatedAt.UTC(),
	}
	for _, rec := range plan.Records {
		r := DomainRecord{Kind: string(rec.Kind), Type: rec.Type, Name: rec.Name, Value: rec.Value, Priority: rec.Priority,
			Required: rec.Required, Purpose: rec.Purpose, State: "pending", Zone: rec.ZoneLine()}
		if st, ok := checks.Get(rec.Kind); ok {
			r.State, r.Seen, r.Detail = string(st.State), st.Seen, st.Detail
		}
		out.Records = append(out.Records, r)
	}
	return out, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateDomain adds a custom email domain to the project and returns the
// DNS records its owner publishes, with a DKIM key made for it.
func (h *Host) CreateDomain(ctx context.Context, name string) (*Domain, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, messaging.Invalid("domain", "required, e.g. \"example.com\"")
	}
	if err := h.mailPlanError(); err != nil {
		return nil, err
	}
	norm, err := domain.NormalizeDomain(name)
	if err != nil {
		return nil, messaging.Invalid("domain", "%v", err)
	}
	if norm == h.mail.Domain {
		return nil, messaging.Invalid("domain", "%s is this gateway's own mail domain; connect an email inbox on it without adding it", norm)
	}
	if exists, err := h.read.Domain.Query().Where(entdomain.Domain(norm)).Exist(ctx); err != nil {
		return nil, err
	} else if exists {
		return nil, fault.Conflict("%s is already a domain of this project", norm).WithParam("domain")
	}
	recs, err := domain.Plan(norm, h.mail.Plan)
	if err != nil {
		return nil, messaging.Invalid("domain", "%v", err)
	}
	sealedKey := h.box.Seal(recs.DKIMPrivateKeyPEM)
	plan, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	var created *ent.Domain
	now := h.now()
	_, err = h.write(ctx, func(tx *stream.Tx) error {
		created, err = tx.Client().Domain.Create().SetID(ident.New(ident.Domain)).SetDomain(norm).
			SetInboundDomain(recs.InboundDomain).SetPlan(plan).SetDkimKey(sealedKey).SetCreatedAt(now).Save(tx.Context())
		return err
	})
	if ent.IsConstraintError(err) {
		return nil, fault.Conflict("%s is already a domain of this project", norm).WithParam("domain")
	}
	if err != nil {
		return nil, err
	}
	return domainOf(created)
}

// mailPlanError says why this gateway cannot offer custom domains: the
// hosts customers would publish (SPF include, MX) are not public names, as
// with the default local mail domain.
func (h *Host) mailPlanError() error {
	for _, h := range []struct{ flag, host string }{
		{"--spf-include (COMM_SPF_INCLUDE)", h.mail.Plan.SPFInclude},
		{"--mx-host (COMM_MX_HOST)", h.mail.Plan.MXHost},
	} {
		if _, err := domain.NormalizeDomain(h.host); err != nil {
			return fault.NotImplemented(
				"custom domains are not available on this gateway: its %s is %q, which customers cannot publish (%v); the operator sets it to a public host name",
				h.flag, h.host, err)
		}
	}
	return nil
}

// Domains lists the project's custom domains, oldest first.
func (h *Host) Domains(ctx context.Context, pg messaging.Page) ([]*Domain, error) {
	ds, _, err := h.DomainsPage(ctx, pg)
	return ds, err
}

// DomainsPage is Domains, also telling whether more domains follow the
// page. A page stops before the domain that would take its bytes (the plan
// and what DNS answered, which the domain's owner publishes) past the page
// budget, as a page of messages does. Only the rows that fit are loaded.
func (h *Host) DomainsPage(ctx context.Context, pg messaging.Page) ([]*Domain, bool, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, false, err
	}
	if err := pg.Validate(ident.Domain); err != nil {
		return nil, false, err
	}
	q := h.read.Domain.Query().Order(ent.Asc(entdomain.FieldID))
	if pg.After != "" {
		q = q.Where(entdomain.IDGT(pg.After))
	}
	// One more than asked tells whether there is a next page; so does a
	// page cut short by the byte budget.
	count := q.Clone()
	ids, cut, err := messaging.Fit(func(agg func(*sql.Selector) string, rows any) error {
		return count.Limit(pg.Limit+1).Aggregate(agg).Scan(ctx, rows)
	}, h.svc.PageBytes(), sizedDomainColumns)
	if err != nil {
		return nil, false, err
	}
	more := cut || len(ids) > pg.Limit
	ids = ids[:min(len(ids), pg.Limit)]
	if len(ids) == 0 {
		return []*Domain{}, false, nil
	}
	ds, err := q.Where(entdomain.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, false, err
	}
	out := make([]*Domain, 0, len(ds))
	for _, d := range ds {
		v, err := domainOf(d)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, more, nil
}

// Domain returns one custom domain with the state of each record.
func (h *Host) Domain(ctx context.Context, id string) (*Domain, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, err
	}
	d, err := h.domain(ctx, id)
	if err != nil {
		return nil, err
	}
	return domainOf(d)
}

func (h *Host) domain(ctx context.Context, id string) (*ent.Domain, error) {
	if ident.Check(id, ident.Domain) != nil {
		return nil, messaging.NotFound("domain", id)
	}
	d, err := h.read.Domain.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, messaging.NotFound("domain", id)
	}
	return d, err
}

// DeleteDomain removes a custom domain and retires its inboxes, as
// DeleteConnection does: they stop receiving (mail to them is refused) and
// sending, their conversations and messages stay readable, and their
// addresses are free for the domain's next owner.
func (h *Host) DeleteDomain(ctx context.Context, id string) error {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return err
	}
	d, err := h.domain(ctx, id)
	if err != nil {
		return err
	}
	now := h.now()
	var retired []string
	_, err = h.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		suffixes := []predicate.Connection{entconn.AddressHasSuffix("@" + d.Domain)}
		if d.InboundDomain != "" && d.InboundDomain != d.Domain {
			suffixes = append(suffixes, entconn.AddressHasSuffix("@"+d.InboundDomain))
		}
		where := []predicate.Connection{entconn.Channel("email"), entconn.DeletedAtIsNil(), entconn.Or(suffixes...)}
		ids, err := cl.Connection.Query().Where(where...).IDs(tctx)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if err := cl.Connection.Update().Where(entconn.IDIn(ids...), entconn.DeletedAtIsNil()).
				SetDeletedAt(now).SetStatus("deleted").ClearInboxKey().Exec(tctx); err != nil {
				return err
			}
		}
		retired = ids
		return cl.Domain.DeleteOneID(id).Exec(tctx)
	})
	h.keys.Delete(id)
	if err != nil {
		return err
	}
	h.svc.Release(ctx, retired...)
	return nil
}

// VerifyDomain looks up the domain's records now. The domain comes back
// with each record's state; when every required record is found it is
// verified and domain.verified is appended (once). A DNS failure is not an
// error of the call: it is the domain's last_error.
func (h *Host) VerifyDomain(ctx context.Context, id string) (*Domain, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, err
	}
	d, err := h.domain(ctx, id)
	if err != nil {
		return nil, err
	}
	d, err = h.verify(ctx, d)
	if err != nil {
		return nil, err
	}
	return domainOf(d)
}

// RecheckVerified is how often a verified domain's records are looked up
// again, so a record that was removed shows on the domain.
const RecheckVerified = 24 * time.Hour

// VerifyPending verifies the pending domains of every project not checked
// for at least every, and the verified ones not checked for
// RecheckVerified (the periodic check), at most n at a time, and returns
// how many it checked.
func (h *Host) VerifyPending(ctx context.Context, every time.Duration, n int) (int, error) {
	sys := tenant.System(ctx)
	due, err := h.read.Domain.Query().
		Where(entdomain.Or(
			entdomain.And(entdomain.StatusIn(entdomain.StatusPending, entdomain.StatusUnverified),
				entdomain.Or(entdomain.CheckedAtIsNil(), entdomain.CheckedAtLTE(h.now().Add(-every)))),
			entdomain.And(entdomain.StatusEQ(entdomain.StatusVerified),
				entdomain.CheckedAtLTE(h.now().Add(-RecheckVerified))))).
		Order(ent.Asc(entdomain.FieldID)).Limit(n).All(sys)
	if err != nil {
		return 0, err
	}
	for _, d := range due {
		if _, err := h.verify(tenant.WithProject(ctx, d.ProjectID), d); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// verify runs the DNS checks of d (no transaction is open meanwhile) and
// records the outcome.
func (h *Host) verify(ctx context.Context, d *ent.Domain) (*ent.Domain, error) {
	plan, err := planOf(d)
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	status, verr := domain.Verify(vctx, h.mail.Resolver, plan)
	cancel()
	now := h.now()
	var taken bool
	if verr == nil && status.Verified && d.Status != entdomain.StatusVerified {
		// A domain sends for one project only: the first to verify it.
		taken, err = h.read.Domain.Query().Where(entdomain.Domain(d.Domain), entdomain.StatusEQ(entdomain.StatusVerified),
			entdomain.ProjectIDNEQ(d.ProjectID)).Exist(tenant.System(ctx))
		if err != nil {
			return nil, err
		}
	}
	var updated *ent.Domain
	var unverified bool
	_, err = h.log.Write(tenant.WithProject(ctx, d.ProjectID), d.ProjectID, func(tx *stream.Tx) error {
		unverified = false
		cl, tctx := tx.Client(), tx.Context()
		upd := cl.Domain.UpdateOneID(d.ID).SetCheckedAt(now)
		switch {
		case verr != nil:
			upd.SetLastError(verr.Error())
		case taken:
			checks, _ := json.Marshal(status)
			upd.SetChecks(checks).SetLastError(fmt.Sprintf("%s is verified by another project of this gateway", d.Domain))
		case d.Status == entdomain.StatusVerified && !status.Verified:
			// A verified domain stays verified through a DNS hiccup, but
			// the missing records show; once its ownership record has
			// been missing for the grace period, it is unverified.
			checks, _ := json.Marshal(status)
			var missing []string
			for _, r := range status.Records {
				if r.Record.Required && r.State != domain.Found {
					missing = append(missing, string(r.Record.Kind))
				}
			}
			upd.SetChecks(checks).SetLastError(fmt.Sprintf("verified earlier, but these records are no longer found: %s; mail may be rejected or unsigned until they are back",
				strings.Join(missing, ", ")))
			if owned(status) {
				upd.ClearOwnershipMissingSince()
				break
			}
			since := now
			if d.OwnershipMissingSince != nil {
				since = *d.OwnershipMissingSince
			} else {
				upd.SetOwnershipMissingSince(now)
			}
			if now.Sub(since) >= h.mail.OwnershipGrace {
				unverified = true
				upd.SetStatus(entdomain.StatusUnverified).SetLastError(fmt.Sprintf(
					"unverified: the ownership record %s.%s has been missing since %s; mail from this domain is no longer signed or sent and no new inboxes are accepted; publish the record again and verify",
					domain.OwnershipPrefix, d.Domain, since.UTC().Format(time.RFC3339)))
			}
		default:
			checks, _ := json.Marshal(status)
			upd.SetChecks(checks).ClearLastError()
			if owned(status) {
				upd.ClearOwnershipMissingSince()
			}
		}
		newly := verr == nil && !taken && status.Verified && d.Status != entdomain.StatusVerified
		if newly {
			upd.SetStatus(entdomain.StatusVerified).SetVerifiedAt(now)
		}
		var err error
		if updated, err = upd.Save(tctx); err != nil {
			return err
		}
		if !newly && !unverified {
			return nil
		}
		view, err := domainOf(updated)
		if err != nil {
			return err
		}
		typ := stream.DomainVerified
		if unverified {
			typ = stream.DomainUnverified
		}
		return tx.Append(typ, api.DomainEvent{Domain: view})
	})
	if unverified && err == nil {
		h.keys.Delete(d.ID)
	}
	if ent.IsNotFound(err) {
		return nil, messaging.NotFound("domain", d.ID)
	}
	return updated, err
}

// owned reports whether a check found the ownership record.
func owned(st *domain.Status) bool {
	for _, r := range st.Records {
		if r.Record.Kind == domain.Ownership {
			return r.State == domain.Found
		}
	}
	return false
}

// SigningKey returns the DKIM key of a verified custom domain of the
// project (email.Gateway).
func (h *Host) SigningKey(ctx context.Context, projectID, name string) (*email.SigningKey, error) {
	d, err := h.read.Domain.Query().Where(entdomain.ProjectID(projectID), entdomain.Domain(name)).
		Only(tenant.System(ctx))
	if ent.IsNotFound(err) || (err == nil && d.Status != entdomain.StatusVerified) {
		return nil, email.ErrNotVerified
	}
	if err != nil {
		return nil, err
	}
	if k, ok := h.keys.Load(d.ID); ok {
		return k.(*email.SigningKey), nil
	}
	pemBytes, err := h.box.Open(d.DkimKey)
	if err != nil {
		return nil, fmt.Errorf("domain %s: open dkim key: %w", d.ID, err)
	}
	signer, err := domain.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", d.ID, err)
	}
	plan, err := planOf(d)
	if err != nil {
		return nil, err
	}
	k := &email.SigningKey{Domain: d.Domain, Selector: plan.Selector, Key: signer}
	h.keys.Store(d.ID, k)
	return k, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sizedDomainColumns are the domain columns a page's bytes are counted
// from: what DNS answered at the last verification (the TXT strings seen,
// which the domain's owner publishes) and the plan.
var sizedDomainColumns = []string{entdomain.FieldDomain, entdomain.FieldInboundDomain, entdomain.FieldPlan,
	entdomain.FieldChecks, entdomain.FieldLastError}

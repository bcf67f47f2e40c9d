package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/ent"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entdev "github.com/comm-gateway/comm/ent/devicerequest"
	entproject "github.com/comm-gateway/comm/ent/project"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Device sign-in policy (docs/security.md).
const (
	// DeviceLifetime is how long a sign-in can be approved and collected.
	DeviceLifetime = 15 * time.Minute
	// DeviceInterval is the polling interval a sign-in starts with, in
	// seconds; each slow_down adds DeviceSlowDownStep.
	DeviceInterval     = 5
	DeviceSlowDownStep = 5
	// UserCodeAlphabet has no vowels (no words) and no look-alikes; 8 of
	// them make about 34 bits.
	UserCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"
	userCodeLen      = 8
	// DeviceCodePrefix starts every device code; 22 base62 characters
	// (131 bits) follow.
	DeviceCodePrefix = "dev_"
	deviceCodeBody   = 22
)

// Device sign-in states, as the token endpoint answers them.
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceSlowDown = "slow_down"
	DeviceDenied   = "denied"
	DeviceExpired  = "expired"
	// DeviceConsumed is a request whose key was delivered (the page shows
	// it; the token endpoint answers an error).
	DeviceConsumed = "consumed"
)

// DeviceStartInput starts a device sign-in.
type DeviceStartInput struct {
	// APIKey, when set, is the key whose project is carried into the
	// account on approval.
	APIKey string
	// ClientIP and UserAgent are shown on the approval page.
	ClientIP, UserAgent string
}

// DeviceStart is what the command line shows and keeps.
type DeviceStart struct {
	UserCode   string    `json:"user_code"`
	DeviceCode string    `json:"device_code"`
	Interval   int       `json:"interval"`
	ExpiresIn  int       `json:"expires_in"`
	ExpiresAt  time.Time `json:"-"`
}

// StartDevice begins a device sign-in.
func (s *Service) StartDevice(ctx context.Context, in DeviceStartInput) (*DeviceStart, error) {
	var sandboxProject string
	if in.APIKey != "" {
		p, err := s.svc.Authenticate(ctx, in.APIKey)
		var e *fault.Error
		if errors.As(err, &e) {
			return nil, &fault.Error{Code: e.Code, Param: "api_key", Message: e.Message + "; leave it out to sign in to a new project"}
		}
		if err != nil {
			return nil, err
		}
		sandboxProject = p.ProjectID
	}
	now := s.now()
	for range 5 { // a user code collision is retried with a fresh code
		st := &DeviceStart{UserCode: newUserCode(), DeviceCode: DeviceCodePrefix + randomBase62(deviceCodeBody),
			Interval: DeviceInterval, ExpiresIn: int(DeviceLifetime / time.Second), ExpiresAt: now.Add(DeviceLifetime)}
		dh, uh := sha256.Sum256([]byte(st.DeviceCode)), userCodeHash(st.UserCode)
		id := ident.New(ident.DeviceRequest)
		_, err := s.log.Write(tenant.System(ctx), id, func(tx *stream.Tx) error {
			return tx.Client().DeviceRequest.Create().SetID(id).SetDeviceHash(dh[:]).SetUserHash(uh[:]).
				SetSandboxProjectID(sandboxProject).SetClientIP(clip(in.ClientIP, 100)).SetUserAgent(clip(in.UserAgent, 300)).
				SetInterval(DeviceInterval).SetExpiresAt(st.ExpiresAt).SetCreatedAt(now).Exec(tx.Context())
		})
		if ent.IsConstraintError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("device sign-in: no free user code")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// newUserCode is XXXX-XXXX from UserCodeAlphabet.
func newUserCode() string {
	var b [userCodeLen]byte
	out := make([]byte, 0, userCodeLen+1)
	for i := range b {
		// Rejection sampling keeps the letters uniform.
		for {
			rand.Read(b[i : i+1])
			if v := b[i] & 31; v < byte(len(UserCodeAlphabet)) {
				b[i] = UserCodeAlphabet[v]
				break
			}
		}
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, b[i])
	}
	return string(out)
}

// NormalizeUserCode turns what a person typed into the stored form
// (uppercase, no spaces or dashes) and rejects anything outside the
// alphabet before the database is asked.
func NormalizeUserCode(code string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToUpper(code) {
		switch {
		case r == '-' || r == ' ' || r == '\t':
			continue
		case r < 128 && strings.IndexByte(UserCodeAlphabet, byte(r)) >= 0:
			b.WriteRune(r)
		default:
			return "", fault.Invalid("code", "%q is not a sign-in code: codes look like BCDF-GHJK", clip(code, 40))
		}
	}
	if b.Len() != userCodeLen {
		return "", fault.Invalid("code", "%q is not a sign-in code: codes have 8 letters, like BCDF-GHJK", clip(code, 40))
	}
	return b.String(), nil
}

// FormatUserCode shows a normalized code as XXXX-XXXX.
func FormatUserCode(norm string) string {
	if len(norm) != userCodeLen {
		return norm
	}
	return norm[:4] + "-" + norm[4:]
}

func userCodeHash(code string) [32]byte {
	norm, _ := NormalizeUserCode(code)
	return sha256.Sum256([]byte("user:" + norm))
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomBase62(n int) string {
	out := make([]byte, n)
	var b [1]byte
	for i := range out {
		for {
			rand.Read(b[:])
			if b[0] < 62*4 {
				out[i] = base62[b[0]%62]
				break
			}
		}
	}
	return string(out)
}

// DeviceToken is the answer to a poll of the token endpoint.
type DeviceToken struct {
	Status string `json:"status"`
	APIKey string `json:"api_key,omitempty"`
	// Interval is the polling interval now in force (raised by slow_down).
	Interval  int    `json:"interval,omitempty"`
	ProjectID string `json:"project_id,omitempty"`
	AccountID string `json:"account_id,omitempty"`
}

// PollDevice answers a poll: pending, slow_down (polled faster than the
// interval, which grows by DeviceSlowDownStep), denied, expired, or
// approved with the signed-in key. The key is made and returned once, in
// the transaction that marks the request consumed; a later poll is a
// conflict.
func (s *Service) PollDevice(ctx context.Context, deviceCode string) (*DeviceToken, error) {
	body, ok := strings.CutPrefix(deviceCode, DeviceCodePrefix)
	if !ok || len(body) != deviceCodeBody || strings.Trim(body, base62) != "" {
		return nil, fault.Invalid("device_code", "not a device code (they start with %q)", DeviceCodePrefix)
	}
	h := sha256.Sum256([]byte(deviceCode))
	sys := tenant.System(ctx)
	d, err := s.read.DeviceRequest.Query().Where(entdev.DeviceHash(h[:])).Only(sys)
	if ent.IsNotFound(err) {
		return nil, fault.Invalid("device_code", "unknown device code: start a new sign-in")
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	switch {
	case d.Status == entdev.StatusConsumed:
		return nil, fault.Conflict("this sign-in already delivered its key, which is shown only once; start a new sign-in for another").WithParam("device_code")
	case d.Status == entdev.StatusDenied:
		return &DeviceToken{Status: DeviceDenied}, nil
	case now.After(d.ExpiresAt):
		return &DeviceToken{Status: DeviceExpired}, nil
	case d.Status == entdev.StatusApproved:
		return s.consumeDevice(ctx, d)
	}
	// Pending: slow down pollers faster than the interval.
	tok := &DeviceToken{Status: DevicePending, Interval: d.Interval}
	interval := d.Interval
	if d.LastPollAt != nil && now.Sub(*d.LastPollAt) < time.Duration(d.Interval)*time.Second {
		interval += DeviceSlowDownStep
		tok.Status, tok.Interval = DeviceSlowDown, interval
	}
	_, err = s.log.Write(sys, d.ID, func(tx *stream.Tx) error {
		return tx.Client().DeviceRequest.UpdateOneID(d.ID).SetLastPollAt(now).SetInterval(interval).Exec(tx.Context())
	})
	return tok, err
}

// consumeDevice moves an approved request to consumed and makes its key,
// in one transaction; of two racing polls one gets the key.
func (s *Service) consumeDevice(ctx context.Context, d *ent.DeviceRequest) (*DeviceToken, error) {
	project := *d.ProjectIDResult
	key := apikey.New(apikey.SignedInPrefix)
	hash, err := apikey.Parse(key)
	if err != nil {
		return nil, err
	}
	won := false
	_, err = s.log.Write(tenant.WithProject(ctx, project), project, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		n, err := cl.DeviceRequest.Update().Where(entdev.ID(d.ID), entdev.StatusEQ(entdev.StatusApproved)).
			SetStatus(entdev.StatusConsumed).Save(tenant.System(tctx))
		if err != nil || n == 0 {
			won = false
			return err
		}
		won = true
		return cl.APIKey.Create().SetHash(hash[:]).SetKind(entapikey.KindSignedIn).
			SetDisplay(apikey.Display(key)).SetName("comm login").Exec(tctx)
	})
	if err != nil {
		return nil, err
	}
	if !won {
		return nil, fault.Conflict("this sign-in already delivered its key, which is shown only once; start a new sign-in for another").WithParam("device_code")
	}
	return &DeviceToken{Status: DeviceApproved, APIKey: key, ProjectID: project, AccountID: deref(d.AccountID)}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DeviceView is a sign-in request as the approval page shows it.
type DeviceView struct {
	UserCode  string
	Status    string // pending, approved, consumed, denied, expired
	CreatedAt time.Time
	ExpiresAt time.Time
	ClientIP  string
	UserAgent string
	// Project is the sandbox project that approval carries into the
	// account; nil when a new project will be made.
	Project *ProjectSummary
	// ProjectAccountID is the account Project already belongs to; nil
	// when it belongs to none (or there is no Project).
	ProjectAccountID *string
}

// ProjectSummary describes a project in listings and on the approval
// page.
type ProjectSummary = api.ProjectSummary

// DeviceByUserCode finds a sign-in by the code a person typed. A malformed
// code is ErrInvalid (checked before the database is asked); an unknown one
// ErrNotFound.
func (s *Service) DeviceByUserCode(ctx context.Context, code string) (*DeviceView, error) {
	d, err := s.deviceByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	v := &DeviceView{UserCode: code, Status: string(d.Status), CreatedAt: d.CreatedAt.UTC(), ExpiresAt: d.ExpiresAt.UTC(),
		ClientIP: d.ClientIP, UserAgent: d.UserAgent}
	if norm, err := NormalizeUserCode(code); err == nil {
		v.UserCode = FormatUserCode(norm)
	}
	if (d.Status == entdev.StatusPending || d.Status == entdev.StatusApproved) && s.now().After(d.ExpiresAt) {
		v.Status = DeviceExpired
	}
	if d.SandboxProjectID != "" {
		if v.Project, v.ProjectAccountID, err = s.projectSummary(ctx, d.SandboxProjectID); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (s *Service) deviceByCode(ctx context.Context, code string) (*ent.DeviceRequest, error) {
	if _, err := NormalizeUserCode(code); err != nil {
		return nil, err
	}
	h := userCodeHash(code)
	d, err := s.read.DeviceRequest.Query().Where(entdev.UserHash(h[:])).Only(tenant.System(ctx))
	if ent.IsNotFound(err) {
		return nil, fault.NotFoundf("no sign-in with this code: check it against your terminal").WithParam("code")
	}
	return d, err
}

// projectSummary describes a project, and returns the account it belongs
// to (nil for none).
func (s *Service) projectSummary(ctx context.Context, id string) (*ProjectSummary, *string, error) {
	sys := tenant.System(ctx)
	pr, err := s.read.Project.Get(sys, id)
	if err != nil {
		return nil, nil, err
	}
	n, err := s.read.Connection.Query().Where(entconn.ProjectID(id)).Count(sys)
	if err != nil {
		return nil, nil, err
	}
	return &ProjectSummary{ID: pr.ID, Name: pr.Name, Connections: n, LastSeq: pr.LastSeq,
		CreatedAt: pr.CreatedAt.UTC()}, pr.AccountID, nil
}

// Approval is the outcome of approving a sign-in.
type Approval struct {
	ProjectID string
	// CarriedOver says the sandbox project moved into the account (else a
	// new project was made).
	CarriedOver bool
}

// ApproveDevice approves a pending sign-in for an account: the sandbox
// project it started with moves into the account (same id, history and
// connections), or a new project is made in the account. The key itself
// is made when the command line collects it. Of two racing decisions one
// wins; the other is a conflict.
func (s *Service) ApproveDevice(ctx context.Context, accountID, code string) (*Approval, error) {
	d, err := s.decidable(ctx, code)
	if err != nil {
		return nil, err
	}
	acct, err := s.read.Account.Get(tenant.System(ctx), accountID)
	if err != nil {
		return nil, fmt.Errorf("approve: account %s: %w", accountID, err)
	}
	out := &Approval{ProjectID: d.SandboxProjectID, CarriedOver: d.SandboxProjectID != ""}
	if !out.CarriedOver {
		out.ProjectID = ident.New(ident.Project)
	}
	now := s.now()
	_, err = s.log.Write(tenant.WithProject(ctx, out.ProjectID), out.ProjectID, func(tx *stream.Tx) error {
		cl, sys := tx.Client(), tenant.System(tx.Context())
		if out.CarriedOver {
			n, err := cl.Project.Update().Where(entproject.ID(out.ProjectID),
				entproject.Or(entproject.AccountIDIsNil(), entproject.AccountID(accountID))).
				SetAccountID(accountID).Save(sys)
			if err != nil {
				return err
			}
			if n == 0 {
				return fault.Conflict("the project of this sign-in belongs to another account")
			}
		} else {
			if err := s.createProject(tx, out.ProjectID, accountID, "Project of "+firstNonEmpty(acct.Email, acct.Name, acct.Subject)); err != nil {
				return err
			}
		}
		n, err := cl.DeviceRequest.Update().Where(entdev.ID(d.ID), entdev.StatusEQ(entdev.StatusPending)).
			SetStatus(entdev.StatusApproved).SetAccountID(accountID).SetProjectIDResult(out.ProjectID).
			SetDecidedAt(now).Save(sys)
		if err != nil {
			return err
		}
		if n == 0 {
			return fault.Conflict("this sign-in was already decided")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DenyDevice refuses a pending sign-in; its command line is told so.
func (s *Service) DenyDevice(ctx context.Context, accountID, code string) error {
	d, err := s.decidable(ctx, code)
	if err != nil {
		return err
	}
	_, err = s.log.Write(tenant.System(ctx), d.ID, func(tx *stream.Tx) error {
		n, err := tx.Client().DeviceRequest.Update().Where(entdev.ID(d.ID), entdev.StatusEQ(entdev.StatusPending)).
			SetStatus(entdev.StatusDenied).SetAccountID(accountID).SetDecidedAt(s.now()).Save(tx.Context())
		if err == nil && n == 0 {
			return fault.Conflict("this sign-in was already decided")
		}
		return err
	})
	return err
}

// decidable finds a pending, unexpired sign-in by its user code.
func (s *Service) decidable(ctx context.Context, code string) (*ent.DeviceRequest, error) {
	d, err := s.deviceByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	switch {
	case d.Status != entdev.StatusPending:
		return nil, fault.Conflict("this sign-in was already %s", string(d.Status))
	case s.now().After(d.ExpiresAt):
		return nil, fault.Conflict("this sign-in expired: start a new one from your terminal")
	}
	return d, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

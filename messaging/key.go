package messaging

import (
	"context"
	"strings"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/ent"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Key is an API key as listings show it: never the key itself.
type Key = api.Key

// NewKey is a key just made, shown this once.
type NewKey = api.NewKey

func keyOf(k *ent.APIKey, p *Principal) *Key {
	return &Key{ID: k.ID, Kind: string(k.Kind), Display: k.Display, Name: nonEmpty(k.Name), Current: k.ID == p.KeyID,
		CreatedAt: k.CreatedAt.UTC(), LastUsedAt: utcPtr(k.LastUsedAt), RevokedAt: utcPtr(k.RevokedAt)}
}

// inAccount reports whether the caller's project belongs to an account.
func (s *Service) inAccount(ctx context.Context, p *Principal) (bool, error) {
	pr, err := s.read.Project.Get(tenant.System(ctx), p.ProjectID)
	if err != nil {
		return false, err
	}
	return pr.AccountID != nil, nil
}

// mayManageKeys refuses key management to a sandbox key of a project that
// moved into an account: once a person signed in for it, only signed-in
// keys (the kind on the key's row) list, create and revoke its keys. It
// reports whether the project is in an account.
func (s *Service) mayManageKeys(ctx context.Context, p *Principal) (bool, error) {
	owned, err := s.inAccount(ctx, p)
	if err != nil {
		return false, err
	}
	if owned && !p.SignedIn() {
		return true, fault.Forbidden("this project belongs to an account: its keys are listed, created and revoked only with a signed-in key (`comm login`), not with a sandbox key")
	}
	return owned, nil
}

// Keys lists the keys of the caller's project, oldest first, revoked ones
// included.
func (s *Service) Keys(ctx context.Context) ([]*Key, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.mayManageKeys(ctx, p); err != nil {
		return nil, err
	}
	ks, err := s.read.APIKey.Query().Order(ent.Asc(entapikey.FieldID)).All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Key, len(ks))
	for i, k := range ks {
		out[i] = keyOf(k, p)
	}
	return out, nil
}

// MaxKeysPerProject bounds the live keys of a project, and MaxKeysEver
// all its keys, revoked ones included, so the list of a project's keys
// (REST and GraphQL) stays bounded however often keys are made and revoked.
const (
	MaxKeysPerProject = 50
	MaxKeysEver       = 1000
)

// CreateKey makes another key of the caller's project, of the caller's
// kind: a sandbox key makes sandbox keys, a signed-in key signed-in ones.
func (s *Service) CreateKey(ctx context.Context, name string) (*NewKey, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if len(name) > MaxNameLen || strings.ContainsFunc(name, isControl) {
		return nil, Invalid("name", "at most %d characters, one line", MaxNameLen)
	}
	if _, err := s.mayManageKeys(ctx, p); err != nil {
		return nil, err
	}
	live, err := s.read.APIKey.Query().Where(entapikey.RevokedAtIsNil()).Count(ctx)
	if err != nil {
		return nil, err
	}
	if live >= MaxKeysPerProject {
		return nil, fault.Conflict("a project has at most %d live keys: revoke one first", MaxKeysPerProject)
	}
	all, err := s.read.APIKey.Query().Count(ctx)
	if err != nil {
		return nil, err
	}
	if all >= MaxKeysEver {
		return nil, fault.Conflict("a project makes at most %d keys in its life (revoked ones count): use a new project", MaxKeysEver)
	}
	prefix, kind := apikey.SandboxPrefix, entapikey.KindSandbox
	if p.SignedIn() {
		prefix, kind = apikey.SignedInPrefix, entapikey.KindSignedIn
	}
	key := apikey.New(prefix)
	hash, err := apikey.Parse(key)
	if err != nil {
		return nil, err
	}
	var created *ent.APIKey
	_, err = s.write(ctx, func(tx *stream.Tx) error {
		created, err = tx.Client().APIKey.Create().SetHash(hash[:]).SetKind(kind).SetDisplay(apikey.Display(key)).
			SetName(name).SetCreatedAt(s.now()).Save(tx.Context())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &NewKey{Key: *keyOf(created, p), APIKey: key}, nil
}

// RevokeKey revokes one of the project's keys; it stops working at once.
// Revoking a revoked key changes nothing. A project keeps at least one
// working key that may manage its keys (a signed-in one once the project
// is in an account): revoking the last is a conflict.
func (s *Service) RevokeKey(ctx context.Context, id string) (*Key, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if ident.Check(id, ident.APIKey) != nil {
		return nil, NotFound("key", id)
	}
	owned, err := s.mayManageKeys(ctx, p)
	if err != nil {
		return nil, err
	}
	var out *ent.APIKey
	_, err = s.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		k, err := cl.APIKey.Get(tctx, id)
		if ent.IsNotFound(err) {
			return NotFound("key", id)
		}
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			out = k
			return nil
		}
		// In the transaction, so two revocations at once cannot both
		// pass.
		others := cl.APIKey.Query().Where(entapikey.RevokedAtIsNil(), entapikey.IDNEQ(id))
		if owned {
			others = others.Where(entapikey.KindEQ(entapikey.KindSignedIn))
		}
		n, err := others.Count(tctx)
		if err != nil {
			return err
		}
		if n == 0 {
			what := "working key"
			if owned {
				what = "working signed-in key"
			}
			return fault.Conflict(
				"%s is the project's last %s: revoking it would lock the project out; create another key first (POST /v1/keys), then revoke this one", id, what)
		}
		out, err = cl.APIKey.UpdateOneID(id).SetRevokedAt(s.now()).Save(tctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Its websockets close, on every replica (the hint; they also
	// re-check the database).
	s.log.Signal(KeyRevokedSignal, id)
	return keyOf(out, p), nil
}

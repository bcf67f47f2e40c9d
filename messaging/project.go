package messaging

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/comm-gateway/comm/api"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/comm-gateway/comm/apikey"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Key kinds, as stored on the key's row.
const (
	KindSandbox  = "sandbox"
	KindSignedIn = "signed_in"
)

// Sandbox is a new anonymous project and its key.
type Sandbox = api.Sandbox

// Principal is an authenticated caller: one key of one project.
type Principal struct {
	ProjectID string
	// KeyID is the caller's credential: an API key's id, or, for a
	// signed-in person on the dashboard, their browser session's id
	// (ident.WebSession), which LiveKeys checks and KeyRevokedSignal ends
	// like a key's.
	KeyID string
	Kind  string
}

// SignedIn reports whether the key is a signed-in key (the paid tier).
func (p *Principal) SignedIn() bool { return p.Kind == KindSignedIn }

// Project is the caller's project and the head of its stream.
type Project = api.Project

// MaxNameLen bounds project names, in characters.
const MaxNameLen = 200

// ProjectName checks a project name given by a caller, trimmed of
// surrounding spaces ("" when none was given).
func ProjectName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case utf8.RuneCountInString(name) > MaxNameLen:
		return "", Invalid("name", "at most %d characters", MaxNameLen)
	case !utf8.ValidString(name):
		return "", Invalid("name", "must be valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		// NUL cannot be stored by PostgreSQL; the rest have no place in a
		// one-line display name.
		return "", Invalid("name", "must not contain control characters")
	}
	return name, nil
}

// CreateSandbox makes a project with an anonymous key and its default
// customer and agent scope.
func (s *Service) CreateSandbox(ctx context.Context, name string) (*Sandbox, error) {
	name, err := ProjectName(name)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, Invalid("name", "a project name is required")
	}
	sb := &Sandbox{
		ProjectID:  ident.New(ident.Project),
		APIKey:     apikey.New(apikey.SandboxPrefix),
		CustomerID: ident.New(ident.Customer),
		AgentID:    ident.New(ident.Agent),
	}
	hash, err := apikey.Parse(sb.APIKey)
	if err != nil {
		return nil, err
	}
	ctx = tenant.WithProject(ctx, sb.ProjectID)
	_, err = s.log.Write(ctx, sb.ProjectID, func(tx *stream.Tx) error {
		c := tx.Client()
		if err := c.Project.Create().SetID(sb.ProjectID).SetName(name).
			SetCustomerID(sb.CustomerID).SetAgentID(sb.AgentID).Exec(tx.Context()); err != nil {
			return err
		}
		return c.APIKey.Create().SetHash(hash[:]).SetKind(entapikey.KindSandbox).
			SetDisplay(apikey.Display(sb.APIKey)).Exec(tx.Context())
	})
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// Authenticate resolves a bearer key to its principal. Malformed, unknown
// and revoked keys all fail with ErrUnauthenticated.
func (s *Service) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if key == "" {
		return nil, unauthenticated("missing API key: send Authorization: Bearer <key>")
	}
	hash, err := apikey.Parse(key)
	if err != nil {
		return nil, unauthenticated("malformed API key")
	}
	if p, ok := s.keys.get(hash); ok {
		s.touch(p.KeyID, p.ProjectID)
		return &p, nil
	}
	// The one query a request may need: a prepared statement, not ent;
	// then the key is known here for keyTTL, or until it is revoked.
	gen := s.keys.generation()
	var (
		id, project, kind string
		revoked           bool
	)
	err = s.keyByHash.QueryRowContext(ctx, hash[:]).Scan(&id, &project, &kind, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, unauthenticated("unknown API key")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if revoked {
		return nil, unauthenticated("API key revoked")
	}
	s.touch(id, project)
	p := Principal{ProjectID: project, KeyID: id, Kind: kind}
	s.keys.putAt(hash, p, gen)
	return &p, nil
}

// touch records a key's last use, at most once a minute per key, off the
// request path.
func (s *Service) touch(keyID, projectID string) {
	now := s.now()
	s.touchMu.Lock()
	last, seen := s.touched[keyID]
	if seen && now.Sub(last) < time.Minute {
		s.touchMu.Unlock()
		return
	}
	s.touched[keyID] = now
	s.touchMu.Unlock()
	go func() {
		ctx := tenant.WithProject(context.Background(), projectID)
		_, err := s.log.Write(ctx, projectID, func(tx *stream.Tx) error {
			return tx.Client().APIKey.UpdateOneID(keyID).SetLastUsedAt(now).Exec(tx.Context())
		})
		if err != nil {
			s.logger.Warn("record key use", "key", keyID, "err", err)
		}
	}()
}

// Project returns the caller's project.
func (s *Service) Project(ctx context.Context) (*Project, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	pr, err := s.read.Project.Get(ctx, p.ProjectID)
	if err != nil {
		return nil, err
	}
	return &Project{
		ID: pr.ID, Name: pr.Name, CustomerID: pr.CustomerID, AgentID: pr.AgentID,
		LastSeq: pr.LastSeq, CreatedAt: pr.CreatedAt,
	}, nil
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p and scoped to p's project (the
// tenant every ent query and event log write of the request is filtered
// by). Front doors call it once, when they authenticate the caller; the
// domain reads the caller from the context and from nowhere else.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(tenant.WithProject(ctx, p.ProjectID), principalKey{}, p)
}

// PrincipalFrom returns the caller of an authenticated request, as
// WithPrincipal set it, or an unauthenticated error.
func PrincipalFrom(ctx context.Context) (*Principal, error) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	if !ok {
		return nil, unauthenticated("missing API key: send Authorization: Bearer <key>")
	}
	return p, nil
}

// principal is PrincipalFrom for the domain's methods.
func principal(ctx context.Context) (*Principal, error) { return PrincipalFrom(ctx) }

// KeyRevokedSignal is the stream signal (stream.Log.Signal) announcing that
// the key whose id is its value was revoked.
const KeyRevokedSignal = "key.revoked"

// LiveKeys returns which of the credential ids name credentials that
// still work: keys that exist and are not revoked, browser sessions
// (ident.WebSession ids) that are neither signed out nor expired; in one
// query per 500 ids of each. Websockets re-check their credentials with
// it.
func (s *Service) LiveKeys(ctx context.Context, ids []string) (map[string]bool, error) {
	live := make(map[string]bool, len(ids))
	var keys, sessions []string
	for _, id := range ids {
		if strings.HasPrefix(id, ident.WebSession+"_") {
			sessions = append(sessions, id)
		} else {
			keys = append(keys, id)
		}
	}
	if err := s.liveIDs(ctx, live, keys, "SELECT id FROM api_keys WHERE revoked_at IS NULL AND id IN (?%s)"); err != nil {
		return nil, err
	}
	err := s.liveIDs(ctx, live, sessions, "SELECT id FROM web_sessions WHERE revoked_at IS NULL AND expires_at > ? AND id IN (?%s)", s.now().UTC())
	if err != nil {
		return nil, err
	}
	return live, nil
}

// liveIDs marks in live the ids query returns, asking for at most 500 at
// a time: query's %s is where the placeholders after the first go; args
// come before the ids.
func (s *Service) liveIDs(ctx context.Context, live map[string]bool, ids []string, query string, args ...any) error {
	for len(ids) > 0 {
		n := min(len(ids), 500)
		qargs := append([]any(nil), args...)
		for _, id := range ids[:n] {
			qargs = append(qargs, id)
		}
		q := fmt.Sprintf(query, strings.Repeat(",?", n-1))
		rows, err := s.db.R.QueryContext(ctx, s.db.Rebind(q), qargs...)
		if err != nil {
			return fmt.Errorf("live keys: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("live keys: %w", err)
			}
			live[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("live keys: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

package account

import (
	"context"

	"github.com/comm-gateway/comm/ent"
	entproject "github.com/comm-gateway/comm/ent/project"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// What the dashboard needs of accounts: the projects of a signed-in
// person, whether a project is theirs, and a new project for a person who
// has none yet (one who signed in on the dashboard, not through `comm
// login`).

// MaxProjects bounds the projects of one account.
const MaxProjects = 100

// Projects returns the projects of an account, oldest first.
func (s *Service) Projects(ctx context.Context, accountID string) ([]ProjectSummary, error) {
	sys := tenant.System(ctx)
	prs, err := s.read.Project.Query().Where(entproject.AccountID(accountID)).Order(ent.Asc(entproject.FieldID)).
		Limit(MaxProjects).All(sys)
	if err != nil {
		return nil, err
	}
	out := make([]ProjectSummary, 0, len(prs))
	for _, pr := range prs {
		out = append(out, ProjectSummary{ID: pr.ID, Name: pr.Name, LastSeq: pr.LastSeq, CreatedAt: pr.CreatedAt.UTC()})
	}
	return out, nil
}

// Owns reports whether project belongs to the account. A malformed or
// unknown project id is simply not owned.
func (s *Service) Owns(ctx context.Context, accountID, project string) (bool, error) {
	if ident.Check(project, ident.Project) != nil {
		return false, nil
	}
	n, err := s.read.Project.Query().Where(entproject.ID(project), entproject.AccountID(accountID)).Count(tenant.System(ctx))
	return n > 0, err
}

// CreateProject makes a project in an account, with its own customer and
// agent scope. name may be empty: the project is then named after the
// account's person.
func (s *Service) CreateProject(ctx context.Context, accountID, name string) (*ProjectSummary, error) {
	name, err := messaging.ProjectName(name)
	if err != nil {
		return nil, err
	}
	sys := tenant.System(ctx)
	acct, err := s.read.Account.Get(sys, accountID)
	if err != nil {
		return nil, err
	}
	n, err := s.read.Project.Query().Where(entproject.AccountID(accountID)).Count(sys)
	if err != nil {
		return nil, err
	}
	if n >= MaxProjects {
		return nil, fault.Invalid("name", "an account has at most %d projects", MaxProjects)
	}
	if name == "" {
		name = "Project of " + firstNonEmpty(acct.Email, acct.Name, acct.Subject)
	}
	id := ident.New(ident.Project)
	_, err = s.log.Write(tenant.WithProject(ctx, id), id, func(tx *stream.Tx) error {
		return s.createProject(tx, id, accountID, name)
	})
	if err != nil {
		return nil, err
	}
	ps, _, err := s.projectSummary(ctx, id)
	return ps, err
}

// createProject inserts a project of an account in tx.
func (s *Service) createProject(tx *stream.Tx, id, accountID, name string) error {
	return tx.Client().Project.Create().SetID(id).SetName(clip(name, messaging.MaxNameLen)).
		SetCustomerID(ident.New(ident.Customer)).SetAgentID(ident.New(ident.Agent)).SetAccountID(accountID).
		Exec(tenant.System(tx.Context()))
}

// Package graph is comm's GraphQL front door: gqlgen resolvers over the
// same domain functions as REST (package messaging), so the two cannot
// disagree. Resolvers decode, call the domain, and encode; reads of ent
// types go through the domain's read client (messaging.Service.Ent) with
// the caller's project in the context, where the tenant interceptor and
// the domain's read rules (deleted connections are gone) apply, and the
// fields computed from a row are computed by the domain (typing by the
// service clock). generated.go and models_gen.go are generated
// (go generate ./ent).
package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/comm-gateway/comm/account"
	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/ent/connection"
	"github.com/comm-gateway/comm/ent/conversation"
	"github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ent/project"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/webhook"
)

// Resolver is the root resolver.
type Resolver struct {
	Service *messaging.Service
	// Ent reads: the service's read client (Service.Ent), whose
	// interceptors scope every query to the caller and apply the domain's
	// read rules.
	Ent *ent.Client
	// Mail serves custom email domains (nil: not available).
	Mail Domains
	// Accounts serves the caller's account.
	Accounts *account.Service
	// Webhooks serves the project's webhook.
	Webhooks *webhook.Hooks
}

// mail returns the email side of the gateway, or not_implemented.
func (r *Resolver) mail() (Domains, error) {
	if r.Mail == nil {
		return nil, fault.NotImplemented("email is not available on this gateway")
	}
	return r.Mail, nil
}

// principal returns the authenticated caller.
func principal(ctx context.Context) (*messaging.Principal, error) {
	return messaging.PrincipalFrom(ctx)
}

// nodeType maps an id's prefix to its table. A project id other than the
// caller's own is not found, like any other project's id.
func nodeType(ctx context.Context, id string) (string, error) {
	p, err := principal(ctx)
	if err != nil {
		return "", err
	}
	prefix, _, _ := strings.Cut(id, "_")
	table := map[string]string{
		ident.Project:      project.Table,
		ident.Connection:   connection.Table,
		ident.Conversation: conversation.Table,
		ident.Message:      message.Table,
	}[prefix]
	if table == "" || ident.Check(id, prefix) != nil || (prefix == ident.Project && id != p.ProjectID) {
		return "", fault.NotFound("node", id)
	}
	return table, nil
}

func notFoundAsDomain(err error, what, id string) error {
	if ent.IsNotFound(err) {
		return fault.NotFound(what, id)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	return nil
}

func (r *Resolver) connection(ctx context.Context, id string) (*ent.Connection, error) {
	c, err := r.Ent.Connection.Get(ctx, id)
	return c, notFoundAsDomain(err, "connection", id)
}

func (r *Resolver) message(ctx context.Context, id string) (*ent.Message, error) {
	m, err := r.Ent.Message.Get(ctx, id)
	return m, notFoundAsDomain(err, "message", id)
}

// outbound is the message a reply or send stored, as the mutation
// committed it (queued), like REST's answer: reading the row again would
// race the delivery worker, which may already be sending it. Outbound
// messages carry no attachments or details.
func outbound(p *messaging.Principal, m *messaging.Message) *ent.Message {
	next := m.CreatedAt // a queued message is due when stored
	out := &ent.Message{
		ID: m.ID, CreatedAt: m.CreatedAt, ProjectID: p.ProjectID, ConversationID: m.ConversationID,
		ConnectionID: m.ConnectionID, Channel: m.Channel, Direction: message.Direction(m.Direction),
		Status: message.Status(m.Status), Sender: m.Sender, Recipient: deref(m.Recipient), Subject: m.Subject,
		Text: m.Text, HTML: m.HTML, InReplyTo: m.InReplyTo, Error: m.Error, Attempts: m.Attempts,
		NextAttemptAt: &next, SentAt: m.SentAt,
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// errSubscriptionTransport: subscriptions are served by package live, which
// fans out each event's stored bytes instead of executing a resolver per
// subscriber; gqlgen's executor never runs them.
var errSubscriptionTransport = fault.Invalid("",
	"subscriptions are served over the websocket at /graphql (graphql-transport-ws or graphql-ws)")

// Domains is what the front doors need of custom email domains (the email
// channel's gateway side implements it); the front doors know it by this
// contract, not by the provider package.
type Domains interface {
	CreateDomain(ctx context.Context, name string) (*api.Domain, error)
	Domains(ctx context.Context, pg messaging.Page) ([]*api.Domain, error)
	DomainsPage(ctx context.Context, pg messaging.Page) ([]*api.Domain, bool, error)
	Domain(ctx context.Context, id string) (*api.Domain, error)
	VerifyDomain(ctx context.Context, id string) (*api.Domain, error)
	DeleteDomain(ctx context.Context, id string) error
}

// templateOf is a GraphQL template input as the core takes it (REST's
// {"content_sid" or "name" and "language", "variables"}); nil when none
// was given.
func templateOf(in *TemplateInput) *channels.Template {
	if in == nil {
		return nil
	}
	t := &channels.Template{}
	if in.ContentSid != nil {
		t.ContentSID = *in.ContentSid
	}
	if in.Name != nil {
		t.Name = *in.Name
	}
	if in.Language != nil {
		t.Language = *in.Language
	}
	if len(in.Variables) > 0 {
		t.Variables = make(map[string]string, len(in.Variables))
		for _, v := range in.Variables {
			t.Variables[v.Name] = v.Value
		}
	}
	return t
}

// lastMessage is a conversation's newest message, nil for none.
func (r *Resolver) lastMessage(ctx context.Context, c *ent.Conversation) (*ent.Message, error) {
	m, err := r.Ent.Message.Query().Where(message.ConversationID(c.ID)).Order(ent.Desc(message.FieldID)).First(ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return m, err
}

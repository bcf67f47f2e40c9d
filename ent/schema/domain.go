package schema

import (
	"encoding/json"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/comm-gateway/comm/ident"
)

// Domain is a custom email domain of a project: the DNS records its owner
// publishes, what verification last found, and the DKIM key comm signs its
// outbound mail with once it is verified.
type Domain struct{ ent.Schema }

// Annotations of the Domain: exposed through a hand-written GraphQL type
// (the DKIM key must not leak).
func (Domain) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Domain.
func (Domain) Mixin() []ent.Mixin {
	return []ent.Mixin{IDMixin{Prefix: ident.Domain}, TimeMixin{}, TenantMixin{}}
}

// Fields of the Domain.
func (Domain) Fields() []ent.Field {
	return []ent.Field{
		field.String("domain").Immutable().Comment("normalized: lowercase, punycode, no trailing dot"),
		field.String("inbound_domain").Optional().Immutable().Comment("where inbox addresses live (the domain, or a subdomain)"),
		field.Enum("status").Values("pending", "verified", "unverified").Default("pending").
			Comment("unverified: was verified, then its ownership record was missing longer than the grace period"),
		field.JSON("plan", json.RawMessage{}).Comment("domain.Records without the key: what to publish"),
		field.JSON("checks", json.RawMessage{}).Optional().Comment("domain.Status of the last verification"),
		field.String("last_error").Optional().Nillable().Comment("why the last verification could not run"),
		field.Bytes("dkim_key").Sensitive().Comment("sealed (AES-GCM) PKCS#8 PEM of the DKIM signing key"),
		field.Time("checked_at").Optional().Nillable(),
		field.Time("verified_at").Optional().Nillable(),
		field.Time("ownership_missing_since").Optional().Nillable().
			Comment("when a re-check of a verified domain first missed its ownership record; cleared when found"),
	}
}

// Indexes of the Domain.
func (Domain) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("project_id", "domain").Unique(),
		index.Fields("status", "checked_at"),
	}
}

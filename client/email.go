package client

import (
	"context"
	"mime"
	"net/http"
	"net/url"
)

// AddDomain adds a custom email domain to the project (POST /v1/domains)
// and returns it with the DNS records its owner publishes, all
// RecordPending. A domain the project already has fails with ErrConflict;
// a malformed one with ErrInvalid. Publish the records, then call
// VerifyDomain (the gateway also checks pending domains periodically).
func (c *Client) AddDomain(ctx context.Context, domain string) (*Domain, error) {
	var d Domain
	err := c.do(ctx, request{method: http.MethodPost, keyed: true, path: "/v1/domains", body: map[string]string{"domain": domain}, out: &d})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// Domains lists the project's custom domains, oldest first
// (GET /v1/domains). Page with after (the last id received); limit 0 is
// the gateway's default (50; at most 500).
func (c *Client) Domains(ctx context.Context, after string, limit int) ([]Domain, error) {
	out := []Domain{}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/domains", query: page(nil, after, limit), out: &out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Domain returns one custom domain with the state of each record
// (GET /v1/domains/{id}).
func (c *Client) Domain(ctx context.Context, id string) (*Domain, error) {
	var d Domain
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/domains/" + url.PathEscape(id), out: &d}); err != nil {
		return nil, err
	}
	return &d, nil
}

// VerifyDomain looks the domain's records up now
// (POST /v1/domains/{id}/verify) and returns the domain with each
// record's state; it is DomainVerified once every required record is
// found, and domain.verified is appended to the stream. A DNS failure is
// not an error of the call: it is the domain's LastError.
func (c *Client) VerifyDomain(ctx context.Context, id string) (*Domain, error) {
	var d Domain
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/domains/" + url.PathEscape(id) + "/verify", out: &d})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteDomain removes a custom domain: its mail is no longer signed, and
// inboxes on it stop receiving once its MX moves away
// (DELETE /v1/domains/{id}).
func (c *Client) DeleteDomain(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/domains/" + url.PathEscape(id)})
}

// Attachment downloads the bytes of an attachment of a message
// (GET /v1/messages/{id}/attachments/{attachment_id}); Message.Attachments
// lists them. The whole file is read into memory.
func (c *Client) Attachment(ctx context.Context, messageID, attachmentID string) (*AttachmentFile, error) {
	var raw rawAnswer
	err := c.do(ctx, request{method: http.MethodGet,
		path: "/v1/messages/" + url.PathEscape(messageID) + "/attachments/" + url.PathEscape(attachmentID), raw: &raw})
	if err != nil {
		return nil, err
	}
	f := &AttachmentFile{ContentType: raw.header.Get("Content-Type"), Data: raw.body}
	if _, params, err := mime.ParseMediaType(raw.header.Get("Content-Disposition")); err == nil {
		f.Filename = params["filename"]
	}
	if f.Filename == "" {
		f.Filename = attachmentID
	}
	return f, nil
}

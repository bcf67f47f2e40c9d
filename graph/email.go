package graph

import (
	"net/url"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/messaging"
)

// Attachment is an attachment of a message as GraphQL shows it: REST's
// fields, and the message it belongs to for its download path.
type Attachment struct {
	messaging.AttachmentInfo
	MessageID string
}

// URL is the REST download path of the attachment, relative to the base
// URL.
func (a *Attachment) URL() string {
	return "/v1/messages/" + url.PathEscape(a.MessageID) + "/attachments/" + url.PathEscape(a.ID)
}

// attachmentsOf decodes what the message row holds of its attachments.
// Like REST, a row whose list does not decode shows none.
func attachmentsOf(m *ent.Message) []*Attachment {
	infos := messaging.AttachmentsOf(m.Attachments)
	out := make([]*Attachment, 0, len(infos))
	for _, a := range infos {
		out = append(out, &Attachment{AttachmentInfo: a, MessageID: m.ID})
	}
	return out
}

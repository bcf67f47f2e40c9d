package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
)

// page reads the after/limit paging parameters of list endpoints. An
// explicit limit=0 is refused, not taken for the default (messaging.Limit).
func page(q *query) messaging.Page {
	n := int(q.int("limit", messaging.DefaultPageLimit))
	limit, err := messaging.Limit("limit", &n, messaging.MaxPageLimit)
	if err != nil && q.err == nil {
		q.err = err
	}
	return messaging.Page{After: q.str("after"), Limit: limit}
}

// setNextLink tells the client of a list page that more items follow and
// where: a Link header to the next page (the request's query with after
// set to the page's last id). A page may be cut short of its limit by the
// byte budget, so a short page alone does not mean the end.
func setNextLink(w http.ResponseWriter, r *http.Request, last string, limit int) {
	next := r.URL.Query()
	next.Set("after", last)
	next.Set("limit", strconv.Itoa(limit))
	w.Header().Set("Link", "<"+r.URL.Path+"?"+next.Encode()+`>; rel="next"`)
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) error {
	var in messaging.ConnectInput
	if err := decode(r, &in); err != nil {
		return err
	}
	c, err := s.svc.Connect(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.svc.Channels(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

func (s *Server) listConnections(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	cs, err := s.svc.Connections(r.Context(), pg)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request) error {
	c, err := s.svc.Connection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.DeleteConnection(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listBindings lists the people who joined a connection on its shared
// line, oldest first, paged like the other lists (after, limit, Link).
func (s *Server) listBindings(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	bs, next, err := s.svc.Bindings(r.Context(), r.PathValue("id"), pg)
	if err != nil {
		return err
	}
	if next != "" {
		setNextLink(w, r, next, pg.Limit)
	}
	writeJSON(w, http.StatusOK, bs)
	return nil
}

// unbind removes a person's binding to a connection.
func (s *Server) unbind(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.Unbind(r.Context(), r.PathValue("id"), r.PathValue("person")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// inject answers 201 with the stored message, or 200 with the message
// already stored when the id repeats an earlier delivery. A receipt is
// answered 200 with the outbound message it is about, as it stands after
// the report, or 202 with the report kept pending while the send of its
// message is not recorded yet.
func (s *Server) inject(w http.ResponseWriter, r *http.Request) error {
	var body json.RawMessage
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body) == 0 || body[0] != '{' {
		return fault.MalformedJSON("body must be a JSON object")
	}
	inj, err := s.svc.Inject(r.Context(), r.PathValue("id"), body)
	if err != nil {
		return err
	}
	switch {
	case inj.Receipt != nil && inj.Message == nil:
		writeJSON(w, http.StatusAccepted, api.PendingReceipt{Status: "pending",
			MessageID: inj.Receipt.MessageID, ExpiresAt: inj.Receipt.ExpiresAt.UTC()})
	case inj.Receipt != nil || inj.Duplicate:
		writeJSON(w, http.StatusOK, inj.Message)
	default:
		writeJSON(w, http.StatusCreated, inj.Message)
	}
	return nil
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	conn := q.str("connection_id")
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	cs, more, err := s.svc.ConversationsPage(r.Context(), conn, pg)
	if err != nil {
		return err
	}
	if more && len(cs) > 0 {
		setNextLink(w, r, cs[len(cs)-1].ID, pg.Limit)
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	c, err := s.svc.Conversation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) conversationMessages(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	pg := page(q)
	if err := q.done(); err != nil {
		return err
	}
	ms, more, err := s.svc.ConversationMessagesPage(r.Context(), r.PathValue("id"), pg)
	if err != nil {
		return err
	}
	if more && len(ms) > 0 {
		setNextLink(w, r, ms[len(ms)-1].ID, pg.Limit)
	}
	writeJSON(w, http.StatusOK, ms)
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) error {
	m, err := s.svc.Message(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// replyBody is the body of a reply: a SendInput without the fields that
// come from the message answered.
type replyBody struct {
	Text     string             `json:"text"`
	HTML     *string            `json:"html"`
	Subject  *string            `json:"subject"`
	Template *channels.Template `json:"template"`
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request) error {
	var in replyBody
	if err := decode(r, &in); err != nil {
		return err
	}
	m, err := s.svc.Reply(r.Context(), r.PathValue("id"), messaging.SendInput{Text: in.Text, HTML: in.HTML, Subject: in.Subject, Template: in.Template})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, m)
	return nil
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) error {
	var in messaging.SendInput
	if err := decode(r, &in); err != nil {
		return err
	}
	m, err := s.svc.Send(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, m)
	return nil
}

// typing takes no body (an empty JSON object is accepted too).
func (s *Server) typing(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength != 0 && r.Header.Get("Content-Type") != "" {
		var in struct{}
		if err := decode(r, &in); err != nil {
			return err
		}
	}
	st, err := s.svc.Typing(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

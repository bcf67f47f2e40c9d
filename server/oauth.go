package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/messaging"
)

// oauthCallback is where a provider sends the person back after they
// approved (or refused) installing the operator's app for a pending
// connection: /oauth/{channel}/callback?state=...&code=... (or &error=...).
// The state, bound to the connection when it was made, is the only
// credential; the answer is a page for the person, who then goes back to
// their agent.
func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	channel := r.PathValue("channel")
	c, err := s.svc.Callback(r.Context(), channel, q.Get("state"), q.Get("code"), q.Get("error"))
	switch {
	case errors.Is(err, messaging.ErrInstallDenied):
		s.renderMessage(w, r, http.StatusBadRequest, "Not connected", errorText(fault.Invalid("error", "%v", err)), "")
		return nil
	case err != nil:
		p := fault.Present(r.Context(), err)
		if p.Internal {
			s.renderFailure(w, r, err)
			return nil
		}
		s.renderMessage(w, r, p.Status, "Not connected", errorText(err), "")
		return nil
	}
	msg := fmt.Sprintf("Connected %s to comm: connection %s is %s.", channel, c.ID, c.Status)
	if c.Address != nil {
		msg = fmt.Sprintf("Connected %s (%s) to comm: connection %s is %s.", channel, *c.Address, c.ID, c.Status)
	}
	s.renderMessage(w, r, http.StatusOK, "Connected", msg+" You can close this window.", "")
	return nil
}

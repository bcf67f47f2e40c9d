package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/comm-gateway/comm/account"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/slack"

	"github.com/comm-gateway/comm/channels"

	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/x"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/delivery"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	gw "github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// gateway is one running comm server over a real database, wired the way
// cmd/comm/serve.go wires it (package gatewaytest): URL, Log, DB, Svc,
// Mail (the email side) and Front (its websockets: Front.Live()).
type gateway struct{ *gatewaytest.Gateway }

// start opens cfg and serves the REST API on a local port until the test
// ends (or until Stop is called), with the outbox worker delivering.
func start(t *testing.T, cfg store.Config, opts server.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts, outbox: true})
}

// startNoOutbox is start without the outbox worker: outbound messages stay
// queued until a gateway with the worker runs on the same database.
func startNoOutbox(t *testing.T, cfg store.Config, opts server.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts})
}

// startWith is start with the messaging options given (a clock, say);
// Channels and Logger are filled in.
func startWith(t *testing.T, cfg store.Config, opts server.Options, svcOpts messaging.Options) *gateway {
	t.Helper()
	return startGateway(t, cfg, setup{server: opts, svc: svcOpts, outbox: true})
}

// setup says how startGateway wires a gateway.
type setup struct {
	server server.Options
	// svc are the messaging options; Channels and Logger are filled in.
	svc messaging.Options
	// mail are the options of the email side (custom domains, budgets).
	mail   mailhost.Options
	outbox bool
	// email puts the email channel's inboxes on the mail domain
	// "mail.test" (the default domain otherwise).
	email bool
	// relay is the email channel's SMTP relay, if any.
	relay email.Submitter
	// telegram configures the Telegram channel (its Bot API URL).
	telegram telegram.Options
	// slack configures the Slack channel (its Web API URL, the operator's
	// app).
	slack slack.Options
	// discord configures the Discord channel (its API URL, the operator's
	// app).
	discord discord.Options
	// meta configures the facebook and instagram channels (the Graph
	// API URL, the operator's Meta app).
	meta meta.Options
	// twilio configures SMS and WhatsApp through Twilio (its API URLs).
	twilio twilio.Options
	// x configures the X channel (its API URL, the operator's X app).
	x x.Options
	// whatsAppHosted configures hosted WhatsApp (the operator's numbers,
	// the Graph API URL, the Meta app).
	whatsAppHosted wacloud.Options
	// imessage configures the iMessage channel (the operator's relays).
	imessage imessage.Options
	// sessions runs the session worker (long-lived provider sessions).
	sessions bool
	// channels are more channel descriptors (a test's own adapter).
	channels []channels.Descriptor
	// credit are the prices and the low-balance threshold.
	credit account.Options
	// rateLimitSync is gateway.Config.RateLimitSync (negative: the rate
	// limits are not shared on PostgreSQL).
	rateLimitSync time.Duration
}

// startGateway serves the gateway (gatewaytest.Start); BaseURL, when the
// test leaves it empty, is its real address.
func startGateway(t *testing.T, cfg store.Config, su setup) *gateway {
	t.Helper()
	mailOpts := email.Options{Relay: su.relay}
	if su.email {
		mailOpts.MailDomain = "mail.test"
	}
	workers := &gw.Workers{}
	if su.outbox {
		workers.Outbox = &delivery.Outbox{}
	}
	if su.sessions {
		workers.Sessions = &delivery.Sessions{ClaimInterval: 100 * time.Millisecond}
	}
	return &gateway{gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config:  gw.Config{Service: su.svc, Email: mailOpts, Mail: su.mail, Server: su.server, Telegram: su.telegram, Slack: su.slack, Discord: su.discord, Meta: su.meta, Twilio: su.twilio, WhatsAppHosted: su.whatsAppHosted, X: su.x, IMessage: su.imessage, Channels: su.channels, Credit: su.credit, RateLimitSync: su.rateLimitSync},
		Workers: workers,
	})}
}

type (
	// request describes one call; zero fields are left out.
	request = gatewaytest.Request
	// response is an HTTP answer read in full.
	response = gatewaytest.Response
)

var client = gatewaytest.Client

// do sends req to the gateway and reads the whole answer, which must
// agree with the OpenAPI document (checkOpenAPI).
func (g *gateway) do(t *testing.T, req request) response {
	t.Helper()
	resp := g.Do(t, req)
	checkOpenAPI(t, req, resp)
	return resp
}

// sandbox is the body of a 201 from POST /v1/projects/sandbox.
type sandbox = api.Sandbox

// newSandbox creates a project through the API.
func (g *gateway) newSandbox(t *testing.T, name string) sandbox {
	t.Helper()
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		t.Fatal(err)
	}
	resp := g.do(t, request{Method: http.MethodPost, Path: "/v1/projects/sandbox",
		ContentType: "application/json", Body: string(body)})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create sandbox: status %d, body %s", resp.Status, resp.Body)
	}
	var sb sandbox
	decodeJSON(t, resp.Body, &sb)
	return sb
}

// event is one element of GET /v1/events.
type event = api.Event

// events calls GET /v1/events with query (without the "?") and fails the
// test unless it answers 200.
func (g *gateway) events(t *testing.T, key, query string) []event {
	t.Helper()
	path := "/v1/events"
	if query != "" {
		path += "?" + query
	}
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", path, resp.Status, resp.Body)
	}
	var evs []event
	decodeJSON(t, resp.Body, &evs)
	if evs == nil {
		t.Fatalf("GET %s: body %q is not a JSON array", path, resp.Body)
	}
	return evs
}

// project is the body of GET /v1/project.
type project = api.Project

func (g *gateway) project(t *testing.T, key string) project {
	t.Helper()
	resp := g.do(t, request{Path: "/v1/project", Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/project: status %d, body %s", resp.Status, resp.Body)
	}
	var p project
	decodeJSON(t, resp.Body, &p)
	return p
}

// apiError is the one JSON error shape.
type apiError = api.ErrorBody

// wantError checks status, the JSON error shape, its code and (if not
// empty) its param, and returns the decoded error.
func wantError(t *testing.T, resp response, status int, code, param string) apiError {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d; body %s", resp.Status, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e apiError
	decodeJSON(t, resp.Body, &e)
	if e.Error.Code != code {
		t.Errorf("error code %q, want %q; body %s", e.Error.Code, code, resp.Body)
	}
	if e.Error.Message == "" {
		t.Errorf("error without a message: %s", resp.Body)
	}
	if param != "" && e.Error.Param != param {
		t.Errorf("error param %q, want %q; body %s", e.Error.Param, param, resp.Body)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
		t.Errorf("error request_id %q, X-Request-Id header %q", e.Error.RequestID, resp.Header.Get("X-Request-Id"))
	}
	return e
}

// decodeJSON reads an answer strictly (unknown fields fail) and checks
// that the wire type it is read into re-encodes to the same bytes.
func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	gatewaytest.DecodeStrict(t, b, v)
	wireRoundTrip(t, b, v)
}

// appendN appends n message.received events to project and returns their
// payloads by seq.
func appendN(t *testing.T, log *stream.Log, projectID string, n int) map[int64]json.RawMessage {
	t.Helper()
	out := make(map[int64]json.RawMessage, n)
	for i := range n {
		data := json.RawMessage(`{"n":` + strconv.Itoa(i) + `,"project":"` + projectID + `"}`)
		seq, err := log.Append(context.Background(), projectID, stream.MessageReceived, data)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		out[seq] = data
	}
	return out
}

// count runs a COUNT(*) query through the read pool.
func count(t *testing.T, db *store.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.R.QueryRow(db.Rebind(query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// revokeKeys revokes every key of a project through the log's write path,
// as an operator tool would.
func revokeKeys(t *testing.T, log *stream.Log, projectID string) {
	t.Helper()
	ctx := tenant.System(context.Background())
	_, err := log.Write(ctx, projectID, func(tx *stream.Tx) error {
		n, err := tx.Client().APIKey.Update().
			Where(entapikey.ProjectID(projectID), entapikey.RevokedAtIsNil()).
			SetRevokedAt(time.Now().UTC()).Save(tx.Context())
		if err == nil && n == 0 {
			err = errors.New("no live key")
		}
		return err
	})
	if err != nil {
		t.Fatalf("revoke keys of %s: %v", projectID, err)
	}
}

// waitFor polls cond until it holds, for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

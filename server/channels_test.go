package server_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// gqlChannelsQuery selects every field of Query.channels.
const gqlChannelsQuery = `{ channels { channel provider tier available reason oauth summary
	fields { name label help secret required kind example } } }`

// TestChannels lists the gateway's channels over REST and GraphQL for a
// sandbox key and a signed-in key: every channel of the registry, each
// with its summary and connect form; the paid ones unavailable to the
// sandbox key with the 402 that connecting answers, in the same words;
// a channel the operator has not set up unavailable to both, naming the
// operator's settings, as connecting's 501 does; OAuth where the
// operator's app is configured; GraphQL the same as REST.
func TestChannels(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		g := startGateway(t, cfg, setup{
			// The operator's Slack app: installs (OAuth). No Discord app,
			// no X app, no iMessage relays; one hosted WhatsApp number.
			slack: slack.Options{ClientID: "1.2", ClientSecret: "client-secret", SigningSecret: "abcdef0123456789"},
			whatsAppHosted: wacloud.Options{GraphURL: "http://127.0.0.1:1", AppSecret: "app-secret", VerifyToken: "verify",
				Numbers: []wacloud.Number{{PhoneNumberID: "106540352242922", DisplayNumber: "+15550001111", AccessToken: "EAAGm0PX4ZCpsBAKZCZCZBmZCZAqZC8ZBZAz"}}},
		})
		sandboxKey := g.newSandbox(t, "channels").APIKey
		signedKey, _, _ := signedInAccount(t, g, "channels")

		list := func(key string) map[string]api.ChannelInfo {
			t.Helper()
			var rest []api.ChannelInfo
			g.get(t, key, "/v1/channels", &rest)
			// GraphQL's names are REST's (one word each).
			var gql struct{ Channels []api.ChannelInfo }
			g.gqlOK(t, key, gqlChannelsQuery, nil, &gql)
			if !reflect.DeepEqual(gql.Channels, rest) {
				t.Errorf("GraphQL channels differ from REST:\n%+v\n%+v", gql.Channels, rest)
			}
			out := map[string]api.ChannelInfo{}
			for _, c := range rest {
				name := c.Channel
				if c.Provider != nil {
					name += "/" + *c.Provider
				}
				if _, dup := out[name]; dup {
					t.Errorf("%s listed twice", name)
				}
				if c.Summary == "" || (c.Tier != "free" && c.Tier != "paid") || c.Fields == nil {
					t.Errorf("%s: %+v, want a summary, a tier and a (maybe empty) form", name, c)
				}
				if c.Available != (c.Reason == nil) {
					t.Errorf("%s: available %v with reason %v", name, c.Available, c.Reason)
				}
				out[name] = c
			}
			return out
		}
		reason := func(c api.ChannelInfo) string {
			if c.Reason == nil {
				return ""
			}
			return *c.Reason
		}
		// connectRefused checks that connecting answers what the listing
		// said, in its words.
		connectRefused := func(key, body string, status int, code, reason string) {
			t.Helper()
			e := wantError(t, g.post(t, key, "/v1/connections", body), status, code, "")
			if e.Error.Message != reason {
				t.Errorf("connect %s: %q, the listing said %q", body, e.Error.Message, reason)
			}
		}

		sandbox := list(sandboxKey)
		all := []string{"email", "telegram", "discord", "slack", "instagram", "facebook", "sms/twilio", "sms/telnyx",
			"whatsapp/twilio", "whatsapp/hosted", "x", "imessage", "test"}
		if len(sandbox) != len(all) {
			t.Errorf("%d channels, want %d: %v", len(sandbox), len(all), sandbox)
		}
		for _, name := range all {
			c, ok := sandbox[name]
			switch {
			case !ok:
				t.Errorf("%s is not listed", name)
			case c.Tier == "free" && !c.Available:
				t.Errorf("%s is free but not available to a sandbox key: %s", name, reason(c))
			case c.Tier == "paid" && (c.Available || !strings.Contains(reason(c), "signed-in key") || !strings.Contains(reason(c), "comm login")):
				t.Errorf("%s is paid: available %v to a sandbox key, reason %q", name, c.Available, reason(c))
			}
		}
		connectRefused(sandboxKey, `{"channel":"whatsapp","provider":"hosted"}`, http.StatusPaymentRequired, "payment_required", reason(sandbox["whatsapp/hosted"]))

		// The forms: Telegram's token is a required secret; Slack installs
		// the operator's app, Discord (no operator app) does not; the test
		// channel takes no config.
		tg := sandbox["telegram"]
		if len(tg.Fields) == 0 || tg.Fields[0].Name != "bot_token" || !tg.Fields[0].Secret || !tg.Fields[0].Required ||
			tg.Fields[0].Kind != "string" || tg.Fields[0].Label == "" || tg.Fields[0].Help == "" || tg.Fields[0].Example == "" {
			t.Errorf("telegram's form: %+v", tg.Fields)
		}
		if !sandbox["slack"].OAuth || sandbox["discord"].OAuth || sandbox["telegram"].OAuth {
			t.Errorf("oauth: slack %v, discord %v, telegram %v; want true, false, false",
				sandbox["slack"].OAuth, sandbox["discord"].OAuth, sandbox["telegram"].OAuth)
		}
		if f := sandbox["test"].Fields; len(f) != 0 {
			t.Errorf("the test channel's form: %+v, want none", f)
		}
		var raw []map[string]json.RawMessage
		g.get(t, sandboxKey, "/v1/channels", &raw)
		for _, c := range raw {
			if string(c["channel"]) == `"test"` && (string(c["provider"]) != "null" || string(c["fields"]) != "[]" || string(c["reason"]) != "null") {
				t.Errorf("the test channel's provider, fields and reason: %s, %s, %s; want null, [], null", c["provider"], c["fields"], c["reason"])
			}
		}

		// Signed in: hosted WhatsApp is available; X and iMessage are not
		// set up on this gateway, and say what the operator sets.
		signed := list(signedKey)
		if c := signed["whatsapp/hosted"]; !c.Available {
			t.Errorf("whatsapp/hosted is not available to a signed-in key: %s", reason(c))
		}
		for name, setting := range map[string]string{"x": "COMM_X_CLIENT_ID", "imessage": "COMM_IMESSAGE_RELAYS"} {
			if c := signed[name]; c.Available || !strings.Contains(reason(c), "not configured on this gateway") || !strings.Contains(reason(c), setting) {
				t.Errorf("%s on a gateway without it: available %v, reason %q", name, c.Available, reason(c))
			}
		}
		connectRefused(signedKey, `{"channel":"x"}`, http.StatusNotImplemented, "not_implemented", reason(signed["x"]))
		connectRefused(signedKey, `{"channel":"imessage"}`, http.StatusNotImplemented, "not_implemented", reason(signed["imessage"]))
		for name, c := range signed {
			if c.Tier == "free" && !reflect.DeepEqual(c, sandbox[name]) {
				t.Errorf("%s differs between a sandbox and a signed-in key:\n%+v\n%+v", name, sandbox[name], c)
			}
		}

		// No key, no listing.
		if r := g.do(t, request{Path: "/v1/channels"}); r.Status != http.StatusUnauthorized {
			t.Errorf("GET /v1/channels without a key: %d %s", r.Status, r.Body)
		}
	})
}

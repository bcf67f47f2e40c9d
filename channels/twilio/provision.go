package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/comm-gateway/comm/channels"
)

// account is the part of an Account resource Provision reads.
type account struct {
	SID    string `json:"sid"`
	Status string `json:"status"`
}

// incomingNumber is the part of an IncomingPhoneNumber Provision reads.
type incomingNumber struct {
	SID         string `json:"sid"`
	PhoneNumber string `json:"phone_number"`
	SMSURL      string `json:"sms_url"`
}

// service is the part of a Messaging Service Provision reads.
type service struct {
	SID               string `json:"sid"`
	AccountSID        string `json:"account_sid"`
	InboundRequestURL string `json:"inbound_request_url"`
	StatusCallback    string `json:"status_callback"`
}

// credentialField is the configuration field a rejected credential is
// reported on.
func (a *Adapter) credentialField() string {
	if a.cfg.APIKeySID != "" {
		return "api_key_secret"
	}
	return "auth_token"
}

// Provision checks the credentials (the account), that the sender is the
// account's, and points its webhooks at the connection's ingress unless
// the configuration says not to.
func (a *Adapter) Provision(ctx context.Context) (channels.Provisioned, error) {
	var acct account
	err := a.call(ctx, "check credentials", http.MethodGet, a.accountURL(".json"), nil, &acct)
	var ae *apiError
	switch {
	case errors.Is(err, channels.ErrRevoked):
		return channels.Provisioned{}, &channels.ConfigError{Field: a.credentialField(),
			Msg: "Twilio rejected the credentials for account " + a.cfg.AccountSID + "; copy the current Auth Token (or API key) from the console"}
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return channels.Provisioned{}, &channels.ConfigError{Field: "account_sid", Msg: "Twilio knows no account " + a.cfg.AccountSID + " for these credentials"}
	case err != nil:
		return channels.Provisioned{}, err
	}
	if acct.Status != "" && acct.Status != "active" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "account_sid", Msg: "the Twilio account is " + clean(acct.Status) + ", not active"}
	}
	configure := a.cfg.configureWebhooks()
	if configure && a.conn.WebhookURL == "" {
		return channels.Provisioned{}, &channels.ConfigError{Field: "configure_webhooks",
			Msg: "twilio: the gateway has no public URL (--base-url) to point the webhooks at; configure one, or set configure_webhooks to false and point them yourself"}
	}
	cfg := a.cfg
	if cfg.service() {
		if err := a.provisionService(ctx, configure); err != nil {
			return channels.Provisioned{}, err
		}
	} else {
		sid, err := a.provisionNumber(ctx, configure)
		if err != nil {
			return channels.Provisioned{}, err
		}
		cfg.NumberSID = sid
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return channels.Provisioned{}, err
	}
	return channels.Provisioned{Config: raw, Address: cfg.From}, nil
}

// findNumber looks the sender up among the account's numbers; nil when it
// is not one of them.
func (a *Adapter) findNumber(ctx context.Context) (*incomingNumber, error) {
	var list struct {
		Numbers []incomingNumber `json:"incoming_phone_numbers"`
	}
	q := url.Values{"PhoneNumber": {a.cfg.From}}
	if err := a.call(ctx, "find number", http.MethodGet, a.accountURL("/IncomingPhoneNumbers.json?"+q.Encode()), nil, &list); err != nil {
		return nil, err
	}
	for _, n := range list.Numbers {
		if n.PhoneNumber == a.cfg.From && numberSID.MatchString(n.SID) {
			return &n, nil
		}
	}
	return nil, nil
}

// provisionNumber checks that the sender is a number of the account and
// sets its SMS webhook (WhatsApp messages to a Twilio number arrive at the
// same URL). It returns the number's sid ("" for a WhatsApp sender that is
// not one of the account's numbers, such as the sandbox, with
// configure_webhooks false).
func (a *Adapter) provisionNumber(ctx context.Context, configure bool) (string, error) {
	n, err := a.findNumber(ctx)
	if err != nil {
		return "", err
	}
	if n == nil {
		if a.channel == WhatsApp && !configure {
			return "", nil
		}
		msg := "twilio: " + a.cfg.From + " is not a number of account " + a.cfg.AccountSID
		if a.channel == WhatsApp {
			msg += "; for a WhatsApp sender that is not one of your Twilio numbers (the sandbox), set configure_webhooks to false and paste the connection's webhook_url into the sender's settings"
		}
		return "", &channels.ConfigError{Field: "from", Msg: msg}
	}
	if !configure {
		return n.SID, nil
	}
	form := url.Values{"SmsUrl": {a.conn.WebhookURL}, "SmsMethod": {http.MethodPost}}
	if err := a.call(ctx, "configure number", http.MethodPost, a.accountURL("/IncomingPhoneNumbers/"+n.SID+".json"), form, nil); err != nil {
		return "", err
	}
	return n.SID, nil
}

// serviceURL is the Messaging Service's URL.
func (a *Adapter) serviceURL() string {
	return a.opts.MessagingURL + "/v1/Services/" + a.cfg.From
}

// provisionService checks that the Messaging Service is the account's and
// points its inbound and status callback URLs at the connection.
func (a *Adapter) provisionService(ctx context.Context, configure bool) error {
	var svc service
	err := a.call(ctx, "find messaging service", http.MethodGet, a.serviceURL(), nil, &svc)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return &channels.ConfigError{Field: "from", Msg: "twilio: " + a.cfg.From + " is not a Messaging Service of account " + a.cfg.AccountSID}
	}
	if err != nil {
		return err
	}
	if svc.AccountSID != "" && svc.AccountSID != a.cfg.AccountSID {
		return &channels.ConfigError{Field: "from", Msg: "twilio: the Messaging Service " + a.cfg.From + " belongs to another account"}
	}
	if !configure {
		return nil
	}
	form := url.Values{
		"InboundRequestUrl":         {a.conn.WebhookURL},
		"InboundMethod":             {http.MethodPost},
		"StatusCallback":            {a.conn.WebhookURL},
		"UseInboundWebhookOnNumber": {"false"},
	}
	return a.call(ctx, "configure messaging service", http.MethodPost, a.serviceURL(), form, nil)
}

// Deprovision clears the webhooks Provision set, where they still point
// at this connection.
func (a *Adapter) Deprovision(ctx context.Context) error {
	if !a.cfg.configureWebhooks() || a.conn.WebhookURL == "" {
		return nil
	}
	err := a.deprovision(ctx)
	var ae *apiError
	if errors.Is(err, channels.ErrRevoked) || (errors.As(err, &ae) && ae.Status == http.StatusNotFound) {
		// The credentials or the sender are gone: Twilio delivers
		// nothing here any more.
		a.opts.Logger.Info("twilio: deprovision: nothing left to undo", "connection", a.conn.ID, "err", err)
		return nil
	}
	return err
}

func (a *Adapter) deprovision(ctx context.Context) error {
	if a.cfg.service() {
		var svc service
		if err := a.call(ctx, "read messaging service", http.MethodGet, a.serviceURL(), nil, &svc); err != nil {
			return err
		}
		form := url.Values{}
		if svc.InboundRequestURL == a.conn.WebhookURL {
			form.Set("InboundRequestUrl", "")
		}
		if svc.StatusCallback == a.conn.WebhookURL {
			form.Set("StatusCallback", "")
		}
		if len(form) == 0 {
			return nil
		}
		return a.call(ctx, "clear messaging service webhooks", http.MethodPost, a.serviceURL(), form, nil)
	}
	sid := a.cfg.NumberSID
	if sid == "" {
		return nil
	}
	var n incomingNumber
	u := a.accountURL("/IncomingPhoneNumbers/" + sid + ".json")
	if err := a.call(ctx, "read number", http.MethodGet, u, nil, &n); err != nil {
		return err
	}
	if n.SMSURL == "" {
		return nil // cleared already
	}
	if !strings.EqualFold(n.SMSURL, a.conn.WebhookURL) {
		a.opts.Logger.Info("twilio: deprovision: the number's webhook points elsewhere now; left as it is", "connection", a.conn.ID)
		return nil
	}
	return a.call(ctx, "clear number webhook", http.MethodPost, u, url.Values{"SmsUrl": {""}}, nil)
}

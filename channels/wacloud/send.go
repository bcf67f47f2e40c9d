package wacloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/meta"
)

// errClosed is why calls of a closed adapter end.
var errClosed = errors.New("the whatsapp (hosted) adapter was closed")

// never is the closed context of calls made outside a connection
// (SharedApp.Answer).
var never = context.Background()

// name is how errors name the channel.
const name = "whatsapp (hosted)"

// Meta's error codes (WhatsApp Cloud API error codes; Graph API error
// handling).
const (
	codeThroughput   = 130429 // the number's messages per second
	codePairRate     = 131056 // too many messages to one person
	codeMaintenance  = 131057 // the account is in maintenance mode
	codeReengagement = 131047 // more than 24 hours since the person's last message
	codeToken        = 190
)

// transientCodes are refusals worth retrying: the three rate limits and
// maintenance, the Graph API's own rate limits (4, 80007) and "something
// went wrong" (1, 2, 131000, 131016).
var transientCodes = map[int]bool{codeThroughput: true, codePairRate: true, codeMaintenance: true,
	4: true, 80007: true, 1: true, 2: true, 131000: true, 131016: true}

// defaultDelay is how long to wait after a rate limit Meta gave no delay
// for: about the pair rate (one message to a person every 6 s), and a
// little longer for the number's throughput and maintenance.
func defaultDelay(code int) time.Duration {
	switch code {
	case codePairRate:
		return 6 * time.Second
	case codeThroughput, 4, 80007:
		return 30 * time.Second
	case codeMaintenance:
		return time.Minute
	}
	return 0
}

// operatorCode reports codes about the operator's token or its
// permissions: 190 (invalid or expired token), 0 (AuthException), 3
// (capability), 10 and 200-299 (permissions).
func operatorCode(code int) bool {
	return code == codeToken || code == 0 || code == 3 || code == 10 || code >= 200 && code <= 299
}

// call makes a Graph API request from the line's number: method to path
// (under the Graph URL) with the number's token and a JSON body (when not
// nil), decoding the answer into out (when not nil). Failures are
// *channels.Error values.
func (l *line) call(ctx, closed context.Context, op, method, path string, body, out any) error {
	ctx, cancel := channels.Bound(ctx, closed, errClosed, l.opts.CallTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return channels.Permanent("%s: %s: %v", name, op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.opts.GraphURL+path, rd)
	if err != nil {
		return channels.Permanent("%s: %s: bad request", name, op)
	}
	req.Header.Set("Authorization", "Bearer "+l.num.AccessToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ans, err := meta.Exchange(l.opts.HTTPClient, req, name, op, maxResponse)
	switch {
	case err != nil:
		return err
	case ans.TooLarge:
		return channels.Transient(0, "%s: %s: the Graph API answer exceeds %d bytes", name, op, maxResponse)
	case ans.Error != nil:
		return l.classify(op, ans)
	case ans.Status == http.StatusTooManyRequests || ans.Status >= 500:
		return channels.Transient(meta.UsageDelay(ans.Header), "%s: %s: Meta failed (HTTP %d %s)", name, op, ans.Status, http.StatusText(ans.Status))
	case ans.Status == http.StatusUnauthorized || ans.Status == http.StatusForbidden:
		return channels.Permanent("%s: %s: Meta refused the operator's access token for %s (HTTP %d); the operator must renew it in COMM_WHATSAPP_HOSTED_NUMBERS",
			name, op, l.num.DisplayNumber, ans.Status)
	case ans.Status != http.StatusOK:
		return channels.Permanent("%s: %s: HTTP %d %s", name, op, ans.Status, http.StatusText(ans.Status))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(ans.Body, out); err != nil {
		return channels.Transient(0, "%s: %s: malformed Graph API answer: %v", name, op, err)
	}
	return nil
}

// classify makes a Graph API error answer an error of its class.
func (l *line) classify(op string, ans meta.Answer) error {
	e := ans.Error
	what := meta.Sanitize(e.Message)
	if d := meta.Sanitize(e.Data.Details); d != "" && d != what {
		what += ": " + d
	}
	code := "code " + strconv.Itoa(e.Code)
	if e.Subcode != 0 {
		code += "/" + strconv.Itoa(e.Subcode)
	}
	switch {
	case transientCodes[e.Code] || ans.Status == http.StatusTooManyRequests || ans.Status >= 500:
		delay := meta.UsageDelay(ans.Header)
		if delay == 0 {
			delay = defaultDelay(e.Code)
		}
		return channels.Transient(delay, "%s: %s: Meta asks to wait (%s: %s)", name, op, code, what)
	case e.Code == codeReengagement:
		return channels.Permanent("%s: %s: outside the 24-hour window: WhatsApp only takes free text within 24 hours of the person's last message; send a template instead (\"template\": {\"name\",\"language\",\"variables\"}) (%s: %s)",
			name, op, code, what)
	case operatorCode(e.Code):
		return channels.Permanent("%s: %s: Meta refused the operator's access token for %s (%s: %s); the operator must renew it in COMM_WHATSAPP_HOSTED_NUMBERS, this is no credential of the connection's",
			name, op, l.num.DisplayNumber, code, what)
	}
	return channels.Permanent("%s: %s: Meta refused the message (%s: %s)", name, op, code, what)
}

var (
	// bsuidRE is a business-scoped user id: a country code, a dot and an
	// alphanumeric id ("US.13491208655302741918"; a parent BSUID has
	// "ENT." in between).
	bsuidRE = regexp.MustCompile(`^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,64}$`)
	// waIDRE is a wa_id: a phone number's digits with its country code.
	waIDRE = regexp.MustCompile(`^[1-9][0-9]{6,14}$`)
)

// Address is to as conversations key it: a business-scoped user id as it
// is, a phone number as the digits of its E.164 form (as Meta's wa_id,
// "15551234567"; "+", spaces, dashes, parentheses and a "whatsapp:" prefix
// taken off).
func (a *Adapter) Address(to string) (string, error) { return address(to) }

func address(to string) (string, error) {
	s := strings.TrimSpace(to)
	if bsuidRE.MatchString(s) {
		return s, nil
	}
	d := strings.TrimPrefix(phoneSep.Replace(strings.TrimPrefix(s, "whatsapp:")), "+")
	if !waIDRE.MatchString(d) {
		return "", fmt.Errorf("%q is neither a phone number in E.164 form (+15551234567) nor a WhatsApp business-scoped user id (US.13491208655302741918)", to)
	}
	return d, nil
}

// addressee puts the recipient of a message in a Cloud API request: a
// phone number in "to", a business-scoped user id in "recipient" (Meta
// takes "to" first when both are given, so only one is set).
func addressee(body map[string]any, op, thread, to string) error {
	r := thread
	if r == "" {
		r = to
	}
	a, err := address(r)
	if err != nil {
		return channels.Permanent("%s: %s: %v", name, op, err)
	}
	if bsuidRE.MatchString(a) {
		body["recipient"] = a
	} else {
		body["to"] = a
	}
	return nil
}

// sent is the Cloud API's answer to a message.
type sent struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
}

// post sends one message body from the line and returns its wamid.
func (l *line) post(ctx, closed context.Context, op string, body map[string]any) (string, error) {
	body["messaging_product"] = "whatsapp"
	body["recipient_type"] = "individual"
	var r sent
	if err := l.call(ctx, closed, op, http.MethodPost, "/"+l.num.PhoneNumberID+"/messages", body, &r); err != nil {
		return "", err
	}
	if len(r.Messages) == 0 || r.Messages[0].ID == "" || len(r.Messages[0].ID) > 512 {
		return "", channels.Transient(0, "%s: %s: the answer has no message id", name, op)
	}
	return r.Messages[0].ID, nil
}

// text sends text to the person of thread (else to), quoting the message
// inReplyTo when not empty; a text over MaxText goes out as several
// messages, the first quoting. It returns the first's wamid.
func (l *line) text(ctx, closed context.Context, thread, to, text, inReplyTo string) (string, error) {
	if strings.TrimSpace(text) == "" {
		return "", channels.Permanent("%s: send message: the message has no text", name)
	}
	var first string
	for i, part := range channels.Split(text, MaxText, channels.UTF16Units) {
		if i > 0 && strings.TrimSpace(part) == "" {
			continue
		}
		body := map[string]any{"type": "text", "text": map[string]any{"body": part, "preview_url": false}}
		if err := addressee(body, "send message", thread, to); err != nil {
			return "", err
		}
		if i == 0 && inReplyTo != "" {
			body["context"] = map[string]string{"message_id": inReplyTo}
		}
		id, err := l.post(ctx, closed, "send message", body)
		if err != nil {
			return "", err
		}
		if i == 0 {
			first = id
		}
	}
	return first, nil
}

// Send delivers msg: its text (quoting msg.InReplyTo), or its template.
// When a later part of a long text fails, the error is returned and a
// retry sends every part again (the Cloud API takes no idempotency key).
func (a *Adapter) Send(ctx context.Context, msg channels.Outbound) (channels.SendResult, error) {
	if msg.Template != nil {
		id, err := a.template(ctx, msg)
		return channels.SendResult{ProviderID: id}, err
	}
	id, err := a.line.text(ctx, a.closed, msg.ThreadKey, msg.To, msg.Text, msg.InReplyTo)
	if err != nil {
		return channels.SendResult{}, err
	}
	return channels.SendResult{ProviderID: id}, nil
}

// template sends msg.Template as a Cloud API template message, its
// variables as the body's text parameters in order ("1", "2" ...).
func (a *Adapter) template(ctx context.Context, msg channels.Outbound) (string, error) {
	t := *msg.Template
	if err := a.CheckTemplate(t); err != nil {
		return "", channels.Permanent("%s: send template: %v", name, err)
	}
	tpl := map[string]any{"name": t.Name, "language": map[string]string{"code": t.Language}}
	if len(t.Variables) > 0 {
		params := make([]map[string]string, len(t.Variables))
		for i := range params {
			params[i] = map[string]string{"type": "text", "text": t.Variables[strconv.Itoa(i+1)]}
		}
		tpl["components"] = []map[string]any{{"type": "body", "parameters": params}}
	}
	body := map[string]any{"type": "template", "template": tpl}
	if err := addressee(body, "send template", msg.ThreadKey, msg.To); err != nil {
		return "", err
	}
	return a.line.post(ctx, a.closed, "send template", body)
}

var (
	// templateNameRE is a template's name as Meta allows it: lowercase
	// letters, digits and underscores.
	templateNameRE = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)
	// languageRE is a template language code: "en", "en_US", "zh_HK".
	languageRE = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z]{2})?$`)
)

// Bounds of a template's variables (Meta: a body of at most 1024
// characters with its parameters).
const (
	maxVariables     = 100
	maxVariableBytes = 1024
)

// CheckTemplate checks a Cloud API template: its name, its language and
// variables named "1" to "n" without a gap. A Twilio Content SID is
// refused naming template.content_sid.
func (a *Adapter) CheckTemplate(t channels.Template) error {
	switch {
	case t.ContentSID != "":
		return &channels.ConfigError{Field: "template.content_sid", Msg: "a Twilio Content SID; hosted WhatsApp sends WhatsApp Cloud API templates, named by template.name and template.language"}
	case t.Name == "":
		return &channels.ConfigError{Field: "template.name", Msg: "the template's name as Meta approved it is required (hosted WhatsApp)"}
	case !templateNameRE.MatchString(t.Name):
		return &channels.ConfigError{Field: "template.name", Msg: "not a WhatsApp template name (lowercase letters, digits and underscores)"}
	case t.Language == "":
		return &channels.ConfigError{Field: "template.language", Msg: "the template's language code is required (\"en_US\", \"de\")"}
	case !languageRE.MatchString(t.Language):
		return &channels.ConfigError{Field: "template.language", Msg: "not a WhatsApp template language code (\"en_US\", \"de\")"}
	case len(t.Variables) > maxVariables:
		return &channels.ConfigError{Field: "template.variables", Msg: fmt.Sprintf("at most %d variables", maxVariables)}
	}
	for i := 1; i <= len(t.Variables); i++ {
		v, ok := t.Variables[strconv.Itoa(i)]
		switch {
		case !ok:
			return &channels.ConfigError{Field: "template.variables", Msg: fmt.Sprintf("variables are named \"1\" to \"%d\" in order (the template's {{1}}, {{2}} ...); \"%d\" is missing", len(t.Variables), i)}
		case v == "" || len(v) > maxVariableBytes:
			return &channels.ConfigError{Field: "template.variables", Msg: fmt.Sprintf("variable \"%d\" must be 1 to %d bytes", i, maxVariableBytes)}
		}
	}
	return nil
}

// Typing marks the message answered read and shows the typing indicator
// on it (status read with typing_indicator; it lasts until the reply or
// 25 s). With no inbound message to show it on, it does nothing.
func (a *Adapter) Typing(ctx context.Context, t channels.Typing) error {
	if t.InReplyTo == "" {
		return nil
	}
	if len(t.InReplyTo) > 512 || !strings.HasPrefix(t.InReplyTo, "wamid.") {
		return channels.Permanent("%s: typing: %q is not a WhatsApp message id (wamid.…)", name, t.InReplyTo)
	}
	body := map[string]any{"messaging_product": "whatsapp", "status": "read", "message_id": t.InReplyTo,
		"typing_indicator": map[string]string{"type": "text"}}
	return a.line.call(ctx, a.closed, "typing", http.MethodPost, "/"+a.line.num.PhoneNumberID+"/messages", body, nil)
}

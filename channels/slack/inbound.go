package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// Request signing headers (docs.slack.dev "Verifying requests from Slack").
const (
	SignatureHeader = "X-Slack-Signature"
	TimestampHeader = "X-Slack-Request-Timestamp"
)

// MaxSkew is how far a request's timestamp may be from the clock.
const MaxSkew = 5 * time.Minute

// Sign returns the X-Slack-Signature of body sent at ts (Unix seconds):
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + ts + ":" + body)).
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request's signature with secret at now. Its error wraps
// channels.ErrSignature.
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	if secret == "" {
		return fmt.Errorf("slack: no signing secret to verify with: %w", channels.ErrSignature)
	}
	ts := h.Get(TimestampHeader)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(ts) > 12 {
		return fmt.Errorf("slack: missing or malformed %s: %w", TimestampHeader, channels.ErrSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("slack: request timestamp is more than %s off: %w", MaxSkew, channels.ErrSignature)
	}
	got := h.Get(SignatureHeader)
	if !hmac.Equal([]byte(got), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("slack: %s does not verify: %w", SignatureHeader, channels.ErrSignature)
	}
	return nil
}

// envelope is an Events API request.
type envelope struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	TeamID    string          `json:"team_id"`
	APIAppID  string          `json:"api_app_id"`
	EventID   string          `json:"event_id"`
	Event     json.RawMessage `json:"event"`
}

// event is the part of an inner event comm reads.
type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Files       []file `json:"files"`
	Tokens      struct {
		Bot []string `json:"bot"`
	} `json:"tokens"`
}

// file is a file shared with a message.
type file struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

func parseEnvelope(body []byte) (envelope, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return envelope{}, channels.Permanent("slack: malformed Events API request: %v", err)
	}
	if env.Type == "" {
		return envelope{}, channels.Permanent("slack: an Events API request without a type")
	}
	return env, nil
}

// challenge is the answer to url_verification.
func challenge(env envelope) *channels.Response {
	return &channels.Response{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(env.Challenge)}
}

// App is the operator app's webhook (/hooks/slack).
type App struct {
	opts Options
}

// Route verifies the request with the app's signing secret, answers
// url_verification, and routes event_callback requests by team_id.
func (p *App) Route(r *http.Request, body []byte) ([]string, *channels.Response, error) {
	if err := Verify(p.opts.SigningSecret, r.Header, body, p.opts.Now()); err != nil {
		return nil, nil, err
	}
	env, err := parseEnvelope(body)
	if err != nil {
		return nil, nil, err
	}
	switch env.Type {
	case "url_verification":
		return nil, challenge(env), nil
	case "event_callback":
		if idRE.MatchString(env.TeamID) {
			return []string{env.TeamID}, nil, nil
		}
	}
	return nil, nil, nil
}

// secret is what the connection's requests are signed with.
func (a *Adapter) secret() string {
	if a.cfg.App == AppOperator || a.cfg == (Config{}) {
		return a.opts.SigningSecret
	}
	return a.cfg.SigningSecret
}

// Respond answers a verified url_verification with its challenge; other
// verified requests go on to ParseWebhook.
func (a *Adapter) Respond(r *http.Request, body []byte) (*channels.Response, error) {
	if err := Verify(a.secret(), r.Header, body, a.opts.Now()); err != nil {
		return nil, err
	}
	env, err := parseEnvelope(body)
	if err != nil || env.Type != "url_verification" {
		return nil, nil
	}
	return challenge(env), nil
}

// ParseWebhook verifies and parses an Events API request. Events of
// another workspace give nothing; tokens_revoked (of this bot) and
// app_uninstalled give a channels.ErrRevoked error.
func (a *Adapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	if len(body) > MaxEvent {
		return nil, channels.Permanent("slack: an Events API request over %d bytes", MaxEvent)
	}
	if err := Verify(a.secret(), r.Header, body, a.opts.Now()); err != nil {
		return nil, err
	}
	env, err := parseEnvelope(body)
	if err != nil {
		return nil, err
	}
	return a.events(r.Context(), env)
}

// events is what an Events API request (verified) carries.
func (a *Adapter) events(ctx context.Context, env envelope) ([]channels.Inbound, error) {
	if env.Type != "event_callback" || a.NeedsInstall() {
		return nil, nil
	}
	if a.cfg.TeamID != "" && env.TeamID != a.cfg.TeamID {
		return nil, nil // another workspace's event (the app-level route)
	}
	if a.cfg.App == AppOperator && a.cfg.TeamID == "" {
		return nil, nil
	}
	var ev event
	if err := json.Unmarshal(env.Event, &ev); err != nil {
		return nil, channels.Permanent("slack: malformed event: %v", err)
	}
	switch ev.Type {
	case "app_uninstalled":
		return nil, channels.Revoked("slack: the app was uninstalled from the workspace %s", env.TeamID)
	case "tokens_revoked":
		for _, u := range ev.Tokens.Bot {
			if a.cfg.BotUserID == "" || u == a.cfg.BotUserID {
				return nil, channels.Revoked("slack: the bot token was revoked in the workspace %s", env.TeamID)
			}
		}
		return nil, nil
	case "message", "app_mention":
	default:
		return nil, nil
	}
	if !a.keep(ev) {
		return nil, nil
	}
	in := channels.Inbound{ProviderID: ev.Channel + ":" + ev.TS, ThreadKey: ev.Channel, Sender: ev.User, Text: unescape(ev.Text)}
	switch {
	case ev.ThreadTS != "" && ev.ThreadTS != ev.TS:
		in.ThreadKey = ev.Channel + ":" + ev.ThreadTS
		in.References = []string{ev.Channel + ":" + ev.ThreadTS}
	case ev.ThreadTS != "" || (ev.ChannelType != "im" && ev.ChannelType != "mpim"):
		// A thread's parent, or a mention in a channel: the answer goes
		// into its thread.
		if !strings.HasPrefix(ev.Channel, "D") {
			in.ThreadKey = ev.Channel + ":" + ev.TS
		}
	}
	details := map[string]any{"event_id": env.EventID, "team_id": env.TeamID, "channel": ev.Channel, "ts": ev.TS}
	if ev.ChannelType != "" {
		details["channel_type"] = ev.ChannelType
	}
	var skipped []string
	for i, f := range ev.Files {
		if i >= 10 {
			skipped = append(skipped, f.Name)
			continue
		}
		att, err := a.download(ctx, f)
		if errors.Is(err, errSkip) {
			skipped = append(skipped, f.Name)
			continue
		}
		if err != nil {
			return nil, err
		}
		in.Attachments = append(in.Attachments, att)
	}
	if len(skipped) > 0 {
		details["files_left_out"] = skipped
	}
	in.Details, _ = json.Marshal(details)
	return []channels.Inbound{in}, nil
}

// keep says whether an event is a person's message comm keeps.
func (a *Adapter) keep(ev event) bool {
	switch {
	case !channelRE.MatchString(ev.Channel) || !idRE.MatchString(ev.User) || !tsRE.MatchString(ev.TS):
		return false
	case ev.ThreadTS != "" && !tsRE.MatchString(ev.ThreadTS):
		return false
	case ev.BotID != "" || (a.cfg.BotUserID != "" && ev.User == a.cfg.BotUserID):
		return false
	case ev.Subtype != "" && ev.Subtype != "file_share" && ev.Subtype != "thread_broadcast":
		return false // bot_message, message_changed, message_deleted, joins ...
	case ev.Type == "app_mention":
		return true
	}
	return ev.ChannelType == "im" || ev.ChannelType == "mpim" || ev.ThreadTS != ""
}

// errSkip is a file left out of the message (too big, no usable URL).
var errSkip = errors.New("file left out")

// download fetches a shared file with the bot token. Only https URLs on
// slack.com hosts, or on the Web API's own host, get the token. A failure
// to fetch is transient: Slack redelivers the event.
func (a *Adapter) download(ctx context.Context, f file) (channels.Attachment, error) {
	raw := f.URLPrivateDownload
	if raw == "" {
		raw = f.URLPrivate
	}
	if f.Size > a.opts.MaxAttachment || !a.fileURLAllowed(raw) {
		a.opts.Logger.Info("slack: a file was left out of an inbound message", "connection", a.conn.ID, "file", f.ID, "size", f.Size)
		return channels.Attachment{}, errSkip
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return channels.Attachment{}, errSkip
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken)
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return channels.Attachment{}, netError(ctx, "download file", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return channels.Attachment{}, channels.Transient(0, "slack: download file: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, a.opts.MaxAttachment+1))
	if err != nil {
		return channels.Attachment{}, netError(ctx, "download file", err)
	}
	if int64(len(data)) > a.opts.MaxAttachment {
		return channels.Attachment{}, errSkip
	}
	name := path.Base(f.Name)
	if name == "." || name == "/" || len(name) > 255 {
		name = f.ID
	}
	ct := f.Mimetype
	if ct == "" || len(ct) > 255 {
		ct = "application/octet-stream"
	}
	return channels.Attachment{Filename: name, ContentType: ct, Data: data}, nil
}

// fileURLAllowed reports whether the bot token may be sent to raw.
func (a *Adapter) fileURLAllowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	if api, err := url.Parse(a.opts.APIURL); err == nil && u.Scheme == api.Scheme && u.Host == api.Host {
		return true
	}
	h := u.Hostname()
	return u.Scheme == "https" && (h == "slack.com" || strings.HasSuffix(h, ".slack.com"))
}

// unescaper undoes the escaping Slack applies to message text (&, <, >;
// docs.slack.dev "Formatting text for app surfaces"). Mentions and links
// (<@U123>, <https://…|label>) stay as Slack wrote them.
var unescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")

func unescape(s string) string { return unescaper.Replace(s) }

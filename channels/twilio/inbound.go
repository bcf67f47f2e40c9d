package twilio

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/comm-gateway/comm/channels"
)

// SignatureHeader carries Twilio's webhook signature.
const SignatureHeader = "X-Twilio-Signature"

// Signature is X-Twilio-Signature for a request to u carrying params:
// base64 HMAC-SHA1, keyed with the Auth Token, of u followed by each
// parameter sorted by name as name+value (a repeated name's values in
// order). A JSON-bodied request signs u (with its bodySHA256 query) and
// no parameters.
func Signature(authToken, u string, params url.Values) string {
	return signature(sha1.New, authToken, u, params)
}

// SharedKeySignature is X-Twilio-Signature when the account's webhook
// settings sign with a shared key (X-Twilio-Webhooks-Signature-Settings
// says algorithm=HMAC_SHA256): the same string signed with HMAC-SHA256
// keyed with the shared key.
func SharedKeySignature(key, u string, params url.Values) string {
	return signature(sha256.New, key, u, params)
}

// SettingsHeader names the signing Twilio's webhook settings chose when
// it is not the Auth Token's: "key=<key id>,algorithm=HMAC_SHA256".
const SettingsHeader = "X-Twilio-Webhooks-Signature-Settings"

func signature(h func() hash.Hash, key, u string, params url.Values) string {
	mac := hmac.New(h, []byte(key))
	mac.Write([]byte(u))
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range params[k] {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig is Twilio's signature of a request to u with
// params. Like Twilio's own validators it also accepts u with its default
// port added or removed (Twilio signs the URL as it was configured), and a
// repeated parameter's values sorted with duplicates dropped (as
// twilio-php signs them).
func Verify(authToken, u string, params url.Values, sig string) bool {
	return verifyWith(Signature, authToken, u, params, sig)
}

func verifyWith(sign func(key, u string, params url.Values) string, key, u string, params url.Values, sig string) bool {
	sets := []url.Values{params}
	if norm, ok := sortedValues(params); ok {
		sets = append(sets, norm)
	}
	for _, v := range urlVariants(u) {
		for _, p := range sets {
			if hmac.Equal([]byte(sign(key, v, p)), []byte(sig)) {
				return true
			}
		}
	}
	return false
}

// sortedValues is params with each repeated parameter's values sorted and
// deduplicated; false when no parameter repeats.
func sortedValues(params url.Values) (url.Values, bool) {
	repeated := false
	for _, vs := range params {
		repeated = repeated || len(vs) > 1
	}
	if !repeated {
		return nil, false
	}
	out := make(url.Values, len(params))
	for k, vs := range params {
		vs = slices.Clone(vs)
		slices.Sort(vs)
		out[k] = slices.Compact(vs)
	}
	return out, true
}

// urlVariants is u, and u with its default port removed or added.
func urlVariants(u string) []string {
	out := []string{u}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return out
	}
	def := map[string]string{"https": "443", "http": "80"}[p.Scheme]
	if def == "" {
		return out
	}
	host, port, err := net.SplitHostPort(p.Host)
	switch {
	case err != nil: // no port: add the default
		p.Host = net.JoinHostPort(p.Host, def)
	case port == def:
		p.Host = host
		if strings.Contains(host, ":") {
			p.Host = "[" + host + "]"
		}
	default:
		return out
	}
	return append(out, p.String())
}

// signedURL is the URL Twilio signed for r: the connection's public
// ingress URL (never r.Host) with r's query (bodySHA256 on JSON bodies).
func (a *Adapter) signedURL(r *http.Request) string {
	u := a.conn.WebhookURL
	if q := r.URL.RawQuery; q != "" {
		if strings.Contains(u, "?") {
			u += "&" + q
		} else {
			u += "?" + q
		}
	}
	return u
}

// verify checks r's signature and returns its parameters: the form
// fields, or a JSON body's top-level fields (whose digest the signed URL
// carries as bodySHA256).
func (a *Adapter) verify(r *http.Request, body []byte) (url.Values, error) {
	sig := r.Header.Get(SignatureHeader)
	if sig == "" {
		return nil, fmt.Errorf("twilio: the request has no %s header: %w", SignatureHeader, channels.ErrSignature)
	}
	if a.conn.WebhookURL == "" {
		return nil, fmt.Errorf("twilio: the gateway has no public URL to check the signature against: %w", channels.ErrSignature)
	}
	if len(body) > MaxWebhook {
		return nil, channels.Permanent("twilio: webhook body of %d bytes exceeds %d", len(body), MaxWebhook)
	}
	sign, key, keyName, err := a.signer(r)
	if err != nil {
		return nil, err
	}
	signed := a.signedURL(r)
	if digest := r.URL.Query().Get("bodySHA256"); digest != "" || isJSON(r) {
		if !verifyWith(sign, key, signed, nil, sig) {
			return nil, fmt.Errorf("twilio: %s does not match this connection's %s and URL: %w", SignatureHeader, keyName, channels.ErrSignature)
		}
		sum := sha256.Sum256(body)
		if digest == "" || subtle.ConstantTimeCompare([]byte(strings.ToLower(digest)), []byte(hex.EncodeToString(sum[:]))) != 1 {
			return nil, fmt.Errorf("twilio: the JSON body does not match the signed bodySHA256: %w", channels.ErrSignature)
		}
		return jsonParams(body)
	}
	params, err := url.ParseQuery(string(body))
	if err != nil {
		// Twilio signs the parameters it sent; a body that does not
		// parse cannot be verified.
		return nil, fmt.Errorf("twilio: the body is not a form (%v): %w", err, channels.ErrSignature)
	}
	if !verifyWith(sign, key, signed, params, sig) {
		return nil, fmt.Errorf("twilio: %s does not match this connection's %s and URL: %w", SignatureHeader, keyName, channels.ErrSignature)
	}
	return params, nil
}

// signer is how r is signed: with the Auth Token (HMAC-SHA1), or, when
// the account's webhook settings switched to a shared key (SettingsHeader
// with algorithm=HMAC_SHA256), with config.webhook_signing_key.
func (a *Adapter) signer(r *http.Request) (sign func(key, u string, params url.Values) string, key, name string, err error) {
	settings := r.Header.Get(SettingsHeader)
	if settings == "" {
		return Signature, a.cfg.AuthToken, "Auth Token", nil
	}
	var alg, keyID string
	for _, part := range strings.Split(settings, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch strings.ToLower(k) {
		case "algorithm":
			alg = strings.ToUpper(v)
		case "key":
			keyID = v
		}
	}
	if alg != "HMAC_SHA256" {
		return nil, "", "", fmt.Errorf("twilio: %s names algorithm %q; comm verifies HMAC_SHA256 shared keys and the Auth Token's HMAC-SHA1: %w", SettingsHeader, alg, channels.ErrSignature)
	}
	if a.cfg.WebhookSigningKey == "" {
		return nil, "", "", fmt.Errorf("twilio: the request is signed with the shared key %q of the account's webhook settings; set config.webhook_signing_key to that key's secret: %w", keyID, channels.ErrSignature)
	}
	return SharedKeySignature, a.cfg.WebhookSigningKey, "webhook_signing_key", nil
}

func isJSON(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/json"
}

// jsonParams reads a JSON object's top-level fields as parameters:
// strings as they are, numbers and booleans as written, others as JSON.
func jsonParams(body []byte) (url.Values, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, channels.Permanent("twilio: the JSON webhook body is not an object")
	}
	out := url.Values{}
	for k, raw := range obj {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out.Set(k, s)
			continue
		}
		if string(raw) != "null" {
			out.Set(k, string(raw))
		}
	}
	return out, nil
}

// ParseWebhook verifies a Twilio webhook and returns the message it
// delivers, or the receipt of a status callback (MessageStatus).
func (a *Adapter) ParseWebhook(r *http.Request, body []byte) ([]channels.Inbound, error) {
	p, err := a.verify(r, body)
	if err != nil {
		return nil, err
	}
	if acct := p.Get("AccountSid"); acct != "" && acct != a.cfg.AccountSID {
		return nil, channels.Permanent("twilio: the webhook is for account %q, not this connection's", clean(acct))
	}
	if st := p.Get("MessageStatus"); st != "" && st != "received" && st != "receiving" {
		rc, err := receipt(p)
		if err != nil || rc == nil {
			return nil, err
		}
		return []channels.Inbound{{ProviderID: rc.MessageID + ":" + rc.State, Receipt: rc}}, nil
	}
	return a.message(r.Context(), p)
}

// receipt is the Receipt of a status callback; nil for states comm does
// not record (queued, accepted, sending, scheduled).
func receipt(p url.Values) (*channels.Receipt, error) {
	sid := p.Get("MessageSid")
	if sid == "" {
		sid = p.Get("SmsSid")
	}
	if !messageRE.MatchString(sid) {
		return nil, channels.Permanent("twilio: the status callback has no MessageSid")
	}
	rc := &channels.Receipt{MessageID: sid}
	switch st := p.Get("MessageStatus"); st {
	case "sent":
		rc.State = channels.ReceiptSent
	case "delivered":
		rc.State = channels.ReceiptDelivered
	case "read":
		rc.State = channels.ReceiptRead
	case "undelivered", "failed", "canceled":
		rc.State = channels.ReceiptFailed
		rc.Code = p.Get("ErrorCode")
		if len(rc.Code) > 10 {
			rc.Code = rc.Code[:10]
		}
		code, _ := strconv.Atoi(rc.Code)
		rc.Reason = Reason(code)
		if rc.Reason == "" {
			rc.Reason = clean(p.Get("ErrorMessage"))
		}
		if rc.Reason == "" {
			rc.Reason = "Twilio reports the message " + st
			if rc.Code != "" {
				rc.Reason += " (error " + rc.Code + ")"
			}
		}
	default:
		return nil, nil
	}
	if t, err := time.Parse("0601021504", p.Get("RawDlrDoneDate")); err == nil {
		rc.At = t.UTC()
	}
	return rc, nil
}

// detailParams are the webhook parameters kept in a message's details,
// by their name there.
var detailParams = []struct{ param, key string }{
	{"To", "to"},
	{"WaId", "wa_id"},
	{"ProfileName", "profile_name"},
	{"MessagingServiceSid", "messaging_service_sid"},
	{"NumSegments", "num_segments"},
	{"ButtonText", "button_text"},
	{"ButtonPayload", "button_payload"},
	{"Forwarded", "forwarded"},
	{"FrequentlyForwarded", "frequently_forwarded"},
	{"OriginalRepliedMessageSender", "replied_message_sender"},
	{"Latitude", "latitude"},
	{"Longitude", "longitude"},
	{"Address", "address"},
	{"Label", "label"},
	{"FromCity", "from_city"},
	{"FromState", "from_state"},
	{"FromCountry", "from_country"},
}

// failedMedia is a media file left out of a message, in its details.
type failedMedia struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
	Error       string `json:"error"`
}

// message is the Inbound of a message webhook.
func (a *Adapter) message(ctx context.Context, p url.Values) ([]channels.Inbound, error) {
	sid := p.Get("MessageSid")
	if !messageRE.MatchString(sid) {
		return nil, channels.Permanent("twilio: the webhook has no MessageSid (SM or MM followed by 32 hex digits)")
	}
	sender := strings.TrimPrefix(p.Get("From"), "whatsapp:")
	if sender == "" || len(sender) > 64 || !utf8.ValidString(sender) || strings.ContainsFunc(sender, func(r rune) bool { return r < 0x21 }) {
		return nil, channels.Permanent("twilio: the webhook has no usable From")
	}
	text := p.Get("Body")
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	in := channels.Inbound{ProviderID: sid, ThreadKey: sender, Sender: sender, Text: text}
	if ref := p.Get("OriginalRepliedMessageSid"); messageRE.MatchString(ref) {
		in.References = []string{ref}
	}
	details := map[string]any{}
	for _, d := range detailParams {
		if v := p.Get(d.param); v != "" {
			details[d.key] = clean(v)
		}
	}
	n, _ := strconv.Atoi(p.Get("NumMedia"))
	n = min(max(n, 0), MaxMedia)
	var failed []failedMedia
	for i := range n {
		mu, ctype := p.Get(fmt.Sprintf("MediaUrl%d", i)), clean(p.Get(fmt.Sprintf("MediaContentType%d", i)))
		if mu == "" {
			continue
		}
		att, err := a.download(ctx, mu, ctype)
		if err != nil {
			a.opts.Logger.Warn("twilio: media left out of a message", "connection", a.conn.ID, "message", sid, "err", err)
			failed = append(failed, failedMedia{URL: clean(mu), ContentType: ctype, Error: err.Error()})
			continue
		}
		in.Attachments = append(in.Attachments, att)
	}
	if len(failed) > 0 {
		details["media_failed"] = failed
	}
	if len(details) > 0 {
		raw, err := json.Marshal(details)
		if err != nil {
			return nil, channels.Permanent("twilio: details: %v", err)
		}
		in.Details = raw
	}
	return []channels.Inbound{in}, nil
}

// errTooBig is a media file over MaxAttachment.
var errTooBig = errors.New("larger than the attachment limit")

// download fetches a media file with the account's credentials. Only URLs
// of the account on the configured REST API's host are fetched (the
// credentials go nowhere else); redirects from there (to the file's
// presigned storage URL) are followed without them, at most 3.
func (a *Adapter) download(ctx context.Context, mediaURL, ctype string) (channels.Attachment, error) {
	u, err := url.Parse(mediaURL)
	api, _ := url.Parse(a.opts.APIURL)
	if err != nil || api == nil || u.Scheme != api.Scheme || !strings.EqualFold(u.Host, api.Host) ||
		!strings.HasPrefix(u.Path, "/2010-04-01/Accounts/"+a.cfg.AccountSID+"/") {
		return channels.Attachment{}, errors.New("not a media URL of this Twilio account")
	}
	ctx, cancel := a.bound(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return channels.Attachment{}, err
	}
	req.SetBasicAuth(a.credentials())
	// Redirects (to the file's presigned storage URL) are followed here,
	// without the credentials, whatever host they name.
	client := *a.opts.HTTPClient
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	for hops := 0; err == nil && hops < 3 && isRedirect(resp.StatusCode); hops++ {
		loc, lerr := resp.Location()
		resp.Body.Close()
		if lerr != nil || (loc.Scheme != "https" && loc.Scheme != u.Scheme) {
			return channels.Attachment{}, errors.New("download media: a redirect to an unusable location")
		}
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil); err != nil {
			return channels.Attachment{}, err
		}
		resp, err = client.Do(req)
	}
	if err != nil {
		return channels.Attachment{}, netError(ctx, "download media", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return channels.Attachment{}, fmt.Errorf("download media: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if resp.ContentLength > a.opts.MaxAttachment {
		return channels.Attachment{}, errTooBig
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, a.opts.MaxAttachment+1))
	if err != nil {
		return channels.Attachment{}, netError(ctx, "download media", err)
	}
	if int64(len(data)) > a.opts.MaxAttachment {
		return channels.Attachment{}, errTooBig
	}
	if ctype == "" {
		ctype = resp.Header.Get("Content-Type")
	}
	if mt, _, err := mime.ParseMediaType(ctype); err == nil {
		ctype = mt
	} else {
		ctype = "application/octet-stream"
	}
	name := path.Base(u.Path)
	if ext, ok := extensions[ctype]; ok {
		name += ext
	} else if exts, _ := mime.ExtensionsByType(ctype); len(exts) > 0 {
		name += exts[0]
	}
	return channels.Attachment{Filename: name, ContentType: ctype, Data: data}, nil
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// extensions are the file name extensions of the media types Twilio
// delivers most.
var extensions = map[string]string{
	"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp",
	"video/mp4": ".mp4", "audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/amr": ".amr",
	"application/pdf": ".pdf", "text/vcard": ".vcf", "text/plain": ".txt",
}

// twiml is the empty TwiML document: nothing is sent back.
var twiml = []byte(`<?xml version="1.0" encoding="UTF-8"?><Response/>`)

// Ack answers every webhook with empty TwiML, so that Twilio sends no
// automatic reply.
func (a *Adapter) Ack() *channels.Response {
	return &channels.Response{Status: http.StatusOK,
		Header: http.Header{"Content-Type": {"text/xml; charset=utf-8"}}, Body: twiml}
}

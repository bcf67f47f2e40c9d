package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/channels"
)

// bot is a connection's Bot API client, shared by both adapter types.
type bot struct {
	opts Options
	conn channels.Connection
	cfg  Config // Mode resolved

	// closed ends with Close; every call made after, or in flight, ends.
	closed context.Context
	close  context.CancelFunc
}

func newBot(opts Options, conn channels.Connection, cfg Config) *bot {
	closed, cancel := context.WithCancel(context.Background())
	return &bot{opts: opts, conn: conn, cfg: cfg, closed: closed, close: cancel}
}

// errClosed is why calls of a closed adapter end.
var errClosed = errors.New("the telegram adapter was closed")

// Close ends the calls in flight (a long poll, a send, a download) and
// makes later ones fail transiently.
func (b *bot) Close() error {
	b.close()
	return nil
}

// bound returns ctx ended also by Close and, when ctx has no deadline, by
// timeout.
func (b *bot) bound(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.closed, func() { cancel(errClosed) })
	cancelAll := func() { stop(); cancel(nil) }
	if _, ok := ctx.Deadline(); ok || timeout <= 0 {
		return ctx, cancelAll
	}
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	return tctx, func() { tcancel(); cancelAll() }
}

// apiReply is every Bot API answer.
type apiReply struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

// call POSTs params as JSON to method and decodes the result into out
// (when not nil). op names the operation in errors ("send message").
// Failures are *channels.Error values.
func (b *bot) call(ctx context.Context, op, method string, params, out any) error {
	ctx, cancel := b.bound(ctx, b.opts.CallTimeout)
	defer cancel()
	return b.do(ctx, op, method, params, out)
}

// do is call without the timeout (the long poll sets its own).
func (b *bot) do(ctx context.Context, op, method string, params, out any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return channels.Permanent("telegram: %s: %v", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.opts.APIURL+"/bot"+b.cfg.BotToken+"/"+method, bytes.NewReader(body))
	if err != nil {
		return channels.Permanent("telegram: %s: %s", op, b.scrub(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.opts.HTTPClient.Do(req)
	if err != nil {
		return b.netError(ctx, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return b.netError(ctx, op, err)
	}
	if len(data) > maxResponse {
		return channels.Transient(0, "telegram: %s: the Bot API answer exceeds %d bytes", op, maxResponse)
	}
	var r apiReply
	if err := json.Unmarshal(data, &r); err != nil {
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return channels.Transient(0, "telegram: %s: %d %s", op, resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		return channels.Transient(0, "telegram: %s: malformed Bot API answer (HTTP %d)", op, resp.StatusCode)
	}
	if !r.OK {
		if r.ErrorCode == 0 {
			r.ErrorCode = resp.StatusCode
		}
		return b.apiError(op, r)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return channels.Transient(0, "telegram: %s: malformed Bot API result: %s", op, b.scrub(err))
	}
	return nil
}

// apiError classifies an {"ok":false} answer.
func (b *bot) apiError(op string, r apiReply) error {
	desc := b.scrubString(r.Description)
	if desc == "" {
		desc = http.StatusText(r.ErrorCode)
	}
	code := r.ErrorCode
	switch {
	case code == http.StatusTooManyRequests:
		var after time.Duration
		if r.Parameters != nil && r.Parameters.RetryAfter > 0 {
			after = time.Duration(r.Parameters.RetryAfter) * time.Second
		}
		return channels.Transient(after, "telegram: %s: rate limited (%d %s)", op, code, desc)
	case code >= 500:
		return channels.Transient(0, "telegram: %s: Telegram failed (%d %s)", op, code, desc)
	case code == http.StatusUnauthorized || code == http.StatusNotFound:
		// The Bot API answers 401 for a revoked token and 404 for one it
		// does not know; the methods themselves exist.
		return channels.Revoked("telegram: %s: the bot token was rejected (%d %s); copy the current token from @BotFather", op, code, desc)
	case code == http.StatusForbidden && strings.Contains(desc, "bot was blocked by the user"):
		return channels.Permanent("telegram: %s: the recipient blocked the bot (%d %s)", op, code, desc)
	case code == http.StatusConflict:
		return channels.Transient(0, "telegram: %s: conflict (%d %s): another client uses this bot token's updates, or the webhook and polling modes clash", op, code, desc)
	case r.Parameters != nil && r.Parameters.MigrateToChatID != 0:
		return channels.Permanent("telegram: %s: %d %s (the group is now the supergroup %d)", op, code, desc, r.Parameters.MigrateToChatID)
	}
	return channels.Permanent("telegram: %s: %d %s", op, code, desc)
}

// netError classifies a failure to reach the Bot API. A *url.Error names
// the URL, which holds the token: only its cause is kept.
func (b *bot) netError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return channels.Transient(0, "telegram: %s: %s", op, b.scrub(err))
}

// scrub is err's message without the token.
func (b *bot) scrub(err error) string { return b.scrubString(err.Error()) }

func (b *bot) scrubString(s string) string {
	if b.cfg.BotToken == "" {
		return s
	}
	s = strings.ReplaceAll(s, b.cfg.BotToken, "<token>")
	// The secret half alone (a URL escaped or cut at the colon).
	if _, secret, ok := strings.Cut(b.cfg.BotToken, ":"); ok && len(secret) >= 8 {
		s = strings.ReplaceAll(s, secret, "<token>")
	}
	return s
}

// file is the Bot API's File.
type file struct {
	FileID   string `json:"file_id"`
	FileSize int64  `json:"file_size"`
	FilePath string `json:"file_path"`
}

// errTooBig is a file over the attachment limit; it is left out.
var errTooBig = errors.New("file too big")

// download fetches a file by id (getFile, then GET of its path), at most
// MaxAttachment bytes. Failures are transient, except errTooBig.
func (b *bot) download(ctx context.Context, fileID string) ([]byte, string, error) {
	ctx, cancel := b.bound(ctx, b.opts.CallTimeout)
	defer cancel()
	var f file
	if err := b.do(ctx, "get file", "getFile", map[string]string{"file_id": fileID}, &f); err != nil {
		if errors.Is(err, channels.ErrPermanent) && strings.Contains(strings.ToLower(err.Error()), "too big") {
			return nil, "", errTooBig
		}
		if errors.Is(err, channels.ErrPermanent) && !errors.Is(err, channels.ErrRevoked) {
			// Telegram no longer knows the file: retrying will not help,
			// but losing the message would be worse than leaving the file
			// out; the caller decides.
			return nil, "", err
		}
		return nil, "", toTransient(err)
	}
	if f.FileSize > b.opts.MaxAttachment {
		return nil, "", errTooBig
	}
	if f.FilePath == "" || strings.Contains(f.FilePath, "..") {
		return nil, "", channels.Transient(0, "telegram: download file: getFile gave no usable file_path")
	}
	u := b.opts.APIURL + "/file/bot" + b.cfg.BotToken + "/" + (&url.URL{Path: f.FilePath}).EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", channels.Transient(0, "telegram: download file: %s", b.scrub(err))
	}
	resp, err := b.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, "", b.netError(ctx, "download file", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", channels.Transient(0, "telegram: download file: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, b.opts.MaxAttachment+1))
	if err != nil {
		return nil, "", b.netError(ctx, "download file", err)
	}
	if int64(len(data)) > b.opts.MaxAttachment {
		return nil, "", errTooBig
	}
	return data, f.FilePath, nil
}

// toTransient makes err a transient failure (a download the provider
// should retry by redelivering the update).
func toTransient(err error) error {
	if errors.Is(err, channels.ErrTransient) {
		return err
	}
	return channels.Transient(0, "%s", err.Error())
}

// chatID is a chat id as the Bot API takes it: an integer, or an
// "@channelusername" string.
func chatID(s string) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s && n != 0 {
		return n, nil
	}
	if name, ok := strings.CutPrefix(s, "@"); ok && usernameRE.MatchString(name) {
		return s, nil
	}
	return nil, fmt.Errorf("%q is not a telegram chat id (a number, or @channelname)", s)
}

// Package webhook is the push feature beside the core: a project's
// webhook endpoint (registration, replay, the history of attempts) and the
// bookkeeping of its delivery (leases, cursors, retries, disabling), which
// the delivery worker drives. It reaches the core (package messaging)
// through its public API; writes go through the event log like every other
// change. The core knows nothing of it.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/ent"
	entwh "github.com/comm-gateway/comm/ent/webhook"
	entwha "github.com/comm-gateway/comm/ent/webhookattempt"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/netguard"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/signature"
	"github.com/comm-gateway/comm/stream"
)

// Options configure the webhook feature.
type Options struct {
	// AllowPrivate accepts webhook URLs on loopback and private networks,
	// and plain http (tests, LAN installs). The delivery worker's client
	// must allow the same (netguard.NewClient).
	AllowPrivate bool
}

// Hooks is the webhook feature of one gateway.
type Hooks struct {
	svc          *messaging.Service
	log          *stream.Log
	read         *ent.Client
	box          *sealed.Box
	allowPrivate bool

	mu   sync.Mutex
	wake chan struct{} // closed at the next registration change
}

// New returns the webhook feature served by svc.
func New(svc *messaging.Service, opts Options) *Hooks {
	return &Hooks{svc: svc, log: svc.Log(), read: svc.Ent(), box: svc.Box(),
		allowPrivate: opts.AllowPrivate, wake: make(chan struct{})}
}

// AllowPrivate reports whether webhook URLs may be private (Options).
func (s *Hooks) AllowPrivate() bool { return s.allowPrivate }

// Log is the core's event log, which deliveries read.
func (s *Hooks) Log() *stream.Log { return s.log }

func (s *Hooks) now() time.Time { return s.svc.Now() }

// write runs fn in a write transaction of the caller's project.
func (s *Hooks) write(ctx context.Context, fn func(tx *stream.Tx) error) ([]stream.Event, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return s.log.Write(ctx, p.ProjectID, fn)
}

// Webhook is the project's push endpoint.
type Webhook = api.Webhook

func webhookOf(w *ent.Webhook) *Webhook {
	return &Webhook{
		ID: w.ID, URL: w.URL, Status: string(w.Status), Cursor: w.Cursor, LastError: w.LastError,
		FailingSince: utc(w.FailingSince), NextAttemptAt: utc(w.NextAttemptAt), DisabledReason: w.DisabledReason,
		CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Input is the body of PUT /v1/webhook.
type Input = api.WebhookRequest

// Set registers (or replaces) the project's push endpoint.
func (s *Hooks) Set(ctx context.Context, in Input) (*Webhook, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if in.URL == "" {
		return nil, fault.Invalid("url", "required")
	}
	if _, err := netguard.CheckURL(in.URL, s.allowPrivate); err != nil {
		return nil, fault.Invalid("url", "%v", err)
	}
	generated := in.Secret == ""
	if generated {
		b := make([]byte, 24)
		rand.Read(b)
		in.Secret = "whsec_" + base64.StdEncoding.EncodeToString(b)
	} else if len(in.Secret) > 256 {
		return nil, fault.Invalid("secret", "at most 256 bytes")
	}
	key, err := signature.Key(in.Secret)
	if err != nil {
		return nil, fault.Invalid("secret", "%v", err)
	}
	if !generated {
		if err := strongSecret(in.Secret, key); err != nil {
			return nil, err
		}
	}
	head, err := s.log.Head(ctx, p.ProjectID)
	if err != nil {
		return nil, err
	}
	if in.FromSeq != nil && (*in.FromSeq < 0 || *in.FromSeq > head) {
		return nil, fault.Invalid("from_seq", "must be between 0 and the stream's head, %d", head)
	}
	if in.FromSeq != nil {
		if err := s.log.CheckCursor(ctx, p.ProjectID, "from_seq", *in.FromSeq); err != nil {
			return nil, err
		}
	}
	sealedSecret := s.box.Seal([]byte(in.Secret))
	var saved *ent.Webhook
	_, err = s.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		old, err := cl.Webhook.Query().Only(tctx)
		switch {
		case ent.IsNotFound(err):
			cursor := head
			if in.FromSeq != nil {
				cursor = *in.FromSeq
			}
			saved, err = cl.Webhook.Create().SetURL(in.URL).SetSecret(sealedSecret).SetCursor(cursor).Save(tctx)
			return err
		case err != nil:
			return err
		}
		upd := cl.Webhook.UpdateOne(old).SetURL(in.URL).SetSecret(sealedSecret).SetStatus(entwh.StatusActive).
			SetFailures(0).ClearNextAttemptAt().ClearFailingSince().ClearLastError().ClearDisabledReason()
		if in.FromSeq != nil {
			upd.SetCursor(*in.FromSeq)
		}
		if saved, err = upd.Save(tctx); err != nil {
			return err
		}
		if old.Status == entwh.StatusDisabled {
			return tx.Append(stream.WebhookEnabled, api.WebhookEvent{Webhook: webhookOf(saved), Reason: "registered again"})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.wakeWebhooks()
	out := webhookOf(saved)
	if generated {
		out.Secret = in.Secret
	}
	return out, nil
}

// Webhook secret strength: a secret guessed offline from one signed
// delivery forges every later one, so it must carry at least 128 bits.
// The rule, checked on registration only (stored secrets keep working):
//
//   - a "whsec_" secret decodes to at least MinSecretKeyBytes bytes with
//     at least MinSecretDistinct distinct byte values;
//   - any other secret has at least MinSecretChars bytes with at least
//     MinSecretDistinct distinct byte values (32 random hex digits pass;
//     "aaaaaaaaaaaaaaaaaaaaaaaa" and "abababab..." do not).
//
// A generated secret (24 random bytes) always passes.
const (
	MinSecretKeyBytes = 16
	MinSecretChars    = 24
	MinSecretDistinct = 8
)

func strongSecret(secret string, key []byte) error {
	distinct := map[byte]bool{}
	for _, b := range key {
		distinct[b] = true
	}
	if strings.HasPrefix(secret, "whsec_") {
		if len(key) < MinSecretKeyBytes || len(distinct) < MinSecretDistinct {
			return fault.Invalid("secret", "too weak: a whsec_ secret must decode to at least %d random bytes (%d distinct values); leave secret out to have one generated", MinSecretKeyBytes, MinSecretDistinct)
		}
		return nil
	}
	if len(key) < MinSecretChars || len(distinct) < MinSecretDistinct {
		return fault.Invalid("secret", "too weak: at least %d characters with at least %d different ones (e.g. 32 random hex digits), or a whsec_ secret of %d random bytes; leave secret out to have one generated", MinSecretChars, MinSecretDistinct, MinSecretKeyBytes)
	}
	return nil
}

func noWebhook() *fault.Error {
	return fault.NotFoundf("no webhook registered; PUT /v1/webhook {url, secret} registers one")
}

// Get returns the project's push endpoint, without its secret.
func (s *Hooks) Get(ctx context.Context) (*Webhook, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, err
	}
	w, err := s.read.Webhook.Query().Only(ctx)
	if ent.IsNotFound(err) {
		return nil, noWebhook()
	}
	if err != nil {
		return nil, err
	}
	return webhookOf(w), nil
}

// Delete removes the project's push endpoint and its attempts.
func (s *Hooks) Delete(ctx context.Context) error {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return err
	}
	_, err := s.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		n, err := cl.Webhook.Delete().Exec(tctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return noWebhook()
		}
		_, err = cl.WebhookAttempt.Delete().Exec(tctx)
		return err
	})
	if err == nil {
		s.wakeWebhooks()
	}
	return err
}

// Replay moves the cursor back (or forward) to fromSeq: deliveries
// resume with the event after it.
func (s *Hooks) Replay(ctx context.Context, fromSeq *int64) (*Webhook, error) {
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if fromSeq == nil {
		return nil, fault.Invalid("from_seq", "required")
	}
	head, err := s.log.Head(ctx, p.ProjectID)
	if err != nil {
		return nil, err
	}
	if *fromSeq < 0 || *fromSeq > head {
		return nil, fault.Invalid("from_seq", "must be between 0 and the stream's head, %d", head)
	}
	if err := s.log.CheckCursor(ctx, p.ProjectID, "from_seq", *fromSeq); err != nil {
		return nil, err
	}
	var saved *ent.Webhook
	_, err = s.write(ctx, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		w, err := cl.Webhook.Query().Only(tctx)
		if ent.IsNotFound(err) {
			return noWebhook()
		}
		if err != nil {
			return err
		}
		saved, err = cl.Webhook.UpdateOne(w).SetCursor(*fromSeq).ClearNextAttemptAt().Save(tctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wakeWebhooks()
	return webhookOf(saved), nil
}

// WebhookAttempt is one recorded push delivery attempt.
type WebhookAttempt = api.WebhookAttempt

// MaxAttemptHistory bounds the attempts kept per webhook.
const MaxAttemptHistory = 1000

// Attempts lists the latest delivery attempts, newest first; page
// with after (an attempt id) and limit.
func (s *Hooks) Attempts(ctx context.Context, pg messaging.Page) ([]*WebhookAttempt, error) {
	if _, err := messaging.PrincipalFrom(ctx); err != nil {
		return nil, err
	}
	if err := pg.Validate(ident.WebhookAttempt); err != nil {
		return nil, err
	}
	q := s.read.WebhookAttempt.Query().Order(ent.Desc(entwha.FieldID)).Limit(pg.Limit)
	if pg.After != "" {
		q = q.Where(entwha.IDLT(pg.After))
	}
	as, err := q.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*WebhookAttempt, len(as))
	for i, a := range as {
		out[i] = &WebhookAttempt{ID: a.ID, URL: a.URL, Seq: a.Seq, OK: a.Ok, StatusCode: a.StatusCode,
			LatencyMS: a.LatencyMs, Error: a.Error, At: a.CreatedAt.UTC()}
	}
	return out, nil
}

// Wake returns a channel closed at the next registration change
// (a broadcast: every delivery goroutine sees it).
func (s *Hooks) Wake() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

func (s *Hooks) wakeWebhooks() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

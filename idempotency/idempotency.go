// Package idempotency keeps the answers of REST requests made with an
// Idempotency-Key header (the Stripe convention), so that a client can
// retry a POST that creates or sends without doing it twice: a retry with
// the same key and the same request gets the first answer again, on any
// replica.
//
// The record lives in the database (ent.IdempotencyKey, unique per project
// and key). The first request inserts its key "started"; the response is
// stored once the handler is done (Claim.Finish), in a write of its own,
// not in the handler's transaction. So:
//
//   - a request whose key is started and not finished answers a conflict
//     (retryable) until the lease (Options.Lease) runs out; after it, the
//     row is taken to be of a replica that died, and the next request with
//     the key runs afresh. A crash after the handler's write committed and
//     before its response was stored therefore lets one retry, after the
//     lease, run the request a second time: the one window where a key
//     does not prevent a duplicate.
//   - a response the gateway does not keep (5xx, 429: the client is
//     expected to retry) releases the key, and the retry runs afresh.
//   - a response larger than Options.MaxResponseBytes is not kept: its
//     status and size are, and a retry answers a conflict saying so,
//     never running the request again.
//
// Keys are kept Options.TTL (24 h) from their first request, per project,
// and pruned in small batches by the requests that insert keys.
//
// Like webhook and account, this is a feature beside the core: it reaches
// the core (package messaging) through its public API, and writes go
// through the event log (without events).
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/comm-gateway/comm/ent"
	entidk "github.com/comm-gateway/comm/ent/idempotencykey"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader is set ("true") on an answer replayed from a key.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLen is the longest key taken, in bytes.
const MaxKeyLen = 255

// Defaults of Options.
const (
	DefaultTTL              = 24 * time.Hour
	DefaultLease            = time.Minute
	DefaultMaxResponseBytes = 64 << 10
)

// Pruning: at most every pruneEvery per replica, a request that inserts a
// key deletes up to pruneBatch expired keys in its write (sooner again
// while whole batches come).
const (
	pruneEvery = time.Minute
	pruneBatch = 500
)

// Options configure the keys.
type Options struct {
	// TTL is how long a key is kept from its first request (DefaultTTL).
	TTL time.Duration
	// Lease is how long a started request holds its key; a key started
	// longer ago and not finished is taken to be of a replica that died,
	// and the next request with it runs afresh (DefaultLease). Keep it
	// longer than any POST handler runs.
	Lease time.Duration
	// MaxResponseBytes bounds the response body kept for a key
	// (DefaultMaxResponseBytes).
	MaxResponseBytes int
	// Logger receives warnings; slog.Default() if nil.
	Logger *slog.Logger
}

// Keys is the idempotency-key store of one gateway.
type Keys struct {
	svc         *messaging.Service
	log         *stream.Log
	read        *ent.Client
	box         *sealed.Box
	logger      *slog.Logger
	ttl, lease  time.Duration
	maxResponse int

	mu        sync.Mutex
	nextPrune time.Time
}

// New returns the idempotency keys served by svc; its clock (svc.Now)
// dates them.
func New(svc *messaging.Service, opts Options) *Keys {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Keys{svc: svc, log: svc.Log(), read: svc.Ent(), box: svc.Box(), logger: opts.Logger,
		ttl: opts.TTL, lease: opts.Lease, maxResponse: opts.MaxResponseBytes}
}

// MaxResponseBytes is the largest response body kept for a key.
func (k *Keys) MaxResponseBytes() int { return k.maxResponse }

// CheckKey refuses a key that is empty, longer than MaxKeyLen or not
// printable ASCII, naming the header.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fault.Invalid(Header, "must be 1 to %d characters", MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fault.Invalid(Header, "must be printable ASCII (a UUID, say); byte %d is not", i)
		}
	}
	return nil
}

// Fingerprint is the SHA-256 of what makes a request this request: its
// method, path (escaped), query and body; Begin takes it.
func Fingerprint(method, path, query string, body []byte) []byte {
	h := sha256.New()
	for _, part := range []string{method, path, query} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	h.Write(body)
	return h.Sum(nil)
}

// Response is an answer as kept and replayed.
type Response struct {
	Status int
	// Header holds the headers kept (Content-Type, Location, Link,
	// Cache-Control).
	Header http.Header
	Body   []byte
}

// KeptHeaders are the response headers kept with a key's answer.
var KeptHeaders = []string{"Content-Type", "Location", "Link", "Cache-Control"}

// Claim is the right to run the request of a key: Finish keeps its
// answer, Release gives the key up.
type Claim struct {
	k       *Keys
	project string
	id      string
}

// Begin looks the caller's key up (the project is the principal's of ctx)
// for a request whose fingerprint is hash (32 bytes: SHA-256 of what makes
// the request this request). It returns a claim when the request is to
// run now; the kept answer when the key was used for the same request and
// answered; and an error otherwise: idempotency_key_reused (422) for a
// different request, conflict (409, with a retry delay) while the first
// request runs, conflict (409, no retry) when the first answer was too
// large to keep.
func (k *Keys) Begin(ctx context.Context, key string, hash []byte) (*Claim, *Response, error) {
	if err := CheckKey(key); err != nil {
		return nil, nil, err
	}
	p, err := messaging.PrincipalFrom(ctx)
	if err != nil {
		return nil, nil, err
	}
	for range 4 {
		now := k.svc.Now()
		row, err := k.read.IdempotencyKey.Query().Where(entidk.Key(key)).Only(ctx)
		if ent.IsNotFound(err) {
			c, err := k.insert(ctx, p.ProjectID, "", key, hash, now)
			if ent.IsConstraintError(err) {
				continue // inserted at the same moment elsewhere: look again
			}
			return c, nil, err
		}
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency: look up key: %w", err)
		}
		if row.CreatedAt.Before(now.Add(-k.ttl)) {
			// Expired and not pruned yet: as good as absent.
			c, err := k.insert(ctx, p.ProjectID, row.ID, key, hash, now)
			if errors.Is(err, errLost) || ent.IsConstraintError(err) {
				continue
			}
			return c, nil, err
		}
		if !bytes.Equal(row.RequestHash, hash) {
			return nil, nil, fault.IdempotencyKeyReused(Header,
				"this %s was used for another request (method, path or body differ) in the last %s: use a new key for a new request",
				Header, k.ttl)
		}
		if row.Status != nil {
			return k.replay(row)
		}
		if !row.StartedAt.Before(now.Add(-k.lease)) {
			wait := max(time.Second, min(row.StartedAt.Add(k.lease).Sub(now), 5*time.Second))
			return nil, nil, &fault.Error{Code: fault.ErrConflict.Code, Param: Header, RetryAfter: wait,
				Message: "a request with this " + Header + " is still running: retry once it is done to get its answer"}
		}
		// Started longer ago than the lease and never finished: its
		// replica died. Run afresh.
		c, err := k.insert(ctx, p.ProjectID, row.ID, key, hash, now)
		if errors.Is(err, errLost) || ent.IsConstraintError(err) {
			continue
		}
		return c, nil, err
	}
	return nil, nil, &fault.Error{Code: fault.ErrConflict.Code, Param: Header, RetryAfter: time.Second,
		Message: "requests with this " + Header + " are racing each other: retry"}
}

// errLost: the row to replace was taken over or finished by another
// request first.
var errLost = errors.New("idempotency: key taken over")

// insert starts key for the request hash: a new row, replacing the row
// old (expired, or started and past its lease) when not empty. Pruning
// rides along when due.
func (k *Keys) insert(ctx context.Context, project, old, key string, hash []byte, now time.Time) (*Claim, error) {
	id := ident.New(ident.IdempotencyKey)
	prune := k.pruneDue(now)
	full := false
	_, err := k.log.Write(ctx, project, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tx.Context()
		full = false
		if old != "" {
			n, err := cl.IdempotencyKey.Delete().Where(entidk.ID(old), entidk.Or(
				entidk.CreatedAtLT(now.Add(-k.ttl)),
				entidk.And(entidk.StatusIsNil(), entidk.StartedAtLT(now.Add(-k.lease))),
			)).Exec(tctx)
			if err != nil {
				return err
			}
			if n == 0 {
				return errLost
			}
		}
		if prune {
			sys := tenant.System(tctx)
			ids, err := cl.IdempotencyKey.Query().Where(entidk.CreatedAtLT(now.Add(-k.ttl))).
				Limit(pruneBatch).IDs(sys)
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				if _, err := cl.IdempotencyKey.Delete().Where(entidk.IDIn(ids...)).Exec(sys); err != nil {
					return err
				}
			}
			full = len(ids) == pruneBatch
		}
		return cl.IdempotencyKey.Create().SetID(id).SetKey(key).SetRequestHash(hash).
			SetCreatedAt(now).SetStartedAt(now).Exec(tctx)
	})
	if prune && (err != nil || full) {
		k.mu.Lock()
		k.nextPrune = time.Time{} // not done, or more to do: the next insert prunes
		k.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	return &Claim{k: k, project: project, id: id}, nil
}

// pruneDue reports whether the caller's insert should prune, and if so
// puts the next prune pruneEvery later.
func (k *Keys) pruneDue(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Before(k.nextPrune) {
		return false
	}
	k.nextPrune = now.Add(pruneEvery)
	return true
}

// kept is the sealed form of a Response.
type kept struct {
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body"`
}

func (k *Keys) replay(row *ent.IdempotencyKey) (*Claim, *Response, error) {
	if row.Response == nil || len(*row.Response) == 0 {
		return nil, nil, fault.Conflict(
			"the request with this %s was done (status %d) but its answer (%d bytes) was larger than the %d bytes this gateway keeps: it is not run again; look its result up instead",
			Header, *row.Status, row.ResponseBytes, k.maxResponse).WithParam(Header)
	}
	plain, err := k.box.Open(*row.Response)
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency: open kept answer of %s: %w", row.ID, err)
	}
	var kp kept
	if err := json.Unmarshal(plain, &kp); err != nil {
		return nil, nil, fmt.Errorf("idempotency: decode kept answer of %s: %w", row.ID, err)
	}
	return nil, &Response{Status: *row.Status, Header: kp.Header, Body: kp.Body}, nil
}

// Finish keeps resp as the key's answer: sealed (it may hold a secret
// shown once, such as a new API key), or, when its body is larger than
// MaxResponseBytes, only its status and size. Call it with a context that
// outlives the client (context.WithoutCancel).
func (c *Claim) Finish(ctx context.Context, resp Response) error {
	var sealedResp []byte
	if len(resp.Body) <= c.k.maxResponse {
		h := http.Header{}
		for _, name := range KeptHeaders {
			if v := resp.Header.Values(name); len(v) > 0 {
				h[name] = v
			}
		}
		plain, err := json.Marshal(kept{Header: h, Body: resp.Body})
		if err != nil {
			return fmt.Errorf("idempotency: encode answer: %w", err)
		}
		sealedResp = c.k.box.Seal(plain)
	}
	n := 0
	_, err := c.k.log.Write(ctx, c.project, func(tx *stream.Tx) error {
		u := tx.Client().IdempotencyKey.Update().Where(entidk.ID(c.id), entidk.StatusIsNil()).
			SetStatus(resp.Status).SetResponseBytes(len(resp.Body))
		if sealedResp != nil {
			u.SetResponse(sealedResp)
		}
		var err error
		n, err = u.Save(tx.Context())
		return err
	})
	if err != nil {
		return fmt.Errorf("idempotency: keep answer: %w", err)
	}
	if n == 0 {
		c.k.logger.Warn("idempotency: a request ran longer than the lease: its key was taken over and its answer is not kept",
			"key_id", c.id, "project", c.project, "lease", c.k.lease)
	}
	return nil
}

// Release gives the key up without an answer, so the next request with it
// runs afresh (for answers a client is expected to retry: 5xx, 429).
func (c *Claim) Release(ctx context.Context) error {
	_, err := c.k.log.Write(ctx, c.project, func(tx *stream.Tx) error {
		_, err := tx.Client().IdempotencyKey.Delete().Where(entidk.ID(c.id), entidk.StatusIsNil()).Exec(tx.Context())
		return err
	})
	if err != nil {
		return fmt.Errorf("idempotency: release key: %w", err)
	}
	return nil
}

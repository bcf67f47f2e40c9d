package schema_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/comm-gateway/comm/apikey"
	"github.com/comm-gateway/comm/ent"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	entconnection "github.com/comm-gateway/comm/ent/connection"
	entconversation "github.com/comm-gateway/comm/ent/conversation"
	entidk "github.com/comm-gateway/comm/ent/idempotencykey"
	entmessage "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ent/schema"
	entwebhookattempt "github.com/comm-gateway/comm/ent/webhookattempt"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// row is what the matrix needs of any tenant-owned row.
type row struct {
	id, project, text string // text: the row's String(), to see changes
}

// kind adapts one tenant-owned entity to the matrix. Every function takes
// the context the operation runs with; writes get the transaction's client.
type kind struct {
	name string
	// create makes a row with the required fields set and project_id left
	// to the tenant rule; as, when not empty, sets project_id explicitly.
	create func(ctx context.Context, c *ent.Client, as string) (string, error)
	list   func(ctx context.Context, c *ent.Client) ([]row, error)
	get    func(ctx context.Context, c *ent.Client, id string) (row, error)
	count  func(ctx context.Context, c *ent.Client, id string) (int, bool, error) // Count and Exist of Where(id)
	// updateOne and deleteOne go by id; update and delete by predicate
	// (all rows when id is empty) and return how many rows they touched.
	updateOne func(ctx context.Context, c *ent.Client, id string) error
	update    func(ctx context.Context, c *ent.Client, id string) (int, error)
	deleteOne func(ctx context.Context, c *ent.Client, id string) error
	delete    func(ctx context.Context, c *ent.Client, id string) (int, error)
}

func kinds() []kind {
	return []kind{
		{
			name: "APIKey",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				h := sha256.Sum256([]byte(apikey.New(apikey.SignedInPrefix)))
				b := c.APIKey.Create().SetHash(h[:]).SetKind(entapikey.KindSignedIn).SetDisplay("comm_…abcd")
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.APIKey.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.APIKey.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.APIKey.Query().Where(entapikey.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.APIKey.UpdateOneID(id).SetRevokedAt(time.Now()).Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.APIKey.Update().SetRevokedAt(time.Now())
				if id != "" {
					u.Where(entapikey.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.APIKey.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.APIKey.Delete()
				if id != "" {
					d.Where(entapikey.ID(id))
				}
				return d.Exec(ctx)
			},
		},
		{
			name: "Connection",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				b := c.Connection.Create().SetChannel("test").
					SetCustomerID(ident.New(ident.Customer)).SetAgentID(ident.New(ident.Agent))
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.Connection.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.Connection.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.Connection.Query().Where(entconnection.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Connection.UpdateOneID(id).SetStatus("hijacked").SetName("hijacked").Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.Connection.Update().SetStatus("hijacked")
				if id != "" {
					u.Where(entconnection.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Connection.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.Connection.Delete()
				if id != "" {
					d.Where(entconnection.ID(id))
				}
				return d.Exec(ctx)
			},
		},
		{
			name: "Conversation",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				b := c.Conversation.Create().SetConnectionID(ident.New(ident.Connection)).SetThreadKey("peer@example.com")
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.Conversation.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.Conversation.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.Conversation.Query().Where(entconversation.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Conversation.UpdateOneID(id).SetSubject("hijacked").Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.Conversation.Update().SetSubject("hijacked")
				if id != "" {
					u.Where(entconversation.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Conversation.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.Conversation.Delete()
				if id != "" {
					d.Where(entconversation.ID(id))
				}
				return d.Exec(ctx)
			},
		},
		{
			name: "Message",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				b := c.Message.Create().
					SetConversationID(ident.New(ident.Conversation)).SetConnectionID(ident.New(ident.Connection)).
					SetChannel("test").SetDirection(entmessage.DirectionInbound).SetStatus(entmessage.StatusReceived).
					SetProviderMessageID(ident.New("pm")).SetSender("peer@example.com").SetText("hello")
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.Message.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.Message.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.Message.Query().Where(entmessage.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Message.UpdateOneID(id).SetStatus(entmessage.StatusFailed).SetText("hijacked").Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.Message.Update().SetStatus(entmessage.StatusFailed)
				if id != "" {
					u.Where(entmessage.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.Message.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.Message.Delete()
				if id != "" {
					d.Where(entmessage.ID(id))
				}
				return d.Exec(ctx)
			},
		},
		{
			name: "WebhookAttempt",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				b := c.WebhookAttempt.Create().SetWebhookID("whk_x").SetURL("https://example.com/hook").SetSeq(1).SetLatencyMs(1).SetOk(true)
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.WebhookAttempt.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.WebhookAttempt.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.WebhookAttempt.Query().Where(entwebhookattempt.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.WebhookAttempt.UpdateOneID(id).SetError("tampered").Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.WebhookAttempt.Update().SetError("tampered")
				if id != "" {
					u.Where(entwebhookattempt.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.WebhookAttempt.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.WebhookAttempt.Delete()
				if id != "" {
					d.Where(entwebhookattempt.ID(id))
				}
				return d.Exec(ctx)
			},
		},
		{
			name: "IdempotencyKey",
			create: func(ctx context.Context, c *ent.Client, as string) (string, error) {
				now := time.Now().UTC()
				b := c.IdempotencyKey.Create().SetKey(ident.New("k")).SetRequestHash(make([]byte, 32)).
					SetCreatedAt(now).SetStartedAt(now)
				if as != "" {
					b.SetProjectID(as)
				}
				e, err := b.Save(ctx)
				return idOf(e, err)
			},
			list: func(ctx context.Context, c *ent.Client) ([]row, error) {
				return rows(c.IdempotencyKey.Query().All(ctx))
			},
			get: func(ctx context.Context, c *ent.Client, id string) (row, error) {
				return rowOf(c.IdempotencyKey.Get(ctx, id))
			},
			count: func(ctx context.Context, c *ent.Client, id string) (int, bool, error) {
				return countExist(ctx, c.IdempotencyKey.Query().Where(entidk.ID(id)))
			},
			updateOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.IdempotencyKey.UpdateOneID(id).SetStatus(418).Exec(ctx)
			},
			update: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				u := c.IdempotencyKey.Update().SetStatus(418)
				if id != "" {
					u.Where(entidk.ID(id))
				}
				return u.Save(ctx)
			},
			deleteOne: func(ctx context.Context, c *ent.Client, id string) error {
				return c.IdempotencyKey.DeleteOneID(id).Exec(ctx)
			},
			delete: func(ctx context.Context, c *ent.Client, id string) (int, error) {
				d := c.IdempotencyKey.Delete()
				if id != "" {
					d.Where(entidk.ID(id))
				}
				return d.Exec(ctx)
			},
		},
	}
}

func idOf[E interface{ String() string }](e E, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return rowFrom(e).id, nil
}

func rowOf[E interface{ String() string }](e E, err error) (row, error) {
	if err != nil {
		return row{}, err
	}
	return rowFrom(e), nil
}

func rows[E interface{ String() string }](es []E, err error) ([]row, error) {
	if err != nil {
		return nil, err
	}
	out := make([]row, len(es))
	for i, e := range es {
		out[i] = rowFrom(e)
	}
	slices.SortFunc(out, func(a, b row) int { return cmpString(a.id, b.id) })
	return out, nil
}

func rowFrom(e any) row {
	switch e := e.(type) {
	case *ent.APIKey:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.Connection:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.Conversation:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.Message:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.Webhook:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.WebhookAttempt:
		return row{e.ID, e.ProjectID, e.String()}
	case *ent.IdempotencyKey:
		return row{e.ID, e.ProjectID, e.String()}
	}
	panic("rowFrom: unknown entity")
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type countExister interface {
	Count(context.Context) (int, error)
	Exist(context.Context) (bool, error)
}

func countExist(ctx context.Context, q countExister) (int, bool, error) {
	n, err := q.Count(ctx)
	if err != nil {
		return 0, false, err
	}
	ok, err := q.Exist(ctx)
	return n, ok, err
}

// write runs fn through the event log, the one writer, with ctx's tenant.
func write(ctx context.Context, log *stream.Log, project string, fn func(ctx context.Context, c *ent.Client) error) error {
	_, err := log.Write(ctx, project, func(tx *stream.Tx) error {
		return fn(tx.Context(), tx.Client())
	})
	return err
}

func newProject(t *testing.T, log *stream.Log) string {
	t.Helper()
	id := ident.New(ident.Project)
	err := write(tenant.WithProject(context.Background(), id), log, id, func(ctx context.Context, c *ent.Client) error {
		return c.Project.Create().SetID(id).SetName("p").
			SetCustomerID(ident.New(ident.Customer)).SetAgentID(ident.New(ident.Agent)).Exec(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestIsolationMatrix: with two projects A and B holding rows of every
// tenant-owned entity, A's context sees and changes none of B's rows on
// list, get, count, update and delete (by id and by predicate), cannot
// create rows in B, and a context with no tenant is refused outright. B's
// rows are checked with the system context afterwards.
func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		db := storetest.Open(t, cfg)
		log, err := stream.Open(db, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(log.Close)
		projA, projB := newProject(t, log), newProject(t, log)
		bg := context.Background()
		ctxA, ctxB, sys := tenant.WithProject(bg, projA), tenant.WithProject(bg, projB), tenant.System(bg)
		read := db.Ent

		for _, k := range kinds() {
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				make2 := func(ctx context.Context, project string) []string {
					var ids []string
					for range 2 {
						var id string
						err := write(ctx, log, project, func(ctx context.Context, c *ent.Client) (err error) {
							id, err = k.create(ctx, c, "")
							return err
						})
						if err != nil {
							t.Fatalf("create in %s: %v", project, err)
						}
						ids = append(ids, id)
					}
					return ids
				}
				idsA, idsB := make2(ctxA, projA), make2(ctxB, projB)

				// Creates were stamped with the context's project.
				all, err := k.list(sys, read)
				if err != nil {
					t.Fatalf("system list: %v", err)
				}
				owner := map[string]string{}
				for _, r := range all {
					owner[r.id] = r.project
				}
				for _, id := range idsA {
					if owner[id] != projA {
						t.Errorf("row %s made with A's context belongs to %q", id, owner[id])
					}
				}
				for _, id := range idsB {
					if owner[id] != projB {
						t.Errorf("row %s made with B's context belongs to %q", id, owner[id])
					}
				}
				before := snapshot(t, k, sys, read, idsB)

				// List: A sees exactly its own rows.
				assertIDs(t, "A's list", k, ctxA, read, idsA)

				for _, idB := range idsB {
					// Get, count, exist: B's row is as unknown as a made-up id.
					if _, err := k.get(ctxA, read, idB); !ent.IsNotFound(err) {
						t.Errorf("A gets B's %s: %v, want not found", idB, err)
					}
					if n, ok, err := k.count(ctxA, read, idB); err != nil || n != 0 || ok {
						t.Errorf("A counts B's %s: %d, exist %v, %v; want 0, false", idB, n, ok, err)
					}
					// Update and delete by id: not found, nothing changes.
					err := write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) error {
						return k.updateOne(ctx, c, idB)
					})
					if !ent.IsNotFound(err) {
						t.Errorf("A updates B's %s: %v, want not found", idB, err)
					}
					err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) error {
						return k.deleteOne(ctx, c, idB)
					})
					if !ent.IsNotFound(err) {
						t.Errorf("A deletes B's %s: %v, want not found", idB, err)
					}
					// Update and delete by predicate: zero rows.
					var nu, nd int
					err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) (err error) {
						if nu, err = k.update(ctx, c, idB); err != nil {
							return err
						}
						nd, err = k.delete(ctx, c, idB)
						return err
					})
					if err != nil || nu != 0 || nd != 0 {
						t.Errorf("A updates/deletes where id = B's %s: %d, %d rows, %v; want 0, 0", idB, nu, nd, err)
					}
				}
				// A's own rows are reachable, by id and in bulk; a bulk update
				// touches only A's rows.
				if _, err := k.get(ctxA, read, idsA[0]); err != nil {
					t.Errorf("A gets its own %s: %v", idsA[0], err)
				}
				var n int
				err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) (err error) {
					if err := k.updateOne(ctx, c, idsA[0]); err != nil {
						return err
					}
					n, err = k.update(ctx, c, "")
					return err
				})
				if err != nil || n != len(idsA) {
					t.Errorf("A's bulk update: %d rows, %v; want %d", n, err, len(idsA))
				}

				// Create naming another project is refused; naming its own is fine.
				for _, as := range []string{projB, "proj_" + projB[5:] + "x", " " + projA} {
					err := write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) error {
						_, err := k.create(ctx, c, as)
						return err
					})
					if err == nil {
						t.Errorf("A creates a row naming project %q: accepted", as)
					}
				}
				var own string
				err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) (err error) {
					own, err = k.create(ctx, c, projA)
					return err
				})
				if err != nil {
					t.Errorf("A creates a row naming project A: %v", err)
				}
				idsA = append(idsA, own)
				slices.Sort(idsA)

				// No tenant at all: refused before the database, for reads
				// and writes. An empty project is no project.
				for name, ctx := range map[string]context.Context{
					"background":    bg,
					"empty project": tenant.WithProject(bg, ""),
				} {
					if _, err := k.list(ctx, read); !errors.Is(err, schema.ErrNoTenant) {
						t.Errorf("%s list: %v, want ErrNoTenant", name, err)
					}
					if _, err := k.get(ctx, read, idsA[0]); !errors.Is(err, schema.ErrNoTenant) {
						t.Errorf("%s get: %v, want ErrNoTenant", name, err)
					}
					if _, _, err := k.count(ctx, read, idsA[0]); !errors.Is(err, schema.ErrNoTenant) {
						t.Errorf("%s count: %v, want ErrNoTenant", name, err)
					}
					for op, fn := range map[string]func(context.Context, *ent.Client) error{
						"create":    func(ctx context.Context, c *ent.Client) error { _, err := k.create(ctx, c, ""); return err },
						"create A":  func(ctx context.Context, c *ent.Client) error { _, err := k.create(ctx, c, projA); return err },
						"updateOne": func(ctx context.Context, c *ent.Client) error { return k.updateOne(ctx, c, idsA[0]) },
						"update":    func(ctx context.Context, c *ent.Client) error { _, err := k.update(ctx, c, ""); return err },
						"deleteOne": func(ctx context.Context, c *ent.Client) error { return k.deleteOne(ctx, c, idsA[0]) },
						"delete":    func(ctx context.Context, c *ent.Client) error { _, err := k.delete(ctx, c, ""); return err },
					} {
						if err := write(ctx, log, projA, fn); !errors.Is(err, schema.ErrNoTenant) {
							t.Errorf("%s %s: %v, want ErrNoTenant", name, op, err)
						}
					}
				}

				// B is untouched: same rows, same values; A still has its three.
				assertIDs(t, "B's list", k, ctxB, read, idsB)
				if after := snapshot(t, k, sys, read, idsB); !slices.Equal(before, after) {
					t.Errorf("B's rows changed:\nbefore %v\nafter  %v", before, after)
				}
				assertIDs(t, "A's list after the attempts", k, ctxA, read, idsA)

				// A bulk delete removes A's rows only.
				err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) (err error) {
					n, err = k.delete(ctx, c, "")
					return err
				})
				if err != nil || n != len(idsA) {
					t.Errorf("A's bulk delete: %d rows, %v; want %d", n, err, len(idsA))
				}
				assertIDs(t, "system list after A's bulk delete", k, sys, read, idsB)
				if after := snapshot(t, k, sys, read, idsB); !slices.Equal(before, after) {
					t.Errorf("B's rows changed by A's bulk delete:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	})
}

// TestUpsertStaysInTenant: an upsert (the sql/upsert feature) made with
// A's context whose conflict target matches a row of B must neither change
// that row nor hand back its id.
//
// ON CONFLICT ... DO UPDATE runs in the database after the tenant hook has
// stamped the new row with A, and neither the interceptor nor the hook sees
// it; what keeps it in A is that composite unique indexes of tenant-owned
// tables lead with project_id (TestUniqueIndexesLeadWithProject).
func TestUpsertStaysInTenant(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		db := storetest.Open(t, cfg)
		log, err := stream.Open(db, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(log.Close)
		projA, projB := newProject(t, log), newProject(t, log)
		bg := context.Background()
		ctxA, ctxB, sys := tenant.WithProject(bg, projA), tenant.WithProject(bg, projB), tenant.System(bg)
		conn := ident.New(ident.Connection)
		upsert := func(ctx context.Context, c *ent.Client, subject string) (string, error) {
			return c.Conversation.Create().SetConnectionID(conn).SetThreadKey("t").SetSubject(subject).
				OnConflictColumns(entconversation.FieldProjectID, entconversation.FieldConnectionID, entconversation.FieldThreadKey).
				UpdateSubject().ID(ctx)
		}
		var idB, idA string
		if err := write(ctxB, log, projB, func(ctx context.Context, c *ent.Client) (err error) {
			idB, err = upsert(ctx, c, "B's")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		err = write(ctxA, log, projA, func(ctx context.Context, c *ent.Client) (err error) {
			idA, err = upsert(ctx, c, "A's")
			return err
		})
		if err == nil && idA == idB {
			t.Errorf("A's upsert returned B's conversation id %s", idB)
		}
		got, err := db.Ent.Conversation.Get(sys, idB)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProjectID != projB || got.Subject == nil || *got.Subject != "B's" {
			t.Errorf("B's conversation after A's upsert: %v", got)
		}
	})
}

func snapshot(t *testing.T, k kind, ctx context.Context, c *ent.Client, ids []string) []row {
	t.Helper()
	out := make([]row, len(ids))
	for i, id := range ids {
		r, err := k.get(ctx, c, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		out[i] = r
	}
	return out
}

func assertIDs(t *testing.T, what string, k kind, ctx context.Context, c *ent.Client, want []string) {
	t.Helper()
	got, err := k.list(ctx, c)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r.id
	}
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(ids, want) {
		t.Errorf("%s: %v, want %v", what, ids, want)
	}
}

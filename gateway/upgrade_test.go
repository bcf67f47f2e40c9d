package gateway_test

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/gateway"
	"github.com/comm-gateway/comm/gateway/gatewaytest"
	"github.com/comm-gateway/comm/idempotency"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/signature"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/webhook"
)

// The settings the fixtures were made with (testdata/upgrade/make.go).
const (
	fixtureEncryptionKey = "dXBncmFkZS1maXh0dXJlLWtleS1ub3Qtc2VjcmV0ISE="
	fixtureWebhookSecret = "whsec_dXBncmFkZS1maXh0dXJlLXdlYmhvb2stc2VjcmV0"
)

// upgradeFixture is a fixture.json: what the user of an old release saw.
type upgradeFixture struct {
	Version      string            `json:"version"`
	Commit       string            `json:"commit"`
	Engine       string            `json:"engine"`
	MadeAt       time.Time         `json:"made_at"`
	ProjectID    string            `json:"project_id"`
	SandboxKey   string            `json:"sandbox_key"`
	SignedInKey  string            `json:"signed_in_key"`
	AccountID    string            `json:"account_id"`
	TestConn     string            `json:"test_connection_id"`
	EmailConn    string            `json:"email_connection_id"`
	EmailAddress string            `json:"email_address"`
	Inbound      string            `json:"inbound_message_id"`
	Reply        string            `json:"reply_message_id"`
	Conversation string            `json:"conversation_id"`
	Events       []json.RawMessage `json:"events"`
	Head         int64             `json:"head"`
	Cursor       int64             `json:"webhook_cursor"`
	Delivered    []int64           `json:"delivered"`
	Idempotency  struct {
		Key    string `json:"key"`
		Path   string `json:"path"`
		Body   string `json:"body"`
		Status int    `json:"status"`
		Answer string `json:"answer"`
		Kept   bool   `json:"kept"`
	} `json:"idempotency"`
}

func readFixture(t *testing.T, path string) upgradeFixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f upgradeFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// TestUpgrade opens the database every earlier release wrote
// (testdata/upgrade/<version>/, made by make.sh with that release's binary)
// with this code, on SQLite and on PostgreSQL, the way comm serve opens it,
// and uses it as the user of the old release would: the old keys work,
// the log keeps its events and seqs and continues after them, the
// conversations, messages, account and inbox are there, the webhook
// endpoint resumes after its cursor with the old secret, and opening the
// database again changes nothing.
func TestUpgrade(t *testing.T) {
	t.Parallel()
	versions, err := filepath.Glob("testdata/upgrade/*/sqlite/fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) == 0 {
		t.Fatal("no fixtures under testdata/upgrade")
	}
	for _, path := range versions {
		dir := filepath.Dir(filepath.Dir(path))
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			t.Run("sqlite", func(t *testing.T) {
				t.Parallel()
				f := readFixture(t, filepath.Join(dir, "sqlite", "fixture.json"))
				data := t.TempDir()
				b, err := os.ReadFile(filepath.Join(dir, "sqlite", "comm.db"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(store.SQLitePath(data), b, 0o600); err != nil {
					t.Fatal(err)
				}
				upgrade(t, store.Config{DataDir: data, SQLiteSync: "normal"}, f)
			})
			t.Run("postgres", func(t *testing.T) {
				t.Parallel()
				cfg := storetest.Postgres(t)
				f := readFixture(t, filepath.Join(dir, "postgres", "fixture.json"))
				dump, err := os.ReadFile(filepath.Join(dir, "postgres", "dump.sql"))
				if err != nil {
					t.Fatal(err)
				}
				// The dump names no schema: it lands in the test's own
				// (the URL's search_path).
				db, err := sql.Open("postgres", cfg.URL)
				if err != nil {
					t.Fatal(err)
				}
				_, err = db.Exec(string(dump))
				db.Close()
				if err != nil {
					t.Fatalf("load dump.sql: %v", err)
				}
				upgrade(t, cfg, f)
			})
		})
	}
}

// schemaOf describes the database's tables, columns and indexes, to see
// that a second start changes nothing.
func schemaOf(t *testing.T, db *store.DB) string {
	t.Helper()
	q := `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`
	if db.IsPostgres() {
		q = `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = current_schema()
			UNION ALL SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
			UNION ALL SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
				WHERE connamespace = current_schema()::regnamespace
			ORDER BY 1`
	}
	rows, err := db.R.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// hookReceiver is the webhook endpoint after the upgrade: it checks each
// delivery's signature with the fixture's secret and records its seq.
type hookReceiver struct {
	mu   sync.Mutex
	seqs []int64
	errs []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		Seq int64 `json:"seq"`
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sec, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	if err := signature.Verify(fixtureWebhookSecret, r.Header, body, time.Unix(sec, 0)); err != nil {
		h.errs = append(h.errs, fmt.Sprintf("signature: %v", err))
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		h.errs = append(h.errs, fmt.Sprintf("body %s: %v", body, err))
	}
	h.seqs = append(h.seqs, ev.Seq)
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) got() ([]int64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seqs), slices.Clone(h.errs)
}

func upgrade(t *testing.T, cfg store.Config, f upgradeFixture) {
	if f.Head == 0 || int64(len(f.Events)) != f.Head || f.Cursor >= f.Head {
		t.Fatalf("fixture %s/%s: head %d, %d events, cursor %d", f.Version, f.Engine, f.Head, len(f.Events), f.Cursor)
	}
	// The first start migrates; the receiver has moved since the old
	// release ran (a test-only change of the stored URL).
	rcv := &hookReceiver{}
	hook := httptest.NewServer(rcv)
	t.Cleanup(hook.Close)
	db, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open the %s database of %s: %v", f.Engine, f.Version, err)
	}
	migrated := schemaOf(t, db)
	if _, err := db.W.Exec(db.Rebind(`UPDATE webhooks SET url = ? WHERE project_id = ?`), hook.URL+"/hook", f.ProjectID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A second start changes nothing.
	db = storetest.Open(t, cfg)
	if again := schemaOf(t, db); again != migrated {
		t.Errorf("the second start changed the schema:\nafter the first:\n%s\nafter the second:\n%s", migrated, again)
	}
	db.Close()

	key, err := base64.StdEncoding.DecodeString(fixtureEncryptionKey)
	if err != nil {
		t.Fatal(err)
	}
	box, err := sealed.New(key)
	if err != nil {
		t.Fatal(err)
	}
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{
		Config: gateway.Config{
			Service: messaging.Options{Box: box},
			Webhook: webhook.Options{AllowPrivate: true},
			// Keys are kept 24 h; the fixture's is older.
			Server: server.Options{Idempotency: idempotency.Options{TTL: 100 * 365 * 24 * time.Hour}},
		},
		Workers: &gateway.Workers{Outbox: &delivery.Outbox{}, Webhooks: &delivery.Webhooks{}},
	})
	call := func(method, path, key, body string, want int, out any) gatewaytest.Response {
		t.Helper()
		req := gatewaytest.Request{Method: method, Path: path, Key: key, Body: body}
		if body != "" {
			req.ContentType = "application/json"
		}
		resp := g.Do(t, req)
		if resp.Status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.Status, want, resp.Body)
		}
		if out != nil {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, resp.Body)
			}
		}
		return resp
	}

	// The old keys work: the sandbox key and the signed-in one.
	var p struct {
		ID      string `json:"id"`
		LastSeq int64  `json:"last_seq"`
	}
	call("GET", "/v1/project", f.SandboxKey, "", 200, &p)
	if p.ID != f.ProjectID || p.LastSeq != f.Head {
		t.Errorf("project %+v, want %s at seq %d", p, f.ProjectID, f.Head)
	}
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
		Balance  string `json:"balance"`
		Projects []struct {
			ID string `json:"id"`
		} `json:"projects"`
	}
	call("GET", "/v1/account", f.SignedInKey, "", 200, &acct)
	if acct.Account.ID != f.AccountID || acct.Balance != "100.00" || len(acct.Projects) != 1 || acct.Projects[0].ID != f.ProjectID {
		t.Errorf("account %+v, want %s with 100.00 and project %s", acct, f.AccountID, f.ProjectID)
	}
	var keys []struct {
		ID string `json:"id"`
	}
	call("GET", "/v1/keys", f.SignedInKey, "", 200, &keys)
	if len(keys) != 2 {
		t.Errorf("%d keys, want the sandbox key and the signed-in one", len(keys))
	}

	// The log: the same events at the same seqs, byte for byte.
	var evs []json.RawMessage
	call("GET", "/v1/events?after_seq=0&limit=100", f.SandboxKey, "", 200, &evs)
	if len(evs) != len(f.Events) {
		t.Fatalf("%d events after the upgrade, %d before", len(evs), len(f.Events))
	}
	for i := range evs {
		var a, b bytes.Buffer
		json.Compact(&a, evs[i])
		json.Compact(&b, f.Events[i])
		if a.String() != b.String() {
			t.Errorf("event %d after the upgrade:\n%s\nbefore:\n%s", i+1, a.String(), b.String())
		}
	}

	// Conversations and messages read as before.
	var convs []struct {
		ID           string `json:"id"`
		ConnectionID string `json:"connection_id"`
	}
	call("GET", "/v1/conversations", f.SandboxKey, "", 200, &convs)
	var sawTest, sawMail bool
	for _, c := range convs {
		sawTest = sawTest || c.ID == f.Conversation
		sawMail = sawMail || c.ConnectionID == f.EmailConn
	}
	if len(convs) != 3 || !sawTest || !sawMail {
		t.Errorf("conversations %+v, want 3 with %s and the inbox's", convs, f.Conversation)
	}
	var msgs []struct {
		ID        string `json:"id"`
		Direction string `json:"direction"`
		Text      string `json:"text"`
		Status    string `json:"status"`
	}
	call("GET", "/v1/conversations/"+f.Conversation+"/messages", f.SandboxKey, "", 200, &msgs)
	var in, out bool
	for _, m := range msgs {
		in = in || (m.ID == f.Inbound && m.Text == "hello from before the upgrade")
		out = out || (m.ID == f.Reply && m.Text == "hello ann" && m.Status == "sent")
	}
	if !in || !out {
		t.Errorf("messages of %s: %+v, want the inbound %s and the sent reply %s", f.Conversation, msgs, f.Inbound, f.Reply)
	}
	var mail struct {
		Address string `json:"address"`
		Status  string `json:"status"`
	}
	call("GET", "/v1/connections/"+f.EmailConn, f.SandboxKey, "", 200, &mail)
	if mail.Address != f.EmailAddress || mail.Status != "active" {
		t.Errorf("inbox %+v, want %s active", mail, f.EmailAddress)
	}

	// An Idempotency-Key sent before the upgrade answers as it did, where
	// the old release kept it.
	if f.Idempotency.Kept {
		resp := g.Do(t, gatewaytest.Request{Method: "POST", Path: f.Idempotency.Path, Key: f.SandboxKey,
			ContentType: "application/json", Body: f.Idempotency.Body, Header: map[string]string{idempotency.Header: f.Idempotency.Key}})
		if resp.Status != f.Idempotency.Status || resp.Header.Get(idempotency.ReplayedHeader) != "true" ||
			string(resp.Body) != f.Idempotency.Answer {
			t.Errorf("retry with the old Idempotency-Key: %d replayed=%q %s, want %d %s", resp.Status,
				resp.Header.Get(idempotency.ReplayedHeader), resp.Body, f.Idempotency.Status, f.Idempotency.Answer)
		}
	}

	// Someone writes after the upgrade: seq continues, a reply goes out.
	var msg struct {
		ID string `json:"id"`
	}
	call("POST", "/v1/connections/"+f.TestConn+"/inbound", f.SandboxKey, `{"sender":"dan@example.com","text":"after the upgrade"}`, 201, &msg)
	var next []struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	}
	call("GET", fmt.Sprintf("/v1/events?after_seq=%d", f.Head), f.SandboxKey, "", 200, &next)
	if len(next) != 1 || next[0].Seq != f.Head+1 || next[0].Type != "message.received" {
		t.Fatalf("events after %d: %+v, want message.received at %d", f.Head, next, f.Head+1)
	}
	call("POST", "/v1/messages/"+msg.ID+"/reply", f.SandboxKey, `{"text":"hello dan"}`, 202, nil)
	gatewaytest.WaitFor(t, "message.sent after the upgrade", 15*time.Second, func() bool {
		call("GET", fmt.Sprintf("/v1/events?after_seq=%d", f.Head+1), f.SandboxKey, "", 200, &next)
		return len(next) == 1 && next[0].Seq == f.Head+2 && next[0].Type == "message.sent"
	})

	// The webhook endpoint resumes after its cursor, signed with the
	// secret sealed before the upgrade, and reaches the head.
	gatewaytest.WaitFor(t, "webhook deliveries up to the head", 30*time.Second, func() bool {
		seqs, _ := rcv.got()
		return len(seqs) > 0 && seqs[len(seqs)-1] >= f.Head+2
	})
	seqs, errs := rcv.got()
	var want []int64
	for s := f.Cursor + 1; s <= f.Head+2; s++ {
		want = append(want, s)
	}
	if !slices.Equal(seqs, want) || len(errs) > 0 {
		t.Errorf("webhook delivered %v (errors %q), want %v (cursor %d kept)", seqs, errs, want, f.Cursor)
	}
	g.Stop()

	// And a start after all that still changes nothing.
	db = storetest.Open(t, cfg)
	if again := schemaOf(t, db); again != migrated {
		t.Errorf("a later start changed the schema:\nbefore:\n%s\nafter:\n%s", migrated, again)
	}
}

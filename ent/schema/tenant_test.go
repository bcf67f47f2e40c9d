package schema_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	sqlschema "entgo.io/ent/dialect/sql/schema"

	"github.com/comm-gateway/comm/ent"
	entaccount "github.com/comm-gateway/comm/ent/account"
	entapikey "github.com/comm-gateway/comm/ent/apikey"
	entattachment "github.com/comm-gateway/comm/ent/attachment"
	entbinding "github.com/comm-gateway/comm/ent/binding"
	entblob "github.com/comm-gateway/comm/ent/blob"
	entconnection "github.com/comm-gateway/comm/ent/connection"
	entconversation "github.com/comm-gateway/comm/ent/conversation"
	entcreditentry "github.com/comm-gateway/comm/ent/creditentry"
	entdevicerequest "github.com/comm-gateway/comm/ent/devicerequest"
	entdomain "github.com/comm-gateway/comm/ent/domain"
	entidk "github.com/comm-gateway/comm/ent/idempotencykey"
	entlease "github.com/comm-gateway/comm/ent/lease"
	entlineanswer "github.com/comm-gateway/comm/ent/lineanswer"
	entmessage "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ent/migrate"
	entpendingreceipt "github.com/comm-gateway/comm/ent/pendingreceipt"
	entproject "github.com/comm-gateway/comm/ent/project"
	entstate "github.com/comm-gateway/comm/ent/providerstate"
	_ "github.com/comm-gateway/comm/ent/runtime" // schema hooks and interceptors
	"github.com/comm-gateway/comm/ent/schema"
	entwebhook "github.com/comm-gateway/comm/ent/webhook"
	entwebhookattempt "github.com/comm-gateway/comm/ent/webhookattempt"
	entwebsession "github.com/comm-gateway/comm/ent/websession"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/tenant"
)

// notTenantOwned lists the tables that may go without the tenant rule, and
// why. Nothing else with a project_id column may.
var notTenantOwned = map[string]string{
	entproject.Table:       "it is the tenant",
	entaccount.Table:       "an account owns projects; read and written only by the sign-in flow, never through a project's key",
	entdevicerequest.Table: "a sign-in in progress, before any key exists; found by the hash of its code",
	entcreditentry.Table:   "the ledger of an account, which spans its projects",
	entwebsession.Table:    "a browser's sign-in to the /device page, of an account, before and beside any project",
	entlease.Table:         "a replica's hold on work of the whole gateway (the operator's app session), no project's",
	entstate.Table:         "a provider session's progress per credential (keyed by a hash of the bot token), shared by the replicas; written only by adapters through channels.State, never through a project's key",
	"events":               "not an ent table: written and read only by package stream, keyed by (project_id, seq) by construction",
	"event_floors":         "not an ent table: retention's earliest kept seq per project, written and read only by package stream, keyed by project_id",
	"event_type_floors":    "not an ent table: retention's last deleted seq per project and type, written and read only by package stream, keyed by (project_id, type)",
}

// schemas maps every ent table to its schema type. A new ent type makes
// TestSchemaTenantMixin fail until it is added here, and so checked.
var schemas = map[string]entgo.Interface{
	entaccount.Table:        schema.Account{},
	entapikey.Table:         schema.APIKey{},
	entcreditentry.Table:    schema.CreditEntry{},
	entdevicerequest.Table:  schema.DeviceRequest{},
	entattachment.Table:     schema.Attachment{},
	entblob.Table:           schema.Blob{},
	entdomain.Table:         schema.Domain{},
	entconnection.Table:     schema.Connection{},
	entconversation.Table:   schema.Conversation{},
	entmessage.Table:        schema.Message{},
	entproject.Table:        schema.Project{},
	entwebhook.Table:        schema.Webhook{},
	entwebhookattempt.Table: schema.WebhookAttempt{},
	entwebsession.Table:     schema.WebSession{},
	entlease.Table:          schema.Lease{},
	entstate.Table:          schema.ProviderState{},
	entpendingreceipt.Table: schema.PendingReceipt{},
	entbinding.Table:        schema.Binding{},
	entlineanswer.Table:     schema.LineAnswer{},
	entidk.Table:            schema.IdempotencyKey{},
}

// TestSchemaTenantMixin walks the generated table list: every table with a
// project_id column must come from a schema whose mixins include
// TenantMixin (which declares that column), unless it is allowlisted.
func TestSchemaTenantMixin(t *testing.T) {
	t.Parallel()
	inMigrate := map[string]bool{}
	for _, tbl := range migrate.Tables {
		inMigrate[tbl.Name] = true
		s, ok := schemas[tbl.Name]
		if !ok {
			t.Errorf("table %q has no entry in this test's schemas map: add its ent/schema type so the tenant rule is checked", tbl.Name)
			continue
		}
		// The map is right when every field the schema declares is a
		// column of the table.
		fields := declaredFields(s)
		for name := range fields {
			if !slices.ContainsFunc(tbl.Columns, func(c *sqlschema.Column) bool { return c.Name == name }) {
				t.Errorf("table %q has no column %q, which %T declares: the schemas map is wrong", tbl.Name, name, s)
			}
		}
		hasProject := slices.ContainsFunc(tbl.Columns, func(c *sqlschema.Column) bool { return c.Name == "project_id" })
		mixed := hasTenantMixin(s)
		why, allowed := notTenantOwned[tbl.Name]
		switch {
		case allowed && mixed:
			t.Errorf("table %q is allowlisted (%s) yet has TenantMixin: drop it from the allowlist", tbl.Name, why)
		case allowed:
			t.Logf("table %q: not tenant-owned (%s)", tbl.Name, why)
		case hasProject && !mixed:
			t.Errorf("table %q has a project_id column but %T lacks schema.TenantMixin: its rows are not isolated", tbl.Name, s)
		case hasProject && fields["project_id"] != "schema.TenantMixin":
			t.Errorf("table %q: project_id is declared by %s, not by schema.TenantMixin", tbl.Name, fields["project_id"])
		case mixed:
			t.Logf("table %q: tenant-owned", tbl.Name)
		}
	}
	for name := range schemas {
		if !inMigrate[name] {
			t.Errorf("schemas map names table %q, which ent does not generate", name)
		}
	}
	if !inMigrate[entproject.Table] {
		t.Errorf("allowlisted table %q is gone: update the allowlist", entproject.Table)
	}
}

// declaredFields returns the fields s declares, its mixins' included, each
// with what declares it.
func declaredFields(s entgo.Interface) map[string]string {
	out := map[string]string{}
	for _, m := range s.Mixin() {
		for _, f := range m.Fields() {
			out[f.Descriptor().Name] = fmt.Sprintf("%T", m)
		}
	}
	for _, f := range s.Fields() {
		out[f.Descriptor().Name] = fmt.Sprintf("%T", s)
	}
	return out
}

func hasTenantMixin(s entgo.Interface) bool {
	for _, m := range s.Mixin() {
		switch m.(type) {
		case schema.TenantMixin, *schema.TenantMixin:
			return true
		}
	}
	return false
}

// errStop is what the recording driver answers every statement with.
var errStop = errors.New("recording driver: statement not run")

// recorder is an ent driver that records the statements it is given and
// runs none of them.
type recorder struct {
	mu    sync.Mutex
	stmts []stmt
}

type stmt struct {
	query string
	args  []any
}

func (r *recorder) record(query string, args any) error {
	a, _ := args.([]any)
	r.mu.Lock()
	r.stmts = append(r.stmts, stmt{query, a})
	r.mu.Unlock()
	return errStop
}

func (r *recorder) take() []stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stmts
	r.stmts = nil
	return s
}

func (r *recorder) Exec(_ context.Context, query string, args, _ any) error {
	return r.record(query, args)
}

func (r *recorder) Query(_ context.Context, query string, args, _ any) error {
	return r.record(query, args)
}

func (r *recorder) Tx(context.Context) (dialect.Tx, error) { return dialect.NopTx(r), nil }
func (r *recorder) Close() error                           { return nil }
func (r *recorder) Dialect() string                        { return dialect.SQLite }

var fromTable = regexp.MustCompile("(?i)\\b(?:FROM|INTO)\\s+[`\"](\\w+)[`\"]")

// entityClient is one entity's client of an ent.Client, found by reflection
// so that a new entity is swept without anyone listing it.
type entityClient struct {
	field string
	v     reflect.Value
}

func entityClients(c *ent.Client) []entityClient {
	var out []entityClient
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		fv := v.Field(i)
		if !f.IsExported() || fv.Kind() != reflect.Pointer {
			continue
		}
		if !fv.MethodByName("Query").IsValid() || !fv.MethodByName("Delete").IsValid() || !fv.MethodByName("Create").IsValid() {
			continue
		}
		out = append(out, entityClient{f.Name, fv})
	}
	return out
}

// call calls a method by name and returns its results.
func call(v reflect.Value, method string, args ...any) []reflect.Value {
	m := v.MethodByName(method)
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		in[i] = reflect.ValueOf(a)
	}
	return m.Call(in)
}

func lastErr(out []reflect.Value) error {
	err, _ := out[len(out)-1].Interface().(error)
	return err
}

// sweep is what the recording driver saw of one entity.
type sweep struct {
	entity  string
	table   string
	guarded bool     // bare contexts are refused and scoped ones filtered, on query, delete and create
	why     []string // what failed, when not guarded
}

// sweepEntities runs a query, a delete and a create of every entity of the
// generated client, with a bare context, a project's context and the system
// context, against the recording driver. It finds each entity's table from
// the SQL and reports whether the tenant rule held for every operation.
func sweepEntities(t *testing.T) map[string]sweep {
	t.Helper()
	rec := &recorder{}
	client := ent.NewClient(ent.Driver(rec))
	bare := context.Background()
	projA, projB := ident.New(ident.Project), ident.New(ident.Project)
	ctxA := tenant.WithProject(bare, projA)
	sys := tenant.System(bare)
	out := map[string]sweep{}
	for _, ec := range entityClients(client) {
		s := sweep{entity: ec.field, guarded: true}
		fail := func(format string, args ...any) {
			s.guarded = false
			s.why = append(s.why, fmt.Sprintf(format, args...))
		}

		// The system context reaches the database; its SQL names the table.
		if err := lastErr(call(call(ec.v, "Query")[0], "All", sys)); !errors.Is(err, errStop) {
			t.Fatalf("%s: system query: %v, want it to reach the driver", ec.field, err)
		}
		stmts := rec.take()
		if len(stmts) != 1 {
			t.Fatalf("%s: system query ran %d statements", ec.field, len(stmts))
		}
		m := fromTable.FindStringSubmatch(stmts[0].query)
		if m == nil {
			t.Fatalf("%s: no table in %q", ec.field, stmts[0].query)
		}
		s.table = m[1]
		if strings.Contains(stmts[0].query, " WHERE ") {
			fail("system query is filtered: %s", stmts[0].query)
		}

		// Query: bare is refused before the database, a project's context
		// is filtered by that project.
		if err := lastErr(call(call(ec.v, "Query")[0], "All", bare)); !errors.Is(err, schema.ErrNoTenant) {
			fail("bare query: %v, want ErrNoTenant", err)
		}
		if st := rec.take(); len(st) > 0 {
			fail("bare query reached the database: %s", st[0].query)
		}
		err := lastErr(call(call(ec.v, "Query")[0], "All", ctxA))
		if st := rec.take(); len(st) != 1 || !filtered(st[0], projA) {
			fail("scoped query not filtered by project: %v (%v)", st, err)
		}

		// Delete: likewise (update takes the same path through the hook).
		if err := lastErr(call(call(ec.v, "Delete")[0], "Exec", bare)); !errors.Is(err, schema.ErrNoTenant) {
			fail("bare delete: %v, want ErrNoTenant", err)
		}
		if st := rec.take(); len(st) > 0 {
			fail("bare delete reached the database: %s", st[0].query)
		}
		err = lastErr(call(call(ec.v, "Delete")[0], "Exec", ctxA))
		if st := rec.take(); len(st) != 1 || !filtered(st[0], projA) {
			fail("scoped delete not filtered by project: %v (%v)", st, err)
		}

		// Create: bare is refused; naming another project is refused.
		if err := lastErr(call(call(ec.v, "Create")[0], "Exec", bare)); !errors.Is(err, schema.ErrNoTenant) {
			fail("bare create: %v, want ErrNoTenant", err)
		}
		create := call(ec.v, "Create")[0]
		mut := call(create, "Mutation")[0].Interface().(ent.Mutation)
		if err := mut.SetField("project_id", projB); err != nil {
			fail("create has no project_id field: %v", err)
		} else if err := lastErr(call(create, "Exec", ctxA)); err == nil || errors.Is(err, errStop) || ent.IsValidationError(err) {
			// The row has none of its required fields: a create the rule
			// let through fails validation instead of being refused.
			fail("create naming another project under a project's context: %v, want refused by the tenant rule", err)
		}
		if st := rec.take(); len(st) > 0 {
			fail("refused create reached the database: %s", st[0].query)
		}
		out[s.table] = s
	}
	return out
}

// filtered reports whether st restricts project_id to project.
func filtered(st stmt, project string) bool {
	return strings.Contains(st.query, "`project_id` = ?") && slices.Contains(st.args, any(project))
}

// TestEveryTenantTableGuarded sweeps every entity of the generated client
// and fails if a table with a project_id column does not have the tenant
// rule wired in (schema mixin present and its hooks and interceptors
// registered by ent/runtime).
func TestEveryTenantTableGuarded(t *testing.T) {
	t.Parallel()
	swept := sweepEntities(t)
	for _, tbl := range migrate.Tables {
		s, ok := swept[tbl.Name]
		if !ok {
			t.Errorf("table %q: no entity client of ent.Client reads it", tbl.Name)
			continue
		}
		hasProject := slices.ContainsFunc(tbl.Columns, func(c *sqlschema.Column) bool { return c.Name == "project_id" })
		_, allowed := notTenantOwned[tbl.Name]
		switch {
		case hasProject && !allowed && !s.guarded:
			t.Errorf("table %q (%s) has a project_id column but the tenant rule does not hold for it:\n%s",
				tbl.Name, s.entity, strings.Join(s.why, "\n"))
		case !hasProject && s.guarded:
			t.Errorf("table %q (%s) is guarded but has no project_id column", tbl.Name, s.entity)
		}
	}
}

// TestDatabaseTenantTables looks at the migrated database itself, so tables
// made outside ent count too: every table with a project_id column is an
// ent table with the tenant rule, or allowlisted; and the allowlist names
// only tables that exist.
func TestDatabaseTenantTables(t *testing.T) {
	t.Parallel()
	swept := sweepEntities(t)
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		db := storetest.Open(t, cfg)
		tables := projectTables(t, db)
		for name, hasProject := range tables {
			_, allowed := notTenantOwned[name]
			switch {
			case !hasProject || allowed:
			case !swept[name].guarded:
				t.Errorf("table %q has a project_id column and is not an ent table with the tenant rule", name)
			}
		}
		for name := range notTenantOwned {
			if _, ok := tables[name]; !ok {
				t.Errorf("allowlisted table %q does not exist: update the allowlist", name)
			}
		}
		for _, tbl := range migrate.Tables {
			if _, ok := tables[tbl.Name]; !ok {
				t.Errorf("ent table %q missing from the migrated database", tbl.Name)
			}
		}
	})
}

// projectTables returns every table of db, each with whether it has a
// project_id column.
func projectTables(t *testing.T, db *store.DB) map[string]bool {
	t.Helper()
	q := `SELECT m.name, EXISTS (SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'project_id')
		FROM sqlite_master m WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`
	if db.IsPostgres() {
		q = `SELECT t.table_name, EXISTS (SELECT 1 FROM information_schema.columns c
			WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'project_id')
			FROM information_schema.tables t WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`
	}
	rows, err := db.R.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var (
			name string
			has  bool
		)
		if err := rows.Scan(&name, &has); err != nil {
			t.Fatal(err)
		}
		out[name] = has
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no tables found")
	}
	return out
}

// TestUniqueIndexesLeadWithProject: an upsert's conflict target is a unique
// index; on a tenant-owned table a composite one must start with
// project_id, so ON CONFLICT can only match the caller's own rows.
// Single-column unique keys (id, api_keys.hash) are global by design and
// never used as an upsert target.
func TestUniqueIndexesLeadWithProject(t *testing.T) {
	for _, tbl := range migrate.Tables {
		tenantOwned := false
		for _, c := range tbl.Columns {
			if c.Name == "project_id" {
				tenantOwned = true
			}
		}
		if !tenantOwned {
			continue
		}
		for _, idx := range tbl.Indexes {
			if !idx.Unique || len(idx.Columns) < 2 {
				continue
			}
			if idx.Columns[0].Name != "project_id" {
				t.Errorf("table %s: unique index %s starts with %s, not project_id", tbl.Name, idx.Name, idx.Columns[0].Name)
			}
		}
	}
}

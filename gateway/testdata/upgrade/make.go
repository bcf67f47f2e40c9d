//go:build ignore

// make.go writes the upgrade fixtures of one release: it runs that
// release's comm binary on a fresh SQLite database and on a fresh
// PostgreSQL database, uses it through its API as a user would, stops it
// and keeps what it wrote, with a fixture.json of what the user saw:
//
//	<out>/<version>/sqlite/comm.db          (checkpointed, VACUUMed)
//	<out>/<version>/sqlite/fixture.json
//	<out>/<version>/postgres/dump.sql       (pg_dump, made schema-neutral)
//	<out>/<version>/postgres/fixture.json
//
// TestUpgrade (gateway/upgrade_test.go) opens every fixture with the
// current code. Usage (from the repository root; make.sh builds the
// binary of a commit and calls this):
//
//	go run ./gateway/testdata/upgrade/make.go -comm /tmp/comm-0.3.0 -version 0.3.0 -commit b0d2c1c \
//	    -pg 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/smtp"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq"
	_ "github.com/mattn/go-sqlite3"
)

// The settings every fixture is made with; gateway/upgrade_test.go opens
// the fixtures with the same encryption key (the webhook secret is sealed
// with it).
const (
	EncryptionKey = "dXBncmFkZS1maXh0dXJlLWtleS1ub3Qtc2VjcmV0ISE=" // base64("upgrade-fixture-key-not-secret!!")
	WebhookSecret = "whsec_dXBncmFkZS1maXh0dXJlLXdlYmhvb2stc2VjcmV0"
	LocalPassword = "upgrade-fixture-password"
)

// Fixture is fixture.json: what the user saw before the upgrade.
type Fixture struct {
	Version string    `json:"version"`
	Commit  string    `json:"commit"`
	Engine  string    `json:"engine"`
	MadeAt  time.Time `json:"made_at"`

	ProjectID    string `json:"project_id"`
	SandboxKey   string `json:"sandbox_key"`
	SignedInKey  string `json:"signed_in_key"`
	AccountID    string `json:"account_id"`
	TestConn     string `json:"test_connection_id"`
	EmailConn    string `json:"email_connection_id"`
	EmailAddress string `json:"email_address"`
	Inbound      string `json:"inbound_message_id"`
	Reply        string `json:"reply_message_id"`
	Conversation string `json:"conversation_id"`

	// Events is GET /v1/events from seq 0, as the old release answered.
	Events []json.RawMessage `json:"events"`
	// Head is the last seq; WebhookCursor the endpoint's cursor (the
	// receiver was gone for the last events, so it is behind).
	Head          int64 `json:"head"`
	WebhookCursor int64 `json:"webhook_cursor"`
	// Delivered are the seqs the receiver acknowledged.
	Delivered []int64 `json:"delivered"`
	// Idempotency is one POST sent with an Idempotency-Key and its answer.
	Idempotency struct {
		Key    string `json:"key"`
		Path   string `json:"path"`
		Body   string `json:"body"`
		Status int    `json:"status"`
		Answer string `json:"answer"` // the body, byte for byte
		// Kept: the release kept the key (a retry answered the first
		// answer again); releases before idempotency keys ignored it.
		Kept bool `json:"kept"`
	} `json:"idempotency"`
}

func main() {
	bin := flag.String("comm", "", "the release's comm binary")
	version := flag.String("version", "", "the release's version name (directory under -out)")
	commit := flag.String("commit", "", "the release's commit")
	out := flag.String("out", "gateway/testdata/upgrade", "fixtures directory")
	pg := flag.String("pg", "", "PostgreSQL URL of a maintenance database (a fixture database is created next to it and dropped); empty: SQLite only")
	flag.Parse()
	if *bin == "" || *version == "" || *commit == "" {
		log.Fatal("usage: make.go -comm BIN -version V -commit C [-pg URL] [-out DIR]")
	}
	dir := filepath.Join(*out, *version)
	if err := makeSQLite(*bin, *version, *commit, filepath.Join(dir, "sqlite")); err != nil {
		log.Fatalf("sqlite: %v", err)
	}
	if *pg != "" {
		if err := makePostgres(*bin, *version, *commit, *pg, filepath.Join(dir, "postgres")); err != nil {
			log.Fatalf("postgres: %v", err)
		}
	}
}

func makeSQLite(bin, version, commit, out string) error {
	data, err := os.MkdirTemp("", "comm-fixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	f, err := populate(bin, []string{"COMM_DATA_DIR=" + data})
	if err != nil {
		return err
	}
	f.Version, f.Commit, f.Engine = version, commit, "sqlite"
	path := filepath.Join(data, "comm.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		return err
	}
	for _, q := range []string{"PRAGMA wal_checkpoint(TRUNCATE)", "PRAGMA journal_mode=DELETE", "VACUUM"} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	db.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "comm.db"), b, 0o644); err != nil {
		return err
	}
	return writeFixture(out, f)
}

func makePostgres(bin, version, commit, base, out string) error {
	name := "upgrade_fixture_" + strings.NewReplacer(".", "_", "-", "_").Replace(version)
	admin, err := sql.Open("postgres", base)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
		return err
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		return err
	}
	defer admin.Exec("DROP DATABASE IF EXISTS " + name) //nolint:errcheck // best effort
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	u.Path = "/" + name
	data, err := os.MkdirTemp("", "comm-fixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	f, err := populate(bin, []string{"COMM_DATA_DIR=" + data, "COMM_DATABASE_URL=" + u.String()})
	if err != nil {
		return err
	}
	f.Version, f.Commit, f.Engine = version, commit, "postgres"
	cmd := exec.Command("pg_dump", "--no-owner", "--no-privileges", "--schema=public", "--inserts", "--dbname="+u.String())
	cmd.Stderr = os.Stderr
	dump, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("pg_dump: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "dump.sql"), neutral(dump), 0o644); err != nil {
		return err
	}
	return writeFixture(out, f)
}

// neutral makes a pg_dump of schema public restorable into any schema (the
// test's own, chosen by search_path): no schema is created or named.
func neutral(dump []byte) []byte {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "pg_catalog.set_config('search_path'"),
			strings.HasPrefix(line, "CREATE SCHEMA "), strings.HasPrefix(line, "COMMENT ON SCHEMA "),
			strings.HasPrefix(line, "ALTER SCHEMA "), strings.HasPrefix(line, "--"),
			strings.HasPrefix(line, `\`): // psql's \restrict and \unrestrict
			continue
		case strings.HasPrefix(line, "INSERT INTO public."):
			line = "INSERT INTO " + strings.TrimPrefix(line, "INSERT INTO public.")
		default:
			line = strings.ReplaceAll(line, "public.", "")
		}
		if line == "" && bytes.HasSuffix(b.Bytes(), []byte("\n\n")) {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func writeFixture(out string, f *Fixture) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "fixture.json"), append(b, '\n'), 0o644)
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// receiver is the webhook endpoint: it acknowledges every delivery and
// records its seq.
type receiver struct {
	mu   sync.Mutex
	seqs []int64
	srv  *http.Server
	url  string
}

func newReceiver() *receiver {
	r := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String() + "/hook"
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev struct {
			Seq int64 `json:"seq"`
		}
		b, _ := io.ReadAll(req.Body)
		if json.Unmarshal(b, &ev) == nil {
			r.mu.Lock()
			r.seqs = append(r.seqs, ev.Seq)
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go r.srv.Serve(ln)
	return r
}

// client talks to the gateway under test.
type client struct {
	base string
	http *http.Client
}

func (c *client) call(method, path, key, body string, hdr map[string]string) (int, []byte, error) {
	resp, err := c.raw(method, path, key, body, hdr)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, resp.body, nil
}

type response struct {
	*http.Response
	body []byte
}

func (c *client) raw(method, path, key, body string, hdr map[string]string) (*response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &response{resp, b}, err
}

// must calls and decodes a 2xx answer into out.
func (c *client) must(method, path, key, body string, out any) []byte {
	status, b, err := c.call(method, path, key, body, nil)
	if err != nil {
		panic(failure{fmt.Errorf("%s %s: %w", method, path, err)})
	}
	if status/100 != 2 {
		panic(failure{fmt.Errorf("%s %s: %d %s", method, path, status, b)})
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			panic(failure{fmt.Errorf("%s %s: %w in %s", method, path, err, b)})
		}
	}
	return b
}

// failure is a step of populate that failed: must and waitFor panic with
// it, populate recovers it, stops the gateway and returns the error.
type failure struct{ err error }

func waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			panic(failure{fmt.Errorf("timed out waiting for %s", what)})
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// populate runs bin serve with env and uses it as a user would.
func populate(bin string, env []string) (f *Fixture, err error) {
	listen, smtpAddr := freePort(), freePort()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "COMM_LISTEN="+listen, "COMM_SMTP_LISTEN="+smtpAddr,
		"COMM_ENCRYPTION_KEY="+EncryptionKey, "COMM_WEBHOOK_ALLOW_PRIVATE=true",
		"COMM_LOCAL_SIGNIN_PASSWORD="+LocalPassword, "COMM_LOG_FORMAT=text")
	var logBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if e := recover(); e != nil {
			fl, ok := e.(failure)
			if !ok {
				panic(e)
			}
			f, err = nil, fl.err
		}
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
			os.Stderr.Write(logBuf.Bytes())
		}
	}()
	c := &client{base: "http://" + listen, http: &http.Client{Timeout: 30 * time.Second}}
	waitFor("healthz", func() bool {
		s, _, err := c.call("GET", "/healthz", "", "", nil)
		return err == nil && s == 200
	})
	f = &Fixture{MadeAt: time.Now().UTC().Truncate(time.Second)}
	rcv := newReceiver()

	var sb struct {
		ProjectID string `json:"project_id"`
		APIKey    string `json:"api_key"`
	}
	c.must("POST", "/v1/projects/sandbox", "", `{"name":"upgrade"}`, &sb)
	f.ProjectID, f.SandboxKey = sb.ProjectID, sb.APIKey
	key := sb.APIKey
	var id struct {
		ID string `json:"id"`
	}
	c.must("POST", "/v1/connections", key, `{"channel":"test"}`, &id)
	f.TestConn = id.ID
	c.must("PUT", "/v1/webhook", key, `{"url":"`+rcv.url+`","secret":"`+WebhookSecret+`"}`, nil)

	// Two people write; the first one's message is sent with an
	// Idempotency-Key (kept by releases that have them).
	var in struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversation_id"`
	}
	f.Idempotency.Key = "upgrade-fixture-inbound-1"
	f.Idempotency.Path = "/v1/connections/" + f.TestConn + "/inbound"
	f.Idempotency.Body = `{"sender":"ann@example.com","text":"hello from before the upgrade"}`
	status, b, err := c.call("POST", f.Idempotency.Path, key, f.Idempotency.Body, map[string]string{"Idempotency-Key": f.Idempotency.Key})
	if err != nil || status != http.StatusCreated {
		return nil, fmt.Errorf("inbound: %d %s %v", status, b, err)
	}
	f.Idempotency.Status, f.Idempotency.Answer = status, string(b)
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	f.Inbound, f.Conversation = in.ID, in.ConversationID
	retry, err := c.raw("POST", f.Idempotency.Path, key, f.Idempotency.Body, map[string]string{"Idempotency-Key": f.Idempotency.Key})
	if err != nil {
		return nil, err
	}
	f.Idempotency.Kept = retry.Header.Get("Idempotent-Replayed") == "true"
	c.must("POST", "/v1/connections/"+f.TestConn+"/inbound", key, `{"sender":"bob@example.com","text":"hi, it is bob"}`, nil)
	c.must("POST", "/v1/messages/"+f.Inbound+"/reply", key, `{"text":"hello ann"}`, &id)
	f.Reply = id.ID
	waitFor("message.sent", func() bool {
		var evs []json.RawMessage
		c.must("GET", "/v1/events?type=message.sent", key, "", &evs)
		return len(evs) > 0
	})

	// An email inbox, and a mail to it over SMTP.
	var conn struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	}
	c.must("POST", "/v1/connections", key, `{"channel":"email"}`, &conn)
	f.EmailConn, f.EmailAddress = conn.ID, conn.Address
	msg := "From: Carol <carol@example.org>\r\nTo: " + conn.Address + "\r\nSubject: before the upgrade\r\n" +
		"Message-ID: <upgrade-fixture-1@example.org>\r\n\r\nA mail to the inbox.\r\n"
	if err := smtp.SendMail(smtpAddr, nil, "carol@example.org", []string{conn.Address}, []byte(msg)); err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	waitFor("the mail's message.received", func() bool {
		var evs []struct {
			Data struct {
				Message struct {
					ConnectionID string `json:"connection_id"`
				} `json:"message"`
			} `json:"data"`
		}
		c.must("GET", "/v1/events?type=message.received", key, "", &evs)
		for _, e := range evs {
			if e.Data.Message.ConnectionID == conn.ID {
				return true
			}
		}
		return false
	})

	// Sign in (the local operator sign-in) carrying the sandbox project
	// into an account.
	signed, err := signIn(c, key)
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	f.SignedInKey = signed
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	c.must("GET", "/v1/account", signed, "", &acct)
	f.AccountID = acct.Account.ID

	// Every event so far reaches the receiver; then the receiver goes
	// away and one more person writes: the endpoint's cursor stays behind.
	head := func() int64 {
		var p struct {
			LastSeq int64 `json:"last_seq"`
		}
		c.must("GET", "/v1/project", key, "", &p)
		return p.LastSeq
	}
	cursor := func() int64 {
		var wh struct {
			Cursor int64 `json:"cursor"`
		}
		c.must("GET", "/v1/webhook", key, "", &wh)
		return wh.Cursor
	}
	waitFor("webhook cursor at head", func() bool { return cursor() == head() })
	rcv.srv.Close()
	rcv.mu.Lock()
	f.Delivered = append([]int64(nil), rcv.seqs...)
	rcv.mu.Unlock()
	f.WebhookCursor = cursor()
	c.must("POST", "/v1/connections/"+f.TestConn+"/inbound", key, `{"sender":"bob@example.com","text":"are you there?"}`, nil)
	waitFor("a failed delivery attempt", func() bool {
		var as []struct {
			Error string `json:"error"`
		}
		c.must("GET", "/v1/webhook/attempts", key, "", &as)
		return len(as) > 0 && as[0].Error != ""
	})
	if got := cursor(); got != f.WebhookCursor {
		return nil, fmt.Errorf("cursor moved to %d without a receiver", got)
	}
	f.Head = head()
	c.must("GET", "/v1/events?after_seq=0&limit=100", key, "", &f.Events)
	if int64(len(f.Events)) != f.Head {
		return nil, fmt.Errorf("%d events, head %d", len(f.Events), f.Head)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			os.Stderr.Write(logBuf.Bytes())
			return nil, fmt.Errorf("comm serve exited: %w", err)
		}
	case <-time.After(60 * time.Second):
		return nil, errors.New("comm serve did not stop")
	}
	return f, nil
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn runs comm login's device flow with the local operator sign-in,
// as a person in a browser would, and returns the signed-in key.
func signIn(c *client, sandboxKey string) (string, error) {
	var st struct {
		UserCode                string `json:"user_code"`
		DeviceCode              string `json:"device_code"`
		VerificationURIComplete string `json:"verification_uri_complete"`
	}
	c.must("POST", "/v1/auth/device/start", "", `{"api_key":"`+sandboxKey+`"}`, &st)
	jar, err := cookiejar.New(nil)
	if err != nil {
		return "", err
	}
	br := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := func(resp *http.Response, err error) (string, error) {
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %d %s", resp.Request.URL, resp.StatusCode, b)
		}
		return string(b), err
	}
	csrf := func(p string) (string, error) {
		m := csrfRE.FindStringSubmatch(p)
		if m == nil {
			return "", errors.New("no csrf field on the page")
		}
		return html.UnescapeString(m[1]), nil
	}
	p, err := page(br.Get(st.VerificationURIComplete))
	if err != nil {
		return "", err
	}
	tok, err := csrf(p)
	if err != nil {
		return "", err
	}
	p, err = page(br.PostForm(c.base+"/device/signin/local", url.Values{"code": {st.UserCode}, "csrf": {tok}, "password": {LocalPassword}}))
	if err != nil {
		return "", err
	}
	if tok, err = csrf(p); err != nil {
		return "", err
	}
	if _, err = page(br.PostForm(c.base+"/device/approve", url.Values{"code": {st.UserCode}, "csrf": {tok}})); err != nil {
		return "", err
	}
	var t struct {
		Status string `json:"status"`
		APIKey string `json:"api_key"`
	}
	c.must("POST", "/v1/auth/device/token", "", `{"device_code":"`+st.DeviceCode+`"}`, &t)
	if t.APIKey == "" {
		return "", fmt.Errorf("device token: %+v", t)
	}
	return t.APIKey, nil
}

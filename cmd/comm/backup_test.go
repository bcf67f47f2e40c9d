package main_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the restored database's integrity_check
)

// TestBackupUnderLoad: comm backup copies the database of a running
// gateway while messages are injected into it; comm restore puts the
// copy into a fresh data dir, and a gateway started there has every
// message acknowledged before the backup began, in a log whose seqs run
// from 1 without a gap. restore refuses a database in use and one already
// there (without --force); backup refuses to overwrite its destination.
func TestBackupUnderLoad(t *testing.T) {
	bin := binary(t)
	var k [32]byte
	rand.Read(k[:])
	env := []string{"COMM_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(k[:]), "COMM_KEY_WRITES_PER_SECOND=0"}
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "comm-data")
	p := start(t, bin, dir, env...)
	code, body := call(t, "POST", p.base+"/v1/projects/sandbox", "", `{"name":"backup"}`)
	if code != 201 {
		t.Fatalf("sandbox: %d %s", code, body)
	}
	var sb struct {
		Key string `json:"api_key"`
	}
	json.Unmarshal(body, &sb)
	code, body = call(t, "POST", p.base+"/v1/connections", sb.Key, `{"channel":"test"}`)
	if code != 201 {
		t.Fatalf("connect: %d %s", code, body)
	}
	var conn struct{ ID string }
	json.Unmarshal(body, &conn)

	// Four injectors, each recording the messages the gateway
	// acknowledged (201), until told to stop.
	var (
		mu    sync.Mutex
		acked []string
		fails []string
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id, err := inject(p.base, sb.Key, conn.ID, fmt.Sprintf(`{"sender":"w%d","text":"message %d of w%d"}`, w, i, w))
				mu.Lock()
				if err == nil {
					acked = append(acked, id)
				} else {
					fails = append(fails, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); count() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d messages acknowledged, want %d", count(), n)
			}
		}
	}
	waitFor(500)

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	dest := filepath.Join(t.TempDir(), "comm-backup.db")
	out, err := exec.Command(bin, "backup", dest, "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	during := count() - len(before)
	t.Logf("%s(%d messages acknowledged before the backup, %d while it ran)", out, len(before), during)
	waitFor(count() + 100) // the gateway goes on after the backup
	close(stop)
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d injections failed, the first: %s", len(fails), fails[0])
	}

	if out, err := exec.Command(bin, "backup", dest, "--data-dir", dataDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "--force") {
		t.Errorf("backup over an existing file: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "restore", dest, "--data-dir", dataDir, "--force").CombinedOutput(); err == nil || !strings.Contains(string(out), "in use") {
		t.Errorf("restore onto the running gateway's database: %v\n%s", err, out)
	}
	p.stop(t)

	// On PostgreSQL they print the pg_dump and pg_restore commands, without
	// the password, and take nothing.
	pg := "postgres://comm:s3cret@db.example:5432/comm?sslmode=require&search_path=tenant1"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"backup", "out.dump", "--database-url", pg}, []string{"pg_dump --format=custom --file=out.dump --schema=tenant1 --dbname='postgres://comm@db.example:5432/comm?sslmode=require'", "PGPASSWORD"}},
		{[]string{"restore", "out.dump", "--database-url", pg}, []string{"pg_restore --clean --if-exists --no-owner --single-transaction --dbname='postgres://comm@db.example:5432/comm?sslmode=require' out.dump"}},
	} {
		out, err := exec.Command(bin, c.args...).CombinedOutput()
		if err == nil || strings.Contains(string(out), "s3cret") {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v does not say %q:\n%s", c.args, w, out)
			}
		}
	}

	fresh := t.TempDir()
	freshData := filepath.Join(fresh, "comm-data")
	if out, err := exec.Command(bin, "restore", dest, "--data-dir", freshData).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "restore", dest, "--data-dir", freshData).CombinedOutput(); err == nil || !strings.Contains(string(out), "--force") {
		t.Errorf("restore over a database without --force: %v\n%s", err, out)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(freshData, "comm.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("integrity_check of the restored database: %q %v", integrity, err)
	}
	db.Close()

	// A gateway on the restored database: the log runs from seq 1 without
	// a gap and holds every message acknowledged before the backup.
	p = start(t, bin, fresh, env...)
	found := map[string]bool{}
	var seq int64
	for {
		code, body := call(t, "GET", fmt.Sprintf("%s/v1/events?after_seq=%d&limit=1000", p.base, seq), sb.Key, "")
		if code != 200 {
			t.Fatalf("events after %d: %d %s", seq, code, body)
		}
		var page []struct {
			Seq  int64
			Type string
			Data struct {
				Message struct{ ID string }
			}
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Seq != seq+1 {
				t.Fatalf("seq %d after %d", e.Seq, seq)
			}
			seq = e.Seq
			if e.Type == "message.received" {
				found[e.Data.Message.ID] = true
			}
		}
	}
	missing := 0
	for _, id := range before {
		if !found[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d messages acknowledged before the backup are not in it", missing, len(before))
	}
	t.Logf("restored log: %d events, %d messages (%d acknowledged before the backup, %d in all)", seq, len(found), len(before), count())
	p.stop(t)
}

// inject delivers a message into a test connection and returns its id
// once the gateway acknowledged it (201).
func inject(base, key, connID, body string) (string, error) {
	req, _ := http.NewRequest("POST", base+"/v1/connections/"+connID+"/inbound", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct{ ID string }
	json.Unmarshal(b, &m)
	if resp.StatusCode != http.StatusCreated || m.ID == "" {
		return "", fmt.Errorf("inbound: %d %s", resp.StatusCode, b)
	}
	return m.ID, nil
}

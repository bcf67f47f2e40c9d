package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
	"github.com/comm-gateway/comm/stream"
)

const killChildEnv = "COMM_TEST_KILL_CHILD"

// TestAckedAppendsSurviveKill appends from a child process, which prints
// each seq as Append returns it, and kills the child with SIGKILL
// mid-stream. Reopened, the stream must hold every acknowledged event, and
// be dense.
func TestAckedAppendsSurviveKill(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	run := func(t *testing.T, cfg store.Config) {
		l := openLog(t, cfg, stream.Options{})
		p := newProject(t, l)
		spec, _ := json.Marshal(map[string]any{"cfg": cfg, "project": p})
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.v")
		cmd.Env = append(os.Environ(), killChildEnv+"="+string(spec))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[int64]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() && len(acked) < 2000 {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			seq, _ := strconv.ParseInt(f[1], 10, 64)
			acked[seq] = f[2]
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if len(acked) < 2000 {
			t.Fatalf("child acknowledged only %d appends", len(acked))
		}
		// Reopen from scratch, as a restarted gateway would.
		l2 := openLog(t, cfg, stream.Options{})
		head, err := l2.Head(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var after int64
		found := 0
		for {
			evs, err := l2.Read(context.Background(), p, after, 1000, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				break
			}
			for _, e := range evs {
				if e.Seq != after+1 {
					t.Fatalf("gap: %d after %d", e.Seq, after)
				}
				after = e.Seq
				if tok, ok := acked[e.Seq]; ok {
					var got string
					json.Unmarshal(e.Data, &got)
					if got != tok {
						t.Fatalf("seq %d holds %q, acknowledged %q", e.Seq, got, tok)
					}
					found++
				}
			}
		}
		if after != head {
			t.Fatalf("read to %d, head is %d", after, head)
		}
		if found != len(acked) {
			t.Fatalf("%d of %d acknowledged events survived", found, len(acked))
		}
		t.Logf("%d acknowledged, %d stored after SIGKILL", len(acked), head)
	}
	t.Run("sqlite-full", func(t *testing.T) {
		cfg := storetest.SQLite(t)
		cfg.SQLiteSync = "full"
		run(t, cfg)
	})
	t.Run("sqlite-normal", func(t *testing.T) { run(t, storetest.SQLite(t)) })
	if os.Getenv(storetest.EnvURL) != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.Postgres(t)) })
	}
}

// TestKillChild is the child of TestAckedAppendsSurviveKill: it appends
// until killed.
func TestKillChild(t *testing.T) {
	raw := os.Getenv(killChildEnv)
	if raw == "" {
		t.Skip("only run as a child")
	}
	var spec struct {
		Cfg     store.Config
		Project string
	}
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), spec.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := stream.Open(db, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				tok := fmt.Sprintf("g%d-%d", g, i)
				seq, err := l.Append(context.Background(), spec.Project, stream.MessageReceived, tok)
				if err != nil {
					return
				}
				mu.Lock()
				fmt.Fprintf(w, "ack %d %s\n", seq, tok)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Minute) // killed long before
}

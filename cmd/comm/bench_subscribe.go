package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
)

// subscribeBench measures GraphQL subscriptions against a `comm serve`
// child process (so its memory can be read on its own, and the sockets of
// both ends fit the file limits): memory per idle subscription, commit ->
// client latency at several event rates, and catching up a backlog.
type subscribeBench struct {
	subs, projects int
	rates          []int
	d              time.Duration
	backlog        int
	serverGOGC     string
}

var startLine = regexp.MustCompile(`listening on (http://\S+)`)

func (b subscribeBench) run(ctx context.Context) ([]bench.Result, error) {
	dir, err := os.MkdirTemp("", "comm-bench-sub-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// The backlog is written before the server starts, straight into its
	// database.
	var backlogKey string
	if b.backlog > 0 {
		if backlogKey, err = fillBacklog(ctx, dir, b.backlog); err != nil {
			return nil, err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The load comes from one address and few keys: the abuse limits
	// are off, and the websocket caps per IP and per key lifted.
	caps := strconv.Itoa(b.subs + 100)
	cmd := exec.Command(self, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--sandboxes-per-hour", "0", "--key-writes-per-second", "0", "--sandbox-max-connections", "0",
		"--ws-max-per-ip", caps, "--ws-max-per-key", caps)
	cmd.Env = append(os.Environ(), "GOGC="+b.serverGOGC)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return nil, fmt.Errorf("server did not start")
	}
	m := startLine.FindStringSubmatch(sc.Text())
	if m == nil {
		return nil, fmt.Errorf("server said %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	base := m[1]
	api := bench.NewAPI(base, 64)
	conns, err := bench.NewTestConnections(ctx, api, b.projects)
	if err != nil {
		return nil, err
	}

	var results []bench.Result
	engine := "sqlite, server GOGC=" + b.serverGOGC
	rss0 := rss(cmd.Process.Pid)
	var lat bench.Latencies
	t0 := time.Now()
	subs, err := bench.Subscribe(ctx, base, conns, b.subs, func(frame []byte) {
		if sent, ok := bench.SentAt(frame); ok {
			lat.Add(time.Since(sent))
		}
	})
	if err != nil {
		return nil, err
	}
	defer bench.CloseAll(subs)
	setup := time.Since(t0)
	time.Sleep(2 * time.Second)
	rss1 := rss(cmd.Process.Pid)
	results = append(results, bench.Result{
		Name: "idle subscriptions", Engine: engine, Ops: b.subs, Elapsed: setup,
		Note: fmt.Sprintf("server RSS %d -> %d MiB: %.1f KiB per subscription (one socket each, %d projects)",
			rss0>>20, rss1>>20, float64(rss1-rss0)/1024/float64(b.subs), b.projects),
	})
	for _, rate := range b.rates {
		lat.Reset()
		sent, err := bench.Fanout(ctx, api, conns, rate, b.d, &lat)
		if err != nil {
			return nil, err
		}
		time.Sleep(time.Second) // stragglers
		p50, p99, n := lat.Percentiles()
		results = append(results, bench.Result{
			Name: fmt.Sprintf("fan-out at %d events/s", rate), Engine: engine, Ops: n, Elapsed: b.d,
			P50: p50, P99: p99,
			Note: fmt.Sprintf("%d events sent, %d of %d deliveries seen (ops/s = deliveries/s); latency = inbound POST sent -> event at subscriber",
				sent, n, sent*b.subs/b.projects),
		})
	}
	if backlogKey != "" {
		d, err := bench.CatchUp(ctx, base, backlogKey, int64(b.backlog), 1000)
		if err != nil {
			return nil, err
		}
		results = append(results, bench.Result{Name: "catch-up via eventBatches(max: 1000)", Engine: engine,
			Ops: b.backlog, Elapsed: d, Note: "one subscriber replaying the stored backlog from seq 0"})
	}
	return results, nil
}

// fillBacklog makes a sandbox project holding n events in the database in
// dir and returns its key.
func fillBacklog(ctx context.Context, dir string, n int) (string, error) {
	db, err := store.Open(ctx, store.Config{DataDir: dir})
	if err != nil {
		return "", err
	}
	defer db.Close()
	l, err := stream.Open(db, stream.Options{})
	if err != nil {
		return "", err
	}
	defer l.Close()
	g, err := benchGateway(l, messaging.Options{})
	if err != nil {
		return "", err
	}
	svc := g.Svc
	defer svc.Close()
	sb, err := svc.CreateSandbox(ctx, "backlog")
	if err != nil {
		return "", err
	}
	return sb.APIKey, bench.Fill(ctx, l, sb.ProjectID, n)
}

// rss returns a process's resident memory in bytes (0 if unknown).
func rss(pid int) int64 { return procStatus(pid, "VmRSS:") }

// procStatus reads a size in kB (VmRSS:, RssAnon: ...) from a process's
// /proc status, in bytes (0 if unknown).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

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
	serverMemLimit string
	// senders bounds the inbound requests in flight.
	senders int
	// sequence runs the rates one after another on one server; fresh
	// runs each on a server of its own.
	sequence, fresh bool
	// serverProfile, if set, names the CPU profiles of the servers
	// (<serverProfile>.1, .2, ...).
	serverProfile string
	// serverBinary, if set, is the comm binary run as the server instead
	// of this one.
	serverBinary string
	profiles     int
}

var startLine = regexp.MustCompile(`listening on (http://\S+)`)

func (b *subscribeBench) run(ctx context.Context) ([]bench.Result, error) {
	var results []bench.Result
	if b.sequence {
		got, err := b.runSequence(ctx)
		results = append(results, got...)
		if err != nil {
			return results, err
		}
	}
	if b.fresh {
		for _, rate := range b.rates {
			got, err := b.runFresh(ctx, rate)
			results = append(results, got...)
			if err != nil {
				return results, err
			}
		}
	}
	return results, nil
}

// child is a `comm serve` process of the benchmark.
type child struct {
	cmd  *exec.Cmd
	base string
	dir  string
}

// startChild starts a server on a new data dir (holding a backlog of
// b.backlog events if backlog) and waits for it to listen.
func (b *subscribeBench) startChild(ctx context.Context, backlog bool) (*child, string, error) {
	dir, err := os.MkdirTemp("", "comm-bench-sub-")
	if err != nil {
		return nil, "", err
	}
	// The backlog is written before the server starts, straight into its
	// database.
	var backlogKey string
	if backlog && b.backlog > 0 {
		if backlogKey, err = fillBacklog(ctx, dir, b.backlog); err != nil {
			os.RemoveAll(dir)
			return nil, "", err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	if b.serverBinary != "" {
		self = b.serverBinary
	}
	// The load comes from one address and few keys: the abuse limits
	// are off, and the websocket caps per IP and per key lifted.
	caps := strconv.Itoa(b.subs + 100)
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--sandboxes-per-hour", "0", "--key-writes-per-second", "0", "--sandbox-max-connections", "0",
		"--ws-max-per-ip", caps, "--ws-max-per-key", caps, "--smtp-listen", "off", "--log-format", "text"}
	if b.serverProfile != "" {
		b.profiles++
		args = append(args, "--cpuprofile", fmt.Sprintf("%s.%d", b.serverProfile, b.profiles),
			"--memprofile", fmt.Sprintf("%s.%d.heap", b.serverProfile, b.profiles))
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "GOGC="+b.serverGOGC)
	if b.serverMemLimit != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+b.serverMemLimit)
	}
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	c := &child{cmd: cmd, dir: dir}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		c.stop()
		return nil, "", fmt.Errorf("server did not start")
	}
	m := startLine.FindStringSubmatch(sc.Text())
	if m == nil {
		c.stop()
		return nil, "", fmt.Errorf("server said %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	c.base = m[1]
	return c, backlogKey, nil
}

func (c *child) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	c.cmd.Wait()
	os.RemoveAll(c.dir)
}

// cpu is the server's CPU time so far (user and system).
func (c *child) cpu() time.Duration { return procCPU(c.cmd.Process.Pid) }

// runSequence runs every rate, one after another, on one server, after
// measuring the memory of idle subscriptions; then the catch-up.
func (b *subscribeBench) runSequence(ctx context.Context) ([]bench.Result, error) {
	srv, backlogKey, err := b.startChild(ctx, true)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	api := bench.NewAPI(srv.base, b.senders)
	conns, err := bench.NewTestConnections(ctx, api, b.projects)
	if err != nil {
		return nil, err
	}
	var results []bench.Result
	rss0 := rss(srv.cmd.Process.Pid)
	var lat bench.Latencies
	t0 := time.Now()
	subs, err := subscribeAll(ctx, srv.base, conns, b.subs, &lat)
	if err != nil {
		return nil, err
	}
	defer bench.CloseAll(subs)
	setup := time.Since(t0)
	time.Sleep(2 * time.Second)
	rss1 := rss(srv.cmd.Process.Pid)
	results = append(results, bench.Result{
		Name: "idle subscriptions", Engine: b.engine(), Ops: b.subs, Elapsed: setup,
		Note: fmt.Sprintf("server RSS %d -> %d MiB: %.1f KiB per subscription (one socket each, %d projects)",
			rss0>>20, rss1>>20, float64(rss1-rss0)/1024/float64(b.subs), b.projects),
	})
	for i, rate := range b.rates {
		after := "in sequence, first"
		if i > 0 {
			after = fmt.Sprintf("in sequence, after %d events/s", b.rates[i-1])
		}
		r, err := b.phase(ctx, srv, api, conns, &lat, rate, after)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	if backlogKey != "" {
		d, err := bench.CatchUp(ctx, srv.base, backlogKey, int64(b.backlog), 1000)
		if err != nil {
			return results, err
		}
		results = append(results, bench.Result{Name: "catch-up via eventBatches(max: 1000)", Engine: b.engine(),
			Ops: b.backlog, Elapsed: d, Note: "one subscriber replaying the stored backlog from seq 0"})
	}
	return results, nil
}

// runFresh runs one rate on a server of its own.
func (b *subscribeBench) runFresh(ctx context.Context, rate int) ([]bench.Result, error) {
	srv, _, err := b.startChild(ctx, false)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	api := bench.NewAPI(srv.base, b.senders)
	conns, err := bench.NewTestConnections(ctx, api, b.projects)
	if err != nil {
		return nil, err
	}
	var lat bench.Latencies
	subs, err := subscribeAll(ctx, srv.base, conns, b.subs, &lat)
	if err != nil {
		return nil, err
	}
	defer bench.CloseAll(subs)
	time.Sleep(2 * time.Second)
	r, err := b.phase(ctx, srv, api, conns, &lat, rate, "fresh server")
	if err != nil {
		return nil, err
	}
	return []bench.Result{r}, nil
}

func subscribeAll(ctx context.Context, base string, conns []bench.TestConnection, n int, lat *bench.Latencies) ([]*bench.Subscriber, error) {
	return bench.Subscribe(ctx, base, conns, n, func(i int, frame []byte) {
		if intended, ok := bench.SentAt(frame); ok {
			lat.AddFrom(i, time.Since(intended))
		}
	})
}

// phase sends rate events a second for b.d and reports what the
// subscribers saw, from each message's intended send time.
func (b *subscribeBench) phase(ctx context.Context, srv *child, api *bench.API, conns []bench.TestConnection, lat *bench.Latencies, rate int, when string) (bench.Result, error) {
	lat.Reset()
	self := os.Getpid()
	cpu0, gen0, t0 := srv.cpu(), procCPU(self), time.Now()
	st, err := bench.Fanout(ctx, api, conns, rate, b.d, b.senders)
	if err != nil {
		return bench.Result{}, err
	}
	cpu1, gen1, t1 := srv.cpu(), procCPU(self), time.Now()
	// Stragglers: wait until every delivery arrived, or nothing more
	// arrives for a second (counting only: sorting would hold up the
	// subscribers recording the last deliveries).
	want := st.Sent * (b.subs / b.projects)
	for seen, last := 0, time.Now(); ; time.Sleep(50 * time.Millisecond) {
		n := lat.Count()
		if n >= want || time.Since(last) > time.Second {
			break
		}
		if n != seen {
			seen, last = n, time.Now()
		}
	}
	p50, p99, n := lat.Percentiles()
	p999 := lat.Quantile(0.999)
	return bench.Result{
		Name: fmt.Sprintf("fan-out at %d events/s (%s)", rate, when), Engine: b.engine(), Ops: n, Elapsed: b.d,
		P50: p50, P99: p99,
		Note: fmt.Sprintf("p99.9 %.1f ms; server CPU %.0f%% of a core (load generator and subscribers %.0f%%); inbound POST answered p50 %.2f ms, p99 %.2f ms; %d events sent, %d late (> %v after the intended time, at most %.1f ms; median send %.2f ms after it); %d of %d deliveries seen (ops/s = deliveries/s); latency = intended send time of the inbound POST -> event at subscriber",
			float64(p999)/1e6, 100*float64(cpu1-cpu0)/float64(t1.Sub(t0)), 100*float64(gen1-gen0)/float64(t1.Sub(t0)), float64(st.AckP50)/1e6, float64(st.AckP99)/1e6, st.Sent, st.Late, bench.LateAfter, float64(st.MaxLag)/1e6, float64(st.LagP50)/1e6, n, want),
	}, nil
}

func (b *subscribeBench) engine() string {
	e := "sqlite, server GOGC=" + b.serverGOGC
	if b.serverMemLimit != "" {
		e += " GOMEMLIMIT=" + b.serverMemLimit
	}
	return e
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

// procCPU returns a process's CPU time so far, user and system, from
// /proc/<pid>/stat (0 if unknown).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in
	// parentheses; utime and stime are the 14th and 15th of the line.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

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

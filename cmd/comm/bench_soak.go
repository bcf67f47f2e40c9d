package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/store"
)

// soakBench runs a steady mixed load against a `comm serve` child process
// for a long time (--duration, say 30m): inbound messages, replies, page
// reads, GraphQL subscriptions following every project and a webhook
// endpoint per project. It samples the server's memory, goroutines and
// open files as it goes, and at the end checks that every subscription and
// every webhook endpoint got every event of its project once, in order.
type soakBench struct {
	dbURL      string // empty: SQLite
	projects   int
	subsPer    int
	rate       int
	replyEvery int
	d, sample  time.Duration
	out        io.Writer
}

type soakSample struct {
	at                 time.Duration
	rss, anon, heap    int64
	goroutines, fds    int64
	inbound, delivered int64
}

func (b soakBench) run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "comm-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	engine := "sqlite"
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--smtp-listen", "off",
		"--webhook-allow-private", "true",
		"--sandboxes-per-hour", "0", "--key-writes-per-second", "0", "--sandbox-max-connections", "0"}
	if b.dbURL != "" {
		u, drop, err := store.ScratchSchema(b.dbURL)
		if err != nil {
			return err
		}
		defer drop()
		args = append(args, "--database-url", u)
		engine = "postgres"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	args = append(args, "--metrics-listen", metricsAddr)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var key [32]byte
	rand.Read(key[:])
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "COMM_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(key[:]), "COMM_LOG_FORMAT=json")
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return fmt.Errorf("server did not start")
	}
	m := startLine.FindStringSubmatch(sc.Text())
	if m == nil {
		return fmt.Errorf("server said %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	base := m[1]
	api := bench.NewAPI(base, 64)
	conns, err := bench.NewTestConnections(ctx, api, b.projects)
	if err != nil {
		return err
	}
	rcv := bench.NewReceiver()
	defer rcv.Close()
	var keys []string
	for i, c := range conns {
		if err := api.SetWebhook(ctx, c.Key, rcv.URL(fmt.Sprint("p", i))); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		for range b.subsPer {
			keys = append(keys, c.Key)
		}
	}
	followers, err := bench.Follow(ctx, base, keys)
	if err != nil {
		return err
	}
	defer bench.CloseFollowers(followers)

	fmt.Fprintf(b.out, "soak on %s: %d projects, %d subscriptions, %d webhook endpoints, %d inbound/s, a reply to every %dth, a page read every second, for %s\n",
		engine, b.projects, len(followers), len(conns), b.rate, b.replyEvery, b.d)
	load := &bench.SoakLoad{API: api, Conns: conns, Rate: b.rate, ReplyEvery: b.replyEvery, ReadEvery: time.Second}
	lctx, stop := context.WithTimeout(ctx, b.d)
	defer stop()
	done := make(chan struct{})
	go func() { load.Run(lctx); close(done) }()

	pid := cmd.Process.Pid
	t0 := time.Now()
	var samples []soakSample
	take := func() {
		s := soakSample{at: time.Since(t0).Round(time.Second), rss: rss(pid), anon: procStatus(pid, "RssAnon:"), fds: openFiles(pid),
			inbound: load.Inbound.Load(), delivered: rcv.Delivered()}
		s.heap, s.goroutines = scrapeGo(metricsAddr)
		samples = append(samples, s)
		fmt.Fprintf(b.out, "  %8s  rss %4d MiB (anonymous %4d MiB)  heap %4d MiB  goroutines %5d  open files %4d  inbound %8d  webhook deliveries %8d\n",
			s.at, s.rss>>20, s.anon>>20, s.heap>>20, s.goroutines, s.fds, s.inbound, s.delivered)
	}
	take()
	tick := time.NewTicker(b.sample)
	defer tick.Stop()
wait:
	for {
		select {
		case <-tick.C:
			take()
		case <-done:
			break wait
		}
	}

	// Everything acknowledged must reach every follower and endpoint. The
	// heads are read once they stand still: replies still in the outbox
	// when the load stopped append their message.sent after it.
	heads := make([]int64, len(conns))
	for settled := false; !settled; {
		settled = true
		for i, c := range conns {
			h, err := api.Head(ctx, c.Key)
			if err != nil {
				return err
			}
			if h != heads[i] {
				heads[i], settled = h, false
			}
		}
		if !settled {
			time.Sleep(time.Second)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	behind := func() (int, int) {
		subs, hooks := 0, 0
		for i, f := range followers {
			if f.Last() < heads[i/b.subsPer] {
				subs++
			}
		}
		for i := range conns {
			if rcv.Last(fmt.Sprint("p", i)) < heads[i] {
				hooks++
			}
		}
		return subs, hooks
	}
	for {
		subs, hooks := behind()
		if subs == 0 && hooks == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: 2 minutes after the load, %d subscriptions and %d webhook endpoints still short of their project's head", subs, hooks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	take()
	var broken, events int64
	var followerErr error
	for i, f := range followers {
		broken += f.Broken()
		events += heads[i/b.subsPer]
		if err := f.Err(); err != nil && followerErr == nil {
			followerErr = err
		}
	}
	var stored int64
	for _, h := range heads {
		stored += h
	}
	nErr, firstErr := load.Errors()
	fmt.Fprintf(b.out, "requests: %d inbound, %d replies, %d page reads; %d failed (first: %v); %d sends started over 100 ms late\n",
		load.Inbound.Load(), load.Replies.Load(), load.Reads.Load(), nErr, firstErr, load.Late.Load())
	fmt.Fprintf(b.out, "events: %d stored; subscriptions received %d, %d of them out of sequence (socket errors: %v); webhooks delivered %d to %d endpoints, %d out of sequence\n",
		stored, events, broken, followerErr, rcv.Delivered(), len(conns), rcv.Disorder())
	if len(samples) > 2 {
		// Flat: compare the samples of the first and the last quarter
		// after the first (warm-up) sample.
		warm := samples[1:]
		q := max(len(warm)/4, 1)
		avg := func(ss []soakSample, f func(soakSample) int64) int64 {
			var t int64
			for _, s := range ss {
				t += f(s)
			}
			return t / int64(len(ss))
		}
		for _, c := range []struct {
			name string
			f    func(soakSample) int64
			mib  bool
		}{
			{"rss", func(s soakSample) int64 { return s.rss }, true},
			{"anonymous rss (rss less mapped files: SQLite maps its database)", func(s soakSample) int64 { return s.anon }, true},
			{"heap", func(s soakSample) int64 { return s.heap }, true},
			{"goroutines", func(s soakSample) int64 { return s.goroutines }, false},
			{"open files", func(s soakSample) int64 { return s.fds }, false},
		} {
			first, last := avg(warm[:q], c.f), avg(warm[len(warm)-q:], c.f)
			if c.mib {
				fmt.Fprintf(b.out, "%s: first quarter %.1f MiB, last quarter %.1f MiB\n", c.name, float64(first)/(1<<20), float64(last)/(1<<20))
			} else {
				fmt.Fprintf(b.out, "%s: first quarter %d, last quarter %d\n", c.name, first, last)
			}
		}
	}
	if nErr > 0 || broken > 0 || rcv.Disorder() > 0 || followerErr != nil {
		return fmt.Errorf("soak: %d failed requests, %d events out of sequence at subscribers, %d at webhooks, socket error %v", nErr, broken, rcv.Disorder(), followerErr)
	}
	return nil
}

// openFiles counts a process's open file descriptors (0 if unknown).
func openFiles(pid int) int64 {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return 0
	}
	return int64(len(ents))
}

// scrapeGo reads go_memstats_heap_inuse_bytes and go_goroutines from the
// server's /metrics.
func scrapeGo(addr string) (heap, goroutines int64) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			heap = int64(f)
		}
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			goroutines = int64(f)
		}
	}
	return heap, goroutines
}

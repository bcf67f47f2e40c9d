package main

import (
	"context"
	"fmt"
	"github.com/comm-gateway/comm/gateway"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/comm-gateway/comm/bench"
	"github.com/comm-gateway/comm/channels/email/inbound"
	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/metrics"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/webhook"
)

func runBench(s *flagSet, args []string) error {
	dbURL := s.String("database-url", "COMM_BENCH_DATABASE_URL", "", "postgres:// URL to measure PostgreSQL; empty measures SQLite")
	sync := s.String("sqlite-sync", "COMM_SQLITE_SYNC", "full", "SQLite synchronous setting: full or normal")
	what := s.String("what", "COMM_BENCH_WHAT", "append,inbound,reply,read", "comma-separated: append (the stream), inbound (POST .../inbound over HTTP), reply (reply -> message.sent latency), mail (SMTP listener -> message.received, and memory for one 25 MB mail), read (GET /v1/events over HTTP), credit (replies on a paid channel, each debited, against the free test channel's, alternately), subscribe (GraphQL websocket subscriptions; SQLite), soak (a steady mixed load against a comm serve child for --duration, e.g. 30m: memory, goroutines and open files sampled, every event checked at subscribers and webhooks), webhook (push delivery to loopback receivers), telegram (Telegram webhook ingress -> message.received, and reply -> sendMessage at a fake Bot API), slack (Slack Events API ingress -> message.received at /hooks/slack), meta (signed, batched Messenger webhooks at /hooks/facebook -> message.received, and reply -> Send API latency at a fake Graph API), discord (Discord gateway dispatch -> message.received through one session, and sends under its rate limit), telnyx (Telnyx Ed25519-signed webhook ingress -> message.received at /hooks/sms/{id}, and reply -> POST /v2/messages at a fake Telnyx), twilio (signed Twilio SMS webhook ingress -> message.received, and reply -> Messages.json at a fake Twilio), whatsapp-hosted (signed Cloud API webhooks at /hooks/whatsapp -> message.received on shared numbers, people joined by code; needs the shared-lines routing)")
	dur := s.String("duration", "COMM_BENCH_DURATION", "5s", "how long each measurement runs")
	appenders := s.String("appenders", "COMM_BENCH_APPENDERS", "256", "concurrent appenders")
	events := s.String("events", "COMM_BENCH_EVENTS", "1000000", "events stored before the read benchmark")
	httpClients := s.String("http-clients", "COMM_BENCH_HTTP_CLIENTS", "64", "concurrent HTTP clients for the inbound benchmark, and senders in flight for the subscribe benchmark")
	clients := s.String("clients", "COMM_BENCH_CLIENTS", "8", "concurrent HTTP readers")
	writers := s.String("writers", "COMM_WRITERS", "2", "group-commit writers on PostgreSQL")
	subs := s.String("subscribers", "COMM_BENCH_SUBSCRIBERS", "10000", "subscriptions for the subscribe benchmark (one websocket each)")
	rates := s.String("rates", "COMM_BENCH_RATES", "250,400,600", "event rates (events/s) for the subscribe benchmark")
	backlog := s.String("backlog", "COMM_BENCH_BACKLOG", "1000000", "events a subscriber catches up in the subscribe benchmark (0 skips it)")
	serverGOGC := s.String("server-gogc", "COMM_BENCH_SERVER_GOGC", "100", "GOGC of the server process in the subscribe benchmark")
	serverMemLimit := s.String("server-gomemlimit", "COMM_BENCH_SERVER_GOMEMLIMIT", "", "GOMEMLIMIT of the server process in the subscribe benchmark; empty: none")
	serverBinary := s.String("server-binary", "COMM_BENCH_SERVER_BINARY", "", "the comm binary the subscribe benchmark runs as its server (another build, to compare builds under one load generator); empty: this one")
	serverProfile := s.String("server-cpuprofile", "COMM_BENCH_SERVER_CPUPROFILE", "", "write CPU profiles of the subscribe benchmark's servers to <this>.1, .2, ...")
	subModes := s.String("subscribe-modes", "COMM_BENCH_SUBSCRIBE_MODES", "sequence,fresh", "how the subscribe benchmark runs its rates: sequence (one after another on one server, after the idle memory; then the catch-up), fresh (each on a new server), or both")
	withMetrics := s.String("metrics", "COMM_BENCH_METRICS", "false", "count the gateway's metrics (as --metrics-listen does) while measuring, to see what they cost")
	soakRate := s.String("soak-rate", "COMM_BENCH_SOAK_RATE", "200", "inbound messages per second of the soak benchmark (20 projects, 5 subscriptions and a webhook endpoint each, a reply to every 5th message)")
	writeLimit := s.String("write-limit", "COMM_BENCH_WRITE_LIMIT", "off", "the per-key write limit while measuring: off; local (on, so high it never refuses: each request takes a token from this replica's bucket); shared (the same, and shared with other replicas through PostgreSQL every --rate-limit-sync, as comm serve does there)")
	cpuprofile := s.String("cpuprofile", "COMM_BENCH_CPUPROFILE", "", "write a CPU profile of the run to this file")
	if err := s.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	d, err := parseDuration("--duration", *dur)
	if err != nil {
		return err
	}
	nApp, err := parseInt("--appenders", *appenders)
	if err != nil {
		return err
	}
	nEv, err := parseInt("--events", *events)
	if err != nil {
		return err
	}
	nCl, err := parseInt("--clients", *clients)
	if err != nil {
		return err
	}
	nW, err := parseInt("--writers", *writers)
	if err != nil {
		return err
	}
	countMetrics, err := parseBool("--metrics", *withMetrics)
	if err != nil {
		return err
	}
	switch *writeLimit {
	case "off":
		benchWriteLimit = 0
	case "local":
		benchWriteLimit = -1
	case "shared":
		benchWriteLimit = ratelimit.DefaultSync
	default:
		return fmt.Errorf("--write-limit must be off, local or shared, not %q", *writeLimit)
	}
	ctx := context.Background()
	open := func() (*stream.Log, func(), error) {
		benchMetrics = nil
		if countMetrics {
			benchMetrics = metrics.New(metrics.Options{})
		}
		cfg := store.Config{SQLiteSync: *sync, ReadConns: max(nCl, 4)}
		var cleanup func()
		if *dbURL != "" {
			u, drop, err := store.ScratchSchema(*dbURL)
			if err != nil {
				return nil, nil, err
			}
			cfg.URL, cleanup = u, drop
		} else {
			dir, err := os.MkdirTemp("", "comm-bench-")
			if err != nil {
				return nil, nil, err
			}
			cfg.DataDir, cleanup = dir, func() { os.RemoveAll(dir) }
		}
		db, err := store.Open(ctx, cfg)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		l, err := stream.Open(db, stream.Options{Writers: nW, Observer: observer(benchMetrics)})
		if err != nil {
			db.Close()
			cleanup()
			return nil, nil, err
		}
		return l, func() { l.Close(); db.Close(); cleanup() }, nil
	}
	engine := bench.EngineName(store.Config{URL: *dbURL, SQLiteSync: *sync})
	var results []bench.Result
	for _, w := range strings.Split(*what, ",") {
		switch strings.TrimSpace(w) {
		case "append":
			for _, np := range []int{1, 100} {
				l, done, err := open()
				if err != nil {
					return err
				}
				projects, err := bench.CreateProjects(ctx, l, np)
				if err == nil {
					var r bench.Result
					r, err = bench.Appends(ctx, l, projects, nApp, d)
					r.Name, r.Engine = fmt.Sprintf("stream append, %d project(s)", np), engine
					results = append(results, r)
				}
				done()
				if err != nil {
					return err
				}
			}
		case "inbound":
			for _, np := range []int{1, 100} {
				nHTTP, err := parseInt("--http-clients", *httpClients)
				if err != nil {
					return err
				}
				r, err := benchInbound(ctx, open, np, nHTTP, d)
				if err != nil {
					return err
				}
				r.Engine = engine
				results = append(results, r)
			}
		case "reply":
			r, err := benchReply(ctx, open)
			if err != nil {
				return err
			}
			r.Engine = engine
			results = append(results, r)
		case "subscribe":
			nSubs, err := parseInt("--subscribers", *subs)
			if err != nil {
				return err
			}
			nBacklog, err := parseInt("--backlog", *backlog)
			if err != nil {
				return err
			}
			var rs []int
			for _, r := range strings.Split(*rates, ",") {
				n, err := parseInt("--rates", r)
				if err != nil || n == 0 {
					return fmt.Errorf("--rates: %q is not a positive rate", r)
				}
				rs = append(rs, n)
			}
			nSenders, err := parseInt("--http-clients", *httpClients)
			if err != nil {
				return err
			}
			sb := &subscribeBench{subs: nSubs, projects: 100, rates: rs, d: d, backlog: nBacklog, serverGOGC: *serverGOGC,
				serverMemLimit: *serverMemLimit, serverProfile: *serverProfile, serverBinary: *serverBinary, senders: nSenders}
			for _, m := range strings.Split(*subModes, ",") {
				switch strings.TrimSpace(m) {
				case "sequence":
					sb.sequence = true
				case "fresh":
					sb.fresh = true
				default:
					return fmt.Errorf("--subscribe-modes: %q is neither sequence nor fresh", m)
				}
			}
			got, err := sb.run(ctx)
			if err != nil {
				return err
			}
			results = append(results, got...)
		case "webhook":
			got, err := benchWebhooks(ctx, open, d)
			if err != nil {
				return err
			}
			for i := range got {
				got[i].Engine = engine
			}
			results = append(results, got...)
		case "soak":
			rate, err := parseInt("--soak-rate", *soakRate)
			if err != nil {
				return err
			}
			if rate <= 0 {
				return fmt.Errorf("--soak-rate: must be positive")
			}
			sb := soakBench{dbURL: *dbURL, projects: 20, subsPer: 5, rate: rate, replyEvery: 5,
				d: d, sample: min(max(d/30, 10*time.Second), time.Minute), out: os.Stdout}
			if err := sb.run(ctx); err != nil {
				return err
			}
		case "mail":
			got, err := benchMail(ctx, open, d)
			if err != nil {
				return err
			}
			for i := range got {
				got[i].Engine = engine
			}
			results = append(results, got...)
		case "credit":
			nHTTP, err := parseInt("--http-clients", *httpClients)
			if err != nil {
				return err
			}
			got, err := benchCredit(ctx, open, nHTTP, d)
			if err != nil {
				return err
			}
			for i := range got {
				got[i].Engine = engine
			}
			results = append(results, got...)
		case "read":
			r, err := benchRead(ctx, open, nEv, nCl, d)
			if err != nil {
				return err
			}
			r.Engine = engine
			results = append(results, r)
		default:
			run, ok := providerBenches[strings.TrimSpace(w)]
			if !ok {
				return fmt.Errorf("--what: unknown benchmark %q", w)
			}
			nHTTP, err := parseInt("--http-clients", *httpClients)
			if err != nil {
				return err
			}
			got, err := run(ctx, open, nHTTP, d)
			if err != nil {
				return err
			}
			for i := range got {
				got[i].Engine = engine
			}
			results = append(results, got...)
		}
	}
	bench.PrintTable(os.Stdout, results)
	return nil
}

// gateway serves the REST API and runs the outbox on a loopback port. The
// abuse limits are off: the load comes from one address and few keys.
func serveBench(l *stream.Log, cfg gateway.Config) (g *gateway.Gateway, base string, stop func(), err error) {
	cfg.Service.SandboxConnections = -1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	if cfg.Server.BaseURL == "" {
		cfg.Server.BaseURL = "http://" + ln.Addr().String()
	}
	g, err = benchGatewayWith(l, cfg)
	if err != nil {
		ln.Close()
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: g.Front, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stopWorkers := g.StartWorkers(gateway.Workers{Outbox: &delivery.Outbox{}})
	return g, "http://" + ln.Addr().String(), func() { srv.Close(); stopWorkers(); g.Close() }, nil
}

func benchInbound(ctx context.Context, open opener, projects, clients int, d time.Duration) (bench.Result, error) {
	return onGateway(open, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		api := bench.NewAPI(base, clients)
		conns, err := bench.NewTestConnections(ctx, api, projects)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := bench.Inbound(ctx, api, conns, clients, d)
		r.Name = fmt.Sprintf("POST /v1/connections/{id}/inbound, %d project(s)", projects)
		return r, err
	})
}

func benchReply(ctx context.Context, open opener) (bench.Result, error) {
	return onGateway(open, func(_ *stream.Log, _ *gateway.Gateway, base string) (bench.Result, error) {
		api := bench.NewAPI(base, 4)
		conns, err := bench.NewTestConnections(ctx, api, 1)
		if err != nil {
			return bench.Result{}, err
		}
		r, err := bench.ReplyLatency(ctx, api, conns[0], 1000)
		r.Name = "reply -> message.sent"
		return r, err
	})
}

// opener opens a fresh database and log for one measurement.
type opener func() (*stream.Log, func(), error)

// onGateway opens a fresh database, serves the gateway on it and runs fn.
func onGateway(open opener, fn func(l *stream.Log, g *gateway.Gateway, base string) (bench.Result, error)) (bench.Result, error) {
	return onGatewayWith(open, gateway.Config{}, fn)
}

// onGatewayWith is onGateway with the gateway configured by cfg.
func onGatewayWith(open opener, cfg gateway.Config, fn func(l *stream.Log, g *gateway.Gateway, base string) (bench.Result, error)) (bench.Result, error) {
	l, done, err := open()
	if err != nil {
		return bench.Result{}, err
	}
	defer done()
	g, base, stop, err := serveBench(l, cfg)
	if err != nil {
		return bench.Result{}, err
	}
	defer stop()
	return fn(l, g, base)
}

func benchRead(ctx context.Context, open opener, events, clients int, d time.Duration) (bench.Result, error) {
	return onGateway(open, func(l *stream.Log, g *gateway.Gateway, base string) (bench.Result, error) {
		sb, err := g.Svc.CreateSandbox(ctx, "bench")
		if err != nil {
			return bench.Result{}, err
		}
		t0 := time.Now()
		if err := bench.Fill(ctx, l, sb.ProjectID, events); err != nil {
			return bench.Result{}, err
		}
		fmt.Fprintf(os.Stderr, "bench: stored %d events in %s\n", events, time.Since(t0).Round(time.Millisecond))
		r, err := bench.Reads(ctx, base, sb.APIKey, int64(events), clients, d)
		r.Name = "GET /v1/events?limit=100"
		return r, err
	})
}

func benchWebhooks(ctx context.Context, open opener, d time.Duration) ([]bench.Result, error) {
	var out []bench.Result
	for _, c := range []struct{ endpoints, per int }{{1, 10000}, {100, 300}} {
		l, done, err := open()
		if err != nil {
			return nil, err
		}
		g, err := benchGatewayWith(l, gateway.Config{Webhook: webhook.Options{AllowPrivate: true}})
		if err != nil {
			done()
			return nil, err
		}
		svc := g.Svc
		rcv := bench.NewReceiver()
		stopWorkers := g.StartWorkers(gateway.Workers{Webhooks: &delivery.Webhooks{}}) // private targets allowed, as the service's
		r, err := bench.WebhookDrain(ctx, svc, g.Hooks, rcv, c.endpoints, c.per)
		if err == nil {
			r.Name = fmt.Sprintf("webhook delivery, %d endpoint(s)", c.endpoints)
			out = append(out, r)
			r, err = bench.WebhookLatency(ctx, svc, g.Hooks, rcv, c.endpoints, 100*c.endpoints/max(c.endpoints/10, 1), d)
			r.Name = fmt.Sprintf("webhook latency, %d endpoint(s)", c.endpoints)
			out = append(out, r)
		}
		stopWorkers()
		rcv.Close()
		g.Close()
		done()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// benchMail measures the SMTP listener: 10 KB mails per second into
// message.received, then the heap while one 25 MB mail is received.
func benchMail(ctx context.Context, open opener, d time.Duration) ([]bench.Result, error) {
	var out []bench.Result
	_, err := onGateway(open, func(_ *stream.Log, g *gateway.Gateway, base string) (bench.Result, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return bench.Result{}, err
		}
		// The benchmark's clients all come from one address: no session caps.
		mx := &inbound.Server{Backend: g.Mail.Backend(), MaxSessions: -1, MaxSessionsPerIP: -1}
		go mx.Serve(ln)
		defer mx.Close()
		api := bench.NewAPI(base, 4)
		addrs, _, err := bench.NewEmailInboxes(ctx, api, 10)
		if err != nil {
			return bench.Result{}, err
		}
		const big = 25 << 20
		peak, took, err := bench.MailMemory(ctx, ln.Addr().String(), addrs[0], big)
		if err != nil {
			return bench.Result{}, err
		}
		out = append(out, bench.Result{Name: "SMTP: one 25 MB mail (memory)", Ops: 1, Elapsed: took, P50: took, P99: took,
			Note: fmt.Sprintf("peak Go heap %.0f MB above idle while receiving and storing it", float64(peak)/(1<<20))})
		for _, conns := range []int{16, 64} {
			r, err := bench.Mail(ctx, ln.Addr().String(), addrs, conns, 10<<10, d)
			if err != nil {
				return r, err
			}
			r.Name = "SMTP: 10 KB mails -> message.received"
			out = append(out, r)
		}
		return bench.Result{}, nil
	})
	return out, err
}

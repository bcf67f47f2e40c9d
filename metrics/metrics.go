// Package metrics exposes comm's Prometheus metrics: a registry of the
// gateway's own (not the global default, so a process may run several
// gateways), the hooks the hot paths call (stream.Observer for the log's
// group commits, server.Observer for HTTP requests), and collectors that
// read the database and the websocket server when scraped. Every name
// starts with comm_; no label carries a project id unless PerProject is set.
package metrics

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure the metrics.
type Options struct {
	// PerProject adds per-project series (the webhook lag of each
	// project's endpoint): one series per project, so off by default.
	PerProject bool
	// ScrapeTimeout bounds the database queries of one scrape (default
	// 5s).
	ScrapeTimeout time.Duration
	// Logger receives the errors of scrape-time queries; slog.Default() if
	// nil.
	Logger *slog.Logger
}

// Metrics is one gateway's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	reg   *prometheus.Registry
	opts  Options
	watch sync.Once

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	// httpByRoute caches the children of the two vectors by route and
	// status, so a request does not hash its labels.
	httpByRoute sync.Map // httpKey -> *httpChild

	appends      prometheus.Counter
	commits      prometheus.Counter
	commitFailed prometheus.Counter
	commitTime   prometheus.Observer
	batchUnits   prometheus.Observer
	trimmed      prometheus.Counter

	webhookAttempts *prometheus.CounterVec
	webhookLatency  prometheus.Observer
	sends           *prometheus.CounterVec
	providerErrors  *prometheus.CounterVec
	refusals        *prometheus.CounterVec
	smtpSessions    prometheus.Counter
	smtpRefusals    *prometheus.CounterVec
}

// New returns metrics on a registry of their own, with the Go runtime and
// process collectors.
func New(opts Options) *Metrics {
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	m := &Metrics{reg: reg, opts: opts}
	m.httpRequests = f.counterVec("comm_http_requests_total",
		"HTTP requests answered, by route pattern (\"GET /v1/messages/{id}\"; \"unmatched\" when no route matched) and status code (101: a websocket upgraded).",
		"route", "code")
	m.httpDuration = f.histogramVec("comm_http_request_duration_seconds",
		"Time to answer an HTTP request (for a websocket, to the upgrade), by route pattern.",
		prometheus.DefBuckets, "route")
	m.appends = f.counter("comm_log_appended_events_total", "Events appended to the log (committed).")
	m.commits = f.counter("comm_log_commits_total", "Group commits of the log (transactions, each holding one or more pieces of work).")
	m.commitFailed = f.counter("comm_log_failed_writes_total", "Pieces of work (an append or a write) the log refused or failed.")
	m.commitTime = f.histogram("comm_log_commit_duration_seconds", "Time of a group commit, retries included.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5})
	m.batchUnits = f.histogram("comm_log_commit_batch_size", "Pieces of work committed together in one group commit.",
		[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512})
	m.trimmed = f.counter("comm_log_deleted_events_total", "Events deleted from the log by the retention (COMM_EVENT_RETENTION).")
	m.webhookAttempts = f.counterVec("comm_webhook_attempts_total",
		"Webhook delivery attempts, by outcome (ok, gone, http_4xx, http_5xx, http_other, error: no answer).", "outcome")
	m.webhookLatency = f.histogram("comm_webhook_attempt_duration_seconds", "Time of a webhook delivery attempt.", prometheus.DefBuckets)
	m.sends = f.counterVec("comm_sends_total",
		"Outbound messages handed to a provider, by channel and outcome (sent, retry, failed).", "channel", "outcome")
	m.providerErrors = f.counterVec("comm_provider_errors_total",
		"Errors providers answered to outbound sends, by channel and class (revoked, permanent, rate_limited, timeout, transient).", "channel", "class")
	m.refusals = f.counterVec("comm_ratelimit_refusals_total",
		"Requests refused by a rate limit, by bucket.", "bucket")
	m.smtpSessions = f.counter("comm_smtp_sessions_total", "SMTP sessions opened on the inbound mail listener.")
	m.smtpRefusals = f.counterVec("comm_smtp_refusals_total",
		"Inbound mail refused, by reason: session_limit (421 at connect), recipient (RCPT refused), read (DATA unreadable: too large, a line too long), parse (a MIME limit broken, malformed), gateway (554 from the gateway), temporary (451).", "reason")
	return m
}

// Registry returns the registry the metrics are on (to add collectors, or
// to gather in tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/metrics", http.StatusFound)
	})
	return mux
}

type httpKey struct {
	route string
	code  int
}

type httpChild struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// ObserveHTTP counts a request (server.Observer).
func (m *Metrics) ObserveHTTP(pattern string, code int, d time.Duration) {
	if pattern == "" {
		pattern = "unmatched"
	}
	k := httpKey{pattern, code}
	c, ok := m.httpByRoute.Load(k)
	if !ok {
		c, _ = m.httpByRoute.LoadOrStore(k, &httpChild{
			count:    m.httpRequests.WithLabelValues(pattern, strconv.Itoa(code)),
			duration: m.httpDuration.WithLabelValues(pattern),
		})
	}
	ch := c.(*httpChild)
	ch.count.Inc()
	ch.duration.Observe(d.Seconds())
}

// Committed counts a group commit of the log (stream.Observer).
func (m *Metrics) Committed(units, events, failed int, d time.Duration) {
	m.commits.Inc()
	m.appends.Add(float64(events))
	if failed > 0 {
		m.commitFailed.Add(float64(failed))
	}
	m.commitTime.Observe(d.Seconds())
	m.batchUnits.Observe(float64(units))
}

// Trimmed counts events the retention deleted (stream.RetentionObserver).
func (m *Metrics) Trimmed(events int64) { m.trimmed.Add(float64(events)) }

// WebhookAttempted counts a webhook delivery attempt
// (delivery.WebhookObserver).
func (m *Metrics) WebhookAttempted(outcome string, d time.Duration) {
	m.webhookAttempts.WithLabelValues(outcome).Inc()
	m.webhookLatency.Observe(d.Seconds())
}

// Sent counts an outbound message handed to channel's provider, by outcome.
func (m *Metrics) Sent(channel, outcome string) { m.sends.WithLabelValues(channel, outcome).Inc() }

// ProviderError counts a provider's error to a send, by channel and
// class (delivery.SendObserver).
func (m *Metrics) ProviderError(channel, class string) {
	m.providerErrors.WithLabelValues(channel, class).Inc()
}

// Refused counts a request refused by the rate limit named bucket.
func (m *Metrics) Refused(bucket string) { m.refusals.WithLabelValues(bucket).Inc() }

// SMTPSession counts an SMTP session opened (inbound.Observer). Like
// SMTPRefused, it does nothing on nil metrics (metrics off).
func (m *Metrics) SMTPSession() {
	if m != nil {
		m.smtpSessions.Inc()
	}
}

// SMTPRefused counts inbound mail refused, for reason (inbound.Observer).
func (m *Metrics) SMTPRefused(reason string) {
	if m != nil {
		m.smtpRefusals.WithLabelValues(reason).Inc()
	}
}

// Live is what the metrics read of the websocket server (live.Server).
type Live interface {
	Conns() int
	Subscriptions() int
	QueuedBytes() int64
}

// Watch adds the collectors read at scrape time: the webhook lag and the
// outbox depth from db (the read pool; dialect "postgres" or "sqlite3"),
// and the open websockets and their queued bytes from live (nil: none).
// Only the first call counts: one Metrics watches one gateway.
func (m *Metrics) Watch(db *sql.DB, live Live) {
	m.watch.Do(func() {
		if db != nil {
			m.reg.MustRegister(&dbCollector{m: m, db: db})
		}
		if live != nil {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "comm_live_sockets",
				Help: "Open GraphQL websockets (subscriptions' connections) on this replica."},
				func() float64 { return float64(live.Conns()) }))
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "comm_live_subscriptions",
				Help: "GraphQL subscriptions open on this replica's websockets."},
				func() float64 { return float64(live.Subscriptions()) }))
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "comm_live_queued_bytes",
				Help: "Bytes of data messages waiting to be written to this replica's websockets."},
				func() float64 { return float64(live.QueuedBytes()) }))
		}
	})
}

var (
	lagTotalDesc = prometheus.NewDesc("comm_webhook_lag_events",
		"Events appended but not yet acknowledged by the projects' webhook endpoints (head - cursor), summed over the endpoints not disabled.", nil, nil)
	lagMaxDesc = prometheus.NewDesc("comm_webhook_lag_max_events",
		"The largest lag (head - cursor) of one webhook endpoint not disabled.", nil, nil)
	endpointsDesc = prometheus.NewDesc("comm_webhook_endpoints",
		"Webhook endpoints, by status (active, failing, disabled).", []string{"status"}, nil)
	lagProjectDesc = prometheus.NewDesc("comm_webhook_project_lag_events",
		"Lag (head - cursor) of each project's webhook endpoint (only with per-project metrics).", []string{"project"}, nil)
	headDesc = prometheus.NewDesc("comm_stream_head",
		"Seq of the last event of each project's stream (only with per-project metrics).", []string{"project"}, nil)
	outboxDesc = prometheus.NewDesc("comm_outbox_messages",
		"Outbound messages waiting to be sent or being sent (status queued or sending).", nil, nil)
	scrapeErrDesc = prometheus.NewDesc("comm_metrics_scrape_errors_total",
		"Scrape-time database queries that failed.", nil, nil)
)

// dbCollector reads gauges from the database at scrape time, with a few
// bounded queries (no per-project series unless asked).
type dbCollector struct {
	m    *Metrics
	db   *sql.DB
	errs sync.Mutex
	n    float64
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagTotalDesc
	ch <- lagMaxDesc
	ch <- endpointsDesc
	ch <- outboxDesc
	ch <- scrapeErrDesc
	if c.m.opts.PerProject {
		ch <- lagProjectDesc
		ch <- headDesc
	}
}

func (c *dbCollector) fail(err error) {
	c.m.opts.Logger.Warn("metrics: scrape query", "err", err)
	c.errs.Lock()
	c.n++
	c.errs.Unlock()
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.opts.ScrapeTimeout)
	defer cancel()
	var total, most sql.NullInt64
	err := c.db.QueryRowContext(ctx, `SELECT SUM(p.last_seq - w.cursor), MAX(p.last_seq - w.cursor)
		FROM webhooks w JOIN projects p ON p.id = w.project_id WHERE w.status <> 'disabled'`).Scan(&total, &most)
	if err != nil {
		c.fail(err)
	} else {
		ch <- prometheus.MustNewConstMetric(lagTotalDesc, prometheus.GaugeValue, float64(total.Int64))
		ch <- prometheus.MustNewConstMetric(lagMaxDesc, prometheus.GaugeValue, float64(most.Int64))
	}
	counts := map[string]int64{"active": 0, "failing": 0, "disabled": 0}
	if rows, err := c.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM webhooks GROUP BY status`); err != nil {
		c.fail(err)
	} else {
		for rows.Next() {
			var s string
			var n int64
			if err := rows.Scan(&s, &n); err == nil {
				counts[s] = n
			}
		}
		if err := rows.Err(); err != nil {
			c.fail(err)
		}
		rows.Close()
		for s, n := range counts {
			ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(n), s)
		}
	}
	if c.m.opts.PerProject {
		c.perProject(ctx, ch, lagProjectDesc, `SELECT w.project_id, p.last_seq - w.cursor
			FROM webhooks w JOIN projects p ON p.id = w.project_id WHERE w.status <> 'disabled'`)
		c.perProject(ctx, ch, headDesc, `SELECT id, last_seq FROM projects`)
	}
	var outbox int64
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE status IN ('queued', 'sending')`).Scan(&outbox); err != nil {
		c.fail(err)
	} else {
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(outbox))
	}
	c.errs.Lock()
	n := c.n
	c.errs.Unlock()
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.CounterValue, n)
}

// perProject sends a gauge of desc for each (project, value) row of query.
func (c *dbCollector) perProject(ctx context.Context, ch chan<- prometheus.Metric, desc *prometheus.Desc, query string) {
	rows, err := c.db.QueryContext(ctx, query)
	if err != nil {
		c.fail(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		var n int64
		if err := rows.Scan(&p, &n); err == nil {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), p)
		}
	}
	if err := rows.Err(); err != nil {
		c.fail(err)
	}
}

// factory registers what it makes on reg.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
)

// TestDashboardBenchmark measures the dashboard as a browser sees it
// (the README's table): the first load of the live feed (bytes on the
// wire, compressed, and the time until its websocket is subscribed), the
// feed while 1,000 events/s arrive (frames, main-thread stalls), and the
// page's memory after 100,000 events. It starts the real `comm serve`
// (embedded SQLite) and headless Chromium on this machine; the event
// generator, the gateway and the browser share its cores.
//
//	COMM_BENCH_DASHBOARD=1 go test ./cmd/comm -run TestDashboardBenchmark -v -timeout 10m
//
// COMM_BENCH_RATE, COMM_BENCH_SECONDS and COMM_BENCH_EVENTS change the
// load (1,000/s for 20 s, 100,000 events in all); COMM_BENCH_PAGE opens
// another page than the live feed (overview: the same subscription
// without the list).
func TestDashboardBenchmark(t *testing.T) {
	if os.Getenv("COMM_BENCH_DASHBOARD") == "" {
		t.Skip("a benchmark: set COMM_BENCH_DASHBOARD=1")
	}
	rate := benchEnvInt(t, "COMM_BENCH_RATE", 1000)
	seconds := benchEnvInt(t, "COMM_BENCH_SECONDS", 20)
	total := benchEnvInt(t, "COMM_BENCH_EVENTS", 100000)
	chrome := chromium(t)
	bin := binary(t)
	srv := start(t, bin, t.TempDir(), "COMM_BASE_URL=", "COMM_LOCAL_SIGNIN_PASSWORD=bench-password", "COMM_KEY_WRITES_PER_SECOND=0")

	life, cancelLife := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancelLife()
	actx, cancelAlloc := chromedp.NewExecAllocator(life, browserOptions(t, chrome, 1280, 900)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	ctx := tab

	d := dashSignInLocal(t, ctx, srv.base, "bench-password", "Bench")
	key := d.apiKey(t, ctx)
	conn := benchConnect(t, srv.base, key)
	// Some history, so the first load has something to show.
	benchInject(t, srv.base, key, conn, 200, 0)

	// 1. First load: a cold cache, then /dashboard at the live feed. The
	// tab leaves the app first: a navigation from the app's page to its
	// own #fragment would not load it again.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.ClearBrowserCache, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	var (
		mu                  sync.Mutex
		bytes               float64
		requests            int
		subscribedAt        time.Time
		firstEventsAt       time.Time
		maxSeq              atomic.Int64
		frames, frameBytes  atomic.Int64
		seqRE               = regexp.MustCompile(`"seq":(\d+)`)
		dataFrameRE         = regexp.MustCompile(`^\{"id":"[^"]*","type":"next"`)
		subscribeSentRE     = regexp.MustCompile(`"type":"subscribe"`)
		subscribeSeen       atomic.Bool
		firstFrameAfterSubs atomic.Bool
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventLoadingFinished:
			mu.Lock()
			bytes += e.EncodedDataLength
			requests++
			mu.Unlock()
		case *network.EventWebSocketFrameSent:
			if subscribeSentRE.Match(e.Response.PayloadData) && !subscribeSeen.Swap(true) {
				mu.Lock()
				subscribedAt = time.Now()
				mu.Unlock()
			}
		case *network.EventWebSocketFrameReceived:
			p := string(e.Response.PayloadData)
			if !dataFrameRE.MatchString(p) {
				return
			}
			frames.Add(1)
			frameBytes.Add(int64(len(p)))
			if subscribeSeen.Load() && !firstFrameAfterSubs.Swap(true) {
				mu.Lock()
				firstEventsAt = time.Now()
				mu.Unlock()
			}
			if all := seqRE.FindAllStringSubmatch(p, -1); len(all) > 0 {
				n, _ := strconv.ParseInt(all[len(all)-1][1], 10, 64)
				for {
					cur := maxSeq.Load()
					if n <= cur || maxSeq.CompareAndSwap(cur, n) {
						break
					}
				}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	pageName := livePage
	if p := os.Getenv("COMM_BENCH_PAGE"); p != "" {
		pageName = p // e.g. overview: the feed's subscription without its list, for comparison
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.base+"/dashboard#/p/"+d.project+"/"+pageName)); err != nil {
		t.Fatal(err)
	}
	head := benchHead(t, srv.base, key)
	benchWait(t, "the live feed shows the history", func() bool { return maxSeq.Load() >= head })
	mu.Lock()
	loadBytes, loadRequests := bytes, requests
	toSubscribed, toEvents := subscribedAt.Sub(began), firstEventsAt.Sub(began)
	mu.Unlock()

	// 2. 1,000 events/s for a while, measured in the page: frames (by
	// requestAnimationFrame) and long tasks (main-thread stalls over 50 ms).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](probeJS)); err != nil {
		t.Fatal(err)
	}
	before := benchMetrics(t, ctx)
	start := time.Now()
	sent := benchInject(t, srv.base, key, conn, rate*seconds, rate)
	elapsed := time.Since(start)
	head = benchHead(t, srv.base, key)
	benchWait(t, "the live feed keeps up", func() bool { return maxSeq.Load() >= head })
	lag := time.Since(start) - elapsed
	after := benchMetrics(t, ctx)
	probe, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`window.__commProbe.read()`))
	if err != nil {
		t.Fatal(err)
	}

	// 3. Memory after 100,000 events in all.
	if rest := total - int(head); rest > 0 {
		benchInject(t, srv.base, key, conn, rest, 0)
	}
	head = benchHead(t, srv.base, key)
	benchWait(t, "the live feed reaches 100,000 events", func() bool { return maxSeq.Load() >= head })
	time.Sleep(2 * time.Second)
	if _, err := chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	final := benchMetrics(t, ctx)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#app *').length`))
	if err != nil {
		t.Fatal(err)
	}

	fmt.Printf("\n| measure | value |\n|---|---|\n")
	fmt.Printf("| first load: bytes transferred (compressed, %d requests, websocket frames excluded) | %.1f KiB |\n", loadRequests, loadBytes/1024)
	fmt.Printf("| first load: navigation to the live subscription sent | %d ms |\n", toSubscribed.Milliseconds())
	fmt.Printf("| first load: navigation to the first events shown (frame received) | %d ms |\n", toEvents.Milliseconds())
	fmt.Printf("| live feed: events generated | %d in %.1f s (%.0f/s) |\n", sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds())
	fmt.Printf("| live feed: behind the generator at its end | %d ms |\n", lag.Milliseconds())
	fmt.Printf("| live feed: frames painted (requestAnimationFrame) | %.0f in %.1f s (%.1f/s) |\n", probe["frames"], probe["seconds"], probe["frames"]/probe["seconds"])
	fmt.Printf("| live feed: frames later than 50 ms / longest gap between frames | %.0f / %.0f ms |\n", probe["late"], probe["maxGap"])
	fmt.Printf("| live feed: long tasks (main thread busy > 50 ms) / longest | %.0f / %.0f ms |\n", probe["longTasks"], probe["longest"])
	fmt.Printf("| live feed: main-thread busy (TaskDuration) per second of feed | %.0f ms |\n", 1000*(after["TaskDuration"]-before["TaskDuration"])/elapsed.Seconds())
	per := func(m string) float64 { return 1000 * (after[m] - before[m]) / elapsed.Seconds() }
	fmt.Printf("| live feed: of which script / style / layout, per second | %.0f / %.0f / %.0f ms |\n", per("ScriptDuration"), per("RecalcStyleDuration"), per("LayoutDuration"))
	fmt.Printf("| live feed: websocket data frames / mean size | %d / %d B |\n", frames.Load(), frameBytes.Load()/max(1, frames.Load()))
	fmt.Printf("| memory after %d events: JS heap used (after GC) | %.1f MiB |\n", head, final["JSHeapUsedSize"]/(1<<20))
	fmt.Printf("| memory after %d events: DOM nodes (document) / elements in the app | %.0f / %d |\n", head, final["Nodes"], rows)
	fmt.Printf("| memory before the 1,000/s run: JS heap used | %.1f MiB |\n", before["JSHeapUsedSize"]/(1<<20))
}

// livePage is the app's route of the live event feed.
const livePage = "events"

// probeJS counts frames and long tasks in the page from now on.
const probeJS = `(() => {
  const p = { frames: 0, late: 0, maxGap: 0, longTasks: 0, longest: 0, t0: performance.now(), last: performance.now() };
  const tick = (now) => { p.frames++; const gap = now - p.last; if (gap > 50) p.late++; if (gap > p.maxGap) p.maxGap = gap; p.last = now; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => { for (const e of list.getEntries()) { p.longTasks++; if (e.duration > p.longest) p.longest = e.duration; } }).observe({ type: 'longtask' });
  window.__commProbe = { read: () => ({ frames: p.frames, late: p.late, maxGap: p.maxGap, longTasks: p.longTasks, longest: p.longest, seconds: (performance.now() - p.t0) / 1000 }) };
})()`

func benchEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func benchMetrics(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	if _, err := chromedp.Call(ctx, performance.Enable, performance.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range res.Metrics {
		out[m.Name] = m.Value
	}
	return out
}

func benchWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func benchConnect(t *testing.T, base, key string) string {
	t.Helper()
	code, body := call(t, "POST", base+"/v1/connections", key, `{"channel":"test"}`)
	var conn struct{ ID string }
	if json.Unmarshal(body, &conn); code/100 != 2 || conn.ID == "" {
		t.Fatalf("connect: %d %s", code, body)
	}
	return conn.ID
}

func benchHead(t *testing.T, base, key string) int64 {
	t.Helper()
	code, body := call(t, "GET", base+"/v1/project", key, "")
	var p struct {
		LastSeq int64 `json:"last_seq"`
	}
	if json.Unmarshal(body, &p); code != 200 {
		t.Fatalf("project: %d %s", code, body)
	}
	return p.LastSeq
}

// benchInject delivers n test messages (each one event) into conn, at
// rate per second (0: as fast as 64 clients go), from 50 people.
func benchInject(t *testing.T, base, key, conn string, n, rate int) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	jobs := make(chan int, 1024)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	// Each request waits for its group commit (an fsync on SQLite), so
	// the rate needs many in flight.
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body := fmt.Sprintf(`{"sender":"person-%d","text":"event %d of the benchmark"}`, i%50, i)
				req, _ := http.NewRequest("POST", base+"/v1/connections/"+conn+"/inbound", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if resp.StatusCode/100 != 2 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status)
				}
				resp.Body.Close()
			}
		}()
	}
	began := time.Now()
	for i := range n {
		if rate > 0 {
			if wait := time.Until(began.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d injections failed; first: %v", f, n, firstErr.Load())
	}
	return n
}

// dashSession is a browser signed in at the dashboard, on a project.
type dashSession struct {
	project, csrf string
}

// dashSignInLocal signs the browser in at base/dashboard with the local
// operator password and makes a first project named name (or opens the
// account's first project).
func dashSignInLocal(t *testing.T, ctx context.Context, base, password, name string) dashSession {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.Navigate(base+"/dashboard"), chromedp.WaitVisible(chromedp.CSS(`#password`))); err != nil {
		t.Fatalf("the dashboard's sign-in: %v", err)
	}
	if _, err := chromedp.Run(sctx, chromedp.WaitEvent(page.LoadEventFired, nil,
		chromedp.SendKeys(chromedp.CSS(`#password`), password+"\n"))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	if has, _ := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.querySelector('form[action="/dashboard/projects"]') !== null && document.getElementById('comm-boot') === null`)); has {
		if _, err := chromedp.Run(sctx, chromedp.WaitEvent(page.LoadEventFired, nil,
			chromedp.SendKeys(chromedp.CSS(`#name`), name+"\n"))); err != nil {
			t.Fatalf("first project: %v", err)
		}
	}
	boot, err := chromedp.Run(sctx, chromedp.Evaluate[struct {
		CSRF     string `json:"csrf"`
		Projects []struct {
			ID string `json:"id"`
		} `json:"projects"`
	}](`JSON.parse(document.getElementById('comm-boot').textContent)`))
	if err != nil || len(boot.Projects) == 0 {
		t.Fatalf("the app's boot data: %v %+v", err, boot)
	}
	return dashSession{project: boot.Projects[0].ID, csrf: boot.CSRF}
}

// gql runs a GraphQL operation from the page, as the app does.
func (d dashSession) gql(t *testing.T, ctx context.Context, query string) json.RawMessage {
	t.Helper()
	q, _ := json.Marshal(map[string]string{"query": query})
	js := fmt.Sprintf(`fetch('/dashboard/graphql', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Comm-Project': %q, 'X-CSRF-Token': %q}, body: %q}).then(r => r.text())`,
		d.project, d.csrf, string(q))
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("graphql %s: %v", query, err)
	}
	return json.RawMessage(out)
}

// apiKey makes an API key of the project from the page.
func (d dashSession) apiKey(t *testing.T, ctx context.Context) string {
	t.Helper()
	raw := d.gql(t, ctx, `mutation { createAPIKey(name: "bench") { apiKey } }`)
	var out struct {
		Data struct {
			CreateAPIKey struct{ APIKey string }
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Data.CreateAPIKey.APIKey == "" {
		t.Fatalf("createAPIKey: %v %s", err, raw)
	}
	return out.Data.CreateAPIKey.APIKey
}

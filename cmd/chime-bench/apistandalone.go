package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/credential"
)

// The standalone-API phase measures what issue 20 asked of API processes:
// that they hold no job rows. `chime dev` holds n pending one-shot jobs
// due tomorrow (published with the producer SDK, the fastest way in); a
// `chime api` of its own is then started beside it, configured as
// docs/operations.md says (dev's broker, Kafka credential and query
// secret), and measured: its RSS, its time from start to GET /readyz,
// and the latency of job reads through it, which its router sends to
// dev's scheduler.

// Targets of the phase.
const (
	standaloneRSSTarget   = 100 << 20
	standaloneReadyTarget = 2 * time.Second
	standaloneP99Target   = 20 * time.Millisecond
)

// standaloneReads are the reads measured, from standaloneClients clients.
const (
	standaloneGets    = 20_000
	standaloneLists   = 2_000
	standaloneClients = 4
)

func benchAPIStandalone(ctx context.Context, o e2eOptions, n int) []result {
	label := fmt.Sprintf("standalone chime api beside chime dev with %dk pending", n/1000)
	fmt.Fprintf(os.Stderr, "%s: starting chime dev...\n", label)
	c := startChime(ctx, o.chime)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	adm := c.admin()
	defer adm.Close()

	tomorrow := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	at := func(i int) time.Time { return tomorrow.Add(time.Duration(i%86400) * time.Second) }
	fmt.Fprintf(os.Stderr, "%s: publishing %d jobs due tomorrow with the producer SDK...\n", label, n)
	start := time.Now()
	c.ingestProducer(ctx, "http://127.0.0.1:9/hook", 0, n, at, standaloneLabels)
	if !c.waitIndexed(ctx, n, 10*time.Minute+time.Duration(n/1000)*time.Second) {
		fail("%s: chime dev indexed only %v of %d jobs; log %s", label, c.metric(ctx, "chime_scheduler_pending_timers"), n, c.logFile.Name())
	}
	loaded := time.Since(start)
	waitQuiet(ctx, adm, 5*time.Minute)
	devRSS, _ := procMem(c.pid())
	fmt.Fprintf(os.Stderr, "%s: loaded in %s (chime dev RSS %s); starting chime api...\n", label, loaded.Round(100*time.Millisecond), mb(devRSS))

	a := startStandaloneAPI(ctx, o, c)
	defer a.stop()
	rssReady, _ := procMem(a.pid())

	fmt.Fprintf(os.Stderr, "%s: %d job GETs and %d listings from %d clients...\n", label, standaloneGets, standaloneLists, standaloneClients)
	gets := a.latencies(ctx, standaloneGets, func(r *rand.Rand) (string, func(map[string]any) error) {
		i := r.IntN(n)
		id := "j" + strconv.Itoa(i)
		return "/v1/namespaces/" + e2eNamespace + "/jobs/" + id, func(body map[string]any) error {
			if body["id"] != id || body["state"] != "scheduled" {
				return fmt.Errorf("job %s answered %v", id, body)
			}
			return nil
		}
	})
	// Listings: the first page, and a page deeper in (the cursor of a
	// first page read once).
	first := a.get(ctx, "/v1/namespaces/"+e2eNamespace+"/jobs?limit=50")
	cursor, _ := first["next_cursor"].(string)
	lists := a.latencies(ctx, standaloneLists, func(r *rand.Rand) (string, func(map[string]any) error) {
		path := "/v1/namespaces/" + e2eNamespace + "/jobs?limit=50"
		if r.IntN(2) == 1 {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		return path, func(body map[string]any) error {
			if jobs, _ := body["jobs"].([]any); len(jobs) != 50 {
				return fmt.Errorf("a listing page of %d jobs, want 50", len(jobs))
			}
			return nil
		}
	})
	// By label: a label half the jobs carry (the store walks its index
	// and fills a page at once), and a rare one (1 %) with the common one
	// (an intersection of the two indexes; the page's rows lie far apart).
	// Each page is checked to be what it says. The embedded broker's
	// compactions (infra/broker) run in bursts meanwhile and move every
	// p99 here by several milliseconds from one run to the next.
	byLabel := func(rare bool) []time.Duration {
		return a.latencies(ctx, standaloneLists, func(r *rand.Rand) (string, func(map[string]any) error) {
			want := map[string]string{"team": "billing"}
			if rare {
				want["shard"] = strconv.Itoa(2 * r.IntN(50)) // even shards: billing's
			}
			q := url.Values{"limit": {"50"}}
			for k, v := range want { // in either order
				q.Add("label", k+":"+v)
			}
			return "/v1/namespaces/" + e2eNamespace + "/jobs?" + q.Encode(), func(body map[string]any) error {
				jobs, _ := body["jobs"].([]any)
				if len(jobs) != 50 {
					return fmt.Errorf("a page of %d jobs with %v, want 50", len(jobs), want)
				}
				for _, j := range jobs {
					labels, _ := j.(map[string]any)["labels"].(map[string]any)
					for k, v := range want {
						if labels[k] != v {
							return fmt.Errorf("listed by %v, a job with labels %v", want, labels)
						}
					}
				}
				return nil
			}
		})
	}
	common, rare := byLabel(false), byLabel(true)
	rssAfter, peak := procMem(a.pid())
	g50, g99, _ := quantiles(gets)
	l50, l99, _ := quantiles(lists)
	c50, c99, _ := quantiles(common)
	r50, r99, _ := quantiles(rare)
	return []result{
		{label + ": chime api RSS when ready", mb(rssReady), "≤ 100 MB", verdict(rssReady <= standaloneRSSTarget)},
		{label + ": chime api RSS after the reads (peak)", mb(rssAfter) + " (" + mb(peak) + ")", "≤ 100 MB", verdict(peak <= standaloneRSSTarget)},
		{label + ": chime api start → /readyz", a.ready.Round(time.Millisecond).String(), "≤ 2 s", verdict(a.ready <= standaloneReadyTarget)},
		{label + fmt.Sprintf(": job GET p50 / p99 (%d, %d clients)", standaloneGets, standaloneClients), ms2(g50) + " / " + ms2(g99), "p99 ≤ 20 ms", verdict(g99 <= standaloneP99Target)},
		{label + fmt.Sprintf(": job list, 50 a page, p50 / p99 (%d)", standaloneLists), ms2(l50) + " / " + ms2(l99), "p99 ≤ 20 ms", verdict(l99 <= standaloneP99Target)},
		{label + fmt.Sprintf(": job list by a label of half the jobs, p50 / p99 (%d)", standaloneLists), ms2(c50) + " / " + ms2(c99), "p99 ≤ 20 ms", verdict(c99 <= standaloneP99Target)},
		{label + fmt.Sprintf(": job list by a label of 1 %% and one of half, p50 / p99 (%d)", standaloneLists), ms2(r50) + " / " + ms2(r99), "p99 ≤ 20 ms", verdict(r99 <= standaloneP99Target)},
		{label + ": chime dev RSS, load time (producer SDK)", mb(devRSS) + ", " + loaded.Round(100*time.Millisecond).String(), "—", "—"},
	}
}

// standaloneLabels labels the phase's jobs: team billing or ops (half
// each), and one of 100 shards.
func standaloneLabels(i int) map[string]string {
	return map[string]string{"team": []string{"billing", "ops"}[i%2], "shard": strconv.Itoa(i % 100)}
}

// ms2 says a latency in milliseconds with two decimals.
func ms2(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// standaloneAPI is a `chime api` child process.
type standaloneAPI struct {
	cmd    *exec.Cmd
	base   string
	ready  time.Duration // start → GET /readyz 200
	log    *os.File
	hc     *http.Client
	exited chan struct{}
}

// startStandaloneAPI starts `chime api` with a state dir of its own
// beside the chime dev c, and times it until GET /readyz answers 200.
func startStandaloneAPI(ctx context.Context, o e2eOptions, c *chimeProc) *standaloneAPI {
	state := filepath.Join(c.dir, "api-state")
	query, err := credential.Load(filepath.Join(c.dir, "state", config.QueryCredentialFile))
	if err != nil {
		fail("chime dev's query secret: %v", err)
	}
	kafka := c.credential()
	lf, err := os.Create(filepath.Join(c.dir, "chime-api.log"))
	if err != nil {
		fail("%v", err)
	}
	a := &standaloneAPI{
		base:   "http://127.0.0.1:" + strconv.Itoa(freePort()),
		log:    lf,
		hc:     &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: standaloneClients}, Timeout: time.Minute},
		exited: make(chan struct{}),
	}
	cmd := exec.Command(o.chime, "api")
	cmd.Env = append(os.Environ(),
		"CHIME_BROKERS="+c.broker,
		"CHIME_KAFKA_SASL_USER="+kafka.User,
		"CHIME_KAFKA_SASL_PASSWORD="+kafka.Password,
		"CHIME_QUERY_SECRET="+query.Password,
		"CHIME_STATE_DIR="+state,
		"CHIME_API_ADDR="+a.base[len("http://"):],
		"CHIME_ADMIN_TOKEN="+e2eAdmin,
		"CHIME_METRICS_ADDR=",
		"CHIME_CLICKHOUSE_DSN=",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fail("start %s api: %v", o.chime, err)
	}
	a.cmd = cmd
	go func() { _ = cmd.Wait(); close(a.exited) }()
	for {
		select {
		case <-a.exited:
			fail("chime api exited at start; its log: %s", lf.Name())
		default:
		}
		if st, _ := a.status(ctx, "/readyz"); st == http.StatusOK {
			a.ready = time.Since(start)
			return a
		}
		if time.Since(start) > 2*time.Minute || ctx.Err() != nil {
			fail("chime api not ready in 2m; its log: %s", lf.Name())
		}
		// Polled often: the time to ready is what is measured.
		time.Sleep(5 * time.Millisecond)
	}
}

func (a *standaloneAPI) pid() int { return a.cmd.Process.Pid }

func (a *standaloneAPI) status(ctx context.Context, path string) (int, map[string]any) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		fail("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body
}

func (a *standaloneAPI) get(ctx context.Context, path string) map[string]any {
	st, body := a.status(ctx, path)
	if st != http.StatusOK {
		fail("chime api: GET %s: %d %v; its log: %s", path, st, body, a.log.Name())
	}
	return body
}

// latencies makes n reads from standaloneClients clients, each a path
// and a check of its answer, and returns how long each took.
func (a *standaloneAPI) latencies(ctx context.Context, n int, read func(*rand.Rand) (string, func(map[string]any) error)) []time.Duration {
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	for c := range standaloneClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 20))
			for i := c; i < n; i += standaloneClients {
				path, check := read(r)
				t0 := time.Now()
				st, body := a.status(ctx, path)
				out[i] = time.Since(t0)
				if st != http.StatusOK {
					fail("chime api: GET %s: %d %v; its log: %s", path, st, body, a.log.Name())
				}
				if err := check(body); err != nil {
					fail("chime api: GET %s: %v", path, err)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// stop ends chime api with SIGTERM.
func (a *standaloneAPI) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	a.log.Close()
}

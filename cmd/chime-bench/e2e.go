package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The end-to-end phases measure chime as users run it: `bin/chime dev`
// in its own process with its defaults (every role, the embedded broker,
// the local ClickHouse, the API), one namespace with max_concurrency
// 10000, and the receiver in a third process. Beside it, in the same run,
// the ceiling: the same receiver and bodies POSTed by 100 plain goroutines
// with no scheduler at all.

const (
	e2eAdmin     = "bench-admin-token-0123456789abcdef"
	e2eNamespace = "bench"
	e2ePrefix    = schema.DefaultPrefix
)

// e2eOptions are the end-to-end flags.
type e2eOptions struct {
	chime       string        // the chime binary
	burst       int           // jobs due at one instant
	steady      int           // jobs due evenly over steadyOver
	steadyOver  time.Duration //
	pending     int           // pending jobs for the memory and recovery figures
	idle        time.Duration // idle CPU window
	profileDir  string        // CPU profiles of chime dev during each burst
	profileFor  time.Duration // how long each profile runs
	keepLogs    bool
	viaProducer bool // also run the burst with the producer SDK
	failover    bool // the failover phase on Apache Kafka
}

// chimeProc is a `chime dev` child process.
type chimeProc struct {
	bin, dir        string
	apiAddr, broker string
	metricsAddr     string
	extra           []string
	cmd             *exec.Cmd
	logFile         *os.File
	hc              *http.Client
	exited          chan struct{}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startChime starts `chime dev` on a new state dir and waits until its API
// is ready.
func startChime(ctx context.Context, bin string, extra ...string) *chimeProc {
	dir, err := os.MkdirTemp("", "chime-bench-e2e-")
	if err != nil {
		fail("%v", err)
	}
	c := &chimeProc{
		bin: bin, dir: dir, extra: extra,
		apiAddr:     "127.0.0.1:" + strconv.Itoa(freePort()),
		broker:      "127.0.0.1:" + strconv.Itoa(freePort()),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(freePort()),
		hc:          &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 2 * time.Minute},
	}
	c.start(ctx)
	return c
}

func (c *chimeProc) start(ctx context.Context) {
	lf, err := os.OpenFile(filepath.Join(c.dir, "chime.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail("%v", err)
	}
	c.logFile = lf
	_, port, _ := net.SplitHostPort(c.broker)
	args := append([]string{"dev"}, c.extra...)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(),
		"CHIME_STATE_DIR="+filepath.Join(c.dir, "state"),
		"CHIME_API_ADDR="+c.apiAddr,
		"CHIME_EMBEDDED_BROKER_PORT="+port,
		"CHIME_ADMIN_TOKEN="+e2eAdmin,
		"CHIME_METRICS_ADDR="+c.metricsAddr,
		"CHIME_BROKERS=",
		"CHIME_CLICKHOUSE_DSN=",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fail("start %s: %v", c.bin, err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.exited) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-c.exited:
			fail("chime dev exited at start; its log: %s\n%s", lf.Name(), c.tail())
		default:
		}
		if st, _ := c.call(ctx, "GET", "/readyz", nil); st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fail("chime dev not ready in 3m; its log: %s\n%s", lf.Name(), c.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *chimeProc) tail() string {
	b, _ := os.ReadFile(c.logFile.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (c *chimeProc) pid() int { return c.cmd.Process.Pid }

// cpu is chime's CPU seconds; the local ClickHouse is a child process and
// is counted apart (clickhouseCPU).
func (c *chimeProc) cpu() float64 { return procCPU(c.pid()) }

func (c *chimeProc) clickhouseCPU() float64 {
	var s float64
	for _, p := range procChildren(c.pid()) {
		s += max(0, procCPU(p))
	}
	return s
}

func (c *chimeProc) clickhouseRSS() int64 {
	var s int64
	for _, p := range procChildren(c.pid()) {
		r, _ := procMem(p)
		s += r
	}
	return s
}

func (c *chimeProc) call(ctx context.Context, method, path string, body []byte) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.apiAddr+path, bytes.NewReader(body))
	if err != nil {
		fail("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// metric reads one unlabelled gauge or counter from /metrics (-1 when
// it is not there).
func (c *chimeProc) metric(ctx context.Context, name string) float64 {
	for _, l := range c.scrape(ctx)[name] {
		if l.labels == "" {
			return l.value
		}
	}
	return -1
}

// profile takes a CPU profile of chime for d into path, in the background;
// wait for it with the returned function.
func (c *chimeProc) profile(path string, d time.Duration) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.metricsAddr, int(d.Seconds()))
		res, err := c.hc.Get(url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %v\n", err)
			return
		}
		defer res.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %v\n", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, res.Body)
	}()
	return func() { <-done }
}

// snapshot saves one of chime's runtime profiles (heap, allocs, goroutine)
// into path.
func (c *chimeProc) snapshot(name, path string) {
	res, err := c.hc.Get("http://" + c.metricsAddr + "/debug/pprof/" + name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	defer res.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, res.Body)
}

// histogramQuantile estimates quantile q of an unlabelled Prometheus
// histogram from /metrics (the upper bound of the bucket it falls in).
func (c *chimeProc) histogramQuantile(ctx context.Context, name string, q float64) float64 {
	return c.scrape(ctx).quantileSince(scrape{}, name, q)
}

// stop ends chime with SIGTERM (so a CPU profile is written) and removes its
// state unless keep.
func (c *chimeProc) stop(keep bool) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.logFile.Close()
	if keep {
		fmt.Fprintf(os.Stderr, "  chime's state and log kept in %s\n", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

// kill9 kills chime (and, by its parent-death signal, its ClickHouse).
func (c *chimeProc) kill9() {
	_ = c.cmd.Process.Kill()
	<-c.exited
	c.logFile.Close()
}

// credential is the embedded broker's SASL credential, which chime dev
// keeps in its state dir.
func (c *chimeProc) credential() kafkaauth.Credential {
	cred, err := kafkaauth.Load(filepath.Join(c.dir, "state", "kafka-credential"))
	if errors.Is(err, fs.ErrNotExist) {
		// A chime from before the embedded broker required SASL: the
		// harness also measures older builds, to compare.
		return kafkaauth.Credential{}
	}
	if err != nil {
		fail("chime dev's Kafka credential: %v", err)
	}
	return cred
}

func (c *chimeProc) admin() *kadm.Client {
	cl, err := kgo.NewClient(append(c.credential().Kgo(), kgo.SeedBrokers(c.broker))...)
	if err != nil {
		fail("%v", err)
	}
	return kadm.NewClient(cl)
}

// recordsWritten sums the end offsets of every chime topic.
func recordsWritten(ctx context.Context, adm *kadm.Client) int64 {
	td, err := adm.ListTopics(ctx)
	if err != nil {
		fail("list topics: %v", err)
	}
	var names []string
	for _, t := range td.Sorted() {
		if strings.HasPrefix(t.Topic, e2ePrefix) {
			names = append(names, t.Topic)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		fail("end offsets: %v", err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// groupsLag is the total lag of every consumer group on the broker that
// has committed offsets.
func groupsLag(ctx context.Context, adm *kadm.Client) (int64, error) {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return 0, err
	}
	lags, err := adm.Lag(ctx, gs.Groups()...)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range lags {
		if l.Error() != nil {
			return 0, l.Error()
		}
		n += l.Lag.Total()
	}
	return n, nil
}

// waitQuiet waits until every consumer group has consumed everything (the
// breaker, the sink and the scheduler have seen every outcome and ack).
func waitQuiet(ctx context.Context, adm *kadm.Client, within time.Duration) bool {
	deadline := time.Now().Add(within)
	zeros := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := groupsLag(ctx, adm); err == nil && n == 0 {
			zeros++
			if zeros >= 3 {
				return true
			}
		} else {
			zeros = 0
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// jobBody is the callback body of job i: what the receiver reads.
func jobBody(i int, at time.Time) string {
	return `{"id":` + strconv.Itoa(i) + `,"scheduled_at":"` + at.UTC().Format(time.RFC3339Nano) + `"}`
}

// createNamespace makes the one namespace with max_concurrency 10000.
func (c *chimeProc) createNamespace(ctx context.Context) {
	if st, out := c.call(ctx, "PUT", "/v1/namespaces/"+e2eNamespace, []byte(`{"max_concurrency": 10000}`)); st != 200 && st != 201 {
		fail("namespace: %d %s", st, out)
	}
}

// ingestBatch creates jobs [from, to) through POST .../jobs:batch, 1000 per
// request from 4 clients; at gives each job's time.
func (c *chimeProc) ingestBatch(ctx context.Context, url string, from, to int, at func(int) time.Time) {
	const per, clients = 1000, 4
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				lo := int(next.Add(per)) - per
				if lo >= to {
					return
				}
				hi := min(lo+per, to)
				buf.Reset()
				buf.WriteString(`{"jobs":[`)
				for i := lo; i < hi; i++ {
					if i > lo {
						buf.WriteByte(',')
					}
					t := at(i)
					fmt.Fprintf(&buf, `{"id":"j%d","schedule":{"at":%q},"callback":{"url":%q,"body":%s}}`,
						i, t.UTC().Format(time.RFC3339Nano), url, jobBody(i, t))
				}
				buf.WriteString(`]}`)
				if st, out := c.call(ctx, "POST", "/v1/namespaces/"+e2eNamespace+"/jobs:batch", buf.Bytes()); st != 201 {
					fail("jobs:batch: %d %.300s", st, out)
				}
			}
		}()
	}
	wg.Wait()
}

// ingestProducer publishes jobs [from, to) with the producer SDK, straight
// into Kafka.
func (c *chimeProc) ingestProducer(ctx context.Context, url string, from, to int, at func(int) time.Time) {
	p, err := producer.New(producer.Brokers([]string{c.broker}), producer.TopicPrefix(e2ePrefix), producer.KgoOptions(c.credential().Kgo()...))
	if err != nil {
		fail("producer: %v", err)
	}
	defer p.Close()
	var errMu sync.Mutex
	var firstErr error
	for i := from; i < to; i++ {
		t := at(i)
		spec := &chimeJobSpec{i: i, at: t, url: url}
		p.ScheduleAsync(ctx, spec.proto(), func(_ producer.Receipt, err error) {
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		fail("producer flush: %v", err)
	}
	if firstErr != nil {
		fail("producer: %v", firstErr)
	}
}

type chimeJobSpec struct {
	i   int
	at  time.Time
	url string
	ns  string // default e2eNamespace
}

func (s *chimeJobSpec) proto() *chimev1.JobSpec {
	ns := s.ns
	if ns == "" {
		ns = e2eNamespace
	}
	return &chimev1.JobSpec{
		Namespace: ns,
		Id:        "j" + strconv.Itoa(s.i),
		Schedule:  &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(s.at)}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
			Url: s.url, Body: []byte(jobBody(s.i, s.at)),
		}}},
	}
}

// waitIndexed waits until the scheduler holds n timers.
func (c *chimeProc) waitIndexed(ctx context.Context, n int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.metric(ctx, "chime_scheduler_pending_timers") >= float64(n) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// deliveryStats are the receiver's figures for one run.
type deliveryStats struct {
	n                int
	rate             float64 // callbacks/s: n over (last arrival − first scheduled time)
	p50, p99, maxLag time.Duration
	lost, repeated   int
	stray            int64
}

func summarize(a arrivals, scheduled func(int) time.Time) deliveryStats {
	s := deliveryStats{n: len(a.first), stray: a.stray}
	var lags []time.Duration
	var first, last int64
	for i := range a.first {
		switch c := a.count[i]; {
		case c == 0:
			s.lost++
			continue
		case c > 1:
			s.repeated += int(c - 1)
		}
		sched := scheduled(i).UnixNano()
		if first == 0 || sched < first {
			first = sched
		}
		last = max(last, a.first[i])
		lags = append(lags, time.Duration(a.first[i]-sched))
	}
	s.p50, s.p99, s.maxLag = quantiles(lags)
	if last > first {
		s.rate = float64(len(lags)) / (float64(last-first) / 1e9)
	}
	return s
}

func (s deliveryStats) lagString() string {
	return fmt.Sprintf("%.2f / %.2f / %.2f s", s.p50.Seconds(), s.p99.Seconds(), s.maxLag.Seconds())
}

// ceiling POSTs the burst's bodies from 100 goroutines at t, no scheduler.
func ceiling(ctx context.Context, rcv *receiverProc, n int, lead time.Duration) (deliveryStats, float64) {
	rcv.reset(n)
	t := time.Now().Add(lead)
	bodies := make([][]byte, n)
	for i := range n {
		bodies[i] = []byte(jobBody(i, t))
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100, MaxConnsPerHost: 100}, Timeout: time.Minute}
	url := rcv.url()
	cpu0 := procCPU(os.Getpid()) + procCPU(rcv.pid())
	time.Sleep(time.Until(t))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				res, err := hc.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}
	wg.Wait()
	cpu := procCPU(os.Getpid()) + procCPU(rcv.pid()) - cpu0
	hc.CloseIdleConnections()
	return summarize(rcv.results(n), func(int) time.Time { return t }), cpu
}

// burstRun is one chime dev run of n jobs due at one instant.
type burstRun struct {
	label         string
	stats         deliveryStats
	chimeCPU      float64 // from just before the instant until everything is consumed
	clickhouseCPU float64
	receiverCPU   float64
	ingestCPU     float64
	peakRSS, rss  int64
	// ingestRSS and burstRSS are the peaks sampled while the jobs were
	// created and while they fired.
	ingestRSS, burstRSS int64
	clickhouseRSS       int64
	recordsPerJob       float64
	ingest, drain       time.Duration
	quiet               bool
	steadyRSSAfter      int64
	// fireLag50/99 are the scheduler's due emission lag (emitted − due),
	// bucket upper bounds in seconds: which half of the pipeline lags.
	fireLag50, fireLag99 float64
	// machineBusy is the share of the machine's CPU time busy from the
	// instant until the last call arrived: below 1, something other than
	// CPU holds the burst back.
	machineBusy float64
}

func runBurst(ctx context.Context, o e2eOptions, rcv *receiverProc, label string, n int, lead time.Duration, viaProducer bool, spread time.Duration) burstRun {
	r := burstRun{label: label}
	fmt.Fprintf(os.Stderr, "e2e %s: starting chime dev...\n", label)
	c := startChime(ctx, o.chime)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	adm := c.admin()
	defer adm.Close()
	rcv.reset(n)
	records0 := recordsWritten(ctx, adm)

	t0 := time.Now().Add(lead).Truncate(time.Second)
	at := func(i int) time.Time { return t0 }
	if spread > 0 {
		at = func(i int) time.Time { return t0.Add(time.Duration(int64(spread) * int64(i) / int64(n))) }
	}
	fmt.Fprintf(os.Stderr, "e2e %s: creating %d jobs due at %s (+%s)...\n", label, n, t0.Format(time.TimeOnly), spread)
	// RSS sampled every 50 ms: the peak while jobs are created, and while
	// they fire.
	var phase atomic.Int32
	var peaks [2]atomic.Int64
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
			rss, _ := procMem(c.pid())
			p := &peaks[phase.Load()]
			if rss > p.Load() {
				p.Store(rss)
			}
		}
	}()
	defer func() { close(stopSampling); <-sampleDone }()
	cpuStart := c.cpu()
	start := time.Now()
	if viaProducer {
		c.ingestProducer(ctx, rcv.url(), 0, n, at)
	} else {
		c.ingestBatch(ctx, rcv.url(), 0, n, at)
	}
	if !c.waitIndexed(ctx, n, lead+time.Minute) {
		fail("e2e %s: the scheduler indexed only %v of %d jobs; log %s", label, c.metric(ctx, "chime_scheduler_pending_timers"), n, c.logFile.Name())
	}
	r.ingest = time.Since(start)
	if time.Now().After(t0) {
		fmt.Fprintf(os.Stderr, "warning: ingesting took %s, longer than the lead %s; the lag includes it\n", r.ingest.Round(time.Millisecond), lead)
	}
	// The CPU window starts one second before the instant: ingestion (and
	// its consumers) must have settled by then.
	time.Sleep(time.Until(t0.Add(-time.Second)))
	r.ingestCPU = c.cpu() - cpuStart
	phase.Store(1)
	cpu0, ch0, rc0 := c.cpu(), c.clickhouseCPU(), procCPU(rcv.pid())
	busy0, total0 := machineCPU()
	profiled := func() {}
	if o.profileDir != "" {
		base := filepath.Join(o.profileDir, "chime-"+strings.NewReplacer(" ", "-", ":", "").Replace(label))
		path := base + ".pprof"
		c.snapshot("allocs", base+".allocs-before.pprof")
		profiled = c.profile(path, o.profileFor)
		time.AfterFunc(time.Until(t0.Add(3*time.Second)), func() { c.snapshot("heap", base+".heap-during.pprof") })
		for _, after := range []time.Duration{3 * time.Second, 15 * time.Second, 30 * time.Second} {
			time.AfterFunc(time.Until(t0.Add(after)), func() {
				c.snapshot("heap?debug=1", fmt.Sprintf("%s.memstats-%s.txt", base, after))
			})
		}
		defer c.snapshot("heap", base+".heap-after.pprof")
		defer fmt.Fprintf(os.Stderr, "e2e %s: CPU profile of chime from 1 s before the instant, %s: %s\n", label, o.profileFor, path)
	}
	defer profiled()
	fmt.Fprintf(os.Stderr, "e2e %s: ingested in %s; firing...\n", label, r.ingest.Round(time.Millisecond))
	if !rcv.waitCalls(ctx, int64(n), time.Until(t0)+spread+5*time.Minute) {
		fmt.Fprintf(os.Stderr, "e2e %s: only %d of %d calls arrived\n", label, rcv.calls(), n)
	}
	_, r.peakRSS = procMem(c.pid())
	if busy1, total1 := machineCPU(); total1 > total0 {
		r.machineBusy = float64(busy1-busy0) / float64(total1-total0)
	}
	r.fireLag50 = c.histogramQuantile(ctx, "chime_scheduler_fire_lag_seconds", 0.5)
	r.fireLag99 = c.histogramQuantile(ctx, "chime_scheduler_fire_lag_seconds", 0.99)
	if o.profileDir != "" {
		c.snapshot("allocs", filepath.Join(o.profileDir, "chime-"+strings.NewReplacer(" ", "-", ":", "").Replace(label)+".allocs-after.pprof"))
	}
	drainStart := time.Now()
	r.quiet = waitQuiet(ctx, adm, 3*time.Minute)
	r.drain = time.Since(drainStart)
	r.chimeCPU = c.cpu() - cpu0
	r.clickhouseCPU = c.clickhouseCPU() - ch0
	r.receiverCPU = procCPU(rcv.pid()) - rc0
	r.rss, r.peakRSS = procMem(c.pid())
	r.ingestRSS, r.burstRSS = peaks[0].Load(), peaks[1].Load()
	r.clickhouseRSS = c.clickhouseRSS()
	r.recordsPerJob = float64(recordsWritten(ctx, adm)-records0) / float64(n)
	r.stats = summarize(rcv.results(n), at)
	// The steady RSS after the burst: what the process keeps.
	time.Sleep(5 * time.Second)
	r.steadyRSSAfter, _ = procMem(c.pid())
	return r
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }

// benchE2E runs the end-to-end phases and returns their rows.
func benchE2E(ctx context.Context, o e2eOptions) []result {
	if _, err := os.Stat(o.chime); err != nil {
		fail("e2e: the chime binary %q: %v (make bench builds it; or pass -chime)", o.chime, err)
	}
	rcv := startReceiverProc()
	defer rcv.close()
	var out []result
	if o.burst > 0 {
		fmt.Fprintf(os.Stderr, "e2e ceiling: %d POSTs from 100 goroutines, no scheduler...\n", o.burst)
		ceil, ceilCPU := ceiling(ctx, rcv, o.burst, time.Second)
		out = append(out,
			result{fmt.Sprintf("ceiling: %dk POSTs from 100 goroutines, no scheduler: callbacks/s", o.burst/1000), fmt.Sprintf("%.0f/s", ceil.rate), "—", "—"},
			result{"ceiling: lag p50 / p99 / max", ceil.lagString(), "—", "—"},
			result{"ceiling: CPU s per 1000 (client + receiver)", fmt.Sprintf("%.3f s", ceilCPU*1000/float64(o.burst)), "—", "—"},
		)
		runs := []struct {
			label    string
			producer bool
		}{{"jobs:batch", false}}
		if o.viaProducer {
			runs = append(runs, struct {
				label    string
				producer bool
			}{"producer SDK", true})
		}
		for _, run := range runs {
			r := runBurst(ctx, o, rcv, "burst "+run.label, o.burst, 20*time.Second+time.Duration(o.burst/5)*time.Microsecond*10, run.producer, 0)
			s := r.stats
			frac := s.rate / ceil.rate
			usPerJob := r.chimeCPU * 1e6 / float64(o.burst)
			name := fmt.Sprintf("chime dev, %dk due at once (%s)", o.burst/1000, run.label)
			out = append(out,
				result{name + ": callbacks/s", fmt.Sprintf("%.0f/s", s.rate), "≥ 19000", verdict(s.rate >= 19000)},
				result{name + ": fraction of the ceiling", fmt.Sprintf("%.2f", frac), "≥ 0.45", verdict(frac >= 0.45)},
				result{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 5 s", verdict(s.p99 <= 5*time.Second)},
				result{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
				result{name + ": chime CPU per job (fire→analytics)", fmt.Sprintf("%.0f µs (%.3f s per 1000)", usPerJob, r.chimeCPU*1000/float64(o.burst)), "≤ 100 µs", verdict(usPerJob <= 100)},
				result{name + ": CPU s, chime / ClickHouse / receiver", fmt.Sprintf("%.1f / %.1f / %.1f (ingest %.1f)", r.chimeCPU, r.clickhouseCPU, r.receiverCPU, r.ingestCPU), "—", "—"},
				result{name + ": chime peak RSS", mb(r.peakRSS), "≤ 500 MB", verdict(r.peakRSS <= 500<<20)},
				result{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
				result{name + ": RSS after, chime / ClickHouse", mb(r.steadyRSSAfter) + " / " + mb(r.clickhouseRSS), "—", "—"},
				result{name + ": Kafka records written per job", fmt.Sprintf("%.1f", r.recordsPerJob), "—", "—"},
				result{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
				result{name + ": machine CPU busy while firing (all processes)", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
			)
			if !r.quiet {
				out = append(out, result{name + ": consumers caught up", "NO (lag left after 3m)", "yes", "NO"})
			}
		}
	}
	if o.steady > 0 {
		lead := 20*time.Second + time.Duration(o.steady)*25*time.Microsecond
		r := runBurst(ctx, o, rcv, "steady", o.steady, lead, false, o.steadyOver)
		s := r.stats
		name := fmt.Sprintf("chime dev, %dk due evenly over %s", o.steady/1000, o.steadyOver)
		out = append(out,
			result{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 2 s", verdict(s.p99 <= 2*time.Second)},
			result{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
			result{name + ": chime CPU per job", fmt.Sprintf("%.0f µs", r.chimeCPU*1e6/float64(o.steady)), "≤ 100 µs", verdict(r.chimeCPU*1e6/float64(o.steady) <= 100)},
			result{name + ": chime peak RSS", mb(r.peakRSS), "—", "—"},
			result{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
			result{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
			result{name + ": machine CPU busy while firing", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
		)
	}
	if o.pending > 0 {
		out = append(out, benchPending(ctx, o, rcv)...)
	}
	if o.idle > 0 {
		out = append(out, benchIdle(ctx, o)...)
	}
	if o.failover {
		out = append(out, benchFailover(ctx, o, rcv)...)
	}
	return out
}

// benchPending creates o.pending one-shot jobs due tomorrow and reports
// chime's RSS per pending job at half and all of them, then kills chime
// with SIGKILL and times its recovery.
func benchPending(ctx context.Context, o e2eOptions, rcv *receiverProc) []result {
	fmt.Fprintf(os.Stderr, "e2e pending: starting chime dev...\n")
	c := startChime(ctx, o.chime)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	adm := c.admin()
	defer adm.Close()
	tomorrow := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	at := func(i int) time.Time { return tomorrow.Add(time.Duration(i%86400) * time.Second) }
	var out []result
	settle := func(n int) int64 {
		if !c.waitIndexed(ctx, n, 5*time.Minute) {
			fail("e2e pending: only %v of %d indexed", c.metric(ctx, "chime_scheduler_pending_timers"), n)
		}
		waitQuiet(ctx, adm, 2*time.Minute)
		// chime trims its heap 5 s after the last collection once
		// allocation stops (cmd/chime/memory.go): measure after that.
		time.Sleep(20 * time.Second)
		rss, _ := procMem(c.pid())
		return rss
	}
	rss0, _ := procMem(c.pid())
	half := o.pending / 2
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e pending: creating %d jobs due tomorrow...\n", half)
	c.ingestBatch(ctx, rcv.url(), 0, half, at)
	rssHalf := settle(half)
	fmt.Fprintf(os.Stderr, "e2e pending: creating %d more...\n", o.pending-half)
	c.ingestBatch(ctx, rcv.url(), half, o.pending, at)
	rssAll := settle(o.pending)
	if o.profileDir != "" {
		c.snapshot("heap", filepath.Join(o.profileDir, "chime-pending.heap.pprof"))
		c.snapshot("heap?debug=1", filepath.Join(o.profileDir, "chime-pending.memstats.txt"))
	}
	created := time.Since(start)
	_, peak := procMem(c.pid())
	out = append(out,
		result{fmt.Sprintf("chime dev RSS per pending job at %dk (RSS %s, %s idle before)", half/1000, mb(rssHalf), mb(rss0)), fmt.Sprintf("%.0f B", float64(rssHalf)/float64(half)), "—", "—"},
		result{fmt.Sprintf("chime dev RSS per pending job at %dk (RSS %s, peak %s)", o.pending/1000, mb(rssAll), mb(peak)), fmt.Sprintf("%.0f B", float64(rssAll)/float64(o.pending)), "≤ 500 B", verdict(float64(rssAll)/float64(o.pending) <= 500)},
		result{fmt.Sprintf("time to create and index %dk jobs (jobs:batch)", o.pending/1000), created.Round(100 * time.Millisecond).String(), "—", "—"},
	)
	fmt.Fprintf(os.Stderr, "e2e pending: kill -9 and restart...\n")
	c.kill9()
	restart := time.Now()
	c.start(ctx)
	if !c.waitIndexed(ctx, o.pending, 5*time.Minute) {
		fail("e2e pending: after restart only %v of %d indexed", c.metric(ctx, "chime_scheduler_pending_timers"), o.pending)
	}
	rec := time.Since(restart)
	time.Sleep(10 * time.Second)
	rssAfter, _ := procMem(c.pid())
	out = append(out,
		result{fmt.Sprintf("recovery after kill -9 with %dk pending (start → API ready, all timers indexed)", o.pending/1000), rec.Round(100 * time.Millisecond).String(), "≤ 10 s", verdict(rec <= 10*time.Second)},
		result{fmt.Sprintf("chime dev RSS per pending job after the restart (RSS %s)", mb(rssAfter)), fmt.Sprintf("%.0f B", float64(rssAfter)/float64(o.pending)), "≤ 500 B", verdict(float64(rssAfter)/float64(o.pending) <= 500)},
	)
	return out
}

// benchIdle measures chime dev's CPU with nothing due.
func benchIdle(ctx context.Context, o e2eOptions) []result {
	fmt.Fprintf(os.Stderr, "e2e idle: starting chime dev, then %s with nothing due...\n", o.idle)
	c := startChime(ctx, o.chime)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	time.Sleep(10 * time.Second)
	cpu0, ch0 := c.cpu(), c.clickhouseCPU()
	time.Sleep(o.idle)
	cpu := c.cpu() - cpu0
	ch := c.clickhouseCPU() - ch0
	rss, _ := procMem(c.pid())
	share := cpu / o.idle.Seconds()
	return append([]result{
		{fmt.Sprintf("idle chime dev: share of a core (%.2f s CPU in %s; ClickHouse %.2f s)", cpu, o.idle, ch), fmt.Sprintf("%.2f%%", share*100), "< 0.5%", verdict(share < 0.005)},
		{"idle chime dev: RSS, chime / ClickHouse", mb(rss) + " / " + mb(c.clickhouseRSS()), "—", "—"},
	}, announcedBodies(ctx, c)...)
}

// announcedBodies opens hostileConns connections to chime dev's API that
// each announce a 4 MiB body and send one byte of it, as a client trying to
// exhaust memory before authentication would, and reports what they cost
// chime (RSS growth) and whether the API still answers meanwhile.
func announcedBodies(ctx context.Context, c *chimeProc) []result {
	const hostileConns = 1000
	fmt.Fprintf(os.Stderr, "e2e idle: %d connections announcing 4 MiB bodies...\n", hostileConns)
	before, _ := procMem(c.pid())
	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range hostileConns {
		conn, err := net.Dial("tcp", c.apiAddr)
		if err != nil {
			fail("announced bodies: dial %s: %v", c.apiAddr, err)
		}
		conns = append(conns, conn)
		_, err = fmt.Fprintf(conn, "POST /v1/namespaces/bench/jobs HTTP/1.1\r\nHost: chime\r\nAuthorization: Bearer nobody\r\n"+
			"Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{")
		if err != nil {
			fail("announced bodies: write: %v", err)
		}
	}
	// The writes return once the kernel holds the bytes: give chime a few
	// seconds to accept every connection and read its headers, then measure.
	time.Sleep(5 * time.Second)
	st, _ := c.call(ctx, "GET", "/readyz", nil)
	after, _ := procMem(c.pid())
	grown := after - before
	return []result{
		{fmt.Sprintf("idle chime dev: RSS growth with %d connections announcing 4 MiB bodies (%s → %s)", hostileConns, mb(before), mb(after)),
			mb(grown), "< 100 MB", verdict(grown < 100<<20)},
		{fmt.Sprintf("same: the API answers meanwhile (GET /readyz → %d)", st), verdict(st == http.StatusOK), "yes", verdict(st == http.StatusOK)},
	}
}

// Command chime-bench measures chime against the issue targets and prints a
// table. It runs everything in this process on an embedded broker in a
// temporary directory: `make bench` (or go run ./cmd/chime-bench -h).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

type result struct {
	metric, value, target, status string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "receiver" {
		receiverMain()
		return
	}
	// At 100k fires/s the default GOGC of 100 spends a large share of two
	// cores collecting short-lived protobuf garbage. Unless the operator
	// chose, run with 200 (docs/configuration.md).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	jobs := flag.Int("jobs", 100_000, "one-shot jobs due in the same second")
	partitions := flag.Int("partitions", 6, "partitions per topic (chime's default is 12; on 2 cores 6 gives a somewhat lower fire lag: less per-partition overhead)")
	lead := flag.Duration("lead", 20*time.Second, "how far ahead the simultaneous fire is scheduled (must cover ingestion)")
	indexJobs := flag.Int("index-jobs", 1_000_000, "pending jobs for the index memory measurement")
	verbose := flag.Bool("v", false, "log chime's own output")
	callbacks := flag.Int("callbacks", 50_000, "due events in the dispatcher's throughput run; 0 skips the dispatcher rows")
	dispatcherOnly := flag.Bool("dispatcher-only", false, "run only the dispatcher rows")
	outcomes := flag.Int("outcomes", 500_000, "outcomes in the breaker's throughput run; 0 skips the breaker rows")
	gateRun := flag.Duration("gate-run", 20*time.Second, "length of each dead-endpoint run (without and with the breaker); 0 skips the breaker-gating rows")
	gateRate := flag.Int("gate-rate", 50, "jobs per second in the dead-endpoint runs")
	apiCreates := flag.Int("api-creates", 20_000, "single job creates in the API run; 0 skips the API rows")
	analyticsRows := flag.Int("analytics-rows", 1_000_000, "outcomes in the analytics sink's throughput run (local ClickHouse); 0 skips it")
	analyticsQueryRows := flag.Int("analytics-query-rows", 10_000_000, "attempt rows generated for the analytics query latencies; 0 skips them")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the benchmark process to this file")
	var e2e e2eOptions
	flag.StringVar(&e2e.chime, "chime", "bin/chime", "the chime binary the end-to-end phases run (make bench builds it)")
	flag.IntVar(&e2e.burst, "e2e-burst", 100_000, "end to end: one-shot jobs due at one instant; 0 skips")
	flag.BoolVar(&e2e.viaProducer, "e2e-producer", true, "end to end: also run the burst with jobs published by the producer SDK")
	flag.IntVar(&e2e.steady, "e2e-steady", 1_000_000, "end to end: jobs due evenly over -e2e-steady-over; 0 skips")
	flag.DurationVar(&e2e.steadyOver, "e2e-steady-over", time.Minute, "end to end: how long the steady jobs are spread over")
	flag.IntVar(&e2e.pending, "e2e-pending", 2_000_000, "end to end: pending jobs for RSS per pending job and recovery after kill -9; 0 skips")
	flag.DurationVar(&e2e.idle, "e2e-idle", 30*time.Second, "end to end: idle CPU window; 0 skips")
	flag.BoolVar(&e2e.failover, "failover", true, "roles as processes on Apache Kafka (needs make kafka-jars): kill -9 one process of each role under load")
	flag.StringVar(&e2e.profileDir, "e2e-profile-dir", "", "end to end: write a CPU profile of chime dev during each burst into this directory (from /debug/pprof on its metrics address)")
	flag.DurationVar(&e2e.profileFor, "e2e-profile-for", 10*time.Second, "end to end: length of each burst's CPU profile, from 1 s before the instant")
	flag.BoolVar(&e2e.keepLogs, "e2e-keep", false, "end to end: keep chime's state dir and log of each run")
	e2eOnly := flag.Bool("e2e-only", false, "run only the end-to-end phases (the role-by-role rows are diagnosis)")
	apiStandalone := flag.Int("api-standalone", 1_000_000, "end to end: pending jobs in chime dev while a standalone chime api beside it is measured (RSS, time to ready, read latency); 10000000 for the large run; 0 skips")
	soak := flag.Duration("soak", 0, "run only the soak: chime dev at 1,000 fires/s for this long, sampled every minute (make soak: 30m)")
	capacity := capacityFlags()
	e2e.sustain = sustainFlags()
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail("%v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("%v", err)
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var logOut io.Writer = io.Discard
	if *verbose {
		logOut = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))

	var results []result
	add := func(r ...result) { results = append(results, r...) }
	fmt.Fprintf(os.Stderr, "chime-bench: %d cores, %s\n", runtime.NumCPU(), runtime.Version())

	if e2e.profileDir != "" {
		if err := os.MkdirAll(e2e.profileDir, 0o755); err != nil {
			fail("profile dir: %v", err)
		}
	}
	if *soak > 0 {
		printResults(benchSoak(ctx, e2e.chime, *soak))
		return
	}
	if capacity.only {
		printResults(benchCapacity(ctx, e2e, capacity))
		return
	}
	add(benchE2E(ctx, e2e)...)
	if *apiStandalone > 0 {
		add(benchAPIStandalone(ctx, e2e, *apiStandalone)...)
	}
	if capacity.run {
		add(benchCapacity(ctx, e2e, capacity)...)
	}
	if *e2eOnly {
		printResults(results)
		return
	}
	if !*dispatcherOnly {
		add(benchScheduler(ctx, log, *jobs, int32(*partitions), *lead)...)
		fmt.Fprintf(os.Stderr, "measuring index memory with %d pending jobs...\n", *indexJobs)
		b := timerindex.Footprint(*indexJobs)
		add(result{fmt.Sprintf("timer index memory per pending job (%d jobs)", *indexJobs), fmt.Sprintf("%.0f B", b), "≤ 200 B", verdict(b <= 200)})
	}
	if *callbacks > 0 {
		add(benchDispatcher(ctx, log, *callbacks, int32(*partitions))...)
	}
	if *outcomes > 0 {
		add(benchBreaker(ctx, log, *outcomes, int32(*partitions))...)
	}
	if *gateRun > 0 {
		add(benchBreakerGate(ctx, log, *gateRun, *gateRate, int32(*partitions))...)
	}
	if *apiCreates > 0 {
		add(benchAPI(ctx, log, *apiCreates, int32(*partitions))...)
	}
	if *analyticsRows > 0 || *analyticsQueryRows > 0 {
		add(benchAnalytics(ctx, log, *analyticsRows, *analyticsQueryRows, int32(*partitions))...)
	}

	printResults(results)
}

func printResults(results []result) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "METRIC\tVALUE\tTARGET\tMET")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.metric, r.value, r.target, r.status)
	}
	w.Flush()
}

func verdict(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "chime-bench: "+format+"\n", a...)
	os.Exit(1)
}

// benchScheduler ingests jobs through the producer, lets them all fall due
// in the same second and measures the fire lag of the due events.
func benchScheduler(ctx context.Context, log *slog.Logger, jobs int, partitions int32, lead time.Duration) []result {
	bb := startBroker("scheduler")
	defer bb.close()
	brokers := bb.Brokers
	tp := schema.NewTopics("bench.")
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		fail("%v", err)
	}
	provision(ctx, adm, tp, partitions)
	adm.Close()

	// The jobs' namespaces (ns-00 .. ns-49) exist: the scheduler refuses
	// jobs of namespaces it does not know.
	known := schema.StaticNamespaces{}
	for i := range 50 {
		known[fmt.Sprintf("ns-%02d", i)] = &chimev1.NamespaceConfig{}
	}
	s, err := scheduler.New(scheduler.Config{Config: processors.Config{Client: processors.Client{Brokers: brokers, Logger: log}, Topics: tp}, Namespaces: known})
	if err != nil {
		fail("%v", err)
	}
	defer startParts(ctx, s)()

	// Consume due events from the start, recording when each was seen.
	type seen struct {
		due *chimev1.Due
		at  time.Time
	}
	dues := make(chan seen, jobs)
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(tp.Due()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(20*time.Millisecond))
	if err != nil {
		fail("%v", err)
	}
	// The consumer loop must end with this function: polling a closed
	// client returns at once, and the loop would spin through the later
	// benchmarks.
	cctx, cstop := context.WithCancel(ctx)
	consumed := make(chan struct{})
	defer func() { cstop(); <-consumed; cons.Close() }()
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				rec := new(chimev1.Due)
				if proto.Unmarshal(r.Value, rec) == nil {
					for _, d := range schema.DuesOf(rec) {
						select {
						case dues <- seen{d, now}:
						default:
						}
					}
				}
			})
		}
	}()

	p, err := producer.New(producer.Brokers(brokers), producer.TopicPrefix(tp.Prefix))
	if err != nil {
		fail("%v", err)
	}
	defer p.Close()

	var heapBefore runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapBefore)

	fireAt := time.Now().Add(lead).Truncate(time.Second)
	fmt.Fprintf(os.Stderr, "ingesting %d one-shot jobs due at %s...\n", jobs, fireAt.Format(time.RFC3339))
	start := time.Now()
	var errMu sync.Mutex
	var firstErr error
	for i := range jobs {
		spec := &chimev1.JobSpec{
			Namespace: fmt.Sprintf("ns-%02d", i%50),
			Id:        fmt.Sprintf("job-%07d", i),
			// Spread inside one second: 100k jobs "due in the same second".
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(fireAt.Add(time.Duration(i%1000) * time.Millisecond))}},
			Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}},
		}
		p.ScheduleAsync(ctx, spec, func(_ producer.Receipt, err error) {
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
		fail("flush: %v", err)
	}
	ingest := time.Since(start)
	if firstErr != nil {
		fail("publish: %v", firstErr)
	}
	for s.PendingTimers() < jobs {
		if time.Since(start) > lead+time.Minute {
			fail("scheduler applied only %d of %d commands (partitions owned: %v, ready: %v)", s.PendingTimers(), jobs, s.Partitions(), s.Ready() == nil)
		}
		time.Sleep(5 * time.Millisecond)
	}
	applied := time.Since(start)
	var heapAfter runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapAfter)
	if time.Now().After(fireAt) {
		fmt.Fprintf(os.Stderr, "warning: ingestion took longer than -lead=%s; lag figures include it\n", lead)
	}
	fmt.Fprintf(os.Stderr, "ingested in %s, applied in %s; waiting for the fire...\n", ingest.Round(time.Millisecond), applied.Round(time.Millisecond))

	var emitLag, seenLag []time.Duration
	got := map[string]bool{}
	deadline := time.After(time.Until(fireAt) + 3*time.Minute)
	for len(got) < jobs {
		select {
		case sd := <-dues:
			k := sd.due.GetIdempotencyKey()
			if got[k] {
				continue
			}
			got[k] = true
			sched := sd.due.GetScheduledAt().AsTime()
			emitLag = append(emitLag, sd.due.GetEmittedAt().AsTime().Sub(sched))
			seenLag = append(seenLag, sd.at.Sub(sched))
		case <-deadline:
			fail("only %d of %d due events arrived", len(got), jobs)
		case <-ctx.Done():
			os.Exit(1)
		}
	}
	perJob := float64(int64(heapAfter.HeapAlloc)-int64(heapBefore.HeapAlloc)) / float64(jobs)
	ingestRate := float64(jobs) / ingest.Seconds()
	applyRate := float64(jobs) / applied.Seconds()
	p50, p99, mx := quantiles(emitLag)
	s50, s99, smx := quantiles(seenLag)
	n := fmt.Sprintf("%dk", jobs/1000)
	return []result{
		{"schedule commands ingested via producer (acked)", fmt.Sprintf("%.0f cmds/s", ingestRate), "≥ 100k/s", verdict(ingestRate >= 100_000)},
		{"schedule commands applied by scheduler", fmt.Sprintf("%.0f cmds/s", applyRate), "", ""},
		{"fire lag p50, " + n + " due in one second (emitted − scheduled)", ms(p50), "", ""},
		{"fire lag p99, " + n + " due in one second", ms(p99), "≤ 1 s", verdict(p99 <= time.Second)},
		{"fire lag max, " + n + " due in one second", ms(mx), "", ""},
		{"end-to-end lag p50/p99/max (consumer saw − scheduled)", ms(s50) + " / " + ms(s99) + " / " + ms(smx), "", ""},
		{"scheduler heap per pending job (row + index, memory storage)", fmt.Sprintf("%.0f B", perJob), "", ""},
	}
}

func quantiles(d []time.Duration) (p50, p99, max time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.99), d[len(d)-1]
}

func ms(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)), "")
}

// benchBroker is an embedded broker in a temporary directory for one
// benchmark phase; close stops it and removes the directory.
type benchBroker struct {
	b       *broker.Broker
	dir     string
	Brokers []string
}

func startBroker(phase string) *benchBroker {
	dir, err := os.MkdirTemp("", "chime-bench-"+phase+"-")
	if err != nil {
		fail("%v", err)
	}
	b, err := broker.Start(broker.Options{DataDir: dir})
	if err != nil {
		os.RemoveAll(dir)
		fail("broker: %v", err)
	}
	return &benchBroker{b: b, dir: dir, Brokers: b.Addrs()}
}

func (bb *benchBroker) close() {
	bb.b.Close()
	os.RemoveAll(bb.dir)
}

// provision creates every topic under tp with the given partitions.
func provision(ctx context.Context, cl *kgo.Client, tp schema.Topics, partitions int32) {
	if err := topics.Ensure(ctx, kadm.NewClient(cl), tp.All(), partitions, 1); err != nil {
		fail("topics: %v", err)
	}
}

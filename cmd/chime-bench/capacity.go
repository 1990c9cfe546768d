package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chime-sched/chime/internal/kafkacluster"
)

// The capacity phase measures what each of chime's roles costs when it
// runs as its own process on Apache Kafka: the inputs of the capacity
// model in docs/capacity.md.
//
//   - CPU per fired job, of each role, of the broker and of ClickHouse: a
//     steady load of jobs created through the API and due o.lead later, so
//     that in the measured window jobs are created and fired at the same
//     rate; each process's CPU time (/proc/<pid>/stat) over the window
//     divided by the callbacks the receiver got in it, at the full rate
//     and at a quarter of it, and the marginal cost between the two.
//   - CPU and RSS per partition: idle and loaded windows at two partition
//     counts, each on a fresh broker; the difference over the added
//     partitions.
//   - Kafka records and bytes per fired job, by topic: end offsets and
//     log-dir sizes (DescribeLogDirs) at both ends of the window.
//   - How fast the breaker and the sink consume the hot namespace's one
//     outcomes partition (capacityhot.go).
//   - What a second process of the scheduler, the dispatcher and the sink
//     takes over: the same load with two processes of each.
//   - RAM and disk per pending job: jobs due in more than an hour published
//     into one `chime scheduler`: its RSS above its empty baseline, its
//     state dir and the broker's log dirs, per job.
//
// Every process shares this machine's cores, so what transfers to other
// machines is cost per job and per partition, not throughput.

// capRoles are the roles the steady runs start, one process each.
var capRoles = []string{"scheduler", "dispatcher", "breaker", "sink", "api"}

// capScaled are the roles the scale-out run starts a second process of.
var capScaled = []string{"scheduler", "dispatcher", "sink"}

type capacityOptions struct {
	run, only  bool
	rate       int
	lead       time.Duration // from a job's creation to its due time
	warm       time.Duration // firing before the window opens
	window     time.Duration
	idle       time.Duration
	partitions []int // two counts: the per-partition figures are their difference
	pending    int
	profileDir string // CPU profiles of each role over each loaded window (-e2e-profile-dir)
}

// capacityFlags registers the phase's flags.
func capacityFlags() *capacityOptions {
	o := &capacityOptions{lead: 5 * time.Second, warm: 15 * time.Second, idle: 10 * time.Second, partitions: []int{6, 24}}
	flag.BoolVar(&o.run, "capacity", true, "capacity model inputs (docs/capacity.md): the roles as processes on Apache Kafka (needs make kafka-jars): CPU per fired job and per partition, Kafka records and bytes per job, two processes per role, RAM and disk per pending job")
	flag.BoolVar(&o.only, "capacity-only", false, "run only the capacity phase")
	flag.IntVar(&o.rate, "capacity-rate", 2000, "capacity: jobs created (and fired) per second in the steady runs")
	flag.DurationVar(&o.window, "capacity-window", 20*time.Second, "capacity: length of each measured window under load")
	flag.IntVar(&o.pending, "capacity-pending", 1_000_000, "capacity: jobs due in more than an hour loaded into one scheduler; 0 skips")
	flag.Func("capacity-partitions", "capacity: the two partition counts compared (default 6,24); the first also carries the Kafka, scale-out and pending runs", func(s string) error {
		a, b, ok := strings.Cut(s, ",")
		x, err1 := strconv.Atoi(strings.TrimSpace(a))
		y, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || x < 2 || y <= x {
			return fmt.Errorf("want two counts, the second larger, like 6,24")
		}
		o.partitions = []int{x, y}
		return nil
	})
	return o
}

// capRun is the idle and loaded windows at one partition count; the first
// count also has a run at a quarter of the rate, for the marginal cost,
// and the hot namespace's outcome partition drained by the breaker and
// the sink.
type capRun struct {
	partitions int
	idle       capWindow
	low, load  capLoad
	hotBreaker capDrain
	hotSink    capDrain
	clickhouse []string // "table B/row (rows)"
}

// benchCapacity runs the phase with the end-to-end phases' binary, log and
// profile options.
func benchCapacity(ctx context.Context, e2e e2eOptions, o *capacityOptions) []result {
	bin, keep := e2e.chime, e2e.keepLogs
	o.profileDir = e2e.profileDir
	libs := kafkacluster.FindLibs()
	if libs == "" {
		return []result{{"capacity on Apache Kafka", "skipped: no Kafka jars (run `make kafka-jars`)", "—", "—"}}
	}
	if _, err := os.Stat(bin); err != nil {
		fail("capacity: the chime binary %q: %v (make bench builds it; or pass -chime)", bin, err)
	}
	root, err := os.MkdirTemp("", "chime-bench-capacity-")
	if err != nil {
		fail("%v", err)
	}
	defer func() {
		if keep {
			fmt.Fprintf(os.Stderr, "  capacity logs kept in %s\n", root)
			return
		}
		os.RemoveAll(root)
	}()
	rcv := startReceiverProc()
	defer rcv.close()
	// The hot namespace is spread over as many partitions in every run,
	// so that both runs carry the same load.
	spread := o.partitions[0]
	var runs []capRun
	var scaled capLoad
	var pend *capPending
	for i, parts := range o.partitions {
		fmt.Fprintf(os.Stderr, "capacity: starting Apache Kafka %s and ClickHouse for %d partitions...\n", kafkacluster.Version, parts)
		c := startCapCluster(ctx, libs, filepath.Join(root, "p"+strconv.Itoa(parts)), rcv, o)
		d := c.deploy(bin, "cap.", parts)
		for _, role := range capRoles {
			d.add(ctx, role)
		}
		d.waitReady(ctx)
		d.createNamespaces(ctx, spread)
		// The full rate first: its warm-up also warms the broker's JVM
		// (its compiler works for tens of seconds after a start, which
		// an idle or quarter-rate window first would count); idle then
		// measures a warm broker beside the rows the load left.
		run := capRun{partitions: parts}
		run.load = d.steady(ctx, "a", o.rate)
		sleepCtx(ctx, 5*time.Second)
		run.idle = d.idle(ctx)
		if i == 0 {
			run.low = d.steady(ctx, "low", max(1, o.rate/4))
			// Before the hot backlog: its rows, all alike, would
			// compress better than any real ones.
			run.clickhouse = c.clickhouseBytes(ctx)
			run.hotBreaker, run.hotSink = d.hotDrain(ctx)
		}
		runs = append(runs, run)
		if i == 0 {
			for _, role := range capScaled {
				d.add(ctx, role)
			}
			d.waitReady(ctx)
			sleepCtx(ctx, 5*time.Second)
			scaled = d.steady(ctx, "b", o.rate)
		}
		d.stop()
		if i == 0 && o.pending > 0 {
			p := c.pending(ctx, bin, parts)
			pend = &p
		}
		c.close()
	}
	return capacityRows(o, runs, scaled, pend)
}

func capacityRows(o *capacityOptions, runs []capRun, scaled capLoad, pend *capPending) []result {
	var out []result
	add := func(name, value string) { out = append(out, result{"capacity: " + name, value, "—", "—"}) }
	a, b := runs[0], runs[1]
	pa, pb := a.partitions, b.partitions
	add("setup", fmt.Sprintf("%d cores shared by every process; Apache Kafka %s, 1 node, replication 1; one process per role; %d jobs/s created via the API (jobs:batch every %s) and due %s later, half in one namespace spread over %d partitions, half in %d others; each window %s, opened after %s of firing; idle %s, after the full-rate run",
		runtime.NumCPU(), kafkacluster.Version, o.rate, capTick, o.lead, pa, capColdNamespaces, o.window, o.warm, o.idle))
	loadRow := func(name string, l capLoad) {
		s := l.stats
		busy, ours := l.machine()
		out = append(out, result{
			fmt.Sprintf("capacity, %s: fired in the window; lag p50 / p99; lost / repeated of %d; machine busy (this phase's processes)", name, l.n),
			fmt.Sprintf("%d in %.0f s (%.0f/s); %.2f / %.2f s; %d / %d; %.0f %% (%.0f %%)", l.fired(), l.secs(), l.firedRate(), s.p50.Seconds(), s.p99.Seconds(), s.lost, s.repeated, busy*100, ours*100),
			"0 lost", verdict(s.lost == 0)})
	}
	for _, r := range runs {
		busy, ours := r.idle.machine()
		add(fmt.Sprintf("idle, %d partitions: machine busy (this phase's processes)", r.partitions), fmt.Sprintf("%.0f %% (%.0f %%)", busy*100, ours*100))
	}
	loadRow(fmt.Sprintf("%d/s, %d partitions", a.low.rate, pa), a.low)
	for _, r := range runs {
		loadRow(fmt.Sprintf("%d/s, %d partitions", r.load.rate, r.partitions), r.load)
	}

	// CPU per fired job: the window's CPU over the callbacks in it. Much
	// of a process's CPU under load is per request, not per job (a fetch
	// that returns a few records costs nearly what one of thousands
	// does), so the average falls as the rate grows; the marginal cost,
	// between the quarter rate and the full rate, is what one more job
	// costs at this load.
	perJob := func(l capLoad, kind string) float64 {
		if l.fired() <= 0 {
			return 0
		}
		return l.cpu(kind) * 1e6 / float64(l.fired())
	}
	marginal := func(kind string) float64 {
		dr := a.load.firedRate() - a.low.firedRate()
		if dr <= 0 {
			return 0
		}
		return (a.load.cores(kind) - a.low.cores(kind)) * 1e6 / dr
	}
	const chime = "chime (the five roles)"
	kinds := append(slices.Clone(capRoles), chime, labelKafka, labelKafkaWarm, labelClickHouse, labelReceiver)
	for _, kind := range kinds {
		sum := func(f func(string) float64) float64 {
			if kind != chime {
				return f(kind)
			}
			t := 0.0
			for _, role := range capRoles {
				t += f(role)
			}
			return t
		}
		name := kind
		switch kind {
		case labelClickHouse:
			name = "ClickHouse (the sink's inserts)"
		case labelReceiver:
			name = "receiver (the callback endpoint, not chime)"
		}
		add(fmt.Sprintf("CPU per fired job, %s: %d/s and %d/s at %d partitions, %d/s at %d; marginal", name, a.low.rate, a.load.rate, pa, b.load.rate, pb),
			fmt.Sprintf("%s / %s / %s; %s", micros(sum(func(k string) float64 { return perJob(a.low, k) })),
				micros(sum(func(k string) float64 { return perJob(a.load, k) })),
				micros(sum(func(k string) float64 { return perJob(b.load, k) })), micros(sum(marginal))))
	}

	// Per partition: the same load at pa and pb partitions.
	for _, kind := range append(slices.Clone(capRoles), labelKafka) {
		ia, ib := a.idle.cores(kind), b.idle.cores(kind)
		la, lb := a.load.cores(kind), b.load.cores(kind)
		ra, rb := a.idle.rss(kind), b.idle.rss(kind)
		qa, qb := a.load.rss(kind), b.load.rss(kind)
		add(fmt.Sprintf("%s: share of a core idle / loaded, RSS idle / loaded, %d → %d partitions", kind, pa, pb),
			fmt.Sprintf("%s → %s / %s → %s; %s → %s / %s → %s", pct(ia), pct(ib), pct(la), pct(lb), mb(ra), mb(rb), mb(qa), mb(qb)))
		dp := float64(pb - pa)
		add(fmt.Sprintf("%s per added partition: CPU idle / loaded, RSS idle / loaded", kind),
			fmt.Sprintf("%s / %s of a core; %s / %s", signedPct((ib-ia)/dp), signedPct((lb-la)/dp), signedMB(float64(rb-ra)/dp), signedMB(float64(qb-qa)/dp)))
	}

	// Kafka: records and log bytes per fired job, by topic.
	for _, r := range runs {
		recs, size := kafkaPerJob(r.load.capWindow)
		var tr, ts float64
		for _, v := range recs {
			tr += v
		}
		for _, v := range size {
			ts += v
		}
		add(fmt.Sprintf("Kafka records / log bytes per fired job, all topics, %d partitions", r.partitions), fmt.Sprintf("%.2f / %.0f B", tr, ts))
		if r.partitions != pa {
			continue
		}
		topics := slices.Collect(maps.Keys(recs))
		slices.SortFunc(topics, func(x, y string) int { return cmp.Compare(size[y], size[x]) })
		for _, t := range topics {
			if recs[t] < 0.005 && size[t] < 0.5 {
				continue
			}
			add(fmt.Sprintf("Kafka per fired job, topic %s, %d partitions: records, log bytes", strings.TrimPrefix(t, "cap."), pa),
				fmt.Sprintf("%.2f, %.0f B", recs[t], size[t]))
		}
	}
	for _, r := range runs {
		w := r.load.capWindow
		if f := float64(w.fired()); f > 0 {
			grown := w.s1.stateDir["scheduler 1"] - w.s0.stateDir["scheduler 1"]
			add(fmt.Sprintf("scheduler state dir growth per fired job, %d partitions (a finished job's row is kept 7 days)", r.partitions),
				fmt.Sprintf("%.0f B", float64(grown)/f))
		}
	}

	if len(a.clickhouse) > 0 {
		add(fmt.Sprintf("ClickHouse after the %d/s and %d/s runs at %d partitions: compressed bytes per row (rows), by table", a.low.rate, a.load.rate, pa), strings.Join(a.clickhouse, "; "))
	}

	// The hot namespace's one outcomes partition.
	drain := func(x capDrain, ch bool) string {
		if x.failed != "" {
			return x.failed
		}
		v := fmt.Sprintf("%.0f/s, %s CPU each", x.rate, micros(x.cpu*1e6))
		if ch {
			v += fmt.Sprintf(" (+ ClickHouse %s)", micros(x.chCPU*1e6))
		}
		return v
	}
	add(fmt.Sprintf("hot namespace's outcomes (one partition of %d), %dk backlog: breaker drains", pa, capHotOutcomes/1000), drain(a.hotBreaker, false))
	add(fmt.Sprintf("hot namespace's outcomes (one partition of %d), %dk backlog: sink drains", pa, capHotOutcomes/1000), drain(a.hotSink, true))

	// Two processes of a role: the share each one does, and its CPU.
	loadRow(fmt.Sprintf("%d/s, %d partitions, 2 schedulers, 2 dispatchers, 2 sinks", scaled.rate, pa), scaled)
	work := map[string]string{"scheduler": "fires", "dispatcher": "calls", "sink": "records committed"}
	for _, role := range capScaled {
		w := scaled.capWindow
		var shares, cores []string
		var total float64
		for _, i := range []string{"1", "2"} {
			total += w.s1.work[role+" "+i] - w.s0.work[role+" "+i]
		}
		for _, i := range []string{"1", "2"} {
			label := role + " " + i
			share := 0.0
			if total > 0 {
				share = (w.s1.work[label] - w.s0.work[label]) / total
			}
			shares = append(shares, fmt.Sprintf("%.0f %%", share*100))
			cores = append(cores, pct(w.cores(label)))
		}
		add(fmt.Sprintf("2 %ss, same load: share of the %s, process 1 / 2; share of a core each (one %s alone)", role, work[role], role),
			fmt.Sprintf("%s; %s (%s)", strings.Join(shares, " / "), strings.Join(cores, " / "), pct(a.load.cores(role))))
	}

	if pend != nil {
		p := *pend
		n := float64(p.n)
		var k0, k1 int64
		var split []string
		for t, v := range p.kafka1 {
			k1 += v
			k0 += p.kafka0[t]
			if per := float64(v-p.kafka0[t]) / n; per >= 1 {
				split = append(split, fmt.Sprintf("%s %.0f B", strings.TrimPrefix(t, "pend."), per))
			}
		}
		slices.Sort(split)
		add(fmt.Sprintf("one scheduler, %dk jobs due in 2–3 h (%d partitions): applied in; scheduler / broker CPU per job", p.n/1000, p.partitions),
			fmt.Sprintf("%s (%.0f/s); %s / %s", p.apply.Round(100*time.Millisecond), n/p.apply.Seconds(), micros(p.cpu*1e6/n), micros(p.brokerCPU*1e6/n)))
		add(fmt.Sprintf("scheduler RSS per pending job (empty %s → %s with %dk)", mb(p.rss0), mb(p.rss1), p.n/1000),
			fmt.Sprintf("%.0f B", float64(p.rss1-p.rss0)/n))
		add(fmt.Sprintf("scheduler RSS per pending job after a clean restart (%s; ready in %s)", mb(p.rssRestart), p.restart.Round(100*time.Millisecond)),
			fmt.Sprintf("%.0f B", float64(p.rssRestart-p.rss0)/n))
		add(fmt.Sprintf("scheduler ready after kill -9 with %dk pending (start → every timer held); changelog records read", p.n/1000),
			fmt.Sprintf("%s; %.0f", p.killRestart.Round(100*time.Millisecond), p.killRecovered))
		add(fmt.Sprintf("scheduler state dir per pending job (%s → %s)", mb(p.dir0), mb(p.dir1)),
			fmt.Sprintf("%.0f B", float64(p.dir1-p.dir0)/n))
		add(fmt.Sprintf("broker log dirs per pending job, replication 1 (%s)", strings.Join(split, ", ")),
			fmt.Sprintf("%.0f B", float64(k1-k0)/n))
	}
	return out
}

// kafkaPerJob is each topic's records and log bytes written in the
// window, per fired job.
func kafkaPerJob(w capWindow) (records, size map[string]float64) {
	f := float64(w.fired())
	records, size = map[string]float64{}, map[string]float64{}
	if f <= 0 {
		return records, size
	}
	for t, v := range w.s1.records {
		records[t] = float64(v-w.s0.records[t]) / f
		size[t] = float64(w.s1.size[t]-w.s0.size[t]) / f
	}
	return records, size
}

// micros formats seconds-per-job figures already in microseconds.
func micros(v float64) string {
	if v < 10 && v > -10 {
		return fmt.Sprintf("%.1f µs", v)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// pct formats a share of one core.
func pct(cores float64) string {
	if cores < 0.1 {
		return fmt.Sprintf("%.2f %%", cores*100)
	}
	return fmt.Sprintf("%.1f %%", cores*100)
}

func signedPct(cores float64) string { return fmt.Sprintf("%+.3f %%", cores*100) }

func signedMB(b float64) string { return fmt.Sprintf("%+.2f MB", b/(1<<20)) }

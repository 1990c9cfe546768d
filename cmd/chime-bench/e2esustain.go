package main

// The sustained and overload phases: jobs due evenly at an offered rate for
// a window on a fresh chime dev, as in the steady run, but read for what a
// scheduler under load is judged on: whether it keeps up at the end of the
// window (the lag of the jobs due in its last seconds), and, offered more
// than it can do, whether it still dispatches at the rate it sustains and
// loses and repeats nothing while the API keeps accepting.
//
// The sustained maximum is the highest offered rate of -e2e-sustain whose
// tail lag p99 is within -e2e-sustain-p99 with nothing lost or repeated
// (or -e2e-sustain-max, to skip the search); the overload runs offer
// multiples of it (-e2e-overload). Every row stands beside the ceiling
// measured in the same run.

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chime-sched/chime/infra/broker"
)

type sustainOptions struct {
	rates    []int     // offered rates tried for the sustained maximum, ascending
	max      int       // the sustained maximum, given: no search
	overload []float64 // multiples of the sustained maximum offered
	over     time.Duration
	tail     time.Duration // the end of the window whose lag says whether it keeps up
	p99      time.Duration // the tail lag p99 a sustained rate keeps within
	// partitions of chime dev's topics in these runs (the peers harness's
	// tuned mode runs chime with 6).
	partitions int
	probeRate  int // single creates per second through the API during the window
	// dump, if set, is a directory each run writes its per-second lag
	// quantiles into (diagnosis: when in the window the lag grows).
	dump string
}

func sustainFlags() *sustainOptions {
	// The defaults bracket what 2 cores sustain (about 15,000/s on 28
	// November 2026); the overload runs offer 2 and 4 times the maximum
	// found, as issue 28 asks.
	o := &sustainOptions{rates: []int{10_000, 12_500, 15_000, 17_500, 20_000}, overload: []float64{2, 4}}
	flag.Func("e2e-sustain", "end to end: offered rates (jobs due per second, ascending, comma-separated) tried for the sustained maximum; the search stops at the first that does not keep up; empty skips (default 10000,12500,15000,17500,20000)", func(s string) error {
		o.rates = nil
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				return fmt.Errorf("want positive rates like 8000,12000,16000")
			}
			o.rates = append(o.rates, n)
		}
		if !slices.IsSorted(o.rates) {
			return fmt.Errorf("rates must be ascending")
		}
		return nil
	})
	flag.IntVar(&o.max, "e2e-sustain-max", 0, "end to end: the sustained maximum (jobs/s) the overload runs are multiples of, instead of searching -e2e-sustain")
	flag.Func("e2e-overload", "end to end: multiples of the sustained maximum offered in the overload runs (comma-separated, like 2,4); empty skips (default 2,4)", func(s string) error {
		o.overload = nil
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			m, err := strconv.ParseFloat(f, 64)
			if err != nil || m <= 0 {
				return fmt.Errorf("want positive multiples like 2,4")
			}
			o.overload = append(o.overload, m)
		}
		return nil
	})
	flag.DurationVar(&o.over, "e2e-sustain-over", time.Minute, "end to end: the window the sustained and overload jobs are due over")
	flag.DurationVar(&o.tail, "e2e-sustain-tail", 10*time.Second, "end to end: the end of the window whose lag shows whether chime keeps up")
	flag.DurationVar(&o.p99, "e2e-sustain-p99", time.Second, "end to end: the tail lag p99 a sustained rate keeps within")
	flag.IntVar(&o.partitions, "e2e-sustain-partitions", 6, "end to end: chime dev's --partitions in the sustained and overload runs")
	flag.IntVar(&o.probeRate, "e2e-sustain-probe", 50, "end to end: single job creates per second through the API during each window (within the default quotas), to see it accept under load")
	flag.StringVar(&o.dump, "e2e-sustain-dump", "", "end to end: write each sustained or overload run's lag per second of due time (p50, p99, max, arrivals) into this directory")
	return o
}

// sustainRun is one run at an offered rate.
type sustainRun struct {
	rate, n int
	burstRun
	t0       time.Time
	tail     deliveryStats // the jobs due in the last o.tail of the window
	inWindow float64       // callbacks/s arrived within the window
	probe    *probeStats
	// from chime's metrics over the run: due events emitted per job (more
	// than 1: redeliveries or deferrals), outcomes deferred, dues the
	// dispatcher skipped as replays.
	duesPerJob           float64
	deferred, duplicates float64
	// compactions of the table topics by the embedded broker: each stops
	// its produce and fetch requests meanwhile.
	compactions float64
	// stalled is the seconds those compactions held the broker in all;
	// longestStall bounds the longest single hold (the bucket it fell in;
	// -1 when none).
	stalled, longestStall float64
	// the scheduler's table store over the run (creates included), per
	// job: bytes its flushes wrote and its compactions rewrote, blocks it
	// read from its files.
	storeFlushed, storeCompacted, storeMisses float64
}

func (r sustainRun) keepsUp(o *sustainOptions) bool {
	return r.tail.n > 0 && r.tail.lost == 0 && r.stats.lost == 0 && r.stats.repeated == 0 && r.tail.p99 <= o.p99
}

// benchSustain runs the sustained search and the overload runs beside the
// ceiling ceil (measured now when there is none).
func benchSustain(ctx context.Context, e e2eOptions, o *sustainOptions, rcv *receiverProc, ceil deliveryStats) []result {
	if len(o.rates) == 0 && o.max == 0 {
		return nil
	}
	var out []result
	if ceil.rate == 0 {
		fmt.Fprintf(os.Stderr, "e2e ceiling: 100000 POSTs from 100 goroutines, no scheduler...\n")
		var cpu float64
		ceil, cpu = ceiling(ctx, rcv, 100_000, time.Second)
		out = append(out, ceilingRows(100_000, ceil, cpu)...)
	}
	best := o.max
	if best == 0 {
		for _, rate := range o.rates {
			r := runSustain(ctx, e, o, rcv, rate)
			ok := r.keepsUp(o)
			out = append(out, sustainRows(fmt.Sprintf("sustain %d/s", rate), o, r, ceil, 0, ok)...)
			if !ok {
				break
			}
			best = rate
		}
		out = append(out, result{"sustained maximum (tail lag p99 within " + o.p99.String() + ", nothing lost or repeated)", fmt.Sprintf("%d/s", best), "", ""})
		if best == 0 {
			return out
		}
	}
	for _, m := range o.overload {
		rate := int(m * float64(best))
		r := runSustain(ctx, e, o, rcv, rate)
		out = append(out, sustainRows(fmt.Sprintf("overload %g× (%d/s)", m, rate), o, r, ceil, best, false)...)
	}
	return out
}

func runSustain(ctx context.Context, e e2eOptions, o *sustainOptions, rcv *receiverProc, rate int) sustainRun {
	n := int(float64(rate) * o.over.Seconds())
	r := sustainRun{rate: rate, n: n, probe: &probeStats{}}
	// The lead covers creating every job first (about 20 µs each through
	// jobs:batch on 2 cores).
	lead := 20*time.Second + time.Duration(n)*25*time.Microsecond
	plan := burstPlan{label: fmt.Sprintf("sustain %d per s", rate), n: n, lead: lead, spread: o.over,
		extra: []string{"--partitions", strconv.Itoa(o.partitions)}}
	var m0 scrape
	plan.atReady = func(c *chimeProc) { m0 = c.scrape(ctx) }
	plan.atInstant = func(c *chimeProc, t0 time.Time) func() {
		r.t0 = t0
		return c.probeAPI(ctx, o.probeRate, t0.Add(o.over), r.probe)
	}
	plan.atEnd = func(c *chimeProc) {
		m1 := c.scrape(ctx)
		r.duesPerJob = (m1.sum("chime_scheduler_fires_total") - m0.sum("chime_scheduler_fires_total")) / float64(n)
		r.deferred = m1.class("chime_dispatcher_outcomes_total", "deferred") - m0.class("chime_dispatcher_outcomes_total", "deferred")
		r.duplicates = m1.sum("chime_dispatcher_duplicates_total") - m0.sum("chime_dispatcher_duplicates_total")
		r.compactions = m1.sum("chime_broker_compactions_total") - m0.sum("chime_broker_compactions_total")
		r.stalled = m1.sum("chime_broker_compaction_stall_seconds_sum") - m0.sum("chime_broker_compaction_stall_seconds_sum")
		r.longestStall = m1.quantileSince(m0, "chime_broker_compaction_stall_seconds", 1)
		perJob := func(name string) float64 { return (m1.sum(name) - m0.sum(name)) / float64(n) }
		r.storeFlushed = perJob("chime_scheduler_store_flushed_bytes_total")
		r.storeCompacted = perJob("chime_scheduler_store_compacted_bytes_total")
		r.storeMisses = perJob("chime_scheduler_store_cache_misses_total")
	}
	r.burstRun = runBurst(ctx, e, rcv, plan)
	from := int(float64(n) * (o.over - o.tail).Seconds() / o.over.Seconds())
	r.tail = summarize(arrivals{first: r.arrivals.first[from:], count: r.arrivals.count[from:]}, func(i int) time.Time { return r.at(from + i) })
	end := r.t0.Add(o.over).UnixNano()
	in := 0
	for _, f := range r.arrivals.first {
		if f != 0 && f >= r.t0.UnixNano() && f <= end {
			in++
		}
	}
	r.inWindow = float64(in) / o.over.Seconds()
	if o.dump != "" {
		dumpLag(filepath.Join(o.dump, fmt.Sprintf("lag-%d.tsv", rate)), r)
	}
	return r
}

// dumpLag writes, per second of due time, the lag p50, p99 and max of the
// jobs due in it and how many calls arrived in it.
func dumpLag(path string, r sustainRun) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dump: %v\n", err)
		return
	}
	defer f.Close()
	secs := int(r.at(r.n-1).Sub(r.t0)/time.Second) + 1
	lags := make([][]time.Duration, secs)
	arrived := map[int64]int{}
	for i, first := range r.arrivals.first {
		if first == 0 {
			continue
		}
		s := int(r.at(i).Sub(r.t0) / time.Second)
		lags[s] = append(lags[s], time.Duration(first-r.at(i).UnixNano()))
		a := (first - r.t0.UnixNano()) / 1e9
		arrived[a]++
		secs = max(secs, int(a)+1)
	}
	lags = append(lags, make([][]time.Duration, secs-len(lags))...)
	fmt.Fprintln(f, "second\tp50_ms\tp99_ms\tmax_ms\tarrived_in_second")
	for s := range secs {
		p50, p99, mx := quantiles(lags[s])
		fmt.Fprintf(f, "%d\t%d\t%d\t%d\t%d\n", s, p50.Milliseconds(), p99.Milliseconds(), mx.Milliseconds(), arrived[int64(s)])
	}
}

// sustainRows report one sustained or overload run; sustained is the
// sustained maximum an overload run is measured against (0: a search run,
// judged by keepsUp).
func sustainRows(name string, o *sustainOptions, r sustainRun, ceil deliveryStats, sustained int, ok bool) []result {
	s := r.stats
	us := r.chimeCPU * 1e6 / float64(r.n)
	rows := []result{
		{name + ": offered / dispatched callbacks/s (all / within the window)", fmt.Sprintf("%d / %.0f / %.0f", r.rate, s.rate, r.inWindow), "", ""},
		{name + ": dispatched / ceiling", fmt.Sprintf("%.2f (ceiling %.0f/s)", s.rate/ceil.rate, ceil.rate), "", ""},
		{fmt.Sprintf("%s: lag p50 / p99 of the last %s (all: p50 / p99 / max)", name, o.tail), fmt.Sprintf("%.2f / %.2f s (%s)", r.tail.p50.Seconds(), r.tail.p99.Seconds(), s.lagString()), "", ""},
		{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
		{name + ": chime CPU per job (ClickHouse / receiver s); chime's / the receiver's", fmt.Sprintf("%.0f µs (%.1f / %.1f s); %s", us, r.clickhouseCPU, r.receiverCPU, cpuRatio(r.burstRun)), "", ""},
		{name + ": due events per job / deferred / replays skipped / broker compactions (stalled in all, longest at once)", fmt.Sprintf("%.3f / %.0f / %.0f / %.0f (%.1f s, %s)", r.duesPerJob, r.deferred, r.duplicates, r.compactions, r.stalled, longestHold(r.longestStall)), "", ""},
		{name + ": scheduler's table store per job, creates included: bytes flushed / compacted / blocks read from disk", fmt.Sprintf("%.0f B / %.0f B / %.2f", r.storeFlushed, r.storeCompacted, r.storeMisses), "", ""},
		{name + ": API single creates during the window: accepted / sent, p99", r.probe.String(), "all", verdict(r.probe.sent > 0 && r.probe.ok == r.probe.sent)},
		{name + ": machine busy / chime peak RSS", fmt.Sprintf("%.0f%% / %s", r.machineBusy*100, mb(r.peakRSS)), "", ""},
		{name + ": Kafka records per job / due emitted − due time p50, p99 (≤ bucket)", fmt.Sprintf("%.2f / %.2g, %.2g s", r.recordsPerJob, r.fireLag50, r.fireLag99), "", ""},
	}
	if sustained == 0 {
		rows = append(rows, result{fmt.Sprintf("%s: keeps up (tail p99 ≤ %s, nothing lost)", name, o.p99), map[bool]string{true: "yes", false: "no"}[ok], "", ""})
	} else {
		frac := s.rate / float64(sustained)
		rows = append(rows, result{fmt.Sprintf("%s: dispatched / sustained maximum %d/s", name, sustained), fmt.Sprintf("%.2f", frac), "≥ 0.9", verdict(frac >= 0.9)})
	}
	if !r.quiet {
		rows = append(rows, result{name + ": consumers caught up", "NO (lag left after 3m)", "yes", "NO"})
	}
	return rows
}

// probeStats are the API's answers to the creates made during a window.
type probeStats struct {
	mu        sync.Mutex
	sent, ok  int
	statuses  map[int]int
	latencies []time.Duration
}

func (p *probeStats) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, p99, _ := quantiles(slices.Clone(p.latencies))
	s := fmt.Sprintf("%d / %d, p99 %s", p.ok, p.sent, ms(p99))
	for st, c := range p.statuses {
		if st != http.StatusCreated {
			s += fmt.Sprintf(", %d×%d", c, st)
		}
	}
	return s
}

// probeAPI creates rate single jobs a second, due in an hour, until
// until; the returned function waits for it to end.
func (c *chimeProc) probeAPI(ctx context.Context, rate int, until time.Time, p *probeStats) func() {
	done := make(chan struct{})
	if rate <= 0 {
		close(done)
		return func() {}
	}
	p.statuses = map[int]int{}
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
			<-t.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"id":"probe-%d","schedule":{"at":%q},"callback":{"url":"http://127.0.0.1:9/never"}}`, i, at)
				start := time.Now()
				st, _ := c.call(ctx, "POST", "/v1/namespaces/"+e2eNamespace+"/jobs", []byte(body))
				lat := time.Since(start)
				p.mu.Lock()
				p.sent++
				if st == http.StatusCreated {
					p.ok++
				}
				p.statuses[st]++
				p.latencies = append(p.latencies, lat)
				p.mu.Unlock()
			}()
		}
	}()
	return func() { <-done }
}

// longestHold says the longest single hold of the broker's request loop by
// a compaction, as the bucket of chime_broker_compaction_stall_seconds it
// fell in.
func longestHold(le float64) string {
	switch {
	case le < 0:
		return "none"
	case math.IsInf(le, 1):
		return fmt.Sprintf("> %g s", broker.StallBuckets[len(broker.StallBuckets)-1])
	}
	return fmt.Sprintf("≤ %g s", le)
}

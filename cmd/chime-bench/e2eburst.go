package main

// The burst and steady phases: jobs created ahead, then due at one instant
// (or spread evenly) on a fresh chime dev, beside the ceiling: the same
// bodies POSTed to the same receiver with no scheduler.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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
	deferred      int64 // dues the dispatcher deferred instead of calling
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
	// allocsPerJob is chime's heap allocations over the same span as
	// chimeCPU, per job: the collector's work follows it.
	allocsPerJob   float64
	ingest, drain  time.Duration
	quiet          bool
	steadyRSSAfter int64
	// fireLag50/99 are the scheduler's due emission lag (emitted − due),
	// bucket upper bounds in seconds: which half of the pipeline lags.
	fireLag50, fireLag99 float64
	// machineBusy is the share of the machine's CPU time busy from the
	// instant until the last call arrived: below 1, something other than
	// CPU holds the burst back.
	machineBusy float64
	// arrivals are the receiver's, and at each job's due time.
	arrivals arrivals
	at       func(int) time.Time
}

// burstPlan is what one run creates: n jobs, due lead after the run
// starts, all at that instant or spread evenly over spread after it.
type burstPlan struct {
	label  string
	n      int
	lead   time.Duration
	spread time.Duration
	// viaProducer creates the jobs with the producer SDK instead of the
	// API's jobs:batch.
	viaProducer bool
	// extra are chime dev's arguments.
	extra []string
	// atReady, if set, runs before the jobs are created.
	atReady func(c *chimeProc)
	// atInstant, if set, runs 1 s before the instant (when the CPU window
	// opens); what it returns is waited for once the calls arrived.
	atInstant func(c *chimeProc, t0 time.Time) func()
	// atEnd, if set, runs once chime's consumers caught up.
	atEnd func(c *chimeProc)
}

// runBurst starts a fresh chime dev, creates the plan's jobs and measures
// them firing against the receiver.
func runBurst(ctx context.Context, o e2eOptions, rcv *receiverProc, p burstPlan) burstRun {
	label, n, lead, spread := p.label, p.n, p.lead, p.spread
	r := burstRun{label: label}
	fmt.Fprintf(os.Stderr, "e2e %s: starting chime dev...\n", label)
	c := startChime(ctx, o.chime, p.extra...)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	adm := c.admin()
	defer adm.Close()
	rcv.reset(n)
	records0 := recordsWritten(ctx, adm)
	if p.atReady != nil {
		p.atReady(c)
	}

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
			peak := &peaks[phase.Load()]
			if rss > peak.Load() {
				peak.Store(rss)
			}
		}
	}()
	defer func() { close(stopSampling); <-sampleDone }()
	cpuStart := c.cpu()
	start := time.Now()
	// The profiles' files (-e2e-profile-dir) are named after the run.
	profBase := filepath.Join(o.profileDir, "chime-"+strings.NewReplacer(" ", "-", ":", "").Replace(label))
	// The ingest's profile covers the window of its CPU figure, from the
	// first create to one second before the instant, in whole seconds (a
	// profile's length): it starts up to a second late rather than ending
	// early, since the window's last seconds hold the fire lead's ticks,
	// all 100,000 of them. It ends a tenth of a second early: the burst's
	// profile starts then, and chime runs one CPU profile at a time.
	ingestProfiled := func() {}
	if o.profileDir != "" {
		until := time.Until(t0.Add(-time.Second)) - 100*time.Millisecond
		if d := until.Truncate(time.Second); d >= time.Second {
			ingestProfiled = c.profileAfter(profBase+".ingest.pprof", until-d, d)
		}
	}
	if p.viaProducer {
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
	ingestProfiled()
	phase.Store(1)
	cpu0, ch0, rc0 := c.cpu(), c.clickhouseCPU(), procCPU(rcv.pid())
	mallocs0 := c.scrape(ctx).sum("go_memstats_mallocs_total")
	// The machine's CPU is read from the instant itself, not the second
	// before it (nothing fires then, and it read as idle time).
	atInstant := make(chan [2]int64, 1)
	time.AfterFunc(time.Until(t0), func() {
		busy, total := machineCPU()
		atInstant <- [2]int64{busy, total}
	})
	atInstantDone := func() {}
	if p.atInstant != nil {
		atInstantDone = p.atInstant(c, t0)
	}
	profiled := func() {}
	if o.profileDir != "" {
		path := profBase + ".pprof"
		c.snapshot("allocs", profBase+".allocs-before.pprof")
		profiled = c.profile(path, o.profileFor)
		time.AfterFunc(time.Until(t0.Add(3*time.Second)), func() {
			c.snapshot("heap", profBase+".heap-during.pprof")
			// What the goroutines wait on mid-burst, and how many there are:
			// their stacks are memory the collector scans.
			c.snapshot("goroutine", profBase+".goroutine-during.pprof")
		})
		// An execution trace of two seconds of firing: it shows what the
		// goroutines wait on while the machine is not fully busy.
		time.AfterFunc(time.Until(t0.Add(time.Second)), func() { c.snapshot("trace?seconds=2", profBase+".trace") })
		for _, after := range []time.Duration{3 * time.Second, 15 * time.Second, 30 * time.Second} {
			time.AfterFunc(time.Until(t0.Add(after)), func() {
				c.snapshot("heap?debug=1", fmt.Sprintf("%s.memstats-%s.txt", profBase, after))
			})
		}
		defer c.snapshot("heap", profBase+".heap-after.pprof")
		defer fmt.Fprintf(os.Stderr, "e2e %s: CPU profile of chime from 1 s before the instant, %s: %s\n", label, o.profileFor, path)
	}
	defer profiled()
	fmt.Fprintf(os.Stderr, "e2e %s: ingested in %s; firing...\n", label, r.ingest.Round(time.Millisecond))
	if !rcv.waitCalls(ctx, int64(n), time.Until(t0)+spread+5*time.Minute) {
		fmt.Fprintf(os.Stderr, "e2e %s: only %d of %d calls arrived\n", label, rcv.calls(), n)
	}
	atInstantDone()
	_, r.peakRSS = procMem(c.pid())
	m0 := <-atInstant
	if busy1, total1 := machineCPU(); total1 > m0[1] {
		r.machineBusy = float64(busy1-m0[0]) / float64(total1-m0[1])
	}
	r.fireLag50 = c.histogramQuantile(ctx, "chime_scheduler_fire_lag_seconds", 0.5)
	r.fireLag99 = c.histogramQuantile(ctx, "chime_scheduler_fire_lag_seconds", 0.99)
	if o.profileDir != "" {
		c.snapshot("allocs", profBase+".allocs-after.pprof")
	}
	drainStart := time.Now()
	r.quiet = waitQuiet(ctx, adm, 3*time.Minute)
	r.drain = time.Since(drainStart)
	if p.atEnd != nil {
		p.atEnd(c)
	}
	r.chimeCPU = c.cpu() - cpu0
	r.allocsPerJob = (c.scrape(ctx).sum("go_memstats_mallocs_total") - mallocs0) / float64(n)
	r.clickhouseCPU = c.clickhouseCPU() - ch0
	r.receiverCPU = procCPU(rcv.pid()) - rc0
	r.rss, r.peakRSS = procMem(c.pid())
	r.ingestRSS, r.burstRSS = peaks[0].Load(), peaks[1].Load()
	r.clickhouseRSS = c.clickhouseRSS()
	r.recordsPerJob = float64(recordsWritten(ctx, adm)-records0) / float64(n)
	// Answers that are not calls: dues deferred for waiting past the
	// admission wait, each sent again later (an outcome, an event and a
	// due more). A burst that is only queued defers nothing.
	r.deferred = int64(c.scrape(ctx).class("chime_dispatcher_outcomes_total", "deferred"))
	r.arrivals, r.at = rcv.results(n), at
	r.stats = summarize(r.arrivals, at)
	// The steady RSS after the burst: what the process keeps.
	time.Sleep(5 * time.Second)
	r.steadyRSSAfter, _ = procMem(c.pid())
	return r
}

// ceilingRows report the ceiling run of n POSTs.
func ceilingRows(n int, ceil deliveryStats, ceilCPU float64) []result {
	return []result{
		{fmt.Sprintf("ceiling: %dk POSTs from 100 goroutines, no scheduler: callbacks/s", n/1000), fmt.Sprintf("%.0f/s", ceil.rate), "—", "—"},
		{"ceiling: lag p50 / p99 / max", ceil.lagString(), "—", "—"},
		{"ceiling: CPU s per 1000 (client + receiver)", fmt.Sprintf("%.3f s", ceilCPU*1000/float64(n)), "—", "—"},
	}
}

// cpuRatio is chime's CPU over the receiver's in the same phase: both
// run beside each other on one machine, so the ratio holds still while
// the machine's speed does not (the same build measured 64–82 µs a job
// within ten minutes, and 2.5–2.7 times the receiver's): compare builds
// by it.
func cpuRatio(r burstRun) string {
	if r.receiverCPU <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", r.chimeCPU/r.receiverCPU)
}

// burstRows report a burst run of n jobs due at once, beside the ceiling.
func burstRows(name string, n int, r burstRun, ceil deliveryStats) []result {
	s := r.stats
	frac := s.rate / ceil.rate
	usPerJob := r.chimeCPU * 1e6 / float64(n)
	out := []result{
		{name + ": callbacks/s", fmt.Sprintf("%.0f/s", s.rate), "≥ 19000", verdict(s.rate >= 19000)},
		{name + ": fraction of the ceiling", fmt.Sprintf("%.2f", frac), "≥ 0.45", verdict(frac >= 0.45)},
		{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 5 s", verdict(s.p99 <= 5*time.Second)},
		{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
		{name + ": chime CPU per job (fire→analytics)", fmt.Sprintf("%.0f µs (%.3f s per 1000)", usPerJob, r.chimeCPU*1000/float64(n)), "≤ 100 µs", verdict(usPerJob <= 100)},
		{name + ": CPU s, chime / ClickHouse / receiver", fmt.Sprintf("%.1f / %.1f / %.1f (ingest %.1f)", r.chimeCPU, r.clickhouseCPU, r.receiverCPU, r.ingestCPU), "—", "—"},
		{name + ": chime CPU per job / the receiver's per call, same phase", cpuRatio(r), "—", "—"},
		{name + ": chime peak RSS", mb(r.peakRSS), "≤ 500 MB", verdict(r.peakRSS <= 500<<20)},
		{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
		{name + ": RSS after, chime / ClickHouse", mb(r.steadyRSSAfter) + " / " + mb(r.clickhouseRSS), "—", "—"},
		{name + ": Kafka records written per job", fmt.Sprintf("%.1f", r.recordsPerJob), "—", "—"},
		{name + ": chime heap allocations per job (fire→analytics)", fmt.Sprintf("%.0f", r.allocsPerJob), "—", "—"},
		{name + ": dues deferred instead of called", fmt.Sprint(r.deferred), "0", verdict(r.deferred == 0)},
		{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
		{name + ": machine CPU busy while firing (all processes)", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
	}
	if !r.quiet {
		out = append(out, result{name + ": consumers caught up", "NO (lag left after 3m)", "yes", "NO"})
	}
	return out
}

// steadyRows report a steady run of n jobs due evenly.
func steadyRows(name string, n int, r burstRun) []result {
	s := r.stats
	return []result{
		{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 2 s", verdict(s.p99 <= 2*time.Second)},
		{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
		{name + ": chime CPU per job", fmt.Sprintf("%.0f µs", r.chimeCPU*1e6/float64(n)), "≤ 100 µs", verdict(r.chimeCPU*1e6/float64(n) <= 100)},
		{name + ": chime peak RSS", mb(r.peakRSS), "—", "—"},
		{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
		{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
		{name + ": machine CPU busy while firing", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
	}
}

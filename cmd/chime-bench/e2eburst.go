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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The soak runs `chime dev` for a long time at a steady load and samples
// it every soakSample: does it stay flat? The load: soakJobs interval jobs
// every 2 s (1,000 fires/s), 5 % of them answered 500 (retried once), and
// a namespace whose 20 jobs a second fail for the first 10 s of every
// minute, so its breaker trips about once a minute. Each sample reads
// chime's own /metrics: RSS, Go heap in use, goroutines, open files, fire
// lag p99 over the sample, the consumer groups' lag, breaker transitions.
// The verdict compares the last sample with the one at minute 5 (or at a
// third of a shorter run).

const (
	soakJobs     = 2000 // every 2 s: 1,000 fires/s
	soakFailing  = soakJobs / 20
	soakTripJobs = 20 // every 1 s
)

type soakSample struct {
	at                        time.Duration
	rss, heap                 float64
	goroutines, fds           float64
	lagP99                    float64
	consumerLag               float64
	calls, transitions, fires float64
}

func benchSoak(ctx context.Context, bin string, d time.Duration) []result {
	rcv := startReceiverProc()
	defer rcv.close()
	rcv.reset(0)
	c := startChime(ctx, bin)
	defer c.stop(false)
	c.createNamespace(ctx)
	if st, out := c.call(ctx, "PUT", "/v1/namespaces/trip", []byte(`{"breaker": {"window": "10s", "min_requests": 5, "cool_off": "5s", "max_cool_off": "10s"}}`)); st != 200 && st != 201 {
		fail("soak: namespace trip: %d %s", st, out)
	}
	post := func(ns string, jobs []map[string]any) {
		for i := 0; i < len(jobs); i += 1000 {
			body, _ := json.Marshal(map[string]any{"jobs": jobs[i:min(i+1000, len(jobs))]})
			if st, out := c.call(ctx, "POST", "/v1/namespaces/"+ns+"/jobs:batch", body); st != http.StatusCreated {
				fail("soak: jobs: %d %s", st, out)
			}
		}
	}
	var jobs []map[string]any
	for i := range soakJobs {
		url, retry := rcv.url(), map[string]any{"max_attempts": 5}
		if i < soakFailing {
			url, retry = rcv.url()+"?fail=1", map[string]any{"max_attempts": 2, "initial_interval": "1s"}
		}
		jobs = append(jobs, map[string]any{"id": "s" + strconv.Itoa(i), "schedule": map[string]any{"every": "2s"},
			"callback": map[string]any{"url": url, "body": jobBody(i, time.Now())}, "retry": retry})
	}
	post(e2eNamespace, jobs)
	jobs = jobs[:0]
	for i := range soakTripJobs {
		jobs = append(jobs, map[string]any{"id": "t" + strconv.Itoa(i), "schedule": map[string]any{"every": "1s"},
			"callback": map[string]any{"url": rcv.url() + "?trip=1"}, "retry": map[string]any{"max_attempts": 1}})
	}
	post("trip", jobs)

	sample := min(time.Minute, max(d/10, 10*time.Second))
	fmt.Fprintf(os.Stderr, "soak: %s at %d fires/s, a sample every %s\n", d, soakJobs/2+soakTripJobs, sample)
	var samples []soakSample
	prev := c.scrape(ctx)
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		time.Sleep(sample)
		cur := c.scrape(ctx)
		s := soakSample{
			at: time.Since(start).Round(time.Second), rss: cur.sum("process_resident_memory_bytes"), heap: cur.sum("go_memstats_heap_inuse_bytes"),
			goroutines: cur.sum("go_goroutines"), fds: cur.sum("process_open_fds"),
			lagP99:      cur.quantileSince(prev, "chime_scheduler_fire_lag_seconds", 0.99),
			consumerLag: cur.sum("chime_consumer_lag_records"),
			calls:       float64(rcv.calls()),
			transitions: cur.sum("chime_breaker_transitions_total") - prev.sum("chime_breaker_transitions_total"),
			fires:       cur.sum("chime_scheduler_fires_total") - prev.sum("chime_scheduler_fires_total"),
		}
		fmt.Fprintf(os.Stderr, "soak %7s: RSS %4.0f MB, heap %4.0f MB, goroutines %5.0f, fds %4.0f, fire lag p99 %5.2f s, consumer lag %6.0f, fires %6.0f/s, breaker transitions %2.0f\n",
			s.at, s.rss/1e6, s.heap/1e6, s.goroutines, s.fds, s.lagP99, s.consumerLag, s.fires/sample.Seconds(), s.transitions)
		samples = append(samples, s)
		prev = cur
	}
	if len(samples) < 3 {
		return []result{{"soak", "too short to judge", "—", "—"}}
	}
	// The baseline: the sample at minute 5, or a third into a run too
	// short to have one before its end.
	base := samples[len(samples)/3]
	for _, s := range samples[:len(samples)-2] {
		if s.at >= 5*time.Minute {
			base = s
			break
		}
	}
	first, last := samples[0], samples[len(samples)-1]
	worstLag, transitions := 0.0, 0.0
	for _, s := range samples {
		if s.at >= base.at {
			worstLag = max(worstLag, s.lagP99)
		}
		transitions += s.transitions
	}
	name := fmt.Sprintf("soak %s, %d fires/s, 5%% failing, a breaker trip a minute", d, soakJobs/2+soakTripJobs)
	var after []soakSample
	for _, s := range samples {
		if s.at >= base.at {
			after = append(after, s)
		}
	}
	rssGrowth, rssLo, rssHi := trend(after, func(s soakSample) float64 { return s.rss })
	gorGrowth, gorLo, gorHi := trend(after, func(s soakSample) float64 { return s.goroutines })
	return []result{
		{name + ": RSS trend " + base.at.String() + " → end (samples " + fmt.Sprintf("%.0f–%.0f MB", rssLo/1e6, rssHi/1e6) + ")", fmt.Sprintf("%.0f → %.0f MB (%+.1f%%)", base.rss/1e6, last.rss/1e6, rssGrowth), "< +10%", verdict(rssGrowth < 10)},
		{name + ": goroutines trend " + base.at.String() + " → end (samples " + fmt.Sprintf("%.0f–%.0f", gorLo, gorHi) + ")", fmt.Sprintf("%.0f → %.0f (%+.1f%%)", base.goroutines, last.goroutines, gorGrowth), "< +10%", verdict(gorGrowth < 10)},
		{name + ": RSS, heap in use at " + first.at.String() + " → end", fmt.Sprintf("%.0f → %.0f MB, %.0f → %.0f MB", first.rss/1e6, last.rss/1e6, first.heap/1e6, last.heap/1e6), "—", "—"},
		{name + ": open files at end", fmt.Sprintf("%.0f", last.fds), "—", "—"},
		{name + ": worst fire lag p99 of a sample after " + base.at.String(), fmt.Sprintf("%.2f s", worstLag), "< 1 s", verdict(worstLag < 1)},
		{name + ": breaker transitions", fmt.Sprintf("%.0f", transitions), "—", "—"},
	}
}

// trend is the growth, in percent, of the least-squares line through the
// samples' values from the first sample's time to the last's, and the
// lowest and highest value. The line, not two samples: RSS swings ±15 %
// between minutes as the collector runs (GOGC 200), so a run that is flat
// would pass or fail by which minute its baseline and last samples fell on.
func trend(samples []soakSample, value func(soakSample) float64) (growthPct, lo, hi float64) {
	n := float64(len(samples))
	var sx, sy, sxx, sxy float64
	lo, hi = value(samples[0]), value(samples[0])
	for _, s := range samples {
		x, y := s.at.Minutes(), value(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		lo, hi = min(lo, y), max(hi, y)
	}
	if len(samples) < 2 {
		return 0, lo, hi
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	icept := (sy - slope*sx) / n
	x0, x1 := samples[0].at.Minutes(), samples[len(samples)-1].at.Minutes()
	start := icept + slope*x0
	return (slope * (x1 - x0)) / start * 100, lo, hi
}

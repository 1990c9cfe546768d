package main

// The pending phase: chime dev's memory per pending job, and its recovery
// after kill -9 with them all.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

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

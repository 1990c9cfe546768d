package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chime-sched/chime/producer"
)

// capPending is what one scheduler process holds for pending jobs: its
// RSS, its state dir and the broker's log dirs, empty and with n one-shot
// jobs due more than an hour out, then after a clean restart. It reads
// only sizes (the state dir, /proc's RSS), so it measures whatever storage
// the scheduler uses.
type capPending struct {
	n, partitions          int
	rss0, rss1, rssRestart int64
	dir0, dir1             int64
	kafka0, kafka1         map[string]int64 // per topic
	apply, restart         time.Duration
	// After a kill -9: time from the new process's start to every timer
	// held again, and the changelog records it read to get there.
	killRestart   time.Duration
	killRecovered float64
	cpu           float64 // the scheduler's CPU seconds applying the n commands
	brokerCPU     float64
}

const capPendingNamespace = "pend"

// pending runs one `chime scheduler` on a prefix of its own (so it holds
// none of the steady runs' rows), with a breaker for the namespace table
// and an API only long enough to create the namespace, and publishes n
// jobs with the producer SDK straight into Kafka.
func (c *capCluster) pending(ctx context.Context, bin string, partitions int) capPending {
	n := c.o.pending
	r := capPending{n: n, partitions: partitions}
	d := c.deploy(bin, "pend.", partitions)
	defer d.stop()
	sched := d.add(ctx, "scheduler")
	d.add(ctx, "breaker")
	api := d.add(ctx, "api")
	d.waitReady(ctx)
	d.putNamespace(ctx, d.apiClient(), capPendingNamespace, `{}`)
	// The API's job view would replicate every pending job: not what is
	// measured here, and CPU taken from the scheduler.
	d.remove(api)

	// The empty baseline: chime returns memory 5 s after its last
	// collection once allocation stops (cmd/chime/memory.go).
	sleepCtx(ctx, 15*time.Second)
	r.rss0, _ = procMem(sched.pid())
	r.dir0 = dirSize(sched.stateDir())
	_, r.kafka0 = topicStats(ctx, c.adm, d.prefix)

	fmt.Fprintf(os.Stderr, "capacity pending: publishing %d jobs due in 2–3 h into one scheduler (%d partitions)...\n", n, partitions)
	cpu0, b0 := procCPU(sched.pid()), procCPU(c.brokerPID)
	start := time.Now()
	p, err := producer.New(producer.Brokers(c.kc.Addrs()), producer.TopicPrefix(d.prefix))
	if err != nil {
		fail("capacity pending: producer: %v", err)
	}
	due := start.Add(2 * time.Hour).Truncate(time.Second)
	for i := range n {
		spec := &chimeJobSpec{i: i, at: due.Add(time.Duration(i%3600) * time.Second), url: c.rcv.url(), ns: capPendingNamespace}
		p.ScheduleAsync(ctx, spec.proto(), func(_ producer.Receipt, err error) {
			if err != nil {
				fail("capacity pending: producer: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		fail("capacity pending: producer flush: %v", err)
	}
	p.Close()
	if !waitPending(ctx, sched, n, 10*time.Minute) {
		fail("capacity pending: the scheduler holds %v of %d timers after 10m; its log: %s/scheduler.log", sched.scrape(ctx).sum("chime_scheduler_pending_timers"), n, sched.dir)
	}
	r.apply = time.Since(start)
	r.cpu, r.brokerCPU = procCPU(sched.pid())-cpu0, procCPU(c.brokerPID)-b0
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if lag, err := groupLag(ctx, c.adm, d.groupOf("scheduler")); err == nil && lag == 0 {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	sleepCtx(ctx, 20*time.Second)
	r.rss1, _ = procMem(sched.pid())
	r.dir1 = dirSize(sched.stateDir())
	_, r.kafka1 = topicStats(ctx, c.adm, d.prefix)

	// A clean restart: what the scheduler holds at rest for the same rows,
	// without what applying them left behind.
	fmt.Fprintf(os.Stderr, "capacity pending: restarting the scheduler...\n")
	sched.stop()
	restart := time.Now()
	sched.start()
	if !waitPending(ctx, sched, n, 5*time.Minute) {
		fail("capacity pending: after a restart the scheduler holds %v of %d timers", sched.scrape(ctx).sum("chime_scheduler_pending_timers"), n)
	}
	r.restart = time.Since(restart)
	sleepCtx(ctx, 20*time.Second)
	r.rssRestart, _ = procMem(sched.pid())

	// kill -9 and start again: the store keeps its offset, so only what
	// Kafka got since it was last applied is read again.
	fmt.Fprintf(os.Stderr, "capacity pending: kill -9 of the scheduler, and a restart...\n")
	sched.kill9()
	restart = time.Now()
	sched.start()
	if !waitPending(ctx, sched, n, 5*time.Minute) {
		fail("capacity pending: after kill -9 the scheduler holds %v of %d timers", sched.scrape(ctx).sum("chime_scheduler_pending_timers"), n)
	}
	r.killRestart = time.Since(restart)
	r.killRecovered = sched.scrape(ctx).sum("chime_scheduler_recovered_records_total")
	return r
}

// waitPending waits until the scheduler process holds n timers.
func waitPending(ctx context.Context, p *capProc, n int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if p.scrape(ctx).sum("chime_scheduler_pending_timers") >= float64(n) {
			return true
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	return false
}

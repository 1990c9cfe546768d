package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
)

// A namespace's outcomes stay keyed by the namespace even when its dues are
// spread (the breaker must see all of them), so every outcome of the hot
// namespace lands on one outcomes partition: one breaker process and one
// sink process handle half of the whole load, and goka handles a
// partition in one goroutine. capHotDrain measures how fast they consume
// that one partition: with both stopped, a backlog of the hot namespace's
// outcomes is produced, then they start again and their groups' lag is
// sampled while it falls.

// capHotOutcomes is the backlog: several seconds of draining at the
// expected rates, so that the groups' commit intervals (about a second)
// blur the slope little.
const capHotOutcomes = 400_000

// capDrain is one group's consumption of the backlog.
type capDrain struct {
	rate   float64 // outcomes per second
	cpu    float64 // the process's CPU per outcome, seconds
	chCPU  float64 // ClickHouse's CPU per outcome (the sink's inserts), seconds
	failed string  // why no rate was measured
}

func (d *capDeploy) hotDrain(ctx context.Context) (brk, snk capDrain) {
	var breaker, sink *capProc
	for _, p := range d.procs {
		switch p.label {
		case "breaker 1":
			breaker = p
		case "sink 1":
			sink = p
		}
	}
	fmt.Fprintf(os.Stderr, "capacity %s: %d outcomes of the hot namespace, drained by the breaker and the sink...\n", d.label(), capHotOutcomes)
	breaker.stop()
	sink.stop()
	d.produceHotOutcomes(ctx, capHotOutcomes)
	breaker.start()
	sink.start()

	type probe struct {
		p          *capProc
		group      string
		out        *capDrain
		t0         time.Time
		lag0       int64
		cpu0, ch0  float64
		done, seen bool
	}
	probes := []*probe{
		{p: breaker, group: d.groupOf("breaker"), out: &brk},
		{p: sink, group: d.groupOf("sink"), out: &snk},
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		pending := 0
		for _, pr := range probes {
			if pr.done {
				continue
			}
			pending++
			lag, err := groupLag(ctx, d.c.adm, pr.group)
			if err != nil {
				continue
			}
			now, cpu, ch := time.Now(), procCPU(pr.p.pid()), procCPU(d.c.chPID)
			switch {
			case !pr.seen && lag < capHotOutcomes*9/10:
				// Consuming for a moment: the start-up and the first
				// fetches are behind; the slope starts here.
				pr.seen, pr.t0, pr.lag0, pr.cpu0, pr.ch0 = true, now, lag, cpu, ch
			case pr.seen && lag <= capHotOutcomes/20:
				n := float64(pr.lag0 - lag)
				pr.out.rate = n / now.Sub(pr.t0).Seconds()
				pr.out.cpu = (cpu - pr.cpu0) / n
				pr.out.chCPU = (ch - pr.ch0) / n
				pr.done = true
			}
		}
		if pending == 0 {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	for _, pr := range probes {
		if !pr.done {
			pr.out.failed = "not drained in 3m"
		}
	}
	// Whatever is left is consumed before the next run starts.
	for _, pr := range probes {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			if lag, err := groupLag(ctx, d.c.adm, pr.group); err == nil && lag == 0 {
				break
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	return brk, snk
}

// produceHotOutcomes writes n successful outcomes of the hot namespace,
// keyed and partitioned as the dispatcher writes them.
func (d *capDeploy) produceHotOutcomes(ctx context.Context, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.c.kc.Addrs()...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(producer.GokaPartitioner()))
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close()
	topic := d.topics().Outcomes()
	now := time.Now()
	for i := range n {
		o := &chimev1.CallbackOutcome{
			EventId: "hot-" + strconv.Itoa(i), Namespace: capHot, JobId: "hot-" + strconv.Itoa(i),
			FireSeq: 1, Attempt: 1, Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200,
			Latency: durationpb.New(time.Duration(20+i%200) * time.Millisecond), StartedAt: timestamppb.New(now),
			FinishedAt: timestamppb.New(now), Url: d.c.rcv.url(), Method: "POST",
		}
		v, _ := proto.Marshal(o)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(capHot), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail("capacity: produce outcome: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		fail("capacity: flush outcomes: %v", err)
	}
}

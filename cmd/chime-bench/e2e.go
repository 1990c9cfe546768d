package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chime-sched/chime/schema"
)

// The end-to-end phases measure chime as users run it: `bin/chime dev`
// in its own process with its defaults (every role, the embedded broker,
// the local ClickHouse, the API), one namespace with max_concurrency
// 10000, and the receiver in a third process. Beside it, in the same run,
// the ceiling: the same receiver and bodies POSTed by 100 plain goroutines
// with no scheduler at all.
//
//	e2e.go         the options and the order of the phases
//	e2eburst.go    the ceiling, the burst and steady runs, their rows
//	e2epending.go  memory per pending job, recovery after kill -9
//	e2eidle.go     idle CPU, connections announcing large bodies
//	failover.go    the failover phase on Apache Kafka
//	chimeproc.go   chime dev as a child process
//	e2esustain.go  the sustained maximum and overload runs
//	e2eload.go     the namespace and the jobs
//	measure.go     delivery figures, Kafka records and consumer lag
//	receiver.go    the receiver process the callbacks reach

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
	sustain     *sustainOptions
}

// benchE2E runs the end-to-end phases and returns their rows: the ceiling
// and the burst (e2eburst.go), the steady run, pending jobs
// (e2epending.go), idle (e2eidle.go) and failover (failover.go).
func benchE2E(ctx context.Context, o e2eOptions) []result {
	if _, err := os.Stat(o.chime); err != nil {
		fail("e2e: the chime binary %q: %v (make bench builds it; or pass -chime)", o.chime, err)
	}
	rcv := startReceiverProc()
	defer rcv.close()
	var out []result
	var ceil deliveryStats
	if o.burst > 0 {
		fmt.Fprintf(os.Stderr, "e2e ceiling: %d POSTs from 100 goroutines, no scheduler...\n", o.burst)
		var ceilCPU float64
		ceil, ceilCPU = ceiling(ctx, rcv, o.burst, time.Second)
		out = append(out, ceilingRows(o.burst, ceil, ceilCPU)...)
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
			r := runBurst(ctx, o, rcv, burstPlan{label: "burst " + run.label, n: o.burst,
				lead: 20*time.Second + time.Duration(o.burst/5)*time.Microsecond*10, viaProducer: run.producer})
			out = append(out, burstRows(fmt.Sprintf("chime dev, %dk due at once (%s)", o.burst/1000, run.label), o.burst, r, ceil)...)
		}
	}
	if o.steady > 0 {
		lead := 20*time.Second + time.Duration(o.steady)*25*time.Microsecond
		r := runBurst(ctx, o, rcv, burstPlan{label: "steady", n: o.steady, lead: lead, spread: o.steadyOver})
		out = append(out, steadyRows(fmt.Sprintf("chime dev, %dk due evenly over %s", o.steady/1000, o.steadyOver), o.steady, r)...)
	}
	if o.sustain != nil {
		out = append(out, benchSustain(ctx, o, o.sustain, rcv, ceil)...)
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

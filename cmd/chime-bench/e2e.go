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
}

// benchE2E runs the end-to-end phases and returns their rows.
func benchE2E(ctx context.Context, o e2eOptions) []result {
	if _, err := os.Stat(o.chime); err != nil {
		fail("e2e: the chime binary %q: %v (make bench builds it; or pass -chime)", o.chime, err)
	}
	rcv := startReceiverProc()
	defer rcv.close()
	var out []result
	if o.burst > 0 {
		fmt.Fprintf(os.Stderr, "e2e ceiling: %d POSTs from 100 goroutines, no scheduler...\n", o.burst)
		ceil, ceilCPU := ceiling(ctx, rcv, o.burst, time.Second)
		out = append(out,
			result{fmt.Sprintf("ceiling: %dk POSTs from 100 goroutines, no scheduler: callbacks/s", o.burst/1000), fmt.Sprintf("%.0f/s", ceil.rate), "—", "—"},
			result{"ceiling: lag p50 / p99 / max", ceil.lagString(), "—", "—"},
			result{"ceiling: CPU s per 1000 (client + receiver)", fmt.Sprintf("%.3f s", ceilCPU*1000/float64(o.burst)), "—", "—"},
		)
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
			r := runBurst(ctx, o, rcv, "burst "+run.label, o.burst, 20*time.Second+time.Duration(o.burst/5)*time.Microsecond*10, run.producer, 0)
			s := r.stats
			frac := s.rate / ceil.rate
			usPerJob := r.chimeCPU * 1e6 / float64(o.burst)
			name := fmt.Sprintf("chime dev, %dk due at once (%s)", o.burst/1000, run.label)
			out = append(out,
				result{name + ": callbacks/s", fmt.Sprintf("%.0f/s", s.rate), "≥ 19000", verdict(s.rate >= 19000)},
				result{name + ": fraction of the ceiling", fmt.Sprintf("%.2f", frac), "≥ 0.45", verdict(frac >= 0.45)},
				result{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 5 s", verdict(s.p99 <= 5*time.Second)},
				result{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
				result{name + ": chime CPU per job (fire→analytics)", fmt.Sprintf("%.0f µs (%.3f s per 1000)", usPerJob, r.chimeCPU*1000/float64(o.burst)), "≤ 100 µs", verdict(usPerJob <= 100)},
				result{name + ": CPU s, chime / ClickHouse / receiver", fmt.Sprintf("%.1f / %.1f / %.1f (ingest %.1f)", r.chimeCPU, r.clickhouseCPU, r.receiverCPU, r.ingestCPU), "—", "—"},
				result{name + ": chime peak RSS", mb(r.peakRSS), "≤ 500 MB", verdict(r.peakRSS <= 500<<20)},
				result{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
				result{name + ": RSS after, chime / ClickHouse", mb(r.steadyRSSAfter) + " / " + mb(r.clickhouseRSS), "—", "—"},
				result{name + ": Kafka records written per job", fmt.Sprintf("%.1f", r.recordsPerJob), "—", "—"},
				result{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
				result{name + ": machine CPU busy while firing (all processes)", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
			)
			if !r.quiet {
				out = append(out, result{name + ": consumers caught up", "NO (lag left after 3m)", "yes", "NO"})
			}
		}
	}
	if o.steady > 0 {
		lead := 20*time.Second + time.Duration(o.steady)*25*time.Microsecond
		r := runBurst(ctx, o, rcv, "steady", o.steady, lead, false, o.steadyOver)
		s := r.stats
		name := fmt.Sprintf("chime dev, %dk due evenly over %s", o.steady/1000, o.steadyOver)
		out = append(out,
			result{name + ": lag p50 / p99 / max", s.lagString(), "p99 ≤ 2 s", verdict(s.p99 <= 2*time.Second)},
			result{name + ": lost / repeated", fmt.Sprintf("%d / %d", s.lost, s.repeated), "0 / 0", verdict(s.lost == 0 && s.repeated == 0)},
			result{name + ": chime CPU per job", fmt.Sprintf("%.0f µs", r.chimeCPU*1e6/float64(o.steady)), "≤ 100 µs", verdict(r.chimeCPU*1e6/float64(o.steady) <= 100)},
			result{name + ": chime peak RSS", mb(r.peakRSS), "—", "—"},
			result{name + ": chime RSS peak while creating / while firing", mb(r.ingestRSS) + " / " + mb(r.burstRSS), "—", "—"},
			result{name + ": due emitted − due time p50 / p99 (≤ bucket)", fmt.Sprintf("%.2g / %.2g s", r.fireLag50, r.fireLag99), "—", "—"},
			result{name + ": machine CPU busy while firing", fmt.Sprintf("%.0f%%", r.machineBusy*100), "—", "—"},
		)
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

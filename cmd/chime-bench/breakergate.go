package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// benchBreakerGate measures what the breaker saves a dead endpoint: the
// scheduler, the dispatcher and (in the second run) the breaker processor
// run together; a steady schedule of one-shot jobs calls an address that
// refuses connections, with the default retry policy and the default
// breaker thresholds; the calls the dispatcher makes in `run` are scaled to
// a minute. Then, on the run with the breaker, the reaction time: from the
// outcome that crosses a fresh namespace's threshold (acknowledged by
// Kafka) to two dispatchers' breaker views both gating it, as the
// dispatcher asks (circuit.Gate on the view's status).
func benchBreakerGate(ctx context.Context, log *slog.Logger, run time.Duration, perSec int, partitions int32) []result {
	bb := startBroker("gate")
	defer bb.close()
	brokers := bb.Brokers

	// A dead endpoint: a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("%v", err)
	}
	dead := "http://" + l.Addr().String() + "/hook"
	l.Close()

	var out, reaction []result
	var perMin [2]float64
	for i, withBreaker := range []bool{false, true} {
		tp := schema.NewTopics(fmt.Sprintf("bench-gate%d.", i))
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(producer.GokaPartitioner()))
		if err != nil {
			fail("%v", err)
		}
		provision(ctx, cl, tp, partitions)
		known := schema.StaticNamespaces{"dead": &chimev1.NamespaceConfig{}}
		s, err := scheduler.New(scheduler.Config{
			Config:     processors.Config{Client: processors.Client{Brokers: brokers, Logger: log}, Topics: tp},
			PumpIdle:   100 * time.Millisecond,
			Namespaces: known,
		})
		if err != nil {
			fail("%v", err)
		}
		parts := []lifecycle.Part{s}
		var gates []*views.Breakers
		cfg := dispatcher.Config{Brokers: brokers, Topics: tp, Logger: log, Guard: dispatcher.Guard{AllowLoopback: true}}
		if withBreaker {
			p, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: brokers, Logger: log}, Topics: tp}, Namespaces: known})
			if err != nil {
				fail("%v", err)
			}
			parts = append(parts, p)
			// One view per dispatcher process; the second stands for
			// another dispatcher in the reaction measurement.
			for j := range 2 {
				v, err := views.NewBreakers(processors.Client{Brokers: brokers, ClientID: "bench-dispatcher-" + strconv.Itoa(j), Logger: log}, tp)
				if err != nil {
					fail("%v", err)
				}
				parts = append(parts, v)
				gates = append(gates, v)
			}
			cfg.Breakers = gates[0]
		}
		d, err := dispatcher.New(cfg)
		if err != nil {
			fail("%v", err)
		}
		stop := startParts(ctx, append(parts, d)...)

		p, err := producer.New(producer.Brokers(brokers), producer.TopicPrefix(tp.Prefix))
		if err != nil {
			fail("%v", err)
		}
		jobs := int(run.Seconds() * float64(perSec))
		start := time.Now().Add(2 * time.Second)
		gap := time.Second / time.Duration(perSec)
		for j := range jobs {
			p.ScheduleAsync(ctx, &chimev1.JobSpec{
				Namespace: "dead", Id: fmt.Sprintf("job-%06d", j),
				Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(start.Add(time.Duration(j) * gap))}},
				Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: dead}}},
			}, func(_ producer.Receipt, err error) {
				if err != nil {
					fail("schedule: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			fail("flush: %v", err)
		}
		p.Close()
		what := "without"
		if withBreaker {
			what = "with"
		}
		fmt.Fprintf(os.Stderr, "breaker gate: %d jobs over %s to a dead endpoint, %s the breaker...\n", jobs, run, what)
		time.Sleep(time.Until(start))
		before := d.Stats().Calls
		select {
		case <-time.After(run):
		case <-ctx.Done():
			os.Exit(1)
		}
		calls := d.Stats().Calls - before
		perMin[i] = float64(calls) * float64(time.Minute) / float64(run)
		held := d.Stats().Held

		if withBreaker {
			reaction = benchReaction(ctx, cl, tp, gates)
		}
		stop()
		cl.Close()
		out = append(out, result{fmt.Sprintf("calls/min to a dead endpoint, %s the breaker (%d jobs/s, default retry and breaker, %s)", what, perSec, run),
			fmt.Sprintf("%.0f /min", perMin[i]), "", ""})
		if withBreaker {
			out[len(out)-1].value += fmt.Sprintf(" (%d dues held back)", held)
		}
	}
	if perMin[1] > 0 {
		out = append(out, result{"calls to a dead endpoint saved by the breaker (without / with)", fmt.Sprintf("%.0f×", perMin[0]/perMin[1]), "", ""})
	}
	return append(out, reaction...)
}

// benchReaction trips fresh namespaces with the default minimum of failed
// outcomes and times each from the last one's acknowledgement to every
// dispatcher view gating the namespace.
func benchReaction(ctx context.Context, cl *kgo.Client, tp schema.Topics, gates []*views.Breakers) []result {
	fmt.Fprintf(os.Stderr, "breaker gate: reaction time to %d dispatcher views...\n", len(gates))
	var reactions []time.Duration
	for i := range 40 {
		ns := "react" + strconv.Itoa(i)
		if err := cl.ProduceSync(ctx, tripOutcomes(tp, ns)...).FirstErr(); err != nil {
			fail("produce: %v", err)
		}
		crossed := time.Now()
		for {
			all := true
			for _, v := range gates {
				if allow, _, _ := circuit.Gate(v.Get(ns), time.Now(), 0); allow {
					all = false
				}
			}
			if all {
				break
			}
			if time.Since(crossed) > time.Minute {
				fail("breaker gate: %s not gated by every view after a minute", ns)
			}
			time.Sleep(200 * time.Microsecond)
		}
		reactions = append(reactions, time.Since(crossed))
	}
	p50, p99, _ := quantiles(reactions)
	n := len(reactions)
	return []result{
		{fmt.Sprintf("breaker reaction p50 (threshold outcome → both dispatchers' views gating, %d trips)", n), ms(p50), "", ""},
		{fmt.Sprintf("breaker reaction p99 (threshold outcome → both dispatchers' views gating, %d trips)", n), ms(p99), "≤ 1 s", verdict(p99 <= time.Second)},
	}
}

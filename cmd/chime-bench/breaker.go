package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// benchBreaker measures one breaker processor instance: the outcomes per
// second it sustains from a backlog spread over many namespaces (each one
// a table read, a window update and a table write through Kafka), and the
// reaction time from the outcome that crosses a namespace's threshold to a
// breaker view (what a dispatcher reads) gating the namespace.
func benchBreaker(ctx context.Context, log *slog.Logger, outcomes int, partitions int32) []result {
	bb := startBroker("breaker")
	defer bb.close()
	brokers := bb.Brokers
	tp := schema.NewTopics("bench.")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(producer.GokaPartitioner()))
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close()
	provision(ctx, cl, tp, partitions)

	// The backlog: 1000 namespaces, one failure in ten (under every
	// threshold, so each outcome takes the full path and no breaker opens).
	fmt.Fprintf(os.Stderr, "breaker: producing %d outcomes...\n", outcomes)
	const namespaces = 1000
	now := time.Now()
	for i := range outcomes {
		o := &chimev1.CallbackOutcome{
			EventId: strconv.Itoa(i), Namespace: "ns" + strconv.Itoa(i%namespaces), JobId: "job" + strconv.Itoa(i),
			Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200,
			Latency: durationpb.New(time.Duration(20+i%200) * time.Millisecond), FinishedAt: timestamppb.New(now),
		}
		if i%10 == 0 {
			o.Class, o.StatusCode = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, 503
		}
		v, _ := proto.Marshal(o)
		cl.Produce(ctx, &kgo.Record{Topic: tp.Outcomes(), Key: []byte(o.Namespace), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail("produce outcome: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		fail("flush: %v", err)
	}

	p, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: brokers, Logger: log}, Topics: tp}, Namespaces: schema.StaticNamespaces{}})
	if err != nil {
		fail("%v", err)
	}
	v, err := views.NewBreakers(processors.Client{Brokers: brokers, ClientID: "bench-view", Logger: log}, tp)
	if err != nil {
		fail("%v", err)
	}
	// Started together: the backlog is timed from the processor's first
	// outcome, not from its readiness.
	for _, part := range []lifecycle.Part{p, v} {
		if err := part.Start(ctx); err != nil {
			fail("%v", err)
		}
		defer part.Stop()
	}

	fmt.Fprintf(os.Stderr, "breaker: processing the backlog...\n")
	for p.OutcomesHandled() == 0 {
		time.Sleep(time.Millisecond)
	}
	start, first := time.Now(), p.OutcomesHandled()
	deadline := start.Add(5 * time.Minute)
	for p.OutcomesHandled() < uint64(outcomes) {
		if time.Now().After(deadline) {
			fail("breaker: %d of %d outcomes after 5 minutes", p.OutcomesHandled(), outcomes)
		}
		time.Sleep(time.Millisecond)
	}
	rate := float64(uint64(outcomes)-first) / time.Since(start).Seconds()

	// Reaction: for fresh namespaces, the default minimum of failures in a
	// row; the clock starts when the last one is acknowledged by the broker.
	if err := lifecycle.Wait(ctx, v); err != nil {
		fail("view: %v", err)
	}
	fmt.Fprintf(os.Stderr, "breaker: measuring reaction time...\n")
	var reactions []time.Duration
	for i := range 50 {
		ns := "react" + strconv.Itoa(i)
		if err := cl.ProduceSync(ctx, tripOutcomes(tp, ns)...).FirstErr(); err != nil {
			fail("produce: %v", err)
		}
		crossed := time.Now()
		for {
			if allow, _, _ := circuit.Gate(v.Get(ns), time.Now(), 0); !allow {
				break
			}
			if time.Since(crossed) > time.Minute {
				fail("breaker: %s not gated after a minute", ns)
			}
			time.Sleep(200 * time.Microsecond)
		}
		reactions = append(reactions, time.Since(crossed))
	}
	slices.Sort(reactions)
	p50, p99, _ := quantiles(reactions)
	return []result{
		{"breaker: outcomes/s, one instance, through Kafka", fmt.Sprintf("%.0f outcomes/s", rate), "≥ 50k/s", verdict(rate >= 50_000)},
		{fmt.Sprintf("breaker reaction p50 (threshold outcome → view gating, %d trips)", len(reactions)), ms(p50), "", ""},
		{fmt.Sprintf("breaker reaction p99 (threshold outcome → view gating, %d trips)", len(reactions)), ms(p99), "≤ 1 s", verdict(p99 <= time.Second)},
	}
}

// tripOutcomes are just enough failed outcomes (the default min_requests,
// all 500s) to trip ns's breaker with the default thresholds.
func tripOutcomes(tp schema.Topics, ns string) []*kgo.Record {
	var recs []*kgo.Record
	for range schema.NamespaceDefaults().GetBreaker().GetMinRequests() {
		raw, _ := proto.Marshal(&chimev1.CallbackOutcome{Namespace: ns, Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: 500, FinishedAt: timestamppb.Now()})
		recs = append(recs, &kgo.Record{Topic: tp.Outcomes(), Key: []byte(ns), Value: raw})
	}
	return recs
}

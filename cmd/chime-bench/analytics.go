package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/analytics/sink"
	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// benchAnalytics measures the sink (outcomes from Kafka into ClickHouse,
// end to end) on the local ClickHouse, then the query latencies over
// queryRows attempt rows generated inside ClickHouse (INSERT ... SELECT
// FROM numbers(), through the materialized views).
func benchAnalytics(ctx context.Context, log *slog.Logger, sinkRows, queryRows int, partitions int32) []result {
	dir, err := os.MkdirTemp("", "chime-bench-analytics-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(dir)
	srv, err := clickhouse.Start(ctx, clickhouse.Options{Dir: dir + "/clickhouse"})
	if err != nil {
		fail("local ClickHouse (run `make clickhouse`): %v", err)
	}
	defer srv.Stop()
	store, err := analytics.Open(ctx, srv.DSN("bench"), analytics.Options{})
	if err != nil {
		fail("analytics: %v", err)
	}
	defer store.Close()

	var out []result
	if sinkRows > 0 {
		out = append(out, benchSink(ctx, sinkRun{log: log, store: store, dir: dir, n: sinkRows, partitions: partitions}))
	}
	if queryRows > 0 {
		out = append(out, benchQueries(ctx, store, queryRows)...)
	}
	return out
}

// sinkRun is one run of the sink bench: n outcomes produced to a broker
// in dir, on topics of that many partitions, sunk into store.
type sinkRun struct {
	log        *slog.Logger
	store      *analytics.Store
	dir        string
	n          int
	partitions int32
}

func benchSink(ctx context.Context, r sinkRun) result {
	log, store, dir, n, partitions := r.log, r.store, r.dir, r.n, r.partitions
	b, err := broker.Start(broker.Options{DataDir: dir + "/broker"})
	if err != nil {
		fail("broker: %v", err)
	}
	defer b.Close()
	tp := schema.NewTopics("bench.")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close()
	provision(ctx, cl, tp, partitions)
	fmt.Fprintf(os.Stderr, "analytics: producing %d outcomes...\n", n)
	now := time.Now()
	for i := range n {
		o := &chimev1.CallbackOutcome{
			EventId: "ev" + strconv.Itoa(i), Namespace: "ns" + strconv.Itoa(i%1000), JobId: "job" + strconv.Itoa(i),
			FireSeq: 1, Attempt: 1, Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200,
			Latency: durationpb.New(time.Duration(20+i%200) * time.Millisecond), StartedAt: timestamppb.New(now),
			FinishedAt: timestamppb.New(now), Url: "https://example.test/hook", Method: "POST",
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

	fmt.Fprintf(os.Stderr, "analytics: sinking %d outcomes into ClickHouse...\n", n)
	s, err := sink.New(sink.Config{Brokers: b.Addrs(), Topics: tp, Store: store, Logger: log})
	if err != nil {
		fail("%v", err)
	}
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		fail("%v", err)
	}
	for s.Stats().Rows < int64(n) {
		select {
		case <-s.Stopped():
			fail("sink ended: %v", s.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > 10*time.Minute {
			fail("sink: %d of %d rows after 10 minutes", s.Stats().Rows, n)
		}
	}
	elapsed := time.Since(start)
	s.Stop()
	rate := float64(n) / elapsed.Seconds()
	return result{fmt.Sprintf("sink rows/s, Kafka → ClickHouse (%d outcomes, %d batches)", n, s.Stats().Batches),
		fmt.Sprintf("%.0f", rate), "≥ 200k rows/s", verdict(rate >= 200_000)}
}

func benchQueries(ctx context.Context, store *analytics.Store, rows int) []result {
	const namespaces = 1000
	conn := store.Conn()
	fmt.Fprintf(os.Stderr, "analytics: generating %d attempt rows in ClickHouse...\n", rows)
	end := time.Now().UTC().Truncate(time.Minute)
	startAt := end.Add(-24 * time.Hour)
	span := end.Sub(startAt).Milliseconds()
	gen := time.Now()
	// Rows spread evenly over the last 24 hours and 1000 namespaces; one in
	// ten retryable, one in fifty permanent, one in a hundred deferred.
	if err := conn.Exec(ctx, fmt.Sprintf(`
		INSERT INTO callback_attempts (event_id, namespace, job_id, fire_seq, attempt, class, status_code,
			latency_ms, at, started_at, finished_at, kafka_partition, kafka_offset)
		SELECT
			concat('gen-', toString(number)),
			concat('ns', toString(number %% %d)),
			concat('job-', toString(intDiv(number, %d) %% 5000)),
			1, 1,
			multiIf(number %% 100 = 7, 'deferred', number %% 50 = 3, 'permanent', number %% 10 = 1, 'retryable', 'success'),
			multiIf(number %% 50 = 3, 400, number %% 10 = 1, 503, 200),
			20 + (number * 7919) %% 500,
			fromUnixTimestamp64Milli(toInt64(%d + intDiv(number * %d, %d)), 'UTC') AS t,
			t, t, -1, toInt64(number)
		FROM numbers(%d)
		SETTINGS max_insert_threads = 2`,
		namespaces, namespaces, startAt.UnixMilli(), span, rows, rows)); err != nil {
		fail("generate rows: %v", err)
	}
	fmt.Fprintf(os.Stderr, "analytics: generated in %s\n", time.Since(gen).Round(time.Millisecond))
	if err := conn.Exec(ctx, fmt.Sprintf(`
		INSERT INTO breaker_transitions (event_id, namespace, at, from_state, to_state, reason, kafka_partition, kafka_offset)
		SELECT concat('tr-', toString(number)), concat('ns', toString(number %% %d)),
			fromUnixTimestamp64Milli(toInt64(%d + intDiv(number * %d, 100000)), 'UTC'),
			if(number %% 2 = 0, 'closed', 'open'), if(number %% 2 = 0, 'open', 'closed'), 'generated', -1, toInt64(number)
		FROM numbers(100000)`, namespaces, startAt.UnixMilli(), span)); err != nil {
		fail("generate transitions: %v", err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	measure := func(n int, f func(ns string) error) (p50, p99 time.Duration) {
		d := make([]time.Duration, 0, n)
		for range n {
			ns := "ns" + strconv.Itoa(rng.IntN(namespaces))
			t := time.Now()
			if err := f(ns); err != nil {
				fail("query: %v", err)
			}
			d = append(d, time.Since(t))
		}
		slices.Sort(d)
		return d[len(d)/2], d[len(d)*99/100]
	}
	var total uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM callback_attempts").Scan(&total); err != nil {
		fail("count: %v", err)
	}
	fmt.Fprintf(os.Stderr, "analytics: %d attempt rows stored; querying...\n", total)
	sp50, sp99 := measure(200, func(ns string) error {
		_, err := store.Stats(ctx, ns, startAt, end, 5*time.Minute)
		return err
	})
	hp50, hp99 := measure(200, func(ns string) error {
		_, err := store.BreakerHistory(ctx, ns, startAt, end)
		return err
	})
	ap50, ap99 := measure(200, func(ns string) error {
		_, _, err := store.Attempts(ctx, ns, "job-"+strconv.Itoa(rng.IntN(5000)), analytics.AttemptQuery{Limit: 100})
		return err
	})
	rowsLabel := fmt.Sprintf("%.1fM", float64(total)/1e6)
	return []result{
		{fmt.Sprintf("stats query p99 (24 h by 5 min, %s attempt rows)", rowsLabel), fmt.Sprintf("%s (p50 %s)", ms(sp99), ms(sp50)), "≤ 200 ms", verdict(sp99 <= 200*time.Millisecond)},
		{"breaker history query p99 (24 h, 100k transitions)", fmt.Sprintf("%s (p50 %s)", ms(hp99), ms(hp50)), "", "-"},
		{fmt.Sprintf("job attempts query p99 (a page of 100, %s attempt rows)", rowsLabel), fmt.Sprintf("%s (p50 %s)", ms(ap99), ms(ap50)), "", "-"},
	}
}

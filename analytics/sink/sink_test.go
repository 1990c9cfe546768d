package sink_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/analytics/sink"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestMain(m *testing.M) { clickhousetest.Main(m) }

const partitions = 3

var base = time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)

type testBundle struct {
	ctx    context.Context
	kafka  *kafkatest.Cluster
	topics schema.Topics
	prod   *kgo.Client
	adm    *kadm.Client
	store  *analytics.Store
	sent   int // outcomes produced so far
}

func setup(t *testing.T, dsn string) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	k := kafkatest.New(t)
	k.Provision(t, k.Topics(), partitions)
	store, err := analytics.Open(ctx, dsn, analytics.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return &testBundle{
		ctx:    ctx,
		kafka:  k,
		topics: k.Topics(),
		prod:   k.Client(t, kgo.DefaultProduceTopic(k.Topics().Outcomes())),
		adm:    k.Admin(t),
		store:  store,
	}
}

func (tb *testBundle) config() sink.Config {
	return sink.Config{
		Brokers:       tb.kafka.Brokers(),
		Topics:        tb.topics,
		Store:         tb.store,
		BatchSize:     300,
		FlushInterval: 100 * time.Millisecond,
		MaxBackoff:    500 * time.Millisecond,
	}
}

// running is a sink started by start.
type running struct{ *sink.Sink }

// wait returns the sink's error once it stops by itself.
func (r running) wait() error {
	<-r.Stopped()
	return r.Err()
}

// stop stops the sink and returns its error.
func (r running) stop() error {
	r.Stop()
	return r.Err()
}

// start runs a sink until the test ends or it is stopped.
func (tb *testBundle) start(t *testing.T, cfg sink.Config) running {
	t.Helper()
	s, err := sink.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Start(tb.ctx))
	t.Cleanup(s.Stop)
	return running{s}
}

func produce(t *testing.T, tb *testBundle, recs ...*kgo.Record) {
	t.Helper()
	require.NoError(t, tb.prod.ProduceSync(tb.ctx, recs...).FirstErr())
}

func record(topic, key string, m proto.Message) *kgo.Record {
	v, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: v}
}

// sendOutcomes produces n successful outcomes spread over five namespaces
// and the first minutes after base.
func (tb *testBundle) sendOutcomes(t *testing.T, n int) {
	t.Helper()
	var recs []*kgo.Record
	for range n {
		i := tb.sent
		tb.sent++
		ns := fmt.Sprintf("ns%d", i%5)
		at := base.Add(time.Duration(i) * 50 * time.Millisecond)
		recs = append(recs, record(tb.topics.Outcomes(), ns, &chimev1.CallbackOutcome{
			EventId:    fmt.Sprintf("ev-%d", i),
			Namespace:  ns,
			JobId:      fmt.Sprintf("job-%d", i),
			FireSeq:    1,
			Attempt:    1,
			Class:      chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
			StatusCode: 200,
			Latency:    durationpb.New(15 * time.Millisecond),
			StartedAt:  timestamppb.New(at),
			FinishedAt: timestamppb.New(at),
		}))
	}
	produce(t, tb, recs...)
}

func (tb *testBundle) count(t *testing.T, q string) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, tb.store.Conn().QueryRow(tb.ctx, q).Scan(&n))
	return n
}

// requests sums Stats over every namespace: the materialized view's count.
func (tb *testBundle) requests(t *testing.T) uint64 {
	t.Helper()
	var total uint64
	for i := range 5 {
		points, err := tb.store.Stats(tb.ctx, fmt.Sprintf("ns%d", i), base, base.Add(time.Hour), time.Hour)
		require.NoError(t, err)
		for _, p := range points {
			total += p.Requests
		}
	}
	return total
}

func (tb *testBundle) committed(t *testing.T) int64 {
	t.Helper()
	return tb.committedTopic(t, "")
}

// committedTopic sums the sink's committed offsets of topic ("" for all).
func (tb *testBundle) committedTopic(t *testing.T, topic string) int64 {
	t.Helper()
	offs, err := tb.adm.FetchOffsets(tb.ctx, tb.topics.SinkGroup())
	// A real cluster answers COORDINATOR_NOT_AVAILABLE (retriable) while
	// it creates __consumer_offsets or moves the group's coordinator:
	// nothing is committed that the caller could see yet.
	for i := 0; i < 50 && err != nil && kerr.IsRetriable(err); i++ {
		time.Sleep(100 * time.Millisecond)
		offs, err = tb.adm.FetchOffsets(tb.ctx, tb.topics.SinkGroup())
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0
	}
	require.NoError(t, err)
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if topic == "" || o.Topic == topic {
			n += o.At
		}
	})
	return n
}

func TestSinkStoresEveryStreamAndCommits(t *testing.T) {
	t.Parallel()
	tb := setup(t, clickhousetest.New(t).DSN)
	tb.sendOutcomes(t, 1000)
	for i := range 10 {
		produce(t, tb, record(tb.topics.BreakerTransitions(), "ns1", &chimev1.BreakerTransition{
			EventId: fmt.Sprintf("tr-%d", i), Namespace: "ns1", From: chimev1.BreakerState_BREAKER_STATE_CLOSED,
			To: chimev1.BreakerState_BREAKER_STATE_OPEN, Reason: "r", At: timestamppb.New(base.Add(time.Duration(i) * time.Second)),
		}))
	}
	for i := range 20 {
		produce(t, tb, record(tb.topics.JobEvents(), "ns2", &chimev1.JobEvent{
			EventId: fmt.Sprintf("je-%d", i), Namespace: "ns2", JobId: "j", Type: chimev1.JobEventType_JOB_EVENT_TYPE_FIRED,
			At: timestamppb.New(base.Add(time.Duration(i) * time.Second)),
		}))
	}
	// A record that is not protobuf is passed over, not fatal.
	produce(t, tb, &kgo.Record{Topic: tb.topics.JobEvents(), Key: []byte("ns2"), Value: []byte{0xff, 0xff}})

	cfg := tb.config()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	s := tb.start(t, cfg)
	// Offsets are committed after the insert returned: by then the
	// materialized views are written too (a raw part can be visible first).
	kafkatest.WaitFor(t, time.Minute, "every record committed", func() bool { return tb.committed(t) == 1000+10+21 })
	require.Equal(t, uint64(1000), tb.count(t, "SELECT count() FROM callback_attempts"))
	require.Equal(t, uint64(10), tb.count(t, "SELECT count() FROM breaker_transitions"))
	require.Equal(t, uint64(20), tb.count(t, "SELECT count() FROM job_events"))
	require.Equal(t, uint64(1000), tb.requests(t))
	hist, err := tb.store.BreakerHistory(tb.ctx, "ns1", base, base.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, hist, 10)
	require.NoError(t, s.stop())
	c := s.Stats()
	require.Equal(t, int64(1030), c.Rows)
	require.Equal(t, int64(1), c.Bad)
	require.Greater(t, c.Batches, int64(3), "batches are cut by size")
	require.Equal(t, map[string]float64{
		"chime_sink_rows_total":        float64(c.Rows),
		"chime_sink_batches_total":     float64(c.Batches),
		"chime_sink_skipped_total":     float64(c.Skipped),
		"chime_sink_bad_records_total": float64(c.Bad),
		"chime_sink_retries_total":     float64(c.Retries),
	}, counters(t, reg), "the metrics say what Stats says")
}

// counters gathers reg's counters by family name.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	return out
}

// TestSinkCrashBetweenInsertAndCommitLeavesNoDuplicates: the first sink
// stores a batch and dies before committing it; the next one reads the
// batch again and skips it. Neither the rows nor the per-minute aggregates
// count anything twice.
func TestSinkCrashBetweenInsertAndCommitLeavesNoDuplicates(t *testing.T) {
	t.Parallel()
	tb := setup(t, clickhousetest.New(t).DSN)
	tb.sendOutcomes(t, 1000)

	errCrash := errors.New("crash")
	crashed := tb.start(t, sink.WithAfterInsert(tb.config(), func() error { return errCrash }))
	require.ErrorIs(t, crashed.wait(), errCrash)
	stored := tb.count(t, "SELECT count() FROM callback_attempts")
	require.Positive(t, stored)
	require.Zero(t, tb.committed(t), "nothing may be committed before the crash")
	require.Equal(t, stored, tb.count(t, "SELECT count() FROM callback_attempts"))

	s := tb.start(t, tb.config())
	kafkatest.WaitFor(t, time.Minute, "every record committed", func() bool { return tb.committed(t) == 1000 })
	require.NoError(t, s.stop())
	require.Equal(t, uint64(1000), tb.count(t, "SELECT count() FROM callback_attempts"), "raw rows, without FINAL")
	require.Equal(t, uint64(1000), tb.count(t, "SELECT uniqExact(event_id) FROM callback_attempts"))
	require.Equal(t, uint64(1000), tb.requests(t), "per-minute aggregates")
	require.Equal(t, int64(stored), s.Stats().Skipped, "the replayed batch was skipped")
	require.Equal(t, int64(1000-stored), s.Stats().Rows)
}

// TestSinkCatchesUpAfterClickHouseOutage stops ClickHouse while outcomes
// keep coming; the sink lags, retries, and stores everything exactly once
// when the server is back.
func TestSinkCatchesUpAfterClickHouseOutage(t *testing.T) {
	t.Parallel()
	srv := clickhousetest.NewServer(t)
	tb := setup(t, srv.DSN("chime"))
	s := tb.start(t, tb.config())

	tb.sendOutcomes(t, 100)
	kafkatest.WaitFor(t, time.Minute, "the first rows", func() bool { return tb.committed(t) == 100 })

	require.NoError(t, srv.Stop())
	tb.sendOutcomes(t, 400)
	kafkatest.WaitFor(t, time.Minute, "the sink retrying", func() bool { return s.Stats().Retries >= 3 })
	require.Equal(t, int64(100), tb.committed(t), "nothing committed while ClickHouse is down")

	srv, err := srv.Restart(tb.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	kafkatest.WaitFor(t, 2*time.Minute, "the sink caught up", func() bool { return tb.committed(t) == 500 })
	require.Equal(t, uint64(500), tb.count(t, "SELECT count() FROM callback_attempts"))
	require.Equal(t, uint64(500), tb.requests(t))
}

// TestSinkStoresDeadLetters: dead letters reach their table with the due a
// replay needs, once each even when the records are read again.
func TestSinkStoresDeadLetters(t *testing.T) {
	t.Parallel()
	tb := setup(t, clickhousetest.New(t).DSN)
	due := &chimev1.Due{
		Namespace: "shop", JobId: "order-7", FireSeq: 2, Attempt: 3,
		Callback: &chimev1.HttpCallback{Url: "https://example.test/hook", Body: []byte("hi")},
		Retry:    &chimev1.RetryPolicy{MaxAttempts: 3},
		Labels:   map[string]string{"k": "v"},
	}
	// The due carries the earlier failed attempts; the dead letter all of
	// them. The stored due keeps all of them.
	earlier := []*chimev1.CallbackOutcome{{Attempt: 1, StatusCode: 503}, {Attempt: 2, StatusCode: 502}}
	all := append(slices.Clone(earlier), &chimev1.CallbackOutcome{Attempt: 3, StatusCode: 500})
	for i := range 3 {
		d := proto.Clone(due).(*chimev1.Due)
		d.FireSeq = uint64(i + 1)
		d.History = earlier
		produce(t, tb, record(tb.topics.DeadLetters(), "shop", &chimev1.DeadLetter{
			EventId: fmt.Sprintf("dl-%d", i), Due: d, Reason: "HTTP 500", At: timestamppb.New(base.Add(time.Duration(i) * time.Second)),
			Attempts: all,
		}))
	}
	s := tb.start(t, tb.config())
	kafkatest.WaitFor(t, time.Minute, "every dead letter committed", func() bool { return tb.committedTopic(t, tb.topics.DeadLetters()) == 3 })
	require.NoError(t, s.stop())
	require.Equal(t, uint64(3), tb.count(t, "SELECT count() FROM dead_letters"))

	list, err := tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, "dl-2", list[0].ID)
	require.Equal(t, "POST", list[0].Method)
	require.Equal(t, int32(500), list[0].StatusCode)
	got, err := tb.store.GetDeadLetter(tb.ctx, "shop", "dl-1")
	require.NoError(t, err)
	want := proto.CloneOf(due)
	want.History = all
	require.True(t, proto.Equal(want, got.Due), "due: %v", got.Due)
}

// TestSinkCrashBetweenDaysOfABatchLosesNothing: every stream carries
// records of the last seconds before midnight and the first after it,
// interleaved in each partition. The first sink stores the earlier day of
// a batch and dies before the later day's rows are stored. The next one
// replays: it skips exactly what was stored (the later day's records,
// although at offsets below the highest stored, are not skipped), so every
// table ends with every record once and the aggregates count each once.
func TestSinkCrashBetweenDaysOfABatchLosesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, clickhousetest.New(t).DSN)
	mid := time.Now().UTC().Truncate(24 * time.Hour)
	early, later := analytics.DayOf(mid.Add(-time.Millisecond)), analytics.DayOf(mid)
	const n = 200 // per stream
	tables := []string{analytics.TableAttempts, analytics.TableTransitions, analytics.TableJobEvents, analytics.TableDeadLetters}
	var recs []*kgo.Record
	for i := range n {
		ns := fmt.Sprintf("ns%d", i%5)
		at := mid.Add(time.Duration(i) * time.Second) // the later day
		if i%2 == 1 {
			at = mid.Add(-time.Duration(i) * time.Second)
		}
		recs = append(recs,
			record(tb.topics.Outcomes(), ns, &chimev1.CallbackOutcome{
				EventId: fmt.Sprintf("ev-%d", i), Namespace: ns, JobId: fmt.Sprintf("job-%d", i), FireSeq: 1, Attempt: 1,
				Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200, Latency: durationpb.New(15 * time.Millisecond),
				StartedAt: timestamppb.New(at), FinishedAt: timestamppb.New(at),
			}),
			record(tb.topics.BreakerTransitions(), ns, &chimev1.BreakerTransition{
				EventId: fmt.Sprintf("tr-%d", i), Namespace: ns, From: chimev1.BreakerState_BREAKER_STATE_CLOSED,
				To: chimev1.BreakerState_BREAKER_STATE_OPEN, Reason: "r", At: timestamppb.New(at),
			}),
			record(tb.topics.JobEvents(), ns, &chimev1.JobEvent{
				EventId: fmt.Sprintf("je-%d", i), Namespace: ns, JobId: "j", Type: chimev1.JobEventType_JOB_EVENT_TYPE_FIRED, At: timestamppb.New(at),
			}),
			record(tb.topics.DeadLetters(), ns, &chimev1.DeadLetter{
				EventId: fmt.Sprintf("dl-%d", i), Reason: "HTTP 500", At: timestamppb.New(at),
				Due: &chimev1.Due{Namespace: ns, JobId: fmt.Sprintf("job-%d", i), FireSeq: 1, Attempt: 3},
			}))
	}
	produce(t, tb, recs...)

	errCrash := errors.New("crash")
	var crashDays []analytics.Day // written by the insert before Run ends
	crashed := tb.start(t, sink.WithAfterDay(tb.config(), func(days []analytics.Day, i int) error {
		if len(days) > 1 && i == 0 {
			crashDays = days
			return errCrash
		}
		return nil
	}))
	require.ErrorIs(t, crashed.wait(), errCrash)
	require.Equal(t, []analytics.Day{early, later}, crashDays)
	require.Less(t, tb.committed(t), int64(4*n), "the crashed batch is not committed")

	// Each table's highest offset per partition before the replay: the
	// later day has records below it that are not stored.
	var stored uint64
	below := map[string]string{}
	for _, table := range tables {
		stored += tb.count(t, "SELECT count() FROM "+table)
		rows, err := tb.store.Conn().Query(tb.ctx, "SELECT kafka_partition, max(kafka_offset) FROM "+table+" GROUP BY kafka_partition")
		require.NoError(t, err)
		var conds []string
		for rows.Next() {
			var (
				p   int32
				off int64
			)
			require.NoError(t, rows.Scan(&p, &off))
			conds = append(conds, fmt.Sprintf("(kafka_partition = %d AND kafka_offset < %d)", p, off))
		}
		require.NoError(t, rows.Err())
		rows.Close()
		if len(conds) > 0 {
			below[table] = strings.Join(conds, " OR ")
		}
	}
	require.Positive(t, stored)
	require.Less(t, stored, uint64(4*n))

	s := tb.start(t, tb.config())
	kafkatest.WaitFor(t, time.Minute, "every record committed", func() bool { return tb.committed(t) == 4*n })
	require.NoError(t, s.stop())
	for _, table := range tables {
		require.Equal(t, uint64(n), tb.count(t, "SELECT count() FROM "+table), "%s: raw rows, without FINAL", table)
		require.Equal(t, uint64(n), tb.count(t, "SELECT uniqExact(event_id) FROM "+table), table)
		require.Equal(t, uint64(n/2), tb.count(t, fmt.Sprintf("SELECT countIf(toDate(at) = '%s') FROM %s", later, table)), table)
	}
	var lost uint64
	for table, cond := range below {
		lost += tb.count(t, fmt.Sprintf("SELECT count() FROM %s WHERE toDate(at) = '%s' AND (%s)", table, later, cond))
	}
	require.Positive(t, lost, "a highest offset per partition alone would have skipped (lost) later-day records")
	require.Equal(t, uint64(n), tb.count(t, "SELECT sum(requests) FROM attempts_1m"), "per-minute aggregates")
	c := s.Stats()
	require.Equal(t, int64(stored), c.Skipped, "exactly what was stored is skipped")
	require.Equal(t, int64(4*n)-int64(stored), c.Rows)
	require.Zero(t, c.Bad)
}

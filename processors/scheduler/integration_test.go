package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// Integration tests: a real broker (kfake, started per test on a free port
// with its own data dir), real goka processors, the real producer.

const testPartitions = 4

type bundle struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	topics  schema.Topics
	prod    *producer.Producer
	dues    *kafkatest.Collector[*chimev1.Due]
}

func setup(t *testing.T) *bundle {
	t.Helper()
	c := kafkatest.New(t)
	topics := schema.NewTopics(kafkatest.UniquePrefix(t))
	c.Provision(t, topics, testPartitions)
	p, err := producer.New(producer.Brokers(c.Brokers()), producer.TopicPrefix(topics.Prefix))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	b := &bundle{t: t, cluster: c, topics: topics, prod: p}
	b.dues = kafkatest.CollectEach(t, c.Brokers(), topics.Due(), func(r *kgo.Record, keep func(string, *chimev1.Due)) {
		d := new(chimev1.Due)
		require.NoError(t, proto.Unmarshal(r.Value, d))
		for _, d := range schema.DuesOf(d) {
			keep(schema.JobKey(d.Namespace, d.JobId), d)
		}
	})
	return b
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CHIME_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(nopWriter{}, nil))
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// startScheduler runs one scheduler instance until the returned stop is
// called (or the test ends).
func (b *bundle) startScheduler(mutate ...func(*scheduler.Config)) (s *scheduler.Scheduler, stop func()) {
	b.t.Helper()
	cfg := scheduler.Config{
		Config: processors.Config{
			Client: processors.Client{Brokers: b.cluster.Brokers(), Logger: testLogger(b.t)},
			Topics: b.topics,
		},
		TickResend: 2 * time.Second,
		Namespaces: kafkatest.EveryNamespace{},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := scheduler.New(cfg)
	require.NoError(b.t, err)
	lifecycletest.Start(b.t, s)
	return s, func() {
		s.Stop()
		require.NoError(b.t, s.Err())
	}
}

// targetTopic creates the test's Kafka-target topic (on the scheduler's
// allowlist through withTargetTopic): ordinary jobs may not write to
// chime's own topics.
func (b *bundle) targetTopic() string {
	b.t.Helper()
	name := b.topics.Prefix + "app.events"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(b.t, topics.Ensure(ctx, b.cluster.Admin(b.t), []schema.Spec{{Name: name, Cleanup: schema.CleanupDelete}}, testPartitions, 3))
	return name
}

func (b *bundle) schedule(spec *chimev1.JobSpec) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.prod.Schedule(ctx, spec)
	require.NoError(b.t, err)
}

var waitFor = kafkatest.WaitFor

func spec(ns, id string, s *chimev1.Schedule) *chimev1.JobSpec {
	return &chimev1.JobSpec{
		Namespace: ns, Id: id, Schedule: s,
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}},
	}
}

func atSchedule(t time.Time) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(t)}}
}

func everySchedule(d time.Duration, start time.Time) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(d), StartAt: timestamppb.New(start)}}}
}

func cronSchedule(expr, tz string) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: expr, Timezone: tz}}}
}

// TestSchedulesFireOnTime: one-shot, interval and cron (in a time zone)
// jobs produce due events at their times, never early, in order.
func TestSchedulesFireOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startScheduler()

	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	b.schedule(spec("ns-a", "once", atSchedule(start.Add(500*time.Millisecond))))
	b.schedule(spec("ns-a", "every", everySchedule(time.Second, start)))
	b.schedule(spec("ns-b", "cron", cronSchedule("*/2 * * * * *", "Asia/Kolkata")))

	waitFor(t, 30*time.Second, "three interval fires and two cron fires", func() bool {
		return len(b.dues.Get("ns-a/every")) >= 3 && len(b.dues.Get("ns-b/cron")) >= 2 && len(b.dues.Get("ns-a/once")) >= 1
	})

	once := b.dues.Get("ns-a/once")
	require.Len(t, once, 1)
	require.Equal(t, start.Add(500*time.Millisecond), once[0].ScheduledAt.AsTime())
	// A due event may leave up to FireLead and LeadRound early; the call's
	// time, fire_at, is never before the job's.
	early := func(d *chimev1.Due) {
		t.Helper()
		require.False(t, d.FireAt.AsTime().Before(d.ScheduledAt.AsTime()), "never called early")
		require.False(t, d.EmittedAt.AsTime().Before(d.ScheduledAt.AsTime().Add(-scheduler.DefaultFireLead-scheduler.DefaultLeadRound)), "emitted at most FireLead and LeadRound early")
	}
	early(once[0])

	ev := b.dues.Get("ns-a/every")
	for i, d := range ev[:3] {
		require.EqualValues(t, i+1, d.FireSeq)
		require.Equal(t, start.Add(time.Duration(i)*time.Second), d.ScheduledAt.AsTime(), "on the grid, no drift")
		early(d)
		require.Equal(t, fmt.Sprintf("ns-a/every/%d", i+1), d.IdempotencyKey)
	}

	cr := b.dues.Get("ns-b/cron")
	for i, d := range cr[:2] {
		s := d.ScheduledAt.AsTime()
		require.Zero(t, s.Nanosecond())
		require.Zero(t, s.Second()%2, "every second second")
		early(d)
		if i > 0 {
			require.Equal(t, cr[i-1].ScheduledAt.AsTime().Add(2*time.Second), s)
		}
	}
}

// TestCancelPauseResume: cancel and pause stop fires; resume continues on
// the schedule.
func TestCancelPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startScheduler()
	ctx := context.Background()

	start := time.Now().Truncate(time.Second).Add(time.Second)
	b.schedule(spec("ns", "cancelled", everySchedule(time.Second, start)))
	b.schedule(spec("ns", "paused", everySchedule(time.Second, start)))
	b.schedule(spec("ns", "future", atSchedule(start.Add(4*time.Second))))
	waitFor(t, 20*time.Second, "first fires", func() bool {
		return len(b.dues.Get("ns/cancelled")) >= 1 && len(b.dues.Get("ns/paused")) >= 1
	})
	_, err := b.prod.Cancel(ctx, "ns", "cancelled", "test")
	require.NoError(t, err)
	_, err = b.prod.Pause(ctx, "ns", "paused")
	require.NoError(t, err)
	_, err = b.prod.Cancel(ctx, "ns", "future", "not needed")
	require.NoError(t, err)

	// Once the commands are applied, the counts stop growing. Wait for a
	// marker job scheduled after them to fire, then for three more seconds
	// of marker fires.
	b.schedule(spec("ns", "marker", everySchedule(time.Second, time.Now().Truncate(time.Second).Add(time.Second))))
	waitFor(t, 20*time.Second, "marker fires", func() bool { return len(b.dues.Get("ns/marker")) >= 1 })
	cancelled, paused := len(b.dues.Get("ns/cancelled")), len(b.dues.Get("ns/paused"))
	waitFor(t, 20*time.Second, "three more marker fires", func() bool { return len(b.dues.Get("ns/marker")) >= 4 })
	require.Len(t, b.dues.Get("ns/cancelled"), cancelled, "cancelled job fired")
	require.Len(t, b.dues.Get("ns/paused"), paused, "paused job fired")
	require.Empty(t, b.dues.Get("ns/future"), "cancelled one-shot fired")

	resumedAt := time.Now()
	_, err = b.prod.Resume(ctx, "ns", "paused")
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "fires after resume", func() bool { return len(b.dues.Get("ns/paused")) >= paused+2 })
	ds := b.dues.Get("ns/paused")
	after := ds[paused]
	require.False(t, after.ScheduledAt.AsTime().Before(resumedAt.Truncate(time.Second)), "missed occurrences are not made up")
	require.Zero(t, after.ScheduledAt.AsTime().Sub(start)%time.Second, "resume stays on the grid")
	require.Greater(t, after.FireSeq, ds[paused-1].FireSeq)
}

// TestKafkaTargetAndRejection: a Kafka-target job is written by the
// scheduler to its topic; a bad command becomes a rejection event.
func TestKafkaTargetAndRejection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := b.targetTopic()
	b.startScheduler(func(c *scheduler.Config) { c.KafkaTargetTopics = []string{target} })
	timers := kafkatest.Collect(t, b.cluster.Brokers(), target, func(r *kgo.Record) (string, []byte) { return string(r.Value), r.Value })
	rejections := kafkatest.Collect(t, b.cluster.Brokers(), b.topics.Rejections(), func(r *kgo.Record) (string, *chimev1.Rejection) {
		rej := new(chimev1.Rejection)
		require.NoError(t, proto.Unmarshal(r.Value, rej))
		return rej.JobId, rej
	})

	s := spec("ns", "timer", atSchedule(time.Now().Add(time.Second)))
	s.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: target, Key: []byte("ns"), Value: []byte("cool-off over")}}}
	b.schedule(s)

	bad := spec("ns", "bad", atSchedule(time.Now().Add(time.Second)))
	bad.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: "not-allowed", Value: []byte("x")}}}
	b.schedule(bad)

	// A command that did not go through the producer's validation (another
	// client writing to Kafka): a callback URL with a space would be sent
	// as is in the request line.
	badURL := spec("ns", "bad-url", atSchedule(time.Now().Add(time.Second)))
	badURL.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/a b"}}}
	b.publishRaw(&chimev1.JobCommand{
		CommandId: "raw-1", IssuedAt: timestamppb.Now(), Namespace: "ns", JobId: "bad-url",
		Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: badURL}},
	})

	waitFor(t, 20*time.Second, "kafka target delivery", func() bool { return len(timers.Get("cool-off over")) == 1 })
	waitFor(t, 20*time.Second, "rejection", func() bool { return len(rejections.Get("bad")) == 1 })
	r := rejections.Get("bad")[0]
	require.Contains(t, r.Reason, "allowlist")
	require.NotEmpty(t, r.Command)
	waitFor(t, 20*time.Second, "the bad URL's rejection", func() bool { return len(rejections.Get("bad-url")) == 1 })
	r = rejections.Get("bad-url")[0]
	require.Equal(t, "upsert.spec.target.http.url", r.Field)
	require.Contains(t, r.Reason, "has a space at byte 20; percent-encode it as %20")
}

// publishRaw writes cmd to the job-commands topic as any Kafka client
// could, without the producer's validation.
func (b *bundle) publishRaw(cmd *chimev1.JobCommand) {
	b.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.cluster.Brokers()...), kgo.RecordPartitioner(producer.GokaPartitioner()))
	require.NoError(b.t, err)
	defer cl.Close()
	raw, err := proto.Marshal(cmd)
	require.NoError(b.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: b.topics.JobCommands(), Key: []byte(schema.JobKey(cmd.Namespace, cmd.JobId)), Value: raw}
	require.NoError(b.t, cl.ProduceSync(ctx, rec).FirstErr())
}

// TestLiveJobsCounted: the scheduler counts each namespace's jobs that
// have not ended (the pending-jobs quota), as jobs are created and
// cancelled, and again after a restart.
func TestLiveJobsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1, stop1 := b.startScheduler()
	far := time.Now().Add(time.Hour)
	b.schedule(spec("a", "1", everySchedule(time.Hour, far)))
	b.schedule(spec("a", "2", atSchedule(far)))
	b.schedule(spec("a", "3", atSchedule(far)))
	b.schedule(spec("b", "1", atSchedule(far)))
	counts := func(s *scheduler.Scheduler, a, bb int64) func() bool {
		return func() bool { return s.LiveJobs("a") == a && s.LiveJobs("b") == bb }
	}
	waitFor(t, 20*time.Second, "3 jobs in a, 1 in b", counts(s1, 3, 1))
	_, err := b.prod.Cancel(context.Background(), "a", "2", "test")
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "a cancelled job no longer counts", counts(s1, 2, 1))
	b.schedule(spec("a", "1", everySchedule(time.Minute, far))) // an update: still one job
	_, err = b.prod.Cancel(context.Background(), "a", "2", "again")
	require.NoError(t, err)
	b.schedule(spec("b", "2", atSchedule(far)))
	waitFor(t, 20*time.Second, "an update and a repeated cancel change nothing", counts(s1, 2, 2))
	// Labelled jobs in namespace c, spread over the partitions; one
	// relabelled by an update, one cancelled.
	// applied holds the last offset of c's commands per partition: a
	// restarted scheduler lists them only once it has applied them again
	// (the group may not have committed them before the stop), which a
	// reader waits for as views/jobquery does.
	applied := map[int32]int64{}
	sent := func(r producer.Receipt, err error) {
		t.Helper()
		require.NoError(t, err)
		applied[r.Partition] = max(applied[r.Partition], r.Offset)
	}
	labelled := func(id string, labels map[string]string) {
		sp := spec("c", id, atSchedule(far))
		sp.Labels = labels
		sent(b.prod.Schedule(context.Background(), sp))
	}
	for i := range 12 {
		labelled(fmt.Sprint(i), map[string]string{"team": []string{"billing", "ops"}[i%2], "tier": fmt.Sprint(i % 3)})
	}
	labelled("0", map[string]string{"team": "ops", "tier": "0"})
	sent(b.prod.Cancel(context.Background(), "c", "4", "test"))
	// The relabel is on c/0's partition, the cancel on c/4's: the count
	// says nothing of the relabel, so it is waited for itself.
	waitFor(t, 20*time.Second, "c's jobs, 0 relabelled", func() bool {
		row, err := s1.Get("c/0")
		return s1.LiveJobs("c") == 11 && err == nil && row.GetSpec().GetLabels()["team"] == "ops"
	})

	stop1()
	s2, _ := b.startScheduler()
	waitFor(t, 20*time.Second, "the counts rebuilt at recovery", counts(s2, 2, 2))
	waitFor(t, 20*time.Second, "c's commands applied again", func() bool {
		for p, off := range applied {
			if r, ok := s2.Reached(p); !ok || r < off {
				return false
			}
		}
		return true
	})

	// The same index lists the jobs, newest first, filtered by status.
	ids := func(es []jobindex.Entry) (out []string) {
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	for name, list := range map[string]func(string, jobindex.Query) ([]jobindex.Entry, bool){"scheduler": s2.ListJobs} {
		all, more := list("a", jobindex.Query{Limit: 10})
		require.False(t, more, name)
		require.ElementsMatch(t, []string{"1", "2", "3"}, ids(all), name)
		for i := 1; i < len(all); i++ {
			require.GreaterOrEqual(t, all[i-1].Created, all[i].Created, "%s: newest first", name)
		}
		gone, _ := list("a", jobindex.Query{Limit: 10, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_CANCELLED}})
		require.Equal(t, []string{"2"}, ids(gone), name)

		// By label, across the partitions, after the restart rebuilt the
		// index; in pages of 2.
		byLabel := func(q jobindex.Query) (out []string) {
			q.Limit = 2
			for {
				page, more := list("c", q)
				out = append(out, ids(page)...)
				if !more {
					return out
				}
				q.After = jobindex.CursorAt(page[len(page)-1])
			}
		}
		billing := schema.Label{Key: "team", Value: "billing"}
		require.ElementsMatch(t, []string{"2", "4", "6", "8", "10"}, byLabel(jobindex.Query{Labels: []schema.Label{billing}}), "0 was relabelled")
		require.ElementsMatch(t, []string{"0", "1", "3", "5", "7", "9", "11"}, byLabel(jobindex.Query{Labels: []schema.Label{{Key: "team", Value: "ops"}}}))
		require.ElementsMatch(t, []string{"2", "8"}, byLabel(jobindex.Query{Labels: []schema.Label{billing, {Key: "tier", Value: "2"}}}))
		require.Equal(t, []string{"4"}, byLabel(jobindex.Query{Labels: []schema.Label{billing}, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_CANCELLED}}))
		require.Empty(t, byLabel(jobindex.Query{Labels: []schema.Label{billing, {Key: "team", Value: "ops"}}}))
	}
}

// TestUnansweredFireRedeliveredAtAckTimeout: a fire held unwritten while it
// waits for the dispatcher's answer keeps its redelivery timer, though it
// lies beyond the timer window: with no answer (no dispatcher) and the
// sweep off, its due event goes out again AckTimeout after the first.
func TestUnansweredFireRedeliveredAtAckTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const ackTimeout = 4 * time.Second
	b.startScheduler(func(c *scheduler.Config) {
		c.AckTimeout = ackTimeout
		c.TimerWindow = time.Second // the redelivery is beyond it
		c.SweepInterval = scheduler.Off
		c.FireLead = scheduler.Off
	})
	b.schedule(spec("ns", "unanswered", atSchedule(time.Now().Add(500*time.Millisecond))))
	waitFor(t, 60*time.Second, "the fire and its redelivery", func() bool { return len(b.dues.Get("ns/unanswered")) >= 2 })
	dues := b.dues.Get("ns/unanswered")
	first, again := dues[0], dues[1]
	require.Equal(t, first.FireSeq, again.FireSeq)
	require.Equal(t, first.EmitSeq, again.EmitSeq, "the same emission, sent again")
	gap := again.EmittedAt.AsTime().Sub(first.EmittedAt.AsTime())
	require.GreaterOrEqual(t, gap, ackTimeout)
	require.Less(t, gap, 2*ackTimeout, "redelivered at AckTimeout, not by a sweep minutes later")
}

// TestBatchesApplyEachCommand: a batch record (the API's batch creates,
// the dispatchers' answers) applies each of its commands to its own row,
// in order; one for another partition is rejected alone; a batch that is
// not one (a batch inside it) is rejected whole.
func TestBatchesApplyEachCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.startScheduler()
	rejections := kafkatest.Collect(t, b.cluster.Brokers(), b.topics.Rejections(), func(r *kgo.Record) (string, *chimev1.Rejection) {
		rj := new(chimev1.Rejection)
		require.NoError(t, proto.Unmarshal(r.Value, rj))
		return string(r.Key), rj
	})
	// Four jobs on one partition, one on another.
	var same []string
	other := ""
	for i := 0; len(same) < 4 || other == ""; i++ {
		id := fmt.Sprintf("b%d", i)
		switch p := schema.PartitionOf(schema.JobKey("ns", id), testPartitions); {
		case p == 0 && len(same) < 4:
			same = append(same, id)
		case p != 0 && other == "":
			other = id
		}
	}
	later := atSchedule(time.Now().Add(time.Hour))
	cl := b.cluster.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Written as a foreign producer could: the producer checks a batch
	// before it publishes one.
	write := func(cmds ...*chimev1.JobCommand) {
		t.Helper()
		batch := command.Batch(cmds)
		command.Stamp(batch, time.Now())
		for _, c := range cmds {
			command.Stamp(c, time.Now())
		}
		raw, err := proto.Marshal(batch)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: b.topics.JobCommands(), Key: []byte(schema.JobKey(batch.GetNamespace(), batch.GetJobId())), Value: raw}).FirstErr())
	}
	write(
		command.Upsert(spec("ns", same[0], later)),
		command.Upsert(spec("ns", same[1], later)),
		command.Upsert(spec("ns", other, later)), // not this record's partition
		command.Upsert(spec("ns", same[2], later)),
		command.Cancel("ns", same[1], "cancelled in the same batch"),
	)
	nested := command.Batch([]*chimev1.JobCommand{command.Upsert(spec("ns", same[3], later))})
	command.Stamp(nested.GetBatch().GetCommands()[0], time.Now())
	write(command.Upsert(spec("ns", same[3], later)), nested)

	waitFor(t, 60*time.Second, "the two rejections", func() bool {
		return len(rejections.Get(schema.JobKey("ns", other))) == 1 && len(rejections.Get(schema.JobKey("ns", same[3]))) == 1
	})
	require.Contains(t, rejections.Get(schema.JobKey("ns", other))[0].GetReason(), "belongs to partition")
	require.Contains(t, rejections.Get(schema.JobKey("ns", same[3]))[0].GetReason(), "batches do not nest")
	for _, id := range same[:3] {
		waitFor(t, 30*time.Second, "the row of "+id, func() bool {
			row, err := s.Get(schema.JobKey("ns", id))
			return err == nil && row != nil
		})
	}
	row, err := s.Get(schema.JobKey("ns", same[1]))
	require.NoError(t, err)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_CANCELLED, row.GetStatus(), "applied in order")
	row, err = s.Get(schema.JobKey("ns", same[3]))
	require.NoError(t, err)
	require.Nil(t, row, "the batch that is not one is not applied")
}

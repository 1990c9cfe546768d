package producer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// partitions is the job-commands topic's partition count in these tests.
const partitions = 8

// testBundle is what an integration test works with: a cluster with chime's
// topics under the test's own prefix, and a producer writing to it.
type testBundle struct {
	kafka *kafkatest.Cluster
	topic string
	p     *producer.Producer
}

// setup provisions chime's topics on the test's cluster (an embedded kfake
// broker on a free 127.0.0.1 port, or CHIME_TEST_BROKERS) and returns a
// producer for them; opts come after Brokers and TopicPrefix.
func setup(t testing.TB, opts ...producer.Option) *testBundle {
	t.Helper()
	kafka := kafkatest.New(t)
	kafka.Provision(t, kafka.Topics(), partitions)

	p, err := producer.New(append([]producer.Option{
		producer.Brokers(kafka.Brokers()),
		producer.TopicPrefix(kafka.Prefix()),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &testBundle{kafka: kafka, topic: kafka.Topics().JobCommands(), p: p}
}

// ctx is a test's deadline for anything waiting on the broker.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readAll consumes the topic from the start until it has n records, and
// fails past the test's deadline.
func (b *testBundle) readAll(t testing.TB, n int) []*kgo.Record {
	t.Helper()
	cl := b.kafka.Client(t,
		kgo.ConsumeTopics(b.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)

	ctx := testContext(t)
	var recs []*kgo.Record
	for len(recs) < n {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(recs), n)
		fetches.EachError(func(topic string, p int32, err error) {
			require.NoError(t, err, "fetch %s[%d]", topic, p)
		})
		recs = append(recs, fetches.Records()...)
	}
	require.Len(t, recs, n)
	return recs
}

// readAt reads the one record at partition/offset.
func (b *testBundle) readAt(t testing.TB, partition int32, offset int64) *kgo.Record {
	t.Helper()
	cl := b.kafka.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		b.topic: {partition: kgo.NewOffset().At(offset)},
	}))

	ctx := testContext(t)
	for {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "no record at %s[%d]@%d", b.topic, partition, offset)
		for _, r := range fetches.Records() {
			if r.Offset == offset {
				return r
			}
		}
	}
}

// published counts the records on the topic.
func (b *testBundle) published(t testing.TB) int64 {
	t.Helper()
	ends, err := b.kafka.Admin(t).ListEndOffsets(testContext(t), b.topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// spec is a job the scheduler would accept: a one-shot HTTPS callback an
// hour from now.
func spec(ns, id string) *chimev1.JobSpec {
	return &chimev1.JobSpec{
		Namespace: ns,
		Id:        id,
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{
			At: timestamppb.New(time.Now().Add(time.Hour)),
		}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
			Url:     "https://billing.example.com/hooks/invoice",
			Timeout: durationpb.New(5 * time.Second),
		}}},
	}
}

func decode(t testing.TB, r *kgo.Record) *chimev1.JobCommand {
	t.Helper()
	cmd := new(chimev1.JobCommand)
	require.NoError(t, proto.Unmarshal(r.Value, cmd))
	return cmd
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Every command kind lands keyed by its job, with its kind in a header and
// the receipt pointing at it.
func TestPublishCommands(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	b := setup(t, producer.Clock(func() time.Time { return now }))
	notBefore := now.Add(time.Minute)

	type publish func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error)
	tests := []struct {
		name    string
		publish publish
		kind    string
		check   func(t *testing.T, cmd *chimev1.JobCommand)
	}{
		{
			name: "schedule",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Schedule(ctx, spec(ns, id))
			},
			kind: "upsert",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				require.Equal(t, "https://billing.example.com/hooks/invoice", cmd.GetUpsert().GetSpec().GetTarget().GetHttp().GetUrl())
			},
		},
		{
			name: "cancel",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Cancel(ctx, ns, id, "invoice paid")
			},
			kind: "cancel",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				require.Equal(t, "invoice paid", cmd.GetCancel().GetReason())
			},
		},
		{
			name: "pause",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Pause(ctx, ns, id)
			},
			kind:  "pause",
			check: func(t *testing.T, cmd *chimev1.JobCommand) { require.NotNil(t, cmd.GetPause()) },
		},
		{
			name: "resume",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Resume(ctx, ns, id)
			},
			kind:  "resume",
			check: func(t *testing.T, cmd *chimev1.JobCommand) { require.NotNil(t, cmd.GetResume()) },
		},
		{
			// Trigger's header was missing until the builders moved to
			// package command: the header named every kind but this one.
			name: "trigger",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Trigger(ctx, ns, id)
			},
			kind: "trigger",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				require.NotNil(t, cmd.GetTrigger())
			},
		},
		{
			name: "backfill",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Backfill(ctx, ns, id, notBefore.Add(-3*time.Hour), notBefore.Add(-time.Hour))
			},
			kind: "backfill",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				want := &chimev1.Backfill{From: timestamppb.New(notBefore.Add(-3 * time.Hour)), To: timestamppb.New(notBefore.Add(-time.Hour))}
				require.True(t, proto.Equal(want, cmd.GetBackfill()), "got %v", cmd.GetBackfill())
			},
		},
		{
			name: "retry",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Retry(ctx, command.Emission{Namespace: ns, JobID: id, FireSeq: 3, EmitSeq: 4}, 2, notBefore, "HTTP 503")
			},
			kind: "retry",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				want := &chimev1.Retry{FireSeq: 3, EmitSeq: 4, Attempt: 2, NotBefore: timestamppb.New(notBefore), Reason: "HTTP 503"}
				require.True(t, proto.Equal(want, cmd.GetRetry()), "got %v", cmd.GetRetry())
			},
		},
		{
			name: "defer",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Defer(ctx, command.Emission{Namespace: ns, JobID: id, FireSeq: 3, EmitSeq: 4}, notBefore, "breaker open")
			},
			kind: "defer",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				want := &chimev1.Defer{FireSeq: 3, EmitSeq: 4, NotBefore: timestamppb.New(notBefore), Reason: "breaker open"}
				require.True(t, proto.Equal(want, cmd.GetDefer()), "got %v", cmd.GetDefer())
			},
		},
		{
			name: "ack",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Ack(ctx, command.Emission{Namespace: ns, JobID: id, FireSeq: 3, EmitSeq: 4}, 2, chimev1.AckResult_ACK_RESULT_SUCCEEDED, "HTTP 200")
			},
			kind: "ack",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				want := &chimev1.Ack{FireSeq: 3, EmitSeq: 4, Attempt: 2, Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED, Detail: "HTTP 200"}
				require.True(t, proto.Equal(want, cmd.GetAck()), "got %v", cmd.GetAck())
			},
		},
		{
			name: "publish keeps a caller's command id",
			publish: func(ctx context.Context, p *producer.Producer, ns, id string) (producer.Receipt, error) {
				return p.Publish(ctx, &chimev1.JobCommand{
					CommandId: "republished-1",
					Namespace: ns,
					JobId:     id,
					Command:   &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}},
				})
			},
			kind: "pause",
			check: func(t *testing.T, cmd *chimev1.JobCommand) {
				require.Equal(t, "republished-1", cmd.GetCommandId())
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns, id := "acme", fmt.Sprintf("job-%d", i)

			r, err := tt.publish(testContext(t), b.p, ns, id)
			require.NoError(t, err)
			require.NotEmpty(t, r.CommandID)
			require.GreaterOrEqual(t, r.Offset, int64(0))

			rec := b.readAt(t, r.Partition, r.Offset)
			require.Equal(t, schema.JobKey(ns, id), string(rec.Key))
			require.Equal(t, tt.kind, header(rec, producer.HeaderCommand))
			cmd := decode(t, rec)
			require.Equal(t, r.CommandID, cmd.GetCommandId())
			require.Equal(t, ns, cmd.GetNamespace())
			require.Equal(t, id, cmd.GetJobId())
			require.True(t, now.Equal(cmd.GetIssuedAt().AsTime()), "issued_at %v", cmd.GetIssuedAt().AsTime())
			tt.check(t, cmd)
		})
	}
}

// A record must land on the partition goka computes for its key, or the
// scheduler's state for the job is split. KgoOptions cannot change that.
func TestPartitioningMatchesGoka(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		opts []producer.Option
	}{
		{name: "defaults"},
		{
			name: "KgoOptions cannot replace the partitioner or lower acks",
			opts: []producer.Option{producer.KgoOptions(
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
				kgo.RequiredAcks(kgo.LeaderAck()),
			)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts...)

			const jobs = 2000
			specs := make([]*chimev1.JobSpec, jobs)
			for i := range specs {
				specs[i] = spec(fmt.Sprintf("tenant-%d", i%37), fmt.Sprintf("job-%d", i))
			}
			receipts, err := b.p.ScheduleMany(testContext(t), specs)
			require.NoError(t, err)
			require.Len(t, receipts, jobs)

			hasher := sarama.NewCustomHashPartitioner(goka.DefaultHasher())(b.topic)
			gokaPartition := func(key []byte) int32 {
				p, err := hasher.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, partitions)
				require.NoError(t, err)
				return p
			}

			byCommand := make(map[string]producer.Receipt, jobs)
			for i, r := range receipts {
				key := schema.JobKey(specs[i].GetNamespace(), specs[i].GetId())
				require.Equal(t, gokaPartition([]byte(key)), r.Partition, "receipt of %s", key)
				byCommand[r.CommandID] = r
			}
			require.Len(t, byCommand, jobs, "command IDs must be unique")

			used := make(map[int32]bool)
			for _, rec := range b.readAll(t, jobs) {
				require.Equal(t, gokaPartition(rec.Key), rec.Partition, "record %s", rec.Key)
				r, ok := byCommand[decode(t, rec).GetCommandId()]
				require.True(t, ok, "record %s has no receipt", rec.Key)
				require.Equal(t, r.Partition, rec.Partition)
				require.Equal(t, r.Offset, rec.Offset)
				used[rec.Partition] = true
			}
			require.Len(t, used, partitions, "the keys must spread over every partition")
		})
	}
}

// An invalid command fails with schema.ValidateCommand's *ValidationError,
// unchanged, on every path, and nothing is published.
func TestValidationErrorPublishesNothing(t *testing.T) {
	t.Parallel()

	now := time.Now()
	b := setup(t, producer.Clock(func() time.Time { return now }))

	pause := &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}
	noSchedule := spec("acme", "a")
	noSchedule.Schedule = nil

	tests := []struct {
		name      string
		cmd       func() *chimev1.JobCommand
		wantField string
	}{
		{name: "nil command", cmd: func() *chimev1.JobCommand { return nil }},
		{
			name:      "no namespace",
			cmd:       func() *chimev1.JobCommand { return &chimev1.JobCommand{JobId: "a", Command: pause} },
			wantField: "namespace",
		},
		{
			name: "job id with a slash",
			cmd: func() *chimev1.JobCommand {
				return &chimev1.JobCommand{Namespace: "acme", JobId: "a/b", Command: pause}
			},
			wantField: "job_id",
		},
		{
			name:      "no command",
			cmd:       func() *chimev1.JobCommand { return &chimev1.JobCommand{Namespace: "acme", JobId: "a"} },
			wantField: "command",
		},
		{
			name: "retry without not_before",
			cmd: func() *chimev1.JobCommand {
				return &chimev1.JobCommand{Namespace: "acme", JobId: "a",
					Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, EmitSeq: 1, Attempt: 2}}}
			},
			wantField: "retry.not_before",
		},
		{
			name: "upsert without schedule",
			cmd: func() *chimev1.JobCommand {
				return &chimev1.JobCommand{Namespace: "acme", JobId: "a",
					Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: noSchedule}}}
			},
			wantField: "upsert.spec.schedule",
		},
	}

	t.Run("publish", func(t *testing.T) {
		for _, tt := range tests {
			for _, async := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/async=%v", tt.name, async), func(t *testing.T) {
					t.Parallel()
					cmd := tt.cmd()
					var (
						r   producer.Receipt
						err error
					)
					if async {
						type answer struct {
							r   producer.Receipt
							err error
						}
						answers := make(chan answer, 1)
						b.p.PublishAsync(testContext(t), cmd, func(r producer.Receipt, err error) { answers <- answer{r, err} })
						select {
						case a := <-answers: // validation answers before PublishAsync returns
							r, err = a.r, a.err
						default:
							t.Fatal("PublishAsync returned before reporting the validation error")
						}
					} else {
						r, err = b.p.Publish(testContext(t), cmd)
					}

					var verr *schema.ValidationError
					require.ErrorAs(t, err, &verr)
					require.Equal(t, tt.wantField, verr.Field, "error: %v", err)
					// Publish validated cmd as stamped; the validator says the same.
					require.Equal(t, schema.ValidateCommand(cmd, schema.ValidateOptions{Now: now}), err, "the validator's error, unchanged")
					require.Equal(t, int64(-1), r.Offset)
				})
			}
		}

		t.Run("ScheduleMany publishes nothing if one spec is invalid", func(t *testing.T) {
			t.Parallel()
			specs := []*chimev1.JobSpec{spec("acme", "good"), noSchedule, spec("acme", "good-2")}
			receipts, err := b.p.ScheduleMany(testContext(t), specs)
			var verr *schema.ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, "upsert.spec.schedule", verr.Field)
			require.ErrorContains(t, err, "specs[1] (acme/a)")
			require.Nil(t, receipts)
		})
	})

	// The group above has finished: everything it tried is accounted for.
	require.NoError(t, b.p.Flush(testContext(t)))
	require.Zero(t, b.published(t))
}

// Every async callback fires exactly once, and by the time Flush returns.
func TestAsyncCallbacksAndFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)

	const n = 1000
	var (
		fired    atomic.Int64
		mu       sync.Mutex
		receipts = make(map[string]producer.Receipt, n)
		errs     []error
	)
	ctx := testContext(t)
	for i := range n {
		b.p.ScheduleAsync(ctx, spec("acme", fmt.Sprintf("job-%d", i)), func(r producer.Receipt, err error) {
			fired.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			receipts[r.CommandID] = r
		})
	}
	require.NoError(t, b.p.Flush(ctx))

	// Flush returns after the callbacks of everything it waited for ran.
	require.Equal(t, int64(n), fired.Load())
	mu.Lock()
	require.Empty(t, errs)
	require.Len(t, receipts, n)
	mu.Unlock()
	require.Equal(t, int64(n), b.published(t))
}

// Commands that cannot be delivered (their topic does not exist, and the
// client is told to wait for it) show how the producer treats contexts and
// Close.
func TestUndeliverable(t *testing.T) {
	t.Parallel()

	stuck := []producer.Option{
		producer.TopicPrefix("nowhere."),
		producer.KgoOptions(kgo.UnknownTopicRetries(-1)),
	}
	tests := []struct {
		name string
		run  func(t *testing.T, p *producer.Producer)
	}{
		{
			name: "Publish returns when its context ends",
			run: func(t *testing.T, p *producer.Producer) {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				defer cancel()
				r, err := p.Schedule(ctx, spec("acme", "a"))
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NotEmpty(t, r.CommandID)
				require.Equal(t, int32(-1), r.Partition)
				require.Equal(t, int64(-1), r.Offset)
			},
		},
		{
			name: "Flush returns when its context ends; Close fails what is buffered",
			run: func(t *testing.T, p *producer.Producer) {
				errc := make(chan error, 1)
				p.ScheduleAsync(t.Context(), spec("acme", "a"), func(_ producer.Receipt, err error) { errc <- err })

				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)

				p.Close()
				select {
				case err := <-errc:
					require.ErrorIs(t, err, kgo.ErrClientClosed)
				case <-testContext(t).Done():
					t.Fatal("Close did not fail the buffered command")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, setup(t, stuck...).p)
		})
	}
}

// A canceled context fails every command before it is sent.
func TestScheduleManyCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	specs := []*chimev1.JobSpec{spec("acme", "a"), spec("acme", "b"), spec("acme", "c")}
	receipts, err := b.p.ScheduleMany(ctx, specs)
	require.ErrorIs(t, err, context.Canceled)
	var berr *producer.BatchError
	require.ErrorAs(t, err, &berr)
	require.Len(t, berr.Errs, len(specs))
	require.Len(t, receipts, len(specs))
	for i, r := range receipts {
		require.Error(t, berr.Errs[i])
		require.NotEmpty(t, r.CommandID)
		require.Equal(t, int32(-1), r.Partition)
		require.Equal(t, int64(-1), r.Offset)
	}
	require.NoError(t, b.p.Flush(testContext(t)))
	require.Zero(t, b.published(t))
}

func TestPublishErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		opts    []producer.Option
		prepare func(p *producer.Producer)
		wantIs  error
		wantMsg string
	}{
		{
			name:    "closed producer",
			prepare: func(p *producer.Producer) { p.Close() },
			wantIs:  kgo.ErrClientClosed,
		},
		{
			name: "topic missing",
			opts: []producer.Option{
				producer.TopicPrefix("nowhere."), // overrides setup's: no such topic
				producer.KgoOptions(kgo.UnknownTopicRetries(0)),
			},
			wantMsg: `create topic "nowhere.job-commands"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts...)
			if tt.prepare != nil {
				tt.prepare(b.p)
			}
			r, err := b.p.Schedule(testContext(t), spec("acme", "a"))
			require.Error(t, err)
			if tt.wantIs != nil {
				require.True(t, errors.Is(err, tt.wantIs), "got %v", err)
			}
			require.ErrorContains(t, err, tt.wantMsg)
			require.NotEmpty(t, r.CommandID)
			require.Equal(t, int64(-1), r.Offset)
		})
	}
}

// createNamespace writes ns into topics' namespace table, as chime's
// namespace processor does when the API creates it.
func createNamespace(t testing.TB, kafka *kafkatest.Cluster, topics schema.Topics, ns string) {
	t.Helper()
	value, err := proto.Marshal(&chimev1.NamespaceConfig{Namespace: ns})
	require.NoError(t, err)
	cl := kafka.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	require.NoError(t, cl.ProduceSync(testContext(t), &kgo.Record{Topic: topics.NamespaceTable(), Key: []byte(ns), Value: value}).FirstErr())
}

// TestCheckNamespaces: with CheckNamespaces, a job of a namespace chime
// does not know is refused before anything is published; one of a known
// namespace is published, as are the other commands.
func TestCheckNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t, producer.CheckNamespaces())
	ctx := testContext(t)

	_, err := b.p.Schedule(ctx, spec("ghost", "a"))
	require.ErrorIs(t, err, producer.ErrUnknownNamespace)
	require.ErrorContains(t, err, `namespace "ghost"`)
	require.ErrorContains(t, err, "PUT /v1/namespaces/ghost")
	errc := make(chan error, 1)
	b.p.ScheduleAsync(ctx, spec("ghost", "b"), func(_ producer.Receipt, err error) { errc <- err })
	require.ErrorIs(t, <-errc, producer.ErrUnknownNamespace)

	for _, ns := range []string{"acme", "other"} {
		createNamespace(t, b.kafka, b.kafka.Topics(), ns)
	}
	_, err = b.p.ScheduleMany(ctx, []*chimev1.JobSpec{spec("acme", "a"), spec("ghost", "c")})
	require.ErrorIs(t, err, producer.ErrUnknownNamespace)
	require.ErrorContains(t, err, "specs[1] (ghost/c)")
	require.Zero(t, b.published(t), "nothing was published")

	_, err = b.p.Schedule(ctx, spec("acme", "a"))
	require.NoError(t, err)
	_, err = b.p.ScheduleMany(ctx, []*chimev1.JobSpec{spec("acme", "b"), spec("other", "a")})
	require.NoError(t, err)
	_, err = b.p.Cancel(ctx, "ghost", "a", "not a create: the scheduler answers it")
	require.NoError(t, err)
	require.EqualValues(t, 4, b.published(t))
}

// TestPublishWhereNothingListens: a publish to an address where nothing
// listens fails with an *UnreachableError, not the caller's deadline; the
// command was not published, and once a broker listens there the same
// producer publishes.
func TestPublishWhereNothingListens(t *testing.T) {
	t.Parallel()
	port := freeport.For(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for _, opts := range [][]producer.Option{nil, {producer.CheckNamespaces()}} {
		p, err := producer.New(append([]producer.Option{producer.Brokers([]string{addr})}, opts...)...)
		require.NoError(t, err)
		defer p.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		_, err = p.Schedule(ctx, spec("acme", "a"))
		var u *producer.UnreachableError
		require.ErrorAs(t, err, &u, "%v", err)
		require.Equal(t, []string{addr}, u.Addrs)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		require.ErrorContains(t, err, "nothing listens at "+addr)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "answered before the caller's deadline")
	}

	p, err := producer.New(producer.Brokers([]string{addr}))
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Schedule(testContext(t), spec("acme", "a"))
	require.ErrorAs(t, err, new(*producer.UnreachableError))
	b, err := broker.Start(broker.Options{DataDir: t.TempDir(), Port: port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	adm := kadm.NewClient(p.Client())
	_, err = adm.CreateTopic(testContext(t), partitions, 1, nil, schema.NewTopics("").JobCommands())
	require.NoError(t, err)
	r, err := p.Schedule(testContext(t), spec("acme", "a"))
	require.NoError(t, err, "published once a broker listens there")
	require.GreaterOrEqual(t, r.Offset, int64(0))
}

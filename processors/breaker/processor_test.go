package breaker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/internal/clocktest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

type testBundle struct {
	tt          *tester.Tester
	clock       *clocktest.Clock
	topics      schema.Topics
	transitions *tester.QueueTracker
	jobs        *tester.QueueTracker
	rejections  *tester.QueueTracker
}

// setup runs the real processor callbacks under goka's tester with an
// injected clock and the namespace "acme" configured with small
// thresholds. Every change is written to the table, so a test reads each
// outcome's effect there; setupCheckpoint keeps the default checkpoints.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupCheckpoint(t, EveryChange)
}

func setupCheckpoint(t *testing.T, checkpoint time.Duration) *testBundle {
	t.Helper()
	tt := tester.New(t)
	b := &testBundle{tt: tt, clock: clocktest.New(t0), topics: schema.NewTopics("")}
	p, err := New(Config{
		Config: processors.Config{Client: processors.Client{Logger: slog.New(slog.DiscardHandler)}, Now: b.clock.Now},
		Namespaces: schema.StaticNamespaces{"acme": &chimev1.NamespaceConfig{
			Namespace: "acme",
			Version:   1,
			Breaker: &chimev1.BreakerConfig{
				MinRequests:    4,
				CoolOff:        durationpb.New(2 * time.Second),
				MaxCoolOff:     durationpb.New(time.Minute),
				HalfOpenProbes: 2,
			},
		}},
		CheckpointInterval: checkpoint,
		extraOptions:       []goka.ProcessorOption{goka.WithTester(tt)},
	})
	require.NoError(t, err)
	proc, err := goka.NewProcessor(nil, p.Graph(), p.options()...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	b.transitions = tt.NewQueueTracker(b.topics.BreakerTransitions())
	b.jobs = tt.NewQueueTracker(b.topics.JobCommands())
	b.rejections = tt.NewQueueTracker(b.topics.Rejections())
	return b
}

func (b *testBundle) outcome(t *testing.T, ns string, o oc) {
	t.Helper()
	m := o.at(b.clock.Now())
	m.Namespace = ns
	raw, err := proto.Marshal(m)
	require.NoError(t, err)
	b.tt.Consume(b.topics.Outcomes(), ns, raw)
}

func (b *testBundle) status(ns string) *chimev1.BreakerStatus {
	v := b.tt.TableValue(goka.GroupTable(goka.Group(b.topics.BreakerGroup())), ns)
	st, _ := v.(*chimev1.BreakerStatus)
	return st
}

func (b *testBundle) nextTransition(t *testing.T) *chimev1.BreakerTransition {
	t.Helper()
	_, v, ok := b.transitions.Next()
	require.True(t, ok, "a transition was emitted")
	return v.(*chimev1.BreakerTransition)
}

// timerJob reads the cool-off job the processor scheduled.
func (b *testBundle) timerJob(t *testing.T) (key string, cmd *chimev1.JobCommand, timerValue []byte) {
	t.Helper()
	key, v, ok := b.jobs.Next()
	require.True(t, ok, "a cool-off job was scheduled")
	cmd = new(chimev1.JobCommand)
	require.NoError(t, proto.Unmarshal(v.([]byte), cmd))
	k := cmd.GetUpsert().GetSpec().GetTarget().GetKafka()
	require.Equal(t, b.topics.BreakerTimers(), k.GetTopic())
	return key, cmd, k.GetValue()
}

// The window counts reach the table at most once per checkpoint interval;
// what the dispatchers gate on is written at once, with the counts kept in
// memory in between.
func TestCheckpointWritesCountsOncePerInterval(t *testing.T) {
	t.Parallel()
	b := setupCheckpoint(t, time.Second)

	b.outcome(t, "acme", success)
	require.EqualValues(t, 1, b.status("acme").Window.Requests, "the first change is written")
	b.outcome(t, "acme", success)
	b.outcome(t, "acme", success)
	require.EqualValues(t, 1, b.status("acme").Window.Requests, "counts alone wait for the checkpoint")

	b.clock.Advance(time.Second)
	b.outcome(t, "acme", success)
	require.EqualValues(t, 4, b.status("acme").Window.Requests, "the next input after the interval writes every count kept")
	require.Equal(t, closed, b.status("acme").State)

	// A trip is written at once, with the counts that caused it: 4
	// failures of 8 requests reach the 50% threshold.
	for range 3 {
		b.outcome(t, "acme", failure)
	}
	require.EqualValues(t, 4, b.status("acme").Window.Requests)
	b.outcome(t, "acme", failure)
	require.Equal(t, open, b.nextTransition(t).To)
	st := b.status("acme")
	require.Equal(t, open, st.State)
	require.EqualValues(t, 8, st.Window.Requests)
	require.EqualValues(t, 4, st.Window.Failures)
}

func TestProcessorWithGokaTester(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Three failures: below the namespace's minimum of four.
	for range 3 {
		b.outcome(t, "acme", failure)
	}
	require.Equal(t, closed, b.status("acme").State)
	require.EqualValues(t, 3, b.status("acme").Window.Requests)
	_, _, ok := b.transitions.Next()
	require.False(t, ok, "nothing emitted below the minimum")

	b.outcome(t, "acme", failure)
	tr := b.nextTransition(t)
	require.Equal(t, open, tr.To)
	require.Contains(t, tr.Reason, "failure rate 100% >= 50% over 4 requests in 30s; open for 2s (trip 1)")
	st := b.status("acme")
	require.Equal(t, open, st.State)
	require.Equal(t, t0.Add(2*time.Second), st.NextCheckAt.AsTime())

	key, cmd, timer := b.timerJob(t)
	require.Equal(t, schema.JobKey("acme", CoolOffJobID), key, "keyed like every job command, so goka's hasher finds the scheduler row")
	require.Equal(t, t0.Add(2*time.Second), cmd.GetUpsert().GetSpec().GetSchedule().GetAt().AsTime())
	require.NoError(t, schema.ValidateCommand(cmd, schema.ValidateOptions{Now: t0, AllowReserved: true}))

	// Garbage is skipped, not a crash, and changes nothing.
	b.tt.Consume(b.topics.Outcomes(), "acme", []byte("not a protobuf \xff"))
	b.tt.Consume(b.topics.BreakerTimers(), "acme", []byte("\xff\xff"))
	require.Equal(t, open, b.status("acme").State)

	// The scheduler delivers the timer at the end of the cool-off.
	b.clock.Set(t0.Add(2 * time.Second))
	b.tt.Consume(b.topics.BreakerTimers(), "acme", timer)
	tr = b.nextTransition(t)
	require.Equal(t, open, tr.From)
	require.Equal(t, halfOpen, tr.To)
	require.EqualValues(t, 2, b.status("acme").ProbesGranted)

	// Delivered twice (at-least-once): the second one is stale.
	b.tt.Consume(b.topics.BreakerTimers(), "acme", timer)
	_, _, ok = b.transitions.Next()
	require.False(t, ok, "a stale timer makes no transition")
	require.Equal(t, halfOpen, b.status("acme").State)

	b.outcome(t, "acme", success.asProbe())
	b.outcome(t, "acme", success.asProbe())
	tr = b.nextTransition(t)
	require.Equal(t, closed, tr.To)
	require.Equal(t, "2 of 2 probes succeeded", tr.Reason)
	require.Zero(t, b.status("acme").ConsecutiveTrips)
}

func TestProcessorCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	send := func(key string, cmd *chimev1.BreakerCommand) {
		raw, err := proto.Marshal(cmd)
		require.NoError(t, err)
		b.tt.Consume(b.topics.BreakerCommands(), key, raw)
	}

	send("acme", withID("c1", command.ForceOpen("acme", "")))
	require.Equal(t, forcedOpen, b.nextTransition(t).To)
	require.Equal(t, forcedOpen, b.status("acme").State)

	send("acme", withID("c2", command.Auto("acme", "")))
	require.Equal(t, closed, b.nextTransition(t).To)

	// An unknown namespace uses the defaults (20 requests minimum).
	for range 19 {
		b.outcome(t, "other", failure)
	}
	require.Equal(t, closed, b.status("other").State)
	b.outcome(t, "other", failure)
	require.Equal(t, open, b.status("other").State)
	require.Contains(t, b.nextTransition(t).Reason, "over 20 requests in 30s; open for 10s")

	other := withID("c3", command.ResetBreaker("other", ""))
	send("other", other)
	require.Equal(t, closed, b.nextTransition(t).To)

	// Wrong key and garbage become rejections.
	send("acme", other)
	b.tt.Consume(b.topics.BreakerCommands(), "acme", []byte("\xff\x01"))
	for _, want := range []string{`record key "acme" does not match`, "does not decode"} {
		_, v, ok := b.rejections.Next()
		require.True(t, ok)
		require.Contains(t, v.(*chimev1.Rejection).Reason, want)
	}
	_, _, ok := b.transitions.Next()
	require.False(t, ok)
}

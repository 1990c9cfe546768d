package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestBacklogMeterAgesTheOldestUncompletedDue(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	type step struct {
		at          int
		ends        []int64
		committed   []int64
		worst, flow time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"caught up", []step{
			{0, []int64{10, 5}, []int64{10, 5}, 0, 0},
			{2, []int64{20, 5}, []int64{20, 5}, 0, 0},
		}},
		{"behind: the age of the last sample passed", []step{
			{0, []int64{10, 5}, []int64{10, 5}, 0, 0},
			{2, []int64{20, 9}, []int64{12, 5}, sec(2), sec(2)},
			{4, []int64{30, 9}, []int64{15, 9}, sec(4), 0},
			{6, []int64{40, 9}, []int64{20, 9}, sec(4), 0},
			{8, []int64{50, 9}, []int64{50, 9}, 0, 0},
		}},
		{"every busy partition behind: the least is the flow", []step{
			{0, []int64{10, 10, 0}, []int64{10, 10, -1}, 0, 0},
			{2, []int64{20, 20, 0}, []int64{15, 20, -1}, sec(2), 0},
			{4, []int64{30, 30, 0}, []int64{20, 20, -1}, sec(2), sec(2)},
			{6, []int64{40, 40, 0}, []int64{20, 20, -1}, sec(4), sec(4)},
		}},
		{"one partition behind, the others keep up: no flow backlog", []step{
			{0, []int64{10, 10}, []int64{10, 10}, 0, 0},
			{2, []int64{20, 20}, []int64{20, 10}, sec(2), 0},
			{4, []int64{30, 30}, []int64{30, 10}, sec(4), 0},
		}},
		{"past no sample: as old as the oldest", []step{
			{0, []int64{10}, []int64{3}, 0, 0},
			{2, []int64{20}, []int64{4}, sec(2), sec(2)},
		}},
		{"a partition never committed says nothing", []step{
			{0, []int64{10, 7}, []int64{10, -1}, 0, 0},
			{2, []int64{20, 9}, []int64{20}, 0, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var m backlogMeter
			for i, s := range tc.steps {
				got := m.observe(at(s.at), s.ends, s.committed)
				require.Equal(t, backlog{worst: s.worst, flow: s.flow}, got, "step %d", i)
			}
		})
	}
}

func TestBacklogMeterForgetsBeyondItsSpan(t *testing.T) {
	t.Parallel()
	var m backlogMeter
	for i := range 5000 {
		m.observe(t0.Add(time.Duration(i)*backlogEvery), []int64{int64(i + 1)}, []int64{0})
	}
	require.LessOrEqual(t, len(m.samples), int(backlogSpan/backlogEvery)+1)
	last := t0.Add(4999 * backlogEvery)
	require.Equal(t, backlogSpan, m.observe(last.Add(backlogEvery), []int64{5001}, []int64{0}).worst, "a backlog older than the span counts as the span")
}

// A due event queued behind the dispatchers' backlog is late, not lost:
// it is not sent again until the backlog has drained past it and the ack
// timeout has passed since.
func TestRedeliveryWaitsForTheDispatchersBacklog(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.AckTimeout = time.Minute })
	r.d.backlog.Store(int64(5 * time.Minute))
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	r.tick(t0)
	require.Len(t, r.dues, 1)
	require.Equal(t, t0.Add(6*time.Minute), r.st.TimerAt.AsTime(), "the ack timeout after the backlog")
	r.tick(t0.Add(time.Minute))
	require.Len(t, r.dues, 1, "not sent again at the ack timeout while the dispatchers are behind")
	// The backlog grew meanwhile: at its timer the row looks again and
	// waits longer, sending nothing.
	r.d.backlog.Store(int64(8 * time.Minute))
	r.tick(t0.Add(6 * time.Minute))
	require.Len(t, r.dues, 1)
	require.Equal(t, t0.Add(9*time.Minute), r.st.TimerAt.AsTime())
	// Drained: the next look sends it again, as without a backlog.
	r.d.backlog.Store(0)
	r.tick(t0.Add(9 * time.Minute))
	require.Len(t, r.dues, 2)
	require.Equal(t, r.dues[0].EmitSeq, r.dues[1].EmitSeq)
	require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_REDELIVERED, r.events[len(r.events)-1].Type)
}

func TestPumpIsHeldWhileTheDispatchersAreBehind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		flowConfig time.Duration
		flow       time.Duration
		want       bool
	}{
		{"keeping up", DefaultFlowBacklog, time.Second, false},
		{"at the limit", DefaultFlowBacklog, DefaultFlowBacklog, false},
		{"behind", DefaultFlowBacklog, time.Minute, true},
		{"off", Off, time.Minute, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &Scheduler{cfg: Config{FlowBacklog: tc.flowConfig}, decider: &decider{}}
			s.decider.flow.Store(int64(tc.flow))
			require.Equal(t, tc.want, s.heldBack())
		})
	}
}

// TestPumpTakesNothingWhileTheDispatchersAreBehind: while the dispatchers'
// group is more than FlowBacklog behind on the due topic, a job already
// overdue waits pending (timers taken as if the clock were behind by the
// excess fired it, and an overloaded pump's queue grew without bound);
// once the group has completed what it was given, the job fires.
func TestPumpTakesNothingWhileTheDispatchersAreBehind(t *testing.T) {
	t.Parallel()
	r := newKafkaRig(t, 1)
	s, err := New(Config{
		Config:      r.config(),
		Namespaces:  kafkatest.EveryNamespace{},
		FlowBacklog: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	lifecycletest.Start(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := r.c.Admin(t)
	due := r.topics.Due()
	// The dispatchers' group commits where it stands on the due topic.
	commit := func(at int64) {
		t.Helper()
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: due, Partition: 0, At: at, LeaderEpoch: -1})
		res, err := adm.CommitOffsets(ctx, r.topics.DispatcherGroup(), o)
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
	commit(0)

	r.scheduleHTTP(t, "first", time.Now())
	kafkatest.WaitFor(t, 30*time.Second, "the first job's due event", func() bool { return len(r.dues.Get("first")) == 1 })
	kafkatest.WaitFor(t, 30*time.Second, "the pump to be held back", s.heldBack)
	r.scheduleHTTP(t, "overdue", time.Now().Add(-time.Minute))
	require.Never(t, func() bool { return len(r.dues.Get("overdue")) > 0 }, 1500*time.Millisecond, 50*time.Millisecond,
		"an overdue job fired while the dispatchers were behind")
	require.True(t, s.heldBack())

	ends, err := adm.ListEndOffsets(ctx, due)
	require.NoError(t, err)
	end, ok := ends.Lookup(due, 0)
	require.True(t, ok)
	commit(end.Offset)
	kafkatest.WaitFor(t, 30*time.Second, "the overdue job to fire once the dispatchers caught up", func() bool { return len(r.dues.Get("overdue")) == 1 })
}

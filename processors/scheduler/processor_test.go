package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/internal/clocktest"
	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestProcessorWithGokaTester runs the real goka callbacks and the timer
// storage under goka's tester with an injected clock.
func TestProcessorWithGokaTester(t *testing.T) {
	t.Parallel()
	tt := tester.New(t)
	clock := clocktest.New(t0)
	s, err := New(Config{
		Config: processors.Config{Now: clock.Now},
		// ns2 sets a relevancy window its job does not (see the end).
		Namespaces:   schema.StaticNamespaces{"ns1": {Namespace: "ns1"}, "ns2": {Namespace: "ns2", RelevancyWindow: durationpb.New(30 * time.Second)}},
		PumpIdle:     10 * time.Millisecond,
		extraOptions: []goka.ProcessorOption{goka.WithTester(tt)},
		testProducer: tt.ProducerBuilder(),
		autoConfirm:  true,
	})
	require.NoError(t, err)
	// The table's store replaces the tester's storage: rows are read
	// with s.Get.
	s.timers.rebalanced(goka.Assignment{0: 0})
	ctx, cancel := context.WithCancel(context.Background())
	out := &tickOut{stop: cancel}
	proc, err := goka.NewProcessor(nil, s.Graph(), s.processorOptions(out)...)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	go s.pump(ctx, out)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	topics := s.cfg.Topics
	dues := tt.NewQueueTracker(topics.Due())
	rejections := tt.NewQueueTracker(topics.Rejections())
	key := "ns1/job1"

	cmd := upsert(httpSpec(at(t0.Add(time.Minute))), t0)
	cmd.CommandId, cmd.Namespace, cmd.JobId = "c1", "ns1", "job1"
	raw, err := proto.Marshal(cmd)
	require.NoError(t, err)
	tt.Consume(topics.JobCommands(), key, raw)

	row := tableRow(t, s, key)
	require.Equal(t, t0.Add(time.Minute), row.TimerAt.AsTime())
	require.Eventually(t, func() bool { return s.PendingTimers() == 1 }, 10*time.Second, 5*time.Millisecond, "the store indexed the row's timer")

	// The pump ticks the row once the clock reaches its tick time (the
	// timer less FireLead), not before.
	nextDue := func() *chimev1.Due {
		_, v, ok := dues.Next()
		if !ok {
			return nil
		}
		return v.(*chimev1.Due)
	}
	require.Never(t, func() bool { return nextDue() != nil }, 100*time.Millisecond, 10*time.Millisecond)
	clock.Set(t0.Add(time.Minute))
	// The pump wakes within PumpIdle; the deadline is for a machine
	// loaded by the whole suite under -race.
	var due *chimev1.Due
	require.Eventually(t, func() bool { due = nextDue(); return due != nil }, 30*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, due.FireSeq)
	require.Equal(t, "ns1/job1/1", due.IdempotencyKey)
	row = tableRow(t, s, key)
	require.Equal(t, t0.Add(time.Minute+2*time.Minute), row.TimerAt.AsTime(), "a fired one-shot waits for its ack, then is redelivered")
	require.Len(t, row.Open, 1)
	// The index follows the row: no tick until the redelivery time.
	clock.Set(t0.Add(2 * time.Minute))
	require.Never(t, func() bool { return nextDue() != nil }, 100*time.Millisecond, 10*time.Millisecond)
	// A stale tick changes nothing; the ack settles the fire.
	require.NoError(t, tickNow(s, out, key))
	require.Nil(t, nextDue())
	ack := &chimev1.JobCommand{CommandId: "a1", Namespace: "ns1", JobId: "job1", Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{
		FireSeq: 1, EmitSeq: 1, Attempt: 1, Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED}}}
	raw, err = proto.Marshal(ack)
	require.NoError(t, err)
	tt.Consume(topics.JobCommands(), key, raw)
	row = tableRow(t, s, key)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, row.Status)
	require.EqualValues(t, 1, row.FireSeq)
	require.EqualValues(t, 1, row.Fires)
	require.Empty(t, row.Open)

	// Garbage on the command topic becomes a rejection, not a crash.
	tt.Consume(topics.JobCommands(), key, []byte("not a protobuf \xff"))
	_, v, ok := rejections.Next()
	require.True(t, ok)
	require.Contains(t, v.(*chimev1.Rejection).Reason, "does not decode")

	// A job without its own relevancy window takes its namespace's: after
	// downtime longer than the window, the missed fire expires in the
	// scheduler instead of going out late.
	events := tt.NewQueueTracker(topics.JobEvents())
	lateSpec := httpSpec(at(t0.Add(2 * time.Minute)))
	lateSpec.Namespace, lateSpec.Id = "ns2", "late"
	late := upsert(lateSpec, t0)
	late.CommandId, late.Namespace, late.JobId = "c2", "ns2", "late"
	raw, err = proto.Marshal(late)
	require.NoError(t, err)
	clock.Set(t0.Add(3 * time.Minute)) // the scheduler was down at 2m
	tt.Consume(topics.JobCommands(), "ns2/late", raw)
	var expired *chimev1.JobEvent
	require.Eventually(t, func() bool {
		for {
			_, v, ok := events.Next()
			if !ok {
				return expired != nil
			}
			if e := v.(*chimev1.JobEvent); e.Type == chimev1.JobEventType_JOB_EVENT_TYPE_EXPIRED {
				expired = e
			}
		}
	}, 30*time.Second, 10*time.Millisecond)
	require.Nil(t, nextDue(), "no due event past the namespace's window")
	require.Contains(t, expired.Detail, "relevancy window 30s")
	_ = schema.JobKey
}

// tableRow reads a row as the table's storage has it (not a row held
// unwritten), as goka's tester would.
func tableRow(t *testing.T, s *Scheduler, key string) *chimev1.JobState {
	t.Helper()
	s.timers.mu.Lock()
	st := s.timers.storages[0]
	s.timers.mu.Unlock()
	require.NotNil(t, st)
	raw, err := st.Get(key)
	require.NoError(t, err)
	v, err := schema.JobStateCodec{}.Decode(raw)
	require.NoError(t, err)
	return v.(*chimev1.JobState)
}

// tickNow ticks key's row now, as the pump would, whatever its timer.
func tickNow(s *Scheduler, out *tickOut, key string) error {
	s.tickMu.Lock()
	defer s.tickMu.Unlock()
	st := s.timers.storage(s.partitionOf(key))
	if st == nil {
		return fmt.Errorf("no storage for %q", key)
	}
	st.mu.Lock()
	st.ticking = append(st.ticking[:0], timerindex.Item{Key: key})
	st.mu.Unlock()
	ok := s.tickAll(st, out)
	st.ticked(!ok, s.cfg.Now())
	if !ok {
		return fmt.Errorf("tick of %q not made", key)
	}
	return out.failed()
}

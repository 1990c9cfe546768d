package sink_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// TestBreakerTripAndRecoveryInHistory runs the real breaker and scheduler
// processors and the sink: five failures trip the breaker, the cool-off
// ends through the scheduler, two probes close it. The history shows the
// three transitions in order with their reasons, and the stats count the
// outcomes exactly.
func TestBreakerTripAndRecoveryInHistory(t *testing.T) {
	t.Parallel()
	tb := setup(t, clickhousetest.New(t).DSN)
	cl := tb.kafka.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()), kgo.ProducerLinger(0))
	quiet := slog.New(slog.DiscardHandler)

	cfg, err := proto.Marshal(&chimev1.NamespaceConfig{Namespace: "acme", Version: 1, Breaker: &chimev1.BreakerConfig{
		MinRequests:    5,
		CoolOff:        durationpb.New(time.Second),
		HalfOpenProbes: 2,
	}})
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(tb.ctx, &kgo.Record{Topic: tb.topics.NamespaceTable(), Key: []byte("acme"), Value: cfg}).FirstErr())

	nsView, err := views.NewNamespaces(processors.Client{Brokers: tb.kafka.Brokers(), ClientID: "namespaces", Logger: quiet}, tb.topics)
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Config{Config: processors.Config{Client: processors.Client{Brokers: tb.kafka.Brokers(), Logger: quiet}, Topics: tb.topics}, TickResend: 2 * time.Second, Namespaces: nsView})
	require.NoError(t, err)
	brk, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: tb.kafka.Brokers(), Logger: quiet}, Topics: tb.topics}, Namespaces: nsView})
	require.NoError(t, err)
	lifecycletest.Start(t, nsView, sched, brk)
	tb.start(t, tb.config())

	start := time.Now().Add(-time.Minute)
	n := 0
	outcome := func(probe bool, class chimev1.OutcomeClass, status int32) {
		n++
		now := time.Now()
		raw, err := proto.Marshal(&chimev1.CallbackOutcome{
			EventId: fmt.Sprintf("o-%d", n), Namespace: "acme", JobId: fmt.Sprintf("job-%d", n), FireSeq: 1, Attempt: 1,
			Class: class, StatusCode: status, Probe: probe,
			Latency: durationpb.New(30 * time.Millisecond), StartedAt: timestamppb.New(now), FinishedAt: timestamppb.New(now),
		})
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(tb.ctx, &kgo.Record{Topic: tb.topics.Outcomes(), Key: []byte("acme"), Value: raw}).FirstErr())
	}
	for range 5 {
		outcome(false, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, 500)
	}
	kafkatest.WaitFor(t, time.Minute, "half-open after the cool-off", func() bool {
		st, err := brk.Get("acme")
		return err == nil && st != nil && st.State == chimev1.BreakerState_BREAKER_STATE_HALF_OPEN
	})
	outcome(true, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 200)
	outcome(true, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 200)

	kafkatest.WaitFor(t, time.Minute, "three transitions stored", func() bool {
		h, err := tb.store.BreakerHistory(tb.ctx, "acme", start, time.Now().Add(time.Minute))
		return err == nil && len(h) == 3
	})
	h, err := tb.store.BreakerHistory(tb.ctx, "acme", start, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"closed", "open", "half_open"}, []string{h[0].From, h[1].From, h[2].From})
	require.Equal(t, []string{"open", "half_open", "closed"}, []string{h[0].To, h[1].To, h[2].To})
	require.Contains(t, h[0].Reason, "failure rate 100% >= 50% over 5 requests")
	require.EqualValues(t, 5, h[0].Window.Requests)
	require.EqualValues(t, 5, h[0].Window.Failures)
	require.Equal(t, "2 of 2 probes succeeded", h[2].Reason)
	require.False(t, h[1].At.Before(h[0].At.Add(time.Second)), "half-open not before the cool-off ended")

	kafkatest.WaitFor(t, time.Minute, "every outcome committed", func() bool { return tb.committedTopic(t, tb.topics.Outcomes()) == 7 })
	points, err := tb.store.Stats(tb.ctx, "acme", start, time.Now().Add(time.Minute), time.Hour)
	require.NoError(t, err)
	var sum struct{ requests, successes, retryable uint64 }
	for _, p := range points {
		sum.requests += p.Requests
		sum.successes += p.Successes
		sum.retryable += p.Retryable
	}
	require.Equal(t, uint64(7), sum.requests)
	require.Equal(t, uint64(2), sum.successes)
	require.Equal(t, uint64(5), sum.retryable)
}

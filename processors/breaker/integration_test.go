package breaker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// Integration test: a real broker (kfake), the real scheduler and breaker
// processors, two breaker views standing for two dispatchers.

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// run starts fn(ctx) in the background until the test ends.
func run(t *testing.T, name string, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("%s did not stop within 60s", name)
		}
	})
}

var waitFor = kafkatest.WaitFor

// transitions consumes the transitions topic from the start.
type transitions struct {
	mu   sync.Mutex
	seen []*chimev1.BreakerTransition
}

func (tr *transitions) to(state chimev1.BreakerState) *chimev1.BreakerTransition {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, x := range tr.seen {
		if x.To == state {
			return x
		}
	}
	return nil
}

func collectTransitions(t *testing.T, c *kafkatest.Cluster, topic string) *transitions {
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	tr := &transitions{}
	run(t, "transitions consumer", func(ctx context.Context) error {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				x := new(chimev1.BreakerTransition)
				if proto.Unmarshal(r.Value, x) == nil {
					tr.mu.Lock()
					tr.seen = append(tr.seen, x)
					tr.mu.Unlock()
				}
			})
		}
		return nil
	})
	return tr
}

func TestBreakerOpensAndTheSchedulerEndsTheCoolOff(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	topics := c.Topics()
	c.Provision(t, topics, 4)
	ctx := context.Background()
	cl := c.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()), kgo.ProducerLinger(0))

	// The namespace's thresholds, written where the namespace-config
	// processor keeps them. The cool-off is the window in which both
	// views must be seen open: the scheduler ends it and the views turn
	// half-open (which lets probes through), so on a loaded machine a
	// 1 s cool-off could pass before the slower view caught up.
	const coolOff = 3 * time.Second
	cfg, err := proto.Marshal(&chimev1.NamespaceConfig{Namespace: "acme", Version: 1, Breaker: &chimev1.BreakerConfig{
		MinRequests:    5,
		CoolOff:        durationpb.New(coolOff),
		HalfOpenProbes: 2,
	}})
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topics.NamespaceTable(), Key: []byte("acme"), Value: cfg}).FirstErr())

	nsView, err := views.NewNamespaces(processors.Client{Brokers: c.Brokers(), ClientID: "namespaces", Logger: quiet()}, topics)
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Config{Config: processors.Config{Client: processors.Client{Brokers: c.Brokers(), Logger: quiet()}, Topics: topics}, TickResend: 2 * time.Second, Namespaces: nsView})
	require.NoError(t, err)
	brk, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: c.Brokers(), Logger: quiet()}, Topics: topics}, Namespaces: nsView})
	require.NoError(t, err)
	parts := []lifecycle.Part{nsView, sched, brk}
	var dispatcherViews []*views.Breakers
	for _, id := range []string{"dispatcher-1", "dispatcher-2"} {
		v, err := views.NewBreakers(processors.Client{Brokers: c.Brokers(), ClientID: id, Logger: quiet()}, topics)
		require.NoError(t, err)
		parts = append(parts, v)
		dispatcherViews = append(dispatcherViews, v)
	}
	lifecycletest.Start(t, parts...)
	for _, v := range dispatcherViews {
		require.Equal(t, chimev1.BreakerState_BREAKER_STATE_CLOSED, v.Get("acme").State, "unknown is closed")
	}
	trs := collectTransitions(t, c, topics.BreakerTransitions())

	outcome := func(probe bool, class chimev1.OutcomeClass, status int32) {
		now := time.Now()
		raw, err := proto.Marshal(&chimev1.CallbackOutcome{
			Namespace: "acme", Class: class, StatusCode: status, Probe: probe,
			Latency: durationpb.New(30 * time.Millisecond), FinishedAt: timestamppb.New(now),
		})
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topics.Outcomes(), Key: []byte("acme"), Value: raw}).FirstErr())
	}
	for range 5 {
		outcome(false, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, 500)
	}
	crossed := time.Now()

	// Every dispatcher's view gates: the reaction time of the issue's
	// benchmark, outcome that crosses the threshold → every view denying.
	// Each view counts once it has been seen denying, so one view
	// catching up late is not mistaken for one that never gated.
	gated := make([]bool, len(dispatcherViews))
	waitFor(t, 30*time.Second, "both views see the breaker open", func() bool {
		all := true
		for i, v := range dispatcherViews {
			if allow, _, _ := circuit.Gate(v.Get("acme"), time.Now(), 0); !allow {
				gated[i] = true
			}
			all = all && gated[i]
		}
		return all
	})
	t.Logf("reaction: outcome crossing the threshold → both views gating: %s", time.Since(crossed))
	waitFor(t, 10*time.Second, "the open transition on the topic", func() bool { return trs.to(chimev1.BreakerState_BREAKER_STATE_OPEN) != nil })
	open := trs.to(chimev1.BreakerState_BREAKER_STATE_OPEN)
	require.Contains(t, open.Reason, "failure rate 100% >= 50% over 5 requests in 30s; open for 3s (trip 1)")
	require.EqualValues(t, 5, open.Window.Requests)

	// The cool-off job fires through the scheduler into breaker-timers.
	waitFor(t, 30*time.Second, "half-open after the cool-off", func() bool {
		return trs.to(chimev1.BreakerState_BREAKER_STATE_HALF_OPEN) != nil
	})
	half := trs.to(chimev1.BreakerState_BREAKER_STATE_HALF_OPEN)
	require.False(t, half.At.AsTime().Before(open.At.AsTime().Add(coolOff)), "not before the cool-off ended")
	job, err := sched.Get(schema.JobKey("acme", breaker.CoolOffJobID))
	if err == nil && job != nil { // only if this instance holds the row (it holds all partitions)
		require.Equal(t, chimev1.AckResult_ACK_RESULT_SUCCEEDED, job.LastResult)
	}
	waitFor(t, 10*time.Second, "views see half-open", func() bool {
		for _, v := range dispatcherViews {
			if v.Get("acme").State != chimev1.BreakerState_BREAKER_STATE_HALF_OPEN {
				return false
			}
		}
		return true
	})

	// Both granted probes succeed: closed.
	outcome(true, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 200)
	outcome(true, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 200)
	waitFor(t, 10*time.Second, "closed after the probes", func() bool { return trs.to(chimev1.BreakerState_BREAKER_STATE_CLOSED) != nil })
	require.Equal(t, "2 of 2 probes succeeded", trs.to(chimev1.BreakerState_BREAKER_STATE_CLOSED).Reason)
}

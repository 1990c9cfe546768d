package dispatcher

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestSpreadNamespaceAcrossDispatchers: one namespace spread over the
// four due partitions is carried by two dispatchers at once, while its
// concurrency limit and rate limit hold in sum over both (the real
// scheduler keys the dues; nothing but the namespace config spreads them).
func TestSpreadNamespaceAcrossDispatchers(t *testing.T) {
	t.Parallel()
	const (
		jobs    = 400
		maxConc = 6
		perSec  = 150.0
		burst   = 4
	)
	b := setup(t, 4)
	cfg := &chimev1.NamespaceConfig{Namespace: "hot", Spread: 4, MaxConcurrency: maxConc,
		RateLimit: &chimev1.RateLimit{PerSecond: perSec, Burst: burst}}

	var (
		inFlight, peak atomic.Int32
		mu             sync.Mutex
		at             []time.Time
	)
	rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		time.Sleep(30 * time.Millisecond) // long enough that the concurrency cap binds
		inFlight.Add(-1)
		w.WriteHeader(200)
	})

	spreadCfg := func(c *Config) {
		c.Namespaces = StaticNamespaces{"hot": cfg}
		c.AdmissionWait = 10 * time.Second // wait for the limits rather than defer
	}
	d1 := b.start(spreadCfg)
	d2 := b.start(spreadCfg)
	waitFor(t, 60*time.Second, "both dispatchers in the group with two partitions each", func() bool {
		return groupSpread(b) == "2,2"
	})

	s, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client: processors.Client{Brokers: b.cluster.Brokers(), Logger: testLogger()},
			Topics: b.topics,
		},
		TickResend: 2 * time.Second,
		PumpIdle:   100 * time.Millisecond,
		Namespaces: schema.StaticNamespaces{"hot": cfg},
	})
	require.NoError(t, err)
	lifecycletest.Start(t, s)

	fireAt := time.Now().Add(2 * time.Second)
	specs := make([]*chimev1.JobSpec, jobs)
	for i := range specs {
		specs[i] = &chimev1.JobSpec{
			Namespace: "hot", Id: fmt.Sprintf("j%04d", i),
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(fireAt)}},
			Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: rcv.URL}}},
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	_, err = b.producer().ScheduleMany(sctx, specs)
	require.NoError(t, err)

	waitFor(t, 90*time.Second, "every job's success", func() bool {
		return b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
			return o.Class == chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		}) >= jobs
	})

	c1, c2 := d1.Stats().Calls, d2.Stats().Calls
	t.Logf("calls: dispatcher 1 %d, dispatcher 2 %d; peak in flight %d (cap %d)", c1, c2, peak.Load(), maxConc)
	require.Positive(t, c1, "dispatcher 1 carried part of the namespace")
	require.Positive(t, c2, "dispatcher 2 carried part of the namespace")
	require.EqualValues(t, jobs, c1+c2, "each job called once")
	require.LessOrEqual(t, peak.Load(), int32(maxConc), "max_concurrency holds in sum")

	// The rate limit in sum: in any window of w, at most perSec·w + burst
	// calls (the sum of the shards' buckets). The receiver stamps arrival,
	// a little after the buckets released them; a tolerance of 2 calls
	// covers that jitter.
	mu.Lock()
	times := slices.Clone(at)
	mu.Unlock()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for _, w := range []time.Duration{250 * time.Millisecond, time.Second} {
		allowed := int(perSec*w.Seconds()) + burst + 2
		worst, j := 0, 0
		for i := range times {
			for times[i].Sub(times[j]) > w {
				j++
			}
			worst = max(worst, i-j+1)
		}
		t.Logf("busiest %s: %d calls (limit in sum %d)", w, worst, allowed-2)
		require.LessOrEqual(t, worst, allowed, "rate limit holds in sum over %s", w)
	}
}

// groupSpread is how many due partitions each member of the dispatcher
// group holds, sorted ("2,2"), or "" while the group is not stable.
func groupSpread(b *bundle) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(b.in).DescribeGroups(ctx, b.topics.DispatcherGroup())
	if err != nil {
		return ""
	}
	g, ok := groups[b.topics.DispatcherGroup()]
	if !ok || g.Err != nil || g.State != "Stable" {
		return ""
	}
	var counts []int
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return ""
		}
		n := 0
		for _, tp := range a.Topics {
			n += len(tp.Partitions)
		}
		counts = append(counts, n)
	}
	slices.Sort(counts)
	out := ""
	for i, c := range counts {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(c)
	}
	return out
}

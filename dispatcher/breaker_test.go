package dispatcher

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// Breaker integration tests: a real broker (kfake), the real scheduler,
// the real breaker processor and the dispatcher reading it through
// views.Breakers, with httptest endpoints on 127.0.0.1. Assertions are on
// counts and on the order of events (transition times, arrival times),
// never on how fast anything ran.

// watched wraps the dispatcher's breaker view and records when the
// dispatcher first read each version of a namespace's status: from then on
// every call of that namespace is gated by it.
type watched struct {
	src   Breakers
	mu    sync.Mutex
	first map[string]map[uint64]time.Time
}

func (w *watched) Get(ns string) *chimev1.BreakerStatus {
	st := w.src.Get(ns)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first[ns] == nil {
		w.first[ns] = map[uint64]time.Time{}
	}
	if _, ok := w.first[ns][st.GetVersion()]; !ok {
		w.first[ns][st.GetVersion()] = now
	}
	return st
}

// seen is when the dispatcher first read version v of ns (zero: not yet).
func (w *watched) seen(ns string, v uint64) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[ns][v]
}

// seenFrom is when the dispatcher first read version v of ns or a later
// one (zero: none yet). Under load every due may have been read before the
// breaker opened and the next only once it was half-open: from then on the
// dispatcher knew the breaker was not closed all the same.
func (w *watched) seenFrom(ns string, v uint64) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for ver, at := range w.first[ns] {
		if ver >= v && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// endpoint is an httptest server whose answer the test changes while
// traffic flows; it records every call's arrival, key and answer.
type endpoint struct {
	*httptest.Server
	answer atomic.Pointer[func(n int) (status int, delay time.Duration)]
	mu     sync.Mutex
	calls  []arrival
}

type arrival struct {
	at     time.Time
	key    string
	status int
}

func newEndpoint(t *testing.T, answer func(n int) (int, time.Duration)) *endpoint {
	e := &endpoint{}
	e.set(answer)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		e.mu.Lock()
		n := len(e.calls)
		e.calls = append(e.calls, arrival{at: at, key: r.Header.Get(HeaderIdempotencyKey)})
		e.mu.Unlock()
		status, delay := (*e.answer.Load())(n)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		e.mu.Lock()
		e.calls[n].status = status
		e.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) set(answer func(n int) (int, time.Duration)) { e.answer.Store(&answer) }

func (e *endpoint) arrivals() []arrival {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// between counts the calls that arrived in (from, to]; a zero to is open.
func (e *endpoint) between(from, to time.Time) int {
	n := 0
	for _, a := range e.arrivals() {
		if a.at.After(from) && (to.IsZero() || !a.at.After(to)) {
			n++
		}
	}
	return n
}

// succeeded is the distinct idempotency keys answered 2xx.
func (e *endpoint) succeeded() int {
	keys := map[string]bool{}
	for _, a := range e.arrivals() {
		if a.status >= 200 && a.status < 300 {
			keys[a.key] = true
		}
	}
	return len(keys)
}

type breakerBundle struct {
	*bundle
	nsCfg       *chimev1.NamespaceConfig
	transitions *collector[*chimev1.BreakerTransition]
	sched       *producer.Producer
}

// setupBreaker provisions a broker, writes ns's configuration where the
// namespace-config processor keeps it, and runs the scheduler and the
// breaker processor. Dispatchers are started with startGated.
func setupBreaker(t *testing.T, nsCfg *chimev1.NamespaceConfig) *breakerBundle {
	t.Helper()
	b := &breakerBundle{bundle: setup(t, 4), nsCfg: nsCfg}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := proto.Marshal(nsCfg)
	require.NoError(t, err)
	require.NoError(t, b.in.ProduceSync(ctx, &kgo.Record{Topic: b.topics.NamespaceTable(), Key: []byte(nsCfg.Namespace), Value: raw}).FirstErr())
	b.transitions = collect[*chimev1.BreakerTransition](t, b.cluster.Brokers(), b.topics.BreakerTransitions(), func(m *chimev1.BreakerTransition) string { return m.GetNamespace() })
	b.startScheduler()
	nsView, err := views.NewNamespaces(processors.Client{Brokers: b.cluster.Brokers(), ClientID: "breaker-namespaces", Logger: testLogger()}, b.topics)
	require.NoError(t, err)
	brk, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: b.cluster.Brokers(), Logger: testLogger()}, Topics: b.topics}, Namespaces: nsView})
	require.NoError(t, err)
	lifecycletest.Start(t, nsView, brk)
	b.sched = b.producer()
	return b
}

// startGated runs a dispatcher with its own breaker view (as every
// dispatcher process has), wrapped to record what it read.
func (b *breakerBundle) startGated(id string) (*Dispatcher, *watched, *views.Breakers) {
	b.t.Helper()
	v, err := views.NewBreakers(processors.Client{Brokers: b.cluster.Brokers(), ClientID: id + "-breakers", Logger: testLogger()}, b.topics)
	require.NoError(b.t, err)
	lifecycletest.Start(b.t, v)
	w := &watched{src: v, first: map[string]map[uint64]time.Time{}}
	d := b.start(func(c *Config) {
		c.ID = id
		c.Breakers = w
		c.Namespaces = StaticNamespaces{b.nsCfg.Namespace: b.nsCfg}
	})
	return d, w, v
}

// steady schedules n one-shot jobs of ns, one every gap, the first after
// lead: job-000, job-001, ...
func (b *breakerBundle) steady(ns, url string, n int, lead, gap time.Duration) {
	b.t.Helper()
	start := time.Now().Add(lead)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		b.sched.ScheduleAsync(ctx, &chimev1.JobSpec{
			Namespace: ns, Id: fmt.Sprintf("job-%03d", i),
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(start.Add(time.Duration(i) * gap))}},
			Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: url}}},
		}, func(_ producer.Receipt, err error) {
			if err != nil {
				b.t.Errorf("schedule: %v", err)
			}
		})
	}
	require.NoError(b.t, b.sched.Flush(ctx))
}

// trs returns ns's transitions so far, in order.
func (b *breakerBundle) trs(ns string) []*chimev1.BreakerTransition { return b.transitions.get(ns) }

// nth is ns's i-th (from 0) transition to state, or nil.
func (b *breakerBundle) nth(ns string, to chimev1.BreakerState, i int) *chimev1.BreakerTransition {
	for _, tr := range b.trs(ns) {
		if tr.To == to {
			if i == 0 {
				return tr
			}
			i--
		}
	}
	return nil
}

// after is the transition that followed tr, or nil.
func (b *breakerBundle) after(tr *chimev1.BreakerTransition) *chimev1.BreakerTransition {
	all := b.trs(tr.Namespace)
	for i, x := range all {
		if x.EventId == tr.EventId && i+1 < len(all) {
			return all[i+1]
		}
	}
	return nil
}

func versionOf(tr *chimev1.BreakerTransition) uint64 {
	var v uint64
	_, _ = fmt.Sscanf(tr.EventId, "breaker/"+tr.Namespace+"/%d", &v)
	return v
}

func breakerNamespace(ns string, bc *chimev1.BreakerConfig, maxConc uint32) *chimev1.NamespaceConfig {
	return &chimev1.NamespaceConfig{
		Namespace: ns, Version: 1, MaxConcurrency: maxConc, Breaker: bc,
		// Deferrals are never charged; failed calls are, so give them room.
		Retry: &chimev1.RetryPolicy{MaxAttempts: 50, InitialInterval: durationpb.New(200 * time.Millisecond), MaxInterval: durationpb.New(time.Second)},
	}
}

const (
	open     = chimev1.BreakerState_BREAKER_STATE_OPEN
	halfOpen = chimev1.BreakerState_BREAKER_STATE_HALF_OPEN
	closed   = chimev1.BreakerState_BREAKER_STATE_CLOSED
)

// TestBreakerOpensHoldsBackProbesAndReleasesEverything is the issue's
// first must-show: an endpoint turned to 500s under steady traffic.
func TestBreakerOpensHoldsBackProbesAndReleasesEverything(t *testing.T) {
	t.Parallel()
	const (
		ns       = "acme"
		jobs     = 60
		maxConc  = 4
		probes   = 2
		failTime = 200 * time.Millisecond
	)
	b := setupBreaker(t, breakerNamespace(ns, &chimev1.BreakerConfig{
		Window: durationpb.New(5 * time.Second), MinRequests: 10, FailureRateThreshold: 50,
		CoolOff: durationpb.New(time.Second), MaxCoolOff: durationpb.New(2 * time.Second),
		HalfOpenProbes: probes, TripsToDisable: 10,
	}, maxConc))
	d, w, _ := b.startGated("dispatcher-a")
	ep := newEndpoint(t, func(n int) (int, time.Duration) {
		if n < 5 {
			return 200, 0 // healthy at first
		}
		return 500, failTime
	})
	b.steady(ns, ep.URL, jobs, time.Second, 50*time.Millisecond)
	// A wait that times out says only what it waited for: a failure also
	// says what the breaker did, what the dispatcher saw of it and what
	// reached the endpoint.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, tr := range b.trs(ns) {
			v := versionOf(tr)
			seen := "not yet"
			if at := w.seen(ns, v); !at.IsZero() {
				seen = at.Format("15:04:05.000")
			}
			t.Logf("transition %s -> %s, version %d, at %s, first seen by the dispatcher: %s; %s", tr.GetFrom(), tr.GetTo(), v,
				tr.GetAt().AsTime().Format("15:04:05.000"), seen, tr.GetReason())
		}
		calls := ep.arrivals()
		if len(calls) > 0 {
			t.Logf("the endpoint got %d calls, the last at %s; the dispatcher's stats: %+v", len(calls), calls[len(calls)-1].at.Format("15:04:05.000"), d.Stats())
		}
	})

	// Trip 1 once the minimum is reached.
	waitFor(t, 60*time.Second, "the breaker to open", func() bool { return b.nth(ns, open, 0) != nil })
	open1 := b.nth(ns, open, 0)
	require.GreaterOrEqual(t, open1.Window.Requests, uint64(10), "not before min_requests")
	require.Contains(t, open1.Reason, "failure rate")
	// The first half-open probe fails (the endpoint still answers 500):
	// trip 2. Then the endpoint recovers.
	waitFor(t, 60*time.Second, "the breaker to reopen", func() bool { return b.nth(ns, open, 1) != nil })
	ep.set(func(int) (int, time.Duration) { return 200, 0 })
	waitFor(t, 60*time.Second, "the breaker to close", func() bool { return b.nth(ns, closed, 0) != nil })
	waitFor(t, 120*time.Second, "every job to reach the endpoint and succeed", func() bool { return ep.succeeded() == jobs })
	waitFor(t, 30*time.Second, "every job's ack", func() bool {
		for i := range jobs {
			a := ackOf(b.commands.get(fmt.Sprintf("%s/job-%03d", ns, i)))
			if a == nil {
				return false
			}
			require.Equal(t, chimev1.AckResult_ACK_RESULT_SUCCEEDED, a.Result)
		}
		return true
	})
	// The outcomes topic is read by its own consumer: its records can trail
	// the acks the test just saw.
	waitFor(t, 30*time.Second, "every job's success outcome", func() bool {
		for i := range jobs {
			if !slices.ContainsFunc(b.outcomes.get(fmt.Sprintf("%s/job-%03d", ns, i)), func(o *chimev1.CallbackOutcome) bool {
				return o.Class == chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
			}) {
				return false
			}
		}
		return true
	})
	require.Zero(t, b.dead.count(nil), "nothing dead")

	// Held back: after the dispatcher read the open state, the endpoint
	// received only the calls already in flight (at most one per
	// concurrency slot).
	half1 := b.nth(ns, halfOpen, 0)
	require.NotNil(t, half1)
	seenOpen := w.seenFrom(ns, versionOf(open1))
	require.False(t, seenOpen.IsZero())
	inFlight := ep.between(seenOpen, half1.At.AsTime())
	require.LessOrEqual(t, inFlight, maxConc, "calls after the dispatcher read the open state")
	// Measured from the transition itself, the bound adds the calls that
	// could start while the state travelled to the dispatcher's view: each
	// slot turns over at most once per failing call.
	lag := seenOpen.Sub(open1.At.AsTime())
	bound := maxConc * (1 + int(lag/failTime) + 1)
	afterOpen := ep.between(open1.At.AsTime(), half1.At.AsTime())
	require.LessOrEqual(t, afterOpen, bound, "calls after the open transition")
	t.Logf("after the open transition: %d calls (view lag %s, bound %d); after the dispatcher read it: %d (bound %d)", afterOpen, lag.Round(time.Millisecond), bound, inFlight, maxConc)

	// Half-open: exactly the granted probes. While half-open nothing else
	// arrives; the episode that closed got both of its probes, answered
	// 200; a reopened episode's second probe may land after the reopen
	// (it was in flight), never more.
	var episodes int
	for i := 0; ; i++ {
		h := b.nth(ns, halfOpen, i)
		if h == nil {
			break
		}
		episodes++
		next := b.after(h)
		require.NotNil(t, next)
		got := ep.between(h.At.AsTime(), next.At.AsTime())
		require.LessOrEqual(t, got, probes, "half-open episode %d", i)
		if next.To == closed {
			require.Equal(t, probes, got, "the closing episode's probes")
			require.Equal(t, fmt.Sprintf("%d of %d probes succeeded", probes, probes), next.Reason)
		} else {
			// Open again: only the episode's probes still in flight can
			// arrive before its next half-open.
			reopenEnd := b.after(next)
			require.NotNil(t, reopenEnd)
			require.LessOrEqual(t, ep.between(next.At.AsTime(), reopenEnd.At.AsTime()), probes-got, "reopened episode %d", i)
		}
	}
	require.GreaterOrEqual(t, episodes, 2)
	probeOutcomes := b.outcomes.count(func(o *chimev1.CallbackOutcome) bool { return o.Probe })
	require.LessOrEqual(t, probeOutcomes, probes*episodes)
	require.GreaterOrEqual(t, probeOutcomes, probes)
	require.EqualValues(t, probeOutcomes, d.Stats().Probes)

	// Deferrals were never charged: a job's attempt number counts its
	// calls only.
	held := 0
	for i := range jobs {
		key := fmt.Sprintf("%s/job-%03d", ns, i)
		calls, maxAttempt := 0, uint32(0)
		for _, o := range b.outcomes.get(key) {
			if o.Class == chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED {
				require.Equal(t, kindBreaker, o.ErrorKind)
				held++
			} else {
				calls++
			}
			maxAttempt = max(maxAttempt, o.Attempt)
		}
		require.EqualValues(t, calls, maxAttempt, "%s: attempts = calls", key)
	}
	require.Positive(t, held)

	// The ramp: the dues held back during the first open episode were
	// given places spread over [next check, next check + ramp).
	nextCheck := open1.At.AsTime().Add(time.Second)
	var first []time.Time
	b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
		if o.ErrorKind == kindBreaker && o.StartedAt.AsTime().Before(half1.At.AsTime()) {
			first = append(first, o.NextAttemptAt.AsTime())
		}
		return false
	})
	require.NotEmpty(t, first)
	lo, hi := slices.MinFunc(first, time.Time.Compare), slices.MaxFunc(first, time.Time.Compare)
	require.False(t, lo.Before(nextCheck), "not before the breaker's next check")
	t.Logf("%d dues held during the first open episode, released over %s; %d half-open episodes, %d probes; %d calls for %d jobs",
		len(first), hi.Sub(lo).Round(time.Millisecond), episodes, probeOutcomes, len(ep.arrivals()), jobs)
}

// TestSlowEndpointTripsOnSlowCallRate: answers are 200 but slow; the
// breaker opens on the slow-call rate and the dispatcher holds back.
func TestSlowEndpointTripsOnSlowCallRate(t *testing.T) {
	t.Parallel()
	const ns, maxConc = "slowpoke", 8
	b := setupBreaker(t, breakerNamespace(ns, &chimev1.BreakerConfig{
		Window: durationpb.New(5 * time.Second), MinRequests: 10,
		// Whole seconds: schema.EffectiveNamespace merges a duration into
		// the default's field by field, so a sub-second value would keep
		// the default's seconds (100ms became 5.1s).
		SlowCallDuration: durationpb.New(time.Second), SlowCallRateThreshold: 50,
		CoolOff: durationpb.New(time.Second), MaxCoolOff: durationpb.New(2 * time.Second),
		HalfOpenProbes: 2, TripsToDisable: 10,
	}, maxConc))
	_, w, _ := b.startGated("dispatcher-a")
	ep := newEndpoint(t, func(int) (int, time.Duration) { return 200, 1200 * time.Millisecond })
	b.steady(ns, ep.URL, 40, time.Second, 50*time.Millisecond)

	waitFor(t, 60*time.Second, "the breaker to open", func() bool { return b.nth(ns, open, 0) != nil })
	// Every assertion below names the transitions, so a failure under load
	// can be read from the log alone.
	history := func() string {
		var sb strings.Builder
		for _, tr := range b.trs(ns) {
			fmt.Fprintf(&sb, "\n  %s → %s v%d at %s: %s (window %v)", tr.From, tr.To, versionOf(tr), tr.At.AsTime().Format("15:04:05.000"), tr.Reason, tr.Window)
		}
		return sb.String()
	}
	open1 := b.nth(ns, open, 0)
	require.Contains(t, open1.Reason, "slow-call rate", history())
	require.Zero(t, open1.Window.Failures, "every answer was a 200: %s", history())
	waitFor(t, 30*time.Second, "a due held back by the breaker", func() bool {
		return b.outcomes.count(func(o *chimev1.CallbackOutcome) bool { return o.ErrorKind == kindBreaker }) > 0
	})
	// The probes are slow too: the breaker reopens.
	waitFor(t, 60*time.Second, "a failed (slow) probe", func() bool { return b.nth(ns, open, 1) != nil })
	require.Contains(t, b.nth(ns, open, 1).Reason, "probe took", history())
	half1 := b.nth(ns, halfOpen, 0)
	require.NotNil(t, half1, history())
	seenOpen := w.seenFrom(ns, versionOf(open1))
	require.False(t, seenOpen.IsZero(), history())
	require.LessOrEqual(t, ep.between(seenOpen, half1.At.AsTime()), maxConc,
		"calls after the dispatcher read the open state (at %s): %s", seenOpen.Format("15:04:05.000"), history())
}

// TestFlappingEndpointEndsDisabled: an endpoint that alternates 500 and
// 200 fails one of every pair of probes; after K consecutive trips the
// breaker is disabled and every due is held for an operator.
func TestFlappingEndpointEndsDisabled(t *testing.T) {
	t.Parallel()
	const ns, k = "flappy", 3
	b := setupBreaker(t, breakerNamespace(ns, &chimev1.BreakerConfig{
		Window: durationpb.New(5 * time.Second), MinRequests: 10, FailureRateThreshold: 50,
		CoolOff: durationpb.New(time.Second), MaxCoolOff: durationpb.New(time.Second),
		HalfOpenProbes: 2, TripsToDisable: k,
	}, 4))
	_, w, _ := b.startGated("dispatcher-a")
	ep := newEndpoint(t, func(n int) (int, time.Duration) {
		if n%2 == 0 {
			return 500, 50 * time.Millisecond
		}
		return 200, 50 * time.Millisecond
	})
	b.steady(ns, ep.URL, 100, time.Second, 50*time.Millisecond)

	disabled := chimev1.BreakerState_BREAKER_STATE_DISABLED
	waitFor(t, 90*time.Second, "the breaker to be disabled", func() bool { return b.nth(ns, disabled, 0) != nil })
	dis := b.nth(ns, disabled, 0)
	require.EqualValues(t, k, dis.ConsecutiveTrips)
	require.Contains(t, dis.Reason, "disabled until an operator resets it")
	var path []chimev1.BreakerState
	for _, tr := range b.trs(ns) {
		path = append(path, tr.To)
	}
	require.Equal(t, []chimev1.BreakerState{open, halfOpen, open, halfOpen, disabled}, path)
	require.Nil(t, b.nth(ns, closed, 0), "never closed: the trips were consecutive")

	// Held: once the dispatcher read the disabled state, only the probes
	// already in flight arrive, and dues are deferred for the held recheck.
	waitFor(t, 30*time.Second, "the dispatcher to read the disabled state", func() bool { return !w.seen(ns, versionOf(dis)).IsZero() })
	seen := w.seen(ns, versionOf(dis))
	waitFor(t, 30*time.Second, "a due held by the disabled breaker", func() bool {
		return b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
			return o.ErrorKind == kindBreaker && o.StartedAt.AsTime().After(seen)
		}) > 0
	})
	b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
		if o.ErrorKind == kindBreaker && o.StartedAt.AsTime().After(seen) {
			require.Contains(t, o.Error, "disabled")
			require.False(t, o.NextAttemptAt.AsTime().Before(o.StartedAt.AsTime().Add(circuit.HeldRecheck-time.Second)))
		}
		return false
	})
	require.LessOrEqual(t, ep.between(seen, time.Time{}), 1, "at most the other in-flight probe")
}

// TestTwoDispatchersGateAlike: two dispatchers in one group, each with its
// own breaker view, read the same state, and both hold back the
// namespaces they own.
func TestTwoDispatchersGateAlike(t *testing.T) {
	t.Parallel()
	b := setupBreaker(t, breakerNamespace("unused", nil, 4))
	_, w1, v1 := b.startGated("dispatcher-1")
	_, w2, v2 := b.startGated("dispatcher-2")
	waitFor(t, 60*time.Second, "both dispatchers to hold partitions", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := kadm.NewClient(b.in).DescribeGroups(ctx, b.topics.DispatcherGroup())
		if err != nil {
			return false
		}
		g, ok := gs[b.topics.DispatcherGroup()]
		if !ok || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			a, _ := m.Assigned.AsConsumer()
			if a == nil || len(a.Topics) == 0 || len(a.Topics[0].Partitions) == 0 {
				return false
			}
		}
		return true
	})

	// An operator holds 16 namespaces open (they spread over all four
	// partitions, so both dispatchers own some).
	var names []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 16 {
		ns := fmt.Sprintf("tenant%02d", i)
		names = append(names, ns)
		raw, err := proto.Marshal(&chimev1.BreakerCommand{CommandId: "hold-" + ns, Namespace: ns,
			Command: &chimev1.BreakerCommand_ForceOpen{ForceOpen: &chimev1.BreakerForceOpen{}}})
		require.NoError(t, err)
		require.NoError(t, b.in.ProduceSync(ctx, &kgo.Record{Topic: b.topics.BreakerCommands(), Key: []byte(ns), Value: raw}).FirstErr())
	}
	forced := chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN
	waitFor(t, 30*time.Second, "both views to read every namespace forced open", func() bool {
		for _, ns := range names {
			s1, s2 := v1.Get(ns), v2.Get(ns)
			if s1.State != forced || s2.State != forced || s1.Version != s2.Version {
				return false
			}
		}
		return true
	})

	ep := newEndpoint(t, func(int) (int, time.Duration) { return 200, 0 })
	for _, ns := range names {
		b.steady(ns, ep.URL, 2, 500*time.Millisecond, 10*time.Millisecond)
	}
	waitFor(t, 60*time.Second, "every due held back", func() bool {
		for _, ns := range names {
			for i := range 2 {
				if !slices.ContainsFunc(b.outcomes.get(fmt.Sprintf("%s/job-%03d", ns, i)), func(o *chimev1.CallbackOutcome) bool {
					return o.ErrorKind == kindBreaker
				}) {
					return false
				}
			}
		}
		return true
	})
	require.Empty(t, ep.arrivals(), "no call went out")
	by := map[string]int{}
	b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
		require.Equal(t, chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED, o.Class)
		require.Contains(t, o.Error, "FORCED_OPEN")
		by[o.DispatcherId]++
		return false
	})
	require.Positive(t, by["dispatcher-1"], "dispatcher-1 gated")
	require.Positive(t, by["dispatcher-2"], "dispatcher-2 gated")
	// Each gated on the version the other read.
	for _, ns := range names {
		v := v1.Get(ns).Version
		require.True(t, !w1.seen(ns, v).IsZero() || !w2.seen(ns, v).IsZero(), ns)
	}
	t.Logf("deferred by dispatcher: %v", by)
}

package circuit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const (
	closed       = chimev1.BreakerState_BREAKER_STATE_CLOSED
	open         = chimev1.BreakerState_BREAKER_STATE_OPEN
	halfOpen     = chimev1.BreakerState_BREAKER_STATE_HALF_OPEN
	disabled     = chimev1.BreakerState_BREAKER_STATE_DISABLED
	forcedOpen   = chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN
	forcedClosed = chimev1.BreakerState_BREAKER_STATE_FORCED_CLOSED
)

// thresholds are small, round test settings.
func thresholds(mut ...func(*Thresholds)) Thresholds {
	th := Thresholds{
		Window:                30 * time.Second,
		MinRequests:           10,
		FailureRateThreshold:  50,
		SlowCallDuration:      time.Second,
		SlowCallRateThreshold: 80,
		CoolOff:               10 * time.Second,
		MaxCoolOff:            60 * time.Second,
		HalfOpenProbes:        3,
		TripsToDisable:        4,
	}
	for _, m := range mut {
		m(&th)
	}
	return th
}

type oc struct {
	class   chimev1.OutcomeClass
	status  int32
	latency time.Duration
	probe   bool
}

var (
	success   = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, status: 200, latency: 20 * time.Millisecond}
	failure   = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, status: 503, latency: 20 * time.Millisecond}
	permanent = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, status: 404, latency: 20 * time.Millisecond}
	deferred  = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED}
	slowOK    = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, status: 200, latency: 2 * time.Second}
)

func (o oc) asProbe() oc { o.probe = true; return o }

func (o oc) at(finished time.Time) *chimev1.CallbackOutcome {
	return &chimev1.CallbackOutcome{
		Namespace:  "acme",
		Class:      o.class,
		StatusCode: o.status,
		Latency:    durationpb.New(o.latency),
		Probe:      o.probe,
		FinishedAt: timestamppb.New(finished),
	}
}

func times(n int, o oc) []oc {
	out := make([]oc, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func seq(parts ...[]oc) []oc {
	var out []oc
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// feed observes outcomes one per 100 ms from at, collecting the results.
func feed(st *chimev1.BreakerStatus, th Thresholds, at time.Time, outcomes []oc) (time.Time, []*chimev1.BreakerTransition, []*chimev1.BreakerTimer) {
	var trs []*chimev1.BreakerTransition
	var timers []*chimev1.BreakerTimer
	for _, o := range outcomes {
		res := Observe(st, th, o.at(at), at)
		trs = append(trs, res.Transitions...)
		if res.Timer != nil {
			timers = append(timers, res.Timer)
		}
		at = at.Add(100 * time.Millisecond)
	}
	return at, trs, timers
}

func TestTrip(t *testing.T) {
	t.Parallel()
	latency := func(th *Thresholds) {
		th.LatencyThreshold = 500 * time.Millisecond
		th.SlowCallDuration = 10 * time.Second
	}
	slow600 := oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, status: 200, latency: 600 * time.Millisecond}
	tests := []struct {
		name     string
		th       Thresholds
		outcomes []oc
		want     chimev1.BreakerState
		reason   string
		requests uint64
	}{
		{"not before min requests", thresholds(), times(9, failure), closed, "", 9},
		{"opens at min requests", thresholds(), times(10, failure), open, "failure rate 100% >= 50% over 10 requests in 30s; open for 10s (trip 1)", 10},
		{"opens at exactly the threshold", thresholds(), seq(times(5, success), times(5, failure)), open, "failure rate 50% >= 50% over 10 requests in 30s", 10},
		{"below the threshold", thresholds(), seq(times(11, success), times(10, failure)), closed, "", 21},
		{"4xx proves the client alive", thresholds(), seq(times(6, permanent), times(5, failure)), closed, "", 11},
		{"deferred is not a request", thresholds(), seq(times(20, deferred), times(9, failure)), closed, "", 9},
		{"slow-call rate", thresholds(), times(10, slowOK), open, "slow-call rate 100% >= 80% (calls >= 1s) over 10 requests in 30s", 10},
		{"slow calls below their rate", thresholds(), seq(times(3, success), times(7, slowOK)), closed, "", 10},
		{"average latency", thresholds(latency), times(10, slow600), open, "average latency 600ms >= 500ms over 10 requests in 30s", 10},
		{"latency off by default", thresholds(), times(30, slow600), closed, "", 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := NewStatus("acme")
			_, trs, timers := feed(st, tt.th, t0, tt.outcomes)
			require.Equal(t, tt.want, st.State)
			require.Equal(t, tt.requests, st.GetWindow().GetRequests())
			if tt.want == closed {
				require.Empty(t, trs)
				return
			}
			require.Len(t, trs, 1)
			tr := trs[0]
			require.Equal(t, closed, tr.From)
			require.Equal(t, open, tr.To)
			require.Contains(t, tr.Reason, tt.reason)
			require.Equal(t, tt.requests, tr.Window.Requests, "the transition carries the window that tripped it")
			require.EqualValues(t, 1, tr.ConsecutiveTrips)
			require.Equal(t, "breaker/acme/1", tr.EventId)
			require.Len(t, timers, 1)
			require.EqualValues(t, st.Version, timers[0].Version)
			require.Equal(t, st.NextCheckAt.AsTime(), timers[0].FireAt.AsTime())
			require.Equal(t, 10*time.Second, st.CoolOff.AsDuration())
		})
	}
}

func TestFailureReasonReadsWell(t *testing.T) {
	t.Parallel()
	st := NewStatus("acme")
	th := thresholds(func(th *Thresholds) { th.MinRequests = 40 })
	_, trs, _ := feed(st, th, t0, seq(times(15, success), times(25, failure)))
	require.Len(t, trs, 1)
	require.Equal(t, "failure rate 62.5% >= 50% over 40 requests in 30s; open for 10s (trip 1)", trs[0].Reason)
	require.InDelta(t, 62.5, trs[0].Window.FailureRate, 1e-9)
}

func TestCoolOffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	th := thresholds()
	for trips, want := range map[uint32]time.Duration{
		1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: 60 * time.Second, 5: 60 * time.Second, 1000: 60 * time.Second,
	} {
		require.Equal(t, want, CoolOffFor(th, trips), "trip %d", trips)
	}
}

// open trips a fresh breaker and returns it with the time after.
func opened(t *testing.T, th Thresholds) (*chimev1.BreakerStatus, time.Time, *chimev1.BreakerTimer) {
	t.Helper()
	st := NewStatus("acme")
	at, _, timers := feed(st, th, t0, times(int(th.MinRequests), failure))
	require.Equal(t, open, st.State)
	require.Len(t, timers, 1)
	return st, at, timers[0]
}

func TestHalfOpenGrantsExactlyNProbesAndClosesAfterN(t *testing.T) {
	t.Parallel()
	th := thresholds()
	st, _, timer := opened(t, th)
	at := timer.FireAt.AsTime()

	res := OnTimer(st, th, timer, at)
	require.Len(t, res.Transitions, 1)
	require.Equal(t, halfOpen, st.State)
	require.EqualValues(t, 3, st.ProbesGranted)
	require.Contains(t, res.Transitions[0].Reason, "cool-off of 10s ended; 3 probes granted")

	// The dispatcher's gate lets exactly the granted probes out.
	var sent uint32
	for range 10 {
		if allow, probe, _ := Gate(st, at, sent); allow {
			require.True(t, probe)
			sent++
		}
	}
	require.EqualValues(t, 3, sent)

	// A straggler sent before the breaker opened does not decide anything.
	_, trs, _ := feed(st, th, at, []oc{failure})
	require.Empty(t, trs)
	require.Equal(t, halfOpen, st.State)

	at, trs, _ = feed(st, th, at, []oc{success.asProbe(), permanent.asProbe()})
	require.Empty(t, trs)
	require.Equal(t, halfOpen, st.State)
	require.EqualValues(t, 2, st.ProbesSucceeded)

	_, trs, _ = feed(st, th, at, []oc{success.asProbe()})
	require.Len(t, trs, 1)
	require.Equal(t, "3 of 3 probes succeeded", trs[0].Reason)
	require.Equal(t, closed, st.State)
	require.Zero(t, st.ConsecutiveTrips, "a healthy close resets the trips")
	require.Zero(t, st.GetWindow().GetRequests(), "the failures that opened it are forgotten")
	allow, probe, _ := Gate(st, at, 0)
	require.True(t, allow)
	require.False(t, probe)
}

func TestFailedProbeReopensWithLongerCoolOff(t *testing.T) {
	t.Parallel()
	th := thresholds()
	st, _, timer1 := opened(t, th)
	at := timer1.FireAt.AsTime()
	OnTimer(st, th, timer1, at)
	require.Equal(t, halfOpen, st.State)

	_, trs, timers := feed(st, th, at, []oc{success.asProbe(), failure.asProbe()})
	require.Len(t, trs, 1)
	require.Equal(t, halfOpen, trs[0].From)
	require.Equal(t, open, trs[0].To)
	require.Equal(t, "probe answered 503; open for 20s (trip 2)", trs[0].Reason)
	require.Equal(t, 20*time.Second, st.CoolOff.AsDuration())
	require.Len(t, timers, 1)
	require.Equal(t, at.Add(100*time.Millisecond).Add(20*time.Second), timers[0].FireAt.AsTime())

	// The first timer, delivered again, is stale.
	res := OnTimer(st, th, timer1, at.Add(time.Minute))
	require.False(t, res.Changed)
	require.Empty(t, res.Transitions)
	require.Contains(t, res.Ignored, "stale")
	require.Equal(t, open, st.State)

	// A slow probe is a failed probe too.
	OnTimer(st, th, timers[0], timers[0].FireAt.AsTime())
	_, trs, _ = feed(st, th, timers[0].FireAt.AsTime(), []oc{slowOK.asProbe()})
	require.Len(t, trs, 1)
	require.Equal(t, "probe took 2s >= 1s; open for 40s (trip 3)", trs[0].Reason)
}

func TestConsecutiveTripsDisable(t *testing.T) {
	t.Parallel()
	th := thresholds(func(th *Thresholds) { th.TripsToDisable = 3 })
	st, _, timer := opened(t, th)
	var last *chimev1.BreakerTransition
	for trip := 2; trip <= 3; trip++ {
		at := timer.FireAt.AsTime()
		OnTimer(st, th, timer, at)
		require.Equal(t, halfOpen, st.State)
		res := Observe(st, th, failure.asProbe().at(at), at)
		require.Len(t, res.Transitions, 1)
		last = res.Transitions[0]
		timer = res.Timer
	}
	require.Equal(t, disabled, st.State)
	require.Nil(t, timer, "disabled arms no timer")
	require.Contains(t, last.Reason, "3 consecutive trips without a healthy close: disabled until an operator resets it")
	allow, _, retryAt := Gate(st, t0, 0)
	require.False(t, allow)
	require.Equal(t, t0.Add(HeldRecheck), retryAt)

	// Successes and timers do not revive it; only a reset does.
	_, trs, _ := feed(st, th, t0.Add(time.Hour), times(50, success))
	require.Empty(t, trs)
	require.Equal(t, disabled, st.State)
	res := OnCommand(st, th, command("c1", &chimev1.BreakerCommand_ResetBreaker{ResetBreaker: &chimev1.BreakerReset{}}), t0.Add(time.Hour))
	require.Len(t, res.Transitions, 1)
	require.Equal(t, disabled, res.Transitions[0].From)
	require.Equal(t, closed, st.State)
	require.Zero(t, st.ConsecutiveTrips)
	require.Zero(t, st.GetWindow().GetRequests())
}

func command(id string, c any) *chimev1.BreakerCommand {
	cmd := &chimev1.BreakerCommand{CommandId: id, Namespace: "acme"}
	switch c := c.(type) {
	case *chimev1.BreakerCommand_ForceOpen:
		cmd.Command = c
	case *chimev1.BreakerCommand_ForceClosed:
		cmd.Command = c
	case *chimev1.BreakerCommand_Auto:
		cmd.Command = c
	case *chimev1.BreakerCommand_ResetBreaker:
		cmd.Command = c
	}
	return cmd
}

var (
	forceOpen   = &chimev1.BreakerCommand_ForceOpen{ForceOpen: &chimev1.BreakerForceOpen{}}
	forceClosed = &chimev1.BreakerCommand_ForceClosed{ForceClosed: &chimev1.BreakerForceClosed{}}
	auto        = &chimev1.BreakerCommand_Auto{Auto: &chimev1.BreakerAuto{}}
)

func TestForcedModes(t *testing.T) {
	t.Parallel()
	th := thresholds()

	t.Run("forced open holds, auto recomputes from the window", func(t *testing.T) {
		t.Parallel()
		st := NewStatus("acme")
		res := OnCommand(st, th, command("c1", forceOpen), t0)
		require.Len(t, res.Transitions, 1)
		require.Equal(t, forcedOpen, st.State)
		require.Contains(t, res.Transitions[0].Reason, "operator forced it open (command c1)")
		allow, _, _ := Gate(st, t0, 0)
		require.False(t, allow)
		// Repeating it changes nothing.
		require.Empty(t, OnCommand(st, th, command("c2", forceOpen), t0).Transitions)

		// Failures while forced are counted but do not trip.
		_, trs, _ := feed(st, th, t0, times(20, failure))
		require.Empty(t, trs)
		require.EqualValues(t, 20, st.Window.Requests)

		res = OnCommand(st, th, command("c3", auto), t0.Add(5*time.Second))
		require.Len(t, res.Transitions, 2)
		require.Equal(t, forcedOpen, res.Transitions[0].From)
		require.Equal(t, closed, res.Transitions[0].To)
		require.Equal(t, open, res.Transitions[1].To, "the failing window trips it at once")
		require.NotNil(t, res.Timer)
		require.Equal(t, open, st.State)
	})

	t.Run("forced closed lets everything through", func(t *testing.T) {
		t.Parallel()
		st, _, timer := opened(t, th)
		res := OnCommand(st, th, command("c1", forceClosed), t0)
		require.Len(t, res.Transitions, 1)
		require.Equal(t, forcedClosed, st.State)
		allow, probe, _ := Gate(st, t0, 0)
		require.True(t, allow)
		require.False(t, probe)
		_, trs, _ := feed(st, th, t0, times(20, failure))
		require.Empty(t, trs)
		require.Empty(t, OnTimer(st, th, timer, timer.FireAt.AsTime()).Transitions, "the cool-off timer is stale once forced")

		// auto outside a forced state is a no-op.
		st2 := NewStatus("acme")
		res = OnCommand(st2, th, command("c2", auto), t0)
		require.Empty(t, res.Transitions)
		require.False(t, res.Changed)
	})
}

func TestValidateCommand(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateCommand("acme", command("c1", forceOpen)))
	require.ErrorContains(t, ValidateCommand("other", command("c1", forceOpen)), `record key "other" does not match`)
	require.ErrorContains(t, ValidateCommand("acme", command("", forceOpen)), "command_id must be set")
	require.ErrorContains(t, ValidateCommand("acme", &chimev1.BreakerCommand{CommandId: "c", Namespace: "acme"}), "exactly one of")
	require.ErrorIs(t, ValidateCommand("acme", &chimev1.BreakerCommand{CommandId: "c", Namespace: "acme"}), ErrCommand)
}

func TestWindowBucketsExpireByEventTime(t *testing.T) {
	t.Parallel()
	th := thresholds() // 30 s window, 3 s buckets
	st := NewStatus("acme")
	r := ringOf(st, th.Window)
	add := func(at time.Duration, failure bool) bool {
		return r.add(sample{at: t0.Add(at), failure: failure, latency: 20 * time.Millisecond})
	}
	require.True(t, add(0, true))
	require.True(t, add(15*time.Second, true))
	require.True(t, add(29*time.Second, false))
	require.EqualValues(t, 3, r.stats().requests)
	// 35 s: the bucket starting at 0 s is now more than a window behind.
	require.True(t, add(35*time.Second, false))
	s := r.stats()
	require.EqualValues(t, 3, s.requests)
	require.EqualValues(t, 1, s.failures)
	// A late event from before the window is not counted.
	require.False(t, add(time.Second, true))
	require.EqualValues(t, 3, r.stats().requests)
	// An idle minute later, everything old is gone.
	require.True(t, add(100*time.Second, false))
	require.EqualValues(t, 1, r.stats().requests)

	// The wall clock does not expire buckets; event time does: outcomes
	// reported late but within the window still count.
	st2 := NewStatus("acme")
	now := t0.Add(time.Hour)
	for i := range 10 {
		Observe(st2, th, failure.at(t0.Add(time.Duration(i)*time.Second)), now)
	}
	require.Equal(t, open, st2.State)
}

func TestWindowQuantiles(t *testing.T) {
	t.Parallel()
	var s stats
	for i := range 100 {
		lat := uint64(20)
		if i >= 98 {
			lat = 4000
		}
		s.requests++
		s.latencySumMs += lat
		s.hist[histIndex(lat)]++
	}
	w := s.proto()
	require.InDelta(t, 10+15*50/98.0, w.P50Ms, 1e-9, "interpolated inside (10, 25]")
	require.InDelta(t, 3750, w.P99Ms, 1e-9, "interpolated inside (2500, 5000]")
	require.InDelta(t, 99.6, w.AvgMs, 0.01)
}

func TestWindowRelaidOutWhenTheWindowChanges(t *testing.T) {
	t.Parallel()
	st := NewStatus("acme")
	_, _, _ = feed(st, thresholds(), t0, times(5, failure))
	require.EqualValues(t, 5, st.Window.Requests)
	th := thresholds(func(th *Thresholds) { th.Window = 7 * time.Second })
	Observe(st, th, failure.at(t0.Add(time.Second)), t0.Add(time.Second))
	require.EqualValues(t, 1, st.Window.Requests, "buckets of another layout are dropped, not misread")
}

func TestGate(t *testing.T) {
	t.Parallel()
	now := t0
	tests := []struct {
		name    string
		st      *chimev1.BreakerStatus
		sent    uint32
		allow   bool
		probe   bool
		retryAt time.Time
	}{
		{"unknown namespace", nil, 0, true, false, time.Time{}},
		{"closed", &chimev1.BreakerStatus{State: closed}, 0, true, false, time.Time{}},
		{"forced closed", &chimev1.BreakerStatus{State: forcedClosed}, 0, true, false, time.Time{}},
		{"open until its check", &chimev1.BreakerStatus{State: open, NextCheckAt: timestamppb.New(now.Add(8 * time.Second))}, 0, false, false, now.Add(8 * time.Second)},
		{"open past its check", &chimev1.BreakerStatus{State: open, NextCheckAt: timestamppb.New(now.Add(-time.Second))}, 0, false, false, now.Add(MinRecheck)},
		{"half open, probe left", &chimev1.BreakerStatus{State: halfOpen, ProbesGranted: 3}, 2, true, true, time.Time{}},
		{"half open, probes out", &chimev1.BreakerStatus{State: halfOpen, ProbesGranted: 3, CoolOff: durationpb.New(10 * time.Second)}, 3, false, false, now.Add(10 * time.Second)},
		{"disabled", &chimev1.BreakerStatus{State: disabled}, 0, false, false, now.Add(HeldRecheck)},
		{"forced open", &chimev1.BreakerStatus{State: forcedOpen}, 0, false, false, now.Add(HeldRecheck)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			allow, probe, retryAt := Gate(tt.st, now, tt.sent)
			require.Equal(t, tt.allow, allow)
			require.Equal(t, tt.probe, probe)
			require.Equal(t, tt.retryAt, retryAt)
		})
	}
}

func BenchmarkBreakerOutcomes(b *testing.B) {
	th := ThresholdsFor("acme", nil)
	st := NewStatus("acme")
	outcomes := []*chimev1.CallbackOutcome{success.at(t0), failure.at(t0), slowOK.at(t0), permanent.at(t0)}
	// 3 in 4 succeed: below every threshold, so the breaker stays closed
	// and every outcome takes the full path (count, sum, evaluate).
	outcomes[1] = success.at(t0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		o := outcomes[i%len(outcomes)]
		o.FinishedAt = timestamppb.New(now)
		Observe(st, th, o, now)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "outcomes/s")
}

func TestHalfOpenWithoutProbeResultsIsGrantedAgain(t *testing.T) {
	t.Parallel()
	cfg := Thresholds{Window: 10 * time.Second, MinRequests: 1, FailureRateThreshold: 50, CoolOff: time.Second, MaxCoolOff: time.Minute, HalfOpenProbes: 2, TripsToDisable: 3}
	st := NewStatus("acme")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	res := Observe(st, cfg, &chimev1.CallbackOutcome{Namespace: "acme", Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: 500, FinishedAt: timestamppb.New(now)}, now)
	require.Equal(t, chimev1.BreakerState_BREAKER_STATE_OPEN, StateOf(st))
	res = OnTimer(st, cfg, res.Timer, now.Add(time.Second))
	require.Equal(t, chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, StateOf(st))
	require.NotNil(t, res.Timer, "half-open arms its own timeout")
	v := st.GetVersion()
	// The probes' outcomes never arrive (deferred, lost): the timeout starts
	// a new episode instead of leaving the breaker half-open for ever, and
	// does not count as a trip.
	res = OnTimer(st, cfg, res.Timer, now.Add(time.Second+HalfOpenTimeout(cfg)))
	require.Equal(t, chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, StateOf(st))
	require.Greater(t, st.GetVersion(), v)
	require.EqualValues(t, 1, st.GetConsecutiveTrips())
	require.EqualValues(t, 2, st.GetProbesGranted())
	// The earlier timer is stale now.
	old := &chimev1.BreakerTimer{Namespace: "acme", Version: v}
	require.NotEmpty(t, OnTimer(st, cfg, old, now.Add(time.Hour)).Ignored)
	require.NotNil(t, res.Timer)
}

func TestOverdueTimerIsTakenFromAnOutcome(t *testing.T) {
	t.Parallel()
	cfg := Thresholds{Window: 10 * time.Second, MinRequests: 1, FailureRateThreshold: 50, CoolOff: time.Second, MaxCoolOff: time.Minute, HalfOpenProbes: 2, TripsToDisable: 3}
	st := NewStatus("acme")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	fail := &chimev1.CallbackOutcome{Namespace: "acme", Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: 500, FinishedAt: timestamppb.New(now)}
	Observe(st, cfg, fail, now)
	require.Equal(t, chimev1.BreakerState_BREAKER_STATE_OPEN, StateOf(st))

	// Within the grace: still waiting for the timer.
	_, ok := Overdue(st, cfg, now.Add(time.Second+TimerGrace-time.Millisecond))
	require.False(t, ok)
	// The timer was lost: a held-back callback's outcome stands in for it.
	res, ok := Overdue(st, cfg, now.Add(time.Second+TimerGrace+time.Second))
	require.True(t, ok)
	require.Equal(t, chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, StateOf(st))
	require.Contains(t, res.Transitions[0].Reason, "overdue")
	require.NotNil(t, res.Timer, "the half-open timeout is armed again")

	// Nothing is overdue in CLOSED.
	_, ok = Overdue(NewStatus("x"), cfg, now.Add(time.Hour))
	require.False(t, ok)
}

package breaker

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The breaker decodes only the fields of an outcome that decide it
// (schema.UnmarshalOutcomeVerdict). Two breakers fed the same outcomes,
// one decoded whole and one by verdict, through trips, cool-offs, probes
// and closes, must decide alike: a field the breaker comes to read that
// the verdict leaves out fails this test.
func TestOutcomeVerdictDecidesAsTheWholeOutcome(t *testing.T) {
	t.Parallel()
	th := circuit.Thresholds{Window: 30 * time.Second, MinRequests: 5, FailureRateThreshold: 50, SlowCallDuration: time.Second,
		SlowCallRateThreshold: 80, CoolOff: 2 * time.Second, MaxCoolOff: 20 * time.Second, HalfOpenProbes: 2, TripsToDisable: 50}
	rng := rand.New(rand.NewPCG(7, 28))
	classes := []chimev1.OutcomeClass{
		chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT,
		chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED, chimev1.OutcomeClass_OUTCOME_CLASS_EXPIRED, chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED,
	}
	kinds := []string{"", "timeout", "connection", "tls", "status"}
	whole := &chimev1.BreakerStatus{Namespace: "acme"}
	verdict := &chimev1.BreakerStatus{Namespace: "acme"}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	transitions := 0
	for i := range 3000 {
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		failing := (i/300)%2 == 1 // spells of failures, to trip and recover
		class := classes[rng.IntN(len(classes))]
		if failing && rng.IntN(4) > 0 {
			class = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE
		}
		lat := time.Duration(rng.IntN(1500)) * time.Millisecond
		o := &chimev1.CallbackOutcome{
			EventId: "out-acme/job-" + string(rune('a'+i%26)), Namespace: "acme", JobId: "job", FireSeq: uint64(i), Attempt: 1,
			Class: class, StatusCode: []int32{200, 201, 404, 500, 503, 0}[rng.IntN(6)], Latency: durationpb.New(lat),
			ErrorKind: kinds[rng.IntN(len(kinds))], Error: "boom", BodySnippet: []byte("{}"), Probe: rng.IntN(3) == 0,
			ScheduledAt: timestamppb.New(now.Add(-time.Second)), StartedAt: timestamppb.New(now.Add(-lat / 3)), FinishedAt: timestamppb.New(now),
			DispatcherId: "d-1", WillRetry: true, NextAttemptAt: timestamppb.New(now.Add(time.Second)), Url: "http://127.0.0.1:1/cb", Method: "POST",
		}
		if rng.IntN(5) == 0 {
			o.Latency = nil // the breaker then takes finished_at - started_at
		}
		raw, err := schema.Marshal(o)
		require.NoError(t, err)
		full, part := new(chimev1.CallbackOutcome), new(chimev1.CallbackOutcome)
		require.NoError(t, schema.UnmarshalInternal(raw, full))
		require.NoError(t, schema.UnmarshalOutcomeVerdict(raw, part))
		a := circuit.OnOutcome(whole, th, full, now)
		b := circuit.OnOutcome(verdict, th, part, now)
		requireSameResult(t, a, b, i)
		require.True(t, proto.Equal(whole, verdict), "outcome %d: the statuses differ:\n%v\n%v", i, whole, verdict)
		transitions += len(a.Transitions)
		if a.Timer != nil {
			// The cool-off ends on time: the breaker goes half-open.
			at := a.Timer.GetFireAt().AsTime()
			if at.After(now) {
				now = at
			}
			requireSameResult(t, circuit.OnTimer(whole, th, a.Timer, now), circuit.OnTimer(verdict, th, b.Timer, now), i)
		}
	}
	require.Greater(t, transitions, 4, "the outcomes must trip and close the breaker to test anything")
}

func requireSameResult(t *testing.T, a, b circuit.Result, i int) {
	t.Helper()
	require.Equal(t, a.Changed, b.Changed, "outcome %d", i)
	require.Equal(t, a.Ignored, b.Ignored, "outcome %d", i)
	require.Equal(t, len(a.Transitions), len(b.Transitions), "outcome %d", i)
	for k := range a.Transitions {
		require.True(t, proto.Equal(a.Transitions[k], b.Transitions[k]), "outcome %d: %v / %v", i, a.Transitions[k], b.Transitions[k])
	}
	require.True(t, proto.Equal(a.Timer, b.Timer), "outcome %d: %v / %v", i, a.Timer, b.Timer)
}

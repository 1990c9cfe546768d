package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/schematest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// userTopic is a Kafka-target topic on the rig's allowlist besides the
// breaker's.
const userTopic = "app.events"

// largestSpec is the largest job validation accepts (schematest), as job
// ns1/job1 of the rig, with a retry policy that keeps its fires open.
func largestSpec(t *testing.T, s *chimev1.Schedule, kafka bool) *chimev1.JobSpec {
	t.Helper()
	topic := ""
	if kafka {
		topic = userTopic
	}
	spec := schematest.LargestSpec(s, topic)
	spec.Namespace, spec.Id = "ns1", "job1"
	spec.Retry = &chimev1.RetryPolicy{MaxAttempts: schema.MaxRetryAttempts, InitialInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Second), Multiplier: 1}
	require.NoError(t, schema.ValidateCommand(schematest.Upsert(spec), schema.ValidateOptions{}), "the job is valid")
	return spec
}

// failedAttempt is the largest outcome a dispatcher reports for a due: the
// error quotes the URL, the body snippet is a full KiB.
func failedAttempt(due *chimev1.Due) *chimev1.CallbackOutcome {
	return &chimev1.CallbackOutcome{
		EventId: strings.Repeat("o", 200), Namespace: due.GetNamespace(), JobId: due.GetJobId(), FireSeq: due.GetFireSeq(), Attempt: due.GetAttempt(),
		Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: 500, ErrorKind: "http",
		Error:       "HTTP 500 from " + due.GetCallback().GetUrl() + ": " + strings.Repeat("e", 2048),
		BodySnippet: make([]byte, 1024), Url: due.GetCallback().GetUrl(), Method: "POST", DispatcherId: strings.Repeat("d", 64),
	}
}

func retryOf(due *chimev1.Due, notBefore time.Time) *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
		FireSeq: due.FireSeq, EmitSeq: due.EmitSeq, Attempt: due.Attempt + 1, NotBefore: timestamppb.New(notBefore),
		Reason: "HTTP 500", Outcome: failedAttempt(due)}}}
}

func trigger() *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}}
}

// TestTriggeredFiresAreBounded: a job whose fires stay open (an endpoint
// answering 500, retries an hour apart) triggered far more often than it
// can hold: triggers beyond MaxOpenFires are refused, and the row, with
// every fire's attempt history, stays within the row budget (the rig checks
// every decision). Before, 380 such triggers made a row Kafka refused and
// stopped the scheduler for every tenant.
func TestTriggeredFiresAreBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(largestSpec(t, at(t0.Add(24*time.Hour)), false), t0), t0)
	now := t0
	const triggers = 700
	for i := range triggers {
		now = now.Add(30 * time.Millisecond)
		r.command(trigger(), now)
		if len(r.rejects) > 0 {
			require.Equal(t, schema.MaxOpenFires, i, "refused only at the bound")
			break
		}
		due := r.dues[len(r.dues)-1]
		r.command(retryOf(due, now.Add(time.Hour)), now)
	}
	require.Len(t, r.st.Open, schema.MaxOpenFires)
	require.Len(t, r.st.Pending, schema.MaxOpenFires, "every open fire waits for its retry")
	r.command(trigger(), now.Add(time.Second))
	last := r.rejects[len(r.rejects)-1]
	require.Equal(t, "trigger", last.Field)
	require.Contains(t, last.Reason, "256 fires awaiting their outcome")

	// The retries come due together: each due carries its history, and the
	// answers grow every fire's history past what the row can hold (256
	// fires with 4 attempts of 1 KB each and a 100 KB spec).
	for round := range 4 {
		now = now.Add(time.Hour)
		before := len(r.dues)
		r.tick(now)
		require.Greater(t, len(r.dues), before, "round %d fired the retries", round)
		for _, due := range r.dues[before:] {
			r.command(retryOf(due, now.Add(time.Hour)), now)
		}
	}
	require.LessOrEqual(t, len(r.st.Open), schema.MaxOpenFires)
}

// TestRecurringFiresAreBounded: a recurring job firing every second whose
// every attempt fails, with retries a second apart: fires stay open for
// their hundred attempts, each growing a full history. The oldest fires
// lose their history first; with a budget too small even for their bare
// records, the oldest close as dead. Small budgets and spec make the test
// quick; the shedding is the same at the real budget
// (TestTriggeredFiresAreBounded).
func TestRecurringFiresAreBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		budget int
		dead   bool
	}{{32 << 10, false}, {3 << 10, true}} {
		r := newRig(t, func(c *Config) { c.MaxRowBytes = tc.budget })
		spec := httpSpec(every(time.Second))
		spec.Retry = &chimev1.RetryPolicy{MaxAttempts: schema.MaxRetryAttempts, InitialInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Second), Multiplier: 1}
		r.command(upsert(spec, t0), t0)
		now := t0
		const seconds = 80
		for range seconds {
			now = now.Add(time.Second)
			before := len(r.dues)
			r.tick(now)
			for _, due := range r.dues[before:] {
				r.command(retryOf(due, now.Add(time.Second)), now)
			}
		}
		dead := 0
		for _, ev := range r.events {
			if ev.Type == chimev1.JobEventType_JOB_EVENT_TYPE_DEAD {
				dead++
				require.Contains(t, ev.Detail, "row within")
			}
		}
		if tc.dead {
			require.Positive(t, dead, "the oldest open fires closed as dead to keep the row in budget")
			continue
		}
		require.Zero(t, dead)
		require.Len(t, r.st.Open, seconds, "every fire stays open")
		oldest, newest := r.st.Pending[0], r.st.Pending[len(r.st.Pending)-1]
		require.Less(t, oldest.GetFireSeq(), newest.GetFireSeq())
		require.Empty(t, oldest.History, "the oldest fire's history was shed")
		require.NotEmpty(t, newest.History, "the newest fire keeps its history")
		h := newest.History[len(newest.History)-1]
		require.Empty(t, h.Url, "the URL is the spec's")
		require.LessOrEqual(t, len(h.Error), schema.MaxHistoryError)
		require.LessOrEqual(t, len(h.BodySnippet), schema.MaxHistorySnippet)
	}
}

// TestKafkaTargetRowIsBounded: a recurring Kafka-target job firing faster
// than its writes are confirmed: the row does not copy the value per write
// (the largest value fits 120 unconfirmed writes); when the spec changes,
// the writes of the old one keep a copy of what they wrote, within budget
// (the largest value's copies are shed: a row cannot hold two).
func TestKafkaTargetRowIsBounded(t *testing.T) {
	t.Parallel()
	for _, largest := range []bool{false, true} {
		r := newRig(t)
		spec := largestSpec(t, every(time.Second), true)
		if !largest {
			spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Key: []byte("k"), Value: []byte("v1")}}}
		}
		r.command(upsert(spec, t0), t0)
		now := t0
		for range 120 {
			now = now.Add(time.Second)
			r.tick(now)
		}
		require.Len(t, r.st.Unconfirmed, 120)
		next := proto.CloneOf(spec)
		next.GetTarget().GetKafka().Value = []byte("v2")
		r.command(upsert(next, now), now)
		if largest {
			continue // the rig checked the budget
		}
		require.Len(t, r.st.Unconfirmed, 120)
		for _, u := range r.st.Unconfirmed {
			require.Equal(t, "v1", string(deliveredTarget(r.st, u).GetValue()), "a write re-sent after a restart is what was written")
		}
	}
}

// TestBreakerTimerTopicIsChimesOwn: only chime's reserved jobs may write to
// the breaker's timer topic, which the breaker takes as its own timers.
func TestBreakerTimerTopicIsChimesOwn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(at(t0.Add(time.Second)))
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: r.d.cfg.Topics.BreakerTimers(), Key: []byte("ns1"), Value: []byte("x")}}}
	r.command(upsert(spec, t0), t0)
	require.Nil(t, r.st)
	require.Len(t, r.rejects, 1)
	require.Contains(t, r.rejects[0].Reason, "chime's own")
}

// TestRejectionOfAHugeCommandFits: a command near Kafka's limit that is
// refused makes a rejection that carries only its beginning.
func TestRejectionOfAHugeCommandFits(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	raw := make([]byte, 1<<20-100) // does not decode
	for i := range raw {
		raw[i] = 0xff
	}
	r.off++
	dec := r.d.onCommand(&input{key: r.key, topic: "cmds", offset: r.off, raw: raw}, nil, t0)
	require.NoError(t, dec.oversized())
	require.NotNil(t, dec.rejection)
	require.Len(t, dec.rejection.Command, schema.MaxRejectedCommand)
	require.EqualValues(t, len(raw), dec.rejection.CommandSize)
}

// TestOversizedDecisionIsRefused: the last check before writing catches a
// record over the limit, whatever made it.
func TestOversizedDecisionIsRefused(t *testing.T) {
	t.Parallel()
	big := &chimev1.JobState{LastDetail: strings.Repeat("x", schema.MaxRecordBytes)}
	require.ErrorContains(t, decision{state: big}.oversized(), "row would be")
	require.NoError(t, decision{state: big, del: true}.oversized())
	require.ErrorContains(t, decision{events: []*chimev1.JobEvent{{Detail: big.LastDetail}}}.oversized(), "job event")
}

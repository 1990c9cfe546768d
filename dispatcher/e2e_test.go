package dispatcher

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestRetriesEndToEnd runs the real scheduler beside the dispatcher: jobs
// are scheduled through the producer, Retry commands come back as dues
// with the next attempt, and each fire ends with one Ack.
func TestRetriesEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.startScheduler()
	b.start()
	p := b.producer()

	hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	cases := []struct {
		name    string
		script  []http.HandlerFunc
		timeout time.Duration
		calls   int
		classes []chimev1.OutcomeClass
		ack     chimev1.AckResult
		dead    bool
	}{
		{"500-then-200", []http.HandlerFunc{status(500), status(200)}, 0, 2,
			[]chimev1.OutcomeClass{chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS},
			chimev1.AckResult_ACK_RESULT_SUCCEEDED, false},
		{"timeout-then-200", []http.HandlerFunc{hang, status(204)}, 300 * time.Millisecond, 2,
			[]chimev1.OutcomeClass{chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS},
			chimev1.AckResult_ACK_RESULT_SUCCEEDED, false},
		{"always-503", []http.HandlerFunc{status(503)}, 0, 3,
			[]chimev1.OutcomeClass{chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE},
			chimev1.AckResult_ACK_RESULT_DEAD, true},
		{"400-stops", []http.HandlerFunc{status(400), status(200)}, 0, 1,
			[]chimev1.OutcomeClass{chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT},
			chimev1.AckResult_ACK_RESULT_FAILED, true},
	}
	rcvs := map[string]*receiver{}
	at := time.Now().Add(time.Second)
	for _, c := range cases {
		r := newReceiver(t, c.script...)
		rcvs[c.name] = r
		cb := &chimev1.HttpCallback{Url: r.URL + "/" + c.name, Body: []byte(c.name)}
		if c.timeout > 0 {
			cb.Timeout = durationpb.New(c.timeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Schedule(ctx, &chimev1.JobSpec{
			Namespace: "e2e", Id: c.name,
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(at)}},
			Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: cb}},
			Retry:    &chimev1.RetryPolicy{MaxAttempts: 3, InitialInterval: durationpb.New(200 * time.Millisecond), MaxInterval: durationpb.New(time.Second)},
		})
		cancel()
		require.NoError(t, err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "e2e/" + c.name
			waitFor(t, 60*time.Second, "the fire's ack", func() bool { return ackOf(b.commands.get(key)) != nil })
			calls := rcvs[c.name].calls()
			require.Len(t, calls, c.calls)
			for i, call := range calls {
				require.Equal(t, key+"/1", call.header.Get("Idempotency-Key"), "same key on every attempt")
				require.Equal(t, string(rune('1'+i)), call.header.Get("X-Chime-Attempt"))
			}
			waitFor(t, 10*time.Second, "outcomes", func() bool { return len(b.outcomes.get(key)) == len(c.classes) })
			for i, o := range b.outcomes.get(key) {
				require.Equal(t, c.classes[i], o.Class, "attempt %d", i+1)
				require.EqualValues(t, i+1, o.Attempt)
				require.EqualValues(t, 1, o.FireSeq)
			}
			require.Equal(t, c.ack, ackOf(b.commands.get(key)).Result)
			if c.dead {
				waitFor(t, 10*time.Second, "dead letter", func() bool { return len(b.dead.get(key)) == 1 })
				// The dead letter lists every attempt, in order: the
				// earlier ones travelled with the Retry commands through
				// the scheduler's row and the next due events.
				dl := b.dead.get(key)[0]
				require.Len(t, dl.GetAttempts(), len(c.classes))
				for i, a := range dl.GetAttempts() {
					require.EqualValues(t, i+1, a.GetAttempt())
					require.Equal(t, c.classes[i], a.GetClass())
					require.NotZero(t, a.GetStatusCode(), "attempt %d", i+1)
					require.Equal(t, b.outcomes.get(key)[i].EventId, a.GetEventId(), "attempt %d is the outcome event", i+1)
				}
				require.Len(t, dl.GetDue().GetHistory(), len(c.classes)-1, "the last due carried the earlier attempts")
			} else {
				require.Empty(t, b.dead.get(key))
			}
		})
	}
	// Nothing fires after the acks: a marker job scheduled now fires after
	// any stray re-emission would have.
	r := newReceiver(t, status(200))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.Schedule(ctx, &chimev1.JobSpec{
		Namespace: "e2e", Id: "marker",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(time.Now().Add(2 * time.Second))}},
		Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: r.URL}}},
	})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "marker", func() bool { return len(r.calls()) == 1 })
	for _, c := range cases {
		require.Len(t, rcvs[c.name].calls(), c.calls, c.name)
	}
}

package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// tickEarly ticks the row when its storage would (tick_at, FireLead before
// the timer for an HTTP fire), as the pump does.
func (r *rig) tickEarly() time.Time {
	r.t.Helper()
	at := r.st.GetTimerAt().AsTime()
	if r.st.GetTickAt() != nil {
		at = r.st.GetTickAt().AsTime()
	}
	raw, err := schema.JobStateCodec{}.Encode(r.st)
	require.NoError(r.t, err)
	header, _ := schema.JobStateTimer(raw)
	require.Equal(r.t, at.UnixNano(), header, "the storage indexes tick_at")
	r.tick(at)
	return at
}

// TestHTTPFiresLeaveAheadOfTime: an HTTP job's occurrences and retries
// are emitted FireLead before their time, carrying it as fire_at (the
// dispatcher calls then); the catch-up after downtime still counts only
// what is past; a Kafka target is written at its time.
func TestHTTPFiresLeaveAheadOfTime(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	lead := r.d.cfg.FireLead
	require.Equal(t, DefaultFireLead, lead)
	r.command(upsert(httpSpec(every(time.Second)), t0), t0)
	first := r.st.GetNextScheduledAt().AsTime()
	require.Equal(t, first.Add(-lead), r.st.GetTickAt().AsTime())

	early := r.tickEarly()
	require.Len(t, r.dues, 1)
	d := r.dues[0]
	require.Equal(t, early, d.EmittedAt.AsTime(), "emitted early")
	require.Equal(t, first, d.FireAt.AsTime(), "called at its time")
	require.Equal(t, first, d.ScheduledAt.AsTime())
	require.Equal(t, first, r.st.GetLastFiredAt().AsTime(), "last_fired_at is the fire's time, not its emission's")
	// The occurrences within the lead go too, one per tick, none skipped.
	r.tickEarly()
	r.tickEarly()
	require.Len(t, r.dues, 3)
	for i, d := range r.dues {
		require.EqualValues(t, i+1, d.FireSeq)
		require.Equal(t, first.Add(time.Duration(i)*time.Second), d.FireAt.AsTime())
	}
	require.Zero(t, r.st.Skipped)

	// A retry leaves early too, carrying its not-before as fire_at.
	retryAt := early.Add(time.Minute)
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
		FireSeq: 1, EmitSeq: r.dues[0].EmitSeq, Attempt: 2, NotBefore: timestamppb.New(retryAt)}}}, early)
	r.tick(retryAt.Add(-lead))
	var retried *chimev1.Due
	for _, d := range r.dues {
		if d.FireSeq == 1 && d.Attempt == 2 {
			retried = d
		}
	}
	require.NotNil(t, retried)
	require.Equal(t, retryAt, retried.FireAt.AsTime())

	// A Kafka target is written by the scheduler at its time: no lead.
	k := newRig(t)
	spec := httpSpec(at(t0.Add(time.Minute)))
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Value: []byte("v")}}}
	k.command(upsert(spec, t0), t0)
	require.Nil(t, k.st.GetTickAt())
	k.tick(t0.Add(time.Minute - time.Second))
	require.Empty(t, k.deliver, "not before its time")
	k.tick(t0.Add(time.Minute))
	require.Len(t, k.deliver, 1)
}

// TestFiresWithinALeadRoundTickTogether: the fires whose time less
// FireLead falls in one LeadRound get one tick instant (rounded down), so
// the pump serves them in one round and their dues leave in one record
// per due partition; each due carries its exact time and leaves between
// FireLead and FireLead + LeadRound early. With LeadRound Off each fire is
// ticked exactly FireLead early.
func TestFiresWithinALeadRoundTickTogether(t *testing.T) {
	t.Parallel()
	base := t0.Add(10 * time.Second) // a multiple of 100 ms
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		round   time.Duration
		fires   []time.Duration // after base
		tickAts []time.Duration // the rows' tick_at, after base
	}{
		{"default round", 0, []time.Duration{0, 10 * ms, 50 * ms, 99 * ms, 100 * ms, 150 * ms}, []time.Duration{-2000 * ms, -2000 * ms, -2000 * ms, -2000 * ms, -1900 * ms, -1900 * ms}},
		{"a second's round", time.Second, []time.Duration{-1 * ms, 0, 999 * ms}, []time.Duration{-3000 * ms, -2000 * ms, -2000 * ms}},
		{"off", Off, []time.Duration{10 * ms, 50 * ms}, []time.Duration{-1990 * ms, -1950 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i, off := range tc.fires {
				r := newRig(t, func(c *Config) { c.LeadRound = tc.round })
				fire := base.Add(off)
				r.command(upsert(httpSpec(at(fire)), t0), t0)
				require.Equal(t, base.Add(tc.tickAts[i]), r.st.GetTickAt().AsTime(), "fire at base%+v", off)
				r.tickEarly()
				require.Len(t, r.dues, 1, "the tick at tick_at serves the fire")
				d := r.dues[0]
				require.Equal(t, fire, d.FireAt.AsTime(), "called at its exact time")
				lead := fire.Sub(d.EmittedAt.AsTime())
				require.GreaterOrEqual(t, lead, DefaultFireLead)
				require.LessOrEqual(t, lead, r.d.cfg.maxLead())
			}
		})
	}
}

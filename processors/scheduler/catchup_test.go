package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

func catchupRig(t *testing.T, s *chimev1.Schedule, policy chimev1.CatchupPolicy, window time.Duration) *rig {
	r := newRig(t)
	spec := httpSpec(s)
	spec.Catchup = policy
	if window > 0 {
		spec.CatchupWindow = durationpb.New(window)
	}
	r.command(upsert(spec, t0), t0)
	return r
}

func scheduledTimes(dues []*chimev1.Due) []time.Time {
	var out []time.Time
	for _, d := range dues {
		out = append(out, d.GetScheduledAt().AsTime())
	}
	return out
}

// TestCatchupPolicies: after ten minutes of downtime, latest fires the
// latest missed occurrence, none only one within the window, all every
// one within the window in order; the rest are skipped, all keep their
// numbers.
func TestCatchupPolicies(t *testing.T) {
	t.Parallel()
	back := t0.Add(10*time.Minute + 30*time.Second) // occurrences at 1m ... 10m missed
	for _, tc := range []struct {
		name    string
		policy  chimev1.CatchupPolicy
		window  time.Duration
		fired   []time.Duration
		skipped uint64
	}{
		{"latest (the default)", chimev1.CatchupPolicy_CATCHUP_POLICY_UNSPECIFIED, 0, []time.Duration{10 * time.Minute}, 9},
		{"none, the latest within the window fires", chimev1.CatchupPolicy_CATCHUP_POLICY_NONE, 0, []time.Duration{10 * time.Minute}, 9},
		{"none, nothing within the window", chimev1.CatchupPolicy_CATCHUP_POLICY_NONE, 10 * time.Second, nil, 10},
		{"all within 5 minutes", chimev1.CatchupPolicy_CATCHUP_POLICY_ALL, 5 * time.Minute,
			[]time.Duration{6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := catchupRig(t, every(time.Minute), tc.policy, tc.window)
			r.tick(back)
			var want []time.Time
			for _, d := range tc.fired {
				want = append(want, t0.Add(d))
			}
			require.Equal(t, want, scheduledTimes(r.dues))
			for i, d := range r.dues {
				require.EqualValues(t, d.GetScheduledAt().AsTime().Sub(t0)/time.Minute, d.GetFireSeq(), "fire %d keeps its number", i)
			}
			require.Equal(t, tc.skipped, r.st.GetSkipped())
			require.EqualValues(t, 10, r.st.GetFireSeq())
			require.Equal(t, t0.Add(11*time.Minute), r.st.GetNextScheduledAt().AsTime())
		})
	}
}

// TestCatchupAllAcrossADSTChange: every hourly occurrence of a cron job in
// Berlin missed over the night the clocks go back fires once, in order,
// as the schedule counts them.
func TestCatchupAllAcrossADSTChange(t *testing.T) {
	t.Parallel()
	s := &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "30 * * * *", Timezone: "Europe/Berlin"}}}
	created := time.Date(2026, 10, 24, 20, 0, 0, 0, time.UTC)
	r := newRig(t)
	spec := httpSpec(s)
	spec.Catchup, spec.CatchupWindow = chimev1.CatchupPolicy_CATCHUP_POLICY_ALL, durationpb.New(12*time.Hour)
	r.command(upsert(spec, created), created)
	back := time.Date(2026, 10, 25, 6, 0, 0, 0, time.UTC)
	r.tick(back)
	plan, err := schedule.Compile(s)
	require.NoError(t, err)
	first, _ := plan.First(created)
	var want []time.Time
	for _, f := range plan.Upcoming(r.key, first, 0, 100) {
		if f.ScheduledAt.After(back) {
			break
		}
		want = append(want, f.ScheduledAt)
	}
	require.Len(t, want, 9, "20:30Z to 05:30Z: the wall time 02:30 comes twice, and fires once (at 00:30Z), as chime's DST rule says")
	require.Equal(t, want, scheduledTimes(r.dues))
	require.Zero(t, r.st.GetSkipped())
}

// TestCatchupAfterAPause: occurrences in a pause are skipped (as always)
// unless the job asks for latest or all itself.
func TestCatchupAfterAPause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy chimev1.CatchupPolicy
		fired  []time.Duration
	}{
		{chimev1.CatchupPolicy_CATCHUP_POLICY_UNSPECIFIED, nil},
		{chimev1.CatchupPolicy_CATCHUP_POLICY_LATEST, []time.Duration{4 * time.Minute}},
		{chimev1.CatchupPolicy_CATCHUP_POLICY_ALL, []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute}},
	} {
		r := catchupRig(t, every(time.Minute), tc.policy, 5*time.Minute)
		r.runUntil(t0.Add(time.Minute))
		r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(70*time.Second))
		resumed := t0.Add(4*time.Minute + 30*time.Second)
		r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, resumed)
		if at := r.st.GetTimerAt(); at != nil && !at.AsTime().After(resumed) {
			r.tick(resumed) // the pump ticks a row whose timer has passed at once
		}
		want := []time.Time{t0.Add(time.Minute)}
		for _, d := range tc.fired {
			want = append(want, t0.Add(d))
		}
		require.Equal(t, want, scheduledTimes(r.dues), "policy %v", tc.policy)
	}
}

package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestMaxFiresEndsTheSchedule: a job with max_fires ends once its schedule
// has fired that many times: occurrences skipped in a pause, triggered
// fires and retries do not count; the last fire's answer completes it.
func TestMaxFiresEndsTheSchedule(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(every(time.Minute))
	spec.MaxFires = 3
	r.command(upsert(spec, t0), t0)
	r.runUntil(t0.Add(time.Minute))
	require.Len(t, r.dues, 1)

	// A trigger fires beside the schedule and does not count.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}}, t0.Add(70*time.Second))
	require.Len(t, r.dues, 2)
	// Occurrences skipped in a pause do not count.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(75*time.Second))
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, t0.Add(5*time.Minute+10*time.Second))
	r.runUntil(t0.Add(time.Hour))
	require.Len(t, r.dues, 4, "three scheduled fires and the trigger")
	require.EqualValues(t, 3, r.st.GetScheduledFires())
	require.EqualValues(t, 4, r.st.GetFires())
	require.Nil(t, r.st.GetNextScheduledAt(), "no occurrence left")
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.GetStatus(), "its fires await their answers")

	for _, d := range r.dues {
		r.command(ack(d, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Hour))
	}
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.GetStatus())

	// Raising max_fires with an update continues the schedule.
	spec2 := httpSpec(every(time.Minute))
	spec2.MaxFires = 4
	r.command(upsert(spec2, t0.Add(time.Hour+time.Second)), t0.Add(time.Hour+time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.GetStatus())
	r.runUntil(t0.Add(2 * time.Hour))
	require.Len(t, r.dues, 5)
	require.Nil(t, r.st.GetNextScheduledAt())
}

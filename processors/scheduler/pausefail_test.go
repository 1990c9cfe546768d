package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestPauseOnFailure: a recurring job with pause_on_failure pauses itself
// when a fire ends DEAD or FAILED, saying why (its last detail and a
// PAUSED event naming the fire); without it, the job goes on firing. A
// resume continues the schedule.
func TestPauseOnFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opt    bool
		result chimev1.AckResult
		paused bool
	}{
		{"dead, opted in", true, chimev1.AckResult_ACK_RESULT_DEAD, true},
		{"failed, opted in", true, chimev1.AckResult_ACK_RESULT_FAILED, true},
		{"succeeded, opted in", true, chimev1.AckResult_ACK_RESULT_SUCCEEDED, false},
		{"dead, not opted in", false, chimev1.AckResult_ACK_RESULT_DEAD, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			spec := httpSpec(every(time.Minute))
			spec.PauseOnFailure = tc.opt
			r.command(upsert(spec, t0), t0)
			r.runUntil(t0.Add(time.Minute))
			require.Len(t, r.dues, 1)
			r.command(ack(r.dues[0], tc.result), t0.Add(70*time.Second))
			if !tc.paused {
				require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.GetStatus())
				r.runUntil(t0.Add(2 * time.Minute))
				require.Len(t, r.dues, 2, "it goes on firing")
				return
			}
			require.Equal(t, chimev1.JobStatus_JOB_STATUS_PAUSED, r.st.GetStatus())
			require.Contains(t, r.st.GetLastDetail(), "paused on failure (pause_on_failure): fire 1 ended")
			last := r.events[len(r.events)-1]
			require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_PAUSED, last.GetType())
			require.EqualValues(t, 1, last.GetFireSeq())
			r.tick(t0.Add(5 * time.Minute))
			require.Len(t, r.dues, 1, "a paused job does not fire")
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, t0.Add(5*time.Minute+10*time.Second))
			r.runUntil(t0.Add(6 * time.Minute))
			require.Len(t, r.dues, 2, "resumed, it fires on its schedule")
		})
	}
}

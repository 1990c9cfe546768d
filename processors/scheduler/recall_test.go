package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

func cancelCmd() *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "refunded"}}}
}

func pauseCmd() *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}
}

func resumeCmd() *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}
}

// TestControlsBeforeAFireRecallIt: a due event leaves FireLead (2 s)
// before its time; a cancel, pause or update applied before the time (by
// more than RecallMargin) takes it back, and the row says what becomes of
// the fire. Nearer than the margin, the fire goes out as emitted.
func TestControlsBeforeAFireRecallIt(t *testing.T) {
	t.Parallel()
	fireAt := t0.Add(time.Minute)
	before := fireAt.Add(-1200 * time.Millisecond)
	for _, tc := range []struct {
		name     string
		schedule *chimev1.Schedule
		control  func(r *rig)
		check    func(t *testing.T, r *rig)
	}{
		{
			name:     "cancel of a recurring job",
			schedule: every(time.Minute),
			control:  func(r *rig) { r.command(cancelCmd(), before) },
			check: func(t *testing.T, r *rig) {
				require.Len(t, r.recalls, 1)
				require.Equal(t, chimev1.JobStatus_JOB_STATUS_CANCELLED, r.st.Status)
				require.Empty(t, r.st.Open, "the recalled fire is not waited for")
				require.Zero(t, r.st.Fires)
				r.runUntil(t0.Add(time.Hour))
				require.Len(t, r.dues, 1, "nothing fires after the cancel")
			},
		},
		{
			name:     "pause of a one-shot",
			schedule: at(fireAt),
			control:  func(r *rig) { r.command(pauseCmd(), before) },
			check: func(t *testing.T, r *rig) {
				require.Len(t, r.recalls, 1)
				require.Equal(t, chimev1.JobStatus_JOB_STATUS_PAUSED, r.st.Status)
				require.Empty(t, r.st.Open)
				require.Len(t, r.st.Pending, 1, "the fire waits for the resume")
				require.Nil(t, r.st.TimerAt)
				r.runUntil(t0.Add(time.Hour))
				require.Len(t, r.dues, 1, "nothing while paused")
				r.command(resumeCmd(), fireAt.Add(time.Minute))
				r.runUntil(fireAt.Add(2 * time.Minute))
				require.Len(t, r.dues, 2, "it fires on resume")
				require.EqualValues(t, 1, r.dues[1].FireSeq, "the same occurrence, the same idempotency key")
				require.Greater(t, r.dues[1].EmitSeq, r.dues[0].EmitSeq)
			},
		},
		{
			name:     "pause of a recurring job",
			schedule: every(time.Minute),
			control:  func(r *rig) { r.command(pauseCmd(), before) },
			check: func(t *testing.T, r *rig) {
				require.Len(t, r.recalls, 1)
				require.Empty(t, r.st.Open)
				require.Empty(t, r.st.Pending, "an occurrence in the pause is skipped")
				require.EqualValues(t, 1, r.st.Skipped)
				require.Zero(t, r.st.Fires)
			},
		},
		{
			name:     "update of a one-shot's target",
			schedule: at(fireAt),
			control: func(r *rig) {
				spec := httpSpec(at(fireAt))
				spec.Target.GetHttp().Url = "https://example.com/new"
				r.command(upsert(spec, before), before)
			},
			check: func(t *testing.T, r *rig) {
				require.Len(t, r.recalls, 1)
				require.Len(t, r.dues, 2)
				d := r.dues[1]
				require.Equal(t, "https://example.com/new", d.Callback.Url, "it goes out under the new spec")
				require.EqualValues(t, 1, d.FireSeq)
				require.Equal(t, fireAt, d.FireAt.AsTime(), "at its time")
				require.EqualValues(t, 1, r.st.Fires)
				require.Len(t, r.st.Open, 1)
			},
		},
		{
			name:     "update of a one-shot's time",
			schedule: at(fireAt),
			control:  func(r *rig) { r.command(upsert(httpSpec(at(fireAt.Add(time.Hour))), before), before) },
			check: func(t *testing.T, r *rig) {
				require.Len(t, r.recalls, 1)
				require.Len(t, r.dues, 1, "nothing at the old time")
				require.Empty(t, r.st.Open)
				require.Zero(t, r.st.Fires)
				r.runUntil(fireAt.Add(2 * time.Hour))
				require.Len(t, r.dues, 2)
				require.Equal(t, fireAt.Add(time.Hour), r.dues[1].FireAt.AsTime())
			},
		},
		{
			name:     "cancel within the margin",
			schedule: at(fireAt),
			control:  func(r *rig) { r.command(cancelCmd(), fireAt.Add(-50*time.Millisecond)) },
			check: func(t *testing.T, r *rig) {
				require.Empty(t, r.recalls, "the dispatcher may be calling already")
				require.Len(t, r.st.Open, 1, "its answer is still taken")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.command(upsert(httpSpec(tc.schedule), t0), t0)
			r.tickEarly()
			require.Len(t, r.dues, 1)
			tc.control(r)
			for _, rc := range r.recalls {
				require.True(t, rc.Recall)
				require.Equal(t, r.dues[0].FireSeq, rc.FireSeq)
				require.Equal(t, r.dues[0].EmitSeq, rc.EmitSeq)
				require.Equal(t, r.dues[0].IdempotencyKey, rc.IdempotencyKey)
			}
			tc.check(t, r)
		})
	}
}

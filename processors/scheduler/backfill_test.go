package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

func backfillCmd(from, to time.Time) *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Backfill{Backfill: &chimev1.Backfill{From: timestamppb.New(from), To: timestamppb.New(to)}}}
}

// TestBackfillFiresAPastRange: the occurrences in [from, to) fire now,
// each with its own number and idempotency key; the schedule's next
// occurrence is unchanged; a repeat of the command fires nothing more.
func TestBackfillFiresAPastRange(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
	next := r.st.GetNextScheduledAt().AsTime()
	now := t0.Add(30 * time.Minute)
	cmd := backfillCmd(t0.Add(-5*time.Hour), t0.Add(-2*time.Hour))
	cmd.CommandId = "bf1"
	r.command(cmd, now)
	require.Len(t, r.dues, 3, "-5h, -4h and -3h: the hourly grid extended back from the job's first occurrence")
	keys := map[string]bool{}
	for i, d := range r.dues {
		require.EqualValues(t, i+1, d.GetFireSeq())
		require.Equal(t, now, d.GetFireAt().AsTime(), "goes out now")
		keys[d.GetIdempotencyKey()] = true
	}
	require.Len(t, keys, 3)
	require.Equal(t, next, r.st.GetNextScheduledAt().AsTime(), "the schedule's next occurrence is unchanged")
	r.command(cmd, now.Add(time.Second))
	require.Len(t, r.dues, 3, "the same backfill again fires nothing")
}

// TestBackfillUnderSkip: under overlap skip, the backfilled occurrences
// after the first are skipped while it is open.
func TestBackfillUnderSkip(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(every(time.Hour))
	spec.Overlap = chimev1.OverlapPolicy_OVERLAP_POLICY_SKIP
	r.command(upsert(spec, t0), t0)
	r.command(backfillCmd(t0.Add(-5*time.Hour), t0.Add(-2*time.Hour)), t0.Add(time.Minute))
	require.Len(t, r.dues, 1)
	require.EqualValues(t, 2, r.st.GetSkipped())
}

// TestBackfillRefusals: a range with too many occurrences, one reaching
// into the future, or a one-shot is rejected, saying why.
func TestBackfillRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
	r.command(backfillCmd(t0.Add(-3*time.Hour), t0), t0.Add(time.Second))
	require.Contains(t, r.rejects[len(r.rejects)-1].GetReason(), "more than 100 occurrences")
	r.command(backfillCmd(t0.Add(-time.Hour), t0.Add(time.Hour)), t0.Add(time.Second))
	require.Contains(t, r.rejects[len(r.rejects)-1].GetReason(), "is after now")
	require.Empty(t, r.dues)

	one := newRig(t)
	one.command(upsert(httpSpec(at(t0.Add(time.Hour))), t0), t0)
	one.command(backfillCmd(t0.Add(-time.Hour), t0), t0.Add(time.Second))
	require.Contains(t, one.rejects[len(one.rejects)-1].GetReason(), "one-shot")
}

package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestCreateForAnUnknownNamespaceIsRejected: a job published straight to
// Kafka for a namespace that does not exist is held, never fired, and
// rejected once the wait is over; the API refuses the same job with 404.
func TestCreateForAnUnknownNamespaceIsRejected(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.ns = nsAbsent
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	require.True(t, heldRow(r.st))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_UNSPECIFIED, r.st.GetStatus(), "a held create is not listed or counted (jobstore)")
	require.Empty(t, r.events)
	before := r.off
	r.runUntil(t0.Add(2 * DefaultNamespaceWait))
	checks := r.off - before
	for _, c := range r.rejects {
		require.Equal(t, "namespace", c.Field)
	}
	require.Empty(t, r.dues, "never fired")
	require.True(t, r.deleted)
	require.Len(t, r.rejects, 1)
	require.Contains(t, r.rejects[0].Reason, `namespace "ns1" does not exist`)
	require.NotEmpty(t, r.rejects[0].Command, "the rejection carries the command, for replay after the namespace is created")
	require.NotEmpty(t, r.rejects[0].CommandId)
	require.Less(t, checks, int64(12), "looked at again at doubling intervals, not every tick")
}

// TestHeldCreateIsAppliedWhenItsNamespaceArrives: the scheduler's namespace
// view may lag the API's, so a create for a namespace it does not know yet
// waits for it, and is then applied as if it had just arrived: anchored at
// its issue time, fired at its time.
func TestHeldCreateIsAppliedWhenItsNamespaceArrives(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.ns = nsAbsent
	r.command(upsert(httpSpec(every(time.Second)), t0), t0)
	require.True(t, heldRow(r.st))
	first := r.st.GetTimerAt().AsTime()
	require.Equal(t, t0.Add(firstNamespaceCheck), first)

	// Other commands on a held create are refused; the view failing to
	// answer keeps it held past its deadline.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(time.Millisecond))
	require.Len(t, r.rejects, 1)
	require.Contains(t, r.rejects[0].Reason, "is not created yet")
	r.ns = nsUnreadable
	r.tick(t0.Add(DefaultNamespaceWait + time.Second))
	require.True(t, heldRow(r.st), "not rejected while the namespace view cannot answer")

	r.ns = nsKnown
	now := t0.Add(DefaultNamespaceWait + 2*time.Second)
	r.tick(now)
	require.False(t, heldRow(r.st))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.Status)
	require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_CREATED, r.events[len(r.events)-1].Type)
	require.Equal(t, t0, r.st.GetAnchor().AsTime(), "anchored when it was issued")
	r.tick(now)
	require.Len(t, r.dues, 1, "the catch-up fire after the wait")
}

package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

func overlapRig(t *testing.T, policy chimev1.OverlapPolicy) *rig {
	r := newRig(t, func(c *Config) { c.FireLead = 2 * time.Second })
	spec := httpSpec(every(time.Minute))
	spec.Overlap = policy
	r.command(upsert(spec, t0), t0)
	return r
}

func retryAt(d *chimev1.Due, notBefore time.Time) *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
		FireSeq: d.FireSeq, EmitSeq: d.EmitSeq, Attempt: d.Attempt + 1, NotBefore: timestamppb.New(notBefore), Reason: "503"}}}
}

func (r *rig) lastEvent(typ chimev1.JobEventType) *chimev1.JobEvent {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].GetType() == typ {
			return r.events[i]
		}
	}
	return nil
}

// TestOverlapAllowAll: by default every occurrence fires on time, emitted
// ahead of it, whatever the earlier fires are doing.
func TestOverlapAllowAll(t *testing.T) {
	t.Parallel()
	r := overlapRig(t, chimev1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED)
	r.runUntil(t0.Add(3 * time.Minute))
	require.Len(t, r.dues, 3, "fires 1-3, none answered")
	require.NotNil(t, r.st.GetTickAt(), "emitted ahead of its time (FireLead)")
}

// TestOverlapSkip: an occurrence due while a fire is open, sent or waiting
// for its retry, is skipped and keeps its number; once the fire settles,
// the next occurrence fires. Decided at the occurrence's time, not ahead.
func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	r := overlapRig(t, chimev1.OverlapPolicy_OVERLAP_POLICY_SKIP)
	r.runUntil(t0.Add(time.Minute))
	require.Len(t, r.dues, 1)
	require.Nil(t, r.st.GetTickAt(), "not emitted ahead: decided at the occurrence's time")
	// Fire 1 fails and waits for its retry at 2m30s: occurrence 2 (2m) is skipped.
	r.command(retryAt(r.dues[0], t0.Add(150*time.Second)), t0.Add(70*time.Second))
	r.runUntil(t0.Add(2 * time.Minute))
	require.Len(t, r.dues, 1)
	sk := r.lastEvent(chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED)
	require.NotNil(t, sk)
	require.EqualValues(t, 2, sk.GetFireSeq())
	require.Contains(t, sk.GetDetail(), "overlap policy skip: fire 1 still open")
	// The retry goes out at 2m30s; occurrence 3 (3m) is skipped while it is open.
	r.runUntil(t0.Add(3 * time.Minute))
	require.Len(t, r.dues, 2)
	require.EqualValues(t, 1, r.dues[1].GetFireSeq())
	require.EqualValues(t, 2, r.st.GetSkipped())
	// Settled: occurrence 4 fires.
	r.command(ack(r.dues[1], chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(190*time.Second))
	r.runUntil(t0.Add(4 * time.Minute))
	require.Len(t, r.dues, 3)
	require.EqualValues(t, 4, r.dues[2].GetFireSeq())
}

// TestOverlapBufferOne: one occurrence waits for the open fire and goes
// out as soon as it settles; more are skipped meanwhile.
func TestOverlapBufferOne(t *testing.T) {
	t.Parallel()
	r := overlapRig(t, chimev1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE)
	r.runUntil(t0.Add(3 * time.Minute))
	require.Len(t, r.dues, 1, "fire 1 open: occurrence 2 waits, 3 is skipped")
	require.EqualValues(t, 2, r.st.GetBuffered().GetFireSeq())
	require.EqualValues(t, 1, r.st.GetSkipped())
	require.Contains(t, r.lastEvent(chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED).GetDetail(), "occurrence 2 already waiting")

	settled := t0.Add(190 * time.Second)
	r.command(ack(r.dues[0], chimev1.AckResult_ACK_RESULT_SUCCEEDED), settled)
	require.Len(t, r.dues, 2, "the waiting occurrence goes out when fire 1 settles")
	d := r.dues[1]
	require.EqualValues(t, 2, d.GetFireSeq())
	require.Equal(t, t0.Add(2*time.Minute), d.GetScheduledAt().AsTime())
	require.Equal(t, settled, d.GetFireAt().AsTime())
	require.Nil(t, r.st.GetBuffered())
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.GetStatus())
}

// TestOverlapCancelOther: the open fire's remaining attempts are dropped
// (a SUPERSEDED event) and the occurrence fires; the dropped fire's later
// retry changes nothing.
func TestOverlapCancelOther(t *testing.T) {
	t.Parallel()
	r := overlapRig(t, chimev1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER)
	r.runUntil(t0.Add(time.Minute))
	first := r.dues[0]
	r.command(retryAt(first, t0.Add(150*time.Second)), t0.Add(70*time.Second))
	r.runUntil(t0.Add(2 * time.Minute))
	require.Len(t, r.dues, 2)
	require.EqualValues(t, 2, r.dues[1].GetFireSeq())
	ev := r.lastEvent(chimev1.JobEventType_JOB_EVENT_TYPE_SUPERSEDED)
	require.NotNil(t, ev)
	require.Contains(t, ev.GetDetail(), "the remaining attempts of fire 1 are dropped")
	// Fire 1's retry time passes: nothing goes out for it.
	r.runUntil(t0.Add(150 * time.Second))
	require.Len(t, r.dues, 2)
	for _, em := range r.st.GetOpen() {
		require.NotEqualValues(t, 1, em.GetFireSeq())
	}
}

package scheduler

// A row's timer: when it next needs a tick (the next occurrence with its
// jitter, a pending retry, a redelivery, a confirmation, or the end of an
// ended row's retention), and when a recovering scheduler must look at it.
// The timer is what the storage indexes (storage.go).

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// setTimer recomputes the row's timer: the earliest of the next occurrence
// (with its jitter) and the pending retries; for a terminal row, the time it
// is removed. The timer is what the storage indexes.
func (d *decider) setTimer(key string, st *chimev1.JobState) {
	// timer: when the row needs a tick; recover: when a recovering
	// scheduler must look at it, if it holds writes that may need
	// re-sending (recover_at, the earliest of them).
	var timer, recover time.Time
	scheduled := st.GetStatus() == chimev1.JobStatus_JOB_STATUS_SCHEDULED
	switch {
	case scheduled:
		if n := st.GetNextScheduledAt(); n != nil {
			earliest(&timer, n.AsTime().Add(d.jitter(key, st, st.GetFireSeq()+1)))
		}
		for _, p := range st.GetPending() {
			earliest(&timer, p.GetNotBefore().AsTime())
		}
		for _, em := range st.GetOpen() {
			if d.redeliverable(st, em) {
				earliest(&timer, d.redeliverAt(em))
				earliest(&recover, em.GetEmittedAt().AsTime())
			}
		}
	case schema.JobEnded(st.GetStatus()) && d.cfg.TerminalRetention > 0:
		earliest(&timer, st.GetUpdatedAt().AsTime().Add(d.cfg.TerminalRetention))
	}
	for _, u := range st.GetUnconfirmed() {
		earliest(&timer, u.GetDeliveredAt().AsTime().Add(d.cfg.ConfirmAfter))
		earliest(&recover, u.GetDeliveredAt().AsTime())
	}
	st.TimerAt, st.RecoverAt = timestampOrNil(timer), timestampOrNil(recover)
	st.TickAt = nil
	if !timer.IsZero() && d.leads(st) {
		st.TickAt = timestamppb.New(d.cfg.leadTick(timer))
	}
}

// leads says whether the row's timers are served early (leadTick): those of
// a scheduled HTTP job, whose due events the dispatcher holds until their
// time. A Kafka target is written by the scheduler itself, at its time;
// retention and confirmation timers are not fires.
func (d *decider) leads(st *chimev1.JobState) bool {
	return d.cfg.FireLead > 0 && st.GetStatus() == chimev1.JobStatus_JOB_STATUS_SCHEDULED && st.GetSpec().GetTarget().GetHttp() != nil &&
		// An overlap policy looks at the fires open at the occurrence's
		// time, which is only known then.
		!hasOverlapPolicy(st.GetSpec())
}

// earliest lowers *at to t (a zero *at is unset).
func earliest(at *time.Time, t time.Time) {
	if at.IsZero() || t.Before(*at) {
		*at = t
	}
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// sameInstant is ts when it stands for t, else a new timestamp of t: a
// due shares its emission's timestamps (nothing changes one in place, see
// copyRow) instead of allocating equal ones on every fire.
func sameInstant(ts *timestamppb.Timestamp, t time.Time) *timestamppb.Timestamp {
	if ts != nil && ts.GetSeconds() == t.Unix() && ts.GetNanos() == int32(t.Nanosecond()) {
		return ts
	}
	return timestamppb.New(t)
}

package scheduler

// Catch-up policies (chimev1.CatchupPolicy) for occurrences a recurring
// job missed: latest (the default, fireNext's CatchUp), none and all,
// which look at how late each occurrence is against catchup_window.

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// DefaultCatchupWindow is how late an occurrence may fire under catchup
// none or all when the job sets no catchup_window.
const DefaultCatchupWindow = time.Minute

// MaxCatchupFires bounds the occurrences catchup all fires at once: each
// is an open fire in the row until answered.
const MaxCatchupFires = 100

func windowed(spec *chimev1.JobSpec) bool {
	switch spec.GetCatchup() {
	case chimev1.CatchupPolicy_CATCHUP_POLICY_NONE, chimev1.CatchupPolicy_CATCHUP_POLICY_ALL:
		return true
	}
	return false
}

func catchupWindow(spec *chimev1.JobSpec) time.Duration {
	if w := spec.GetCatchupWindow(); w != nil && w.AsDuration() > 0 {
		return w.AsDuration()
	}
	return DefaultCatchupWindow
}

// catchUpWindowed fires, from the occurrences due between from and now,
// those at most catchup_window late: the latest of them under none, all
// of them (the last MaxCatchupFires) in order under all. The others are
// skipped, in one SKIPPED event. Each keeps its own number.
func (d *decider) catchUpWindowed(in *input, dec *decision, plan *schedule.Compiled, from, now time.Time) {
	st := dec.state
	spec := st.GetSpec()
	// The occurrences due by now, jitter included, in order.
	var due []schedule.Fire
	for t, seq, ok := from, st.GetFireSeq(), true; ok && len(due) < d.cfg.CatchupScanLimit; t, ok = plan.Next(t) {
		// Upcoming's steps, stopping at the first not due yet.
		seq++
		f := schedule.Fire{Seq: seq, ScheduledAt: t, FireAt: t.Add(schedule.Jitter(plan.MaxJitter(), in.key, seq))}
		if f.FireAt.After(now) {
			break
		}
		due = append(due, f)
	}
	truncated := len(due) == d.cfg.CatchupScanLimit
	if len(due) == 0 {
		return
	}
	cutoff := now.Add(-catchupWindow(spec))
	firstKept := len(due)
	for i, f := range due {
		if !f.ScheduledAt.Before(cutoff) {
			firstKept = i
			break
		}
	}
	keep := due[firstKept:]
	switch {
	case spec.GetCatchup() == chimev1.CatchupPolicy_CATCHUP_POLICY_NONE && len(keep) > 1:
		keep = keep[len(keep)-1:]
	case len(keep) > MaxCatchupFires:
		keep = keep[len(keep)-MaxCatchupFires:]
	}
	skipped := due[:len(due)-len(keep)]
	if n := len(skipped); n > 0 {
		sk := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED, now)
		sk.Count = uint64(n)
		sk.FirstScheduledAt = timestamppb.New(skipped[0].ScheduledAt)
		sk.LastScheduledAt = timestamppb.New(skipped[n-1].ScheduledAt)
		sk.FireSeq = skipped[n-1].Seq
		sk.Detail = fmt.Sprintf("%d missed occurrences from %s to %s skipped (catchup %s, window %s)", n,
			skipped[0].ScheduledAt.Format(time.RFC3339), skipped[n-1].ScheduledAt.Format(time.RFC3339),
			schema.CatchupPolicyName(spec.GetCatchup()), catchupWindow(spec))
		if truncated {
			sk.Detail += " (more were due: looked at the first " + fmt.Sprint(d.cfg.CatchupScanLimit) + ")"
		}
		dec.events = append(dec.events, sk)
		st.Skipped += uint64(n)
	}
	last := due[len(due)-1]
	st.FireSeq = last.Seq
	st.LastScheduledAt = timestamppb.New(last.ScheduledAt)
	for _, f := range keep {
		d.fireScheduled(in, dec, occurrence{fireSeq: f.Seq, attempt: 1, scheduledAt: f.ScheduledAt, fireAt: f.FireAt}, now)
	}
	st.NextScheduledAt = nil
	if n, ok := plan.Next(last.ScheduledAt); ok {
		st.NextScheduledAt = timestamppb.New(n)
	}
}

// catchupAfterPause says a resumed job makes up the occurrences that fell
// into its pause: only when it set catchup latest or all itself (chime
// skips them otherwise, as it always has).
func catchupAfterPause(spec *chimev1.JobSpec) bool {
	switch spec.GetCatchup() {
	case chimev1.CatchupPolicy_CATCHUP_POLICY_LATEST, chimev1.CatchupPolicy_CATCHUP_POLICY_ALL:
		return true
	}
	return false
}

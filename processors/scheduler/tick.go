package scheduler

// Ticks: a tick is a hint to look at the row. What is due at its time is
// fired: retries and deferrals, the next occurrence (or the latest one
// missed during downtime, the others skipped); what was left unanswered is
// emitted again; an ended row past its retention is removed.

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

func (d *decider) tick(in *input, cur *chimev1.JobState, now time.Time) decision {
	if cur == nil {
		return decision{}
	}
	if heldRow(cur) {
		return d.onHeld(in, cur, nil, now)
	}
	// due is how far the timers this tick serves reach: an HTTP fire is
	// emitted up to FireLead and LeadRound early (its due carries its
	// time; the dispatcher calls then).
	due := now
	if d.leads(cur) {
		due = now.Add(d.cfg.maxLead())
	}
	if timer := cur.GetTimerAt(); timer == nil || timer.AsTime().After(due) {
		if !d.leftByAnother(cur) {
			if cur.GetRecoverAt() != nil {
				// The recovery tick of a row this incarnation wrote (its
				// partition came back): rewrite it unchanged so that the
				// index takes its timer again.
				return decision{state: copyRow(cur)}
			}
			return decision{} // stale or early tick: the row decides
		}
		// A recovery tick: the row holds what another incarnation emitted
		// and may have lost; it is re-sent below, nothing else is due.
	}
	dec := decision{state: copyRow(cur)}
	st := dec.state
	d.confirmDeliveries(in, &dec, now)
	if schema.JobEnded(st.GetStatus()) {
		if d.retentionOver(st, now) {
			return decision{del: true, deliver: dec.deliver, events: dec.events}
		}
		d.setTimer(in.key, st)
		return dec
	}
	if st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED {
		d.setTimer(in.key, st)
		return dec
	}
	plan, err := compilePlan(st)
	if err != nil {
		// Cannot happen for a row written by this code (upsert compiles the
		// schedule); park the job rather than spin on it.
		st.Status = chimev1.JobStatus_JOB_STATUS_DEAD
		st.LastDetail = "schedule no longer compiles: " + err.Error()
		st.NextScheduledAt = nil
		d.setTimer(in.key, st)
		return dec
	}
	d.firePending(in, &dec, due, now)
	d.fireNext(in, &dec, plan, due, now)
	d.releaseBuffered(in, &dec, now)
	d.redeliver(in, &dec, due, now)
	st.UpdatedAt = sameInstant(st.GetLastFiredAt(), now)
	d.maybeComplete(in, &dec, plan, now)
	d.setTimer(in.key, st)
	return dec
}

// retentionOver says whether an ended row has been kept for
// TerminalRetention, so that its state could still be read, and may now be
// removed from the table (not while a Kafka write of its is unconfirmed).
func (d *decider) retentionOver(st *chimev1.JobState, now time.Time) bool {
	return len(st.GetUnconfirmed()) == 0 && d.cfg.TerminalRetention > 0 &&
		!st.GetUpdatedAt().AsTime().Add(d.cfg.TerminalRetention).After(now)
}

// firePending fires the retries and deferrals whose time has come (due is
// how far this tick reaches).
func (d *decider) firePending(in *input, dec *decision, due, now time.Time) {
	st := dec.state
	var later []*chimev1.Pending
	for _, p := range st.GetPending() {
		if p.GetNotBefore().AsTime().After(due) {
			later = append(later, p)
			continue
		}
		d.fire(in, dec, retryOccurrence(p), now)
	}
	st.Pending = later
}

// fireNext fires the next occurrence, catching up after downtime: only the
// most recent missed occurrence may fire; older ones are skipped and
// reported.
func (d *decider) fireNext(in *input, dec *decision, plan *schedule.Compiled, due, now time.Time) {
	st := dec.state
	next := st.GetNextScheduledAt()
	if next == nil {
		return
	}
	from := next.AsTime()
	// The same steps as a preview's (schedule.Upcoming): the fires a
	// preview shows are the fires made. The occurrence after it is only
	// computed once this one fires.
	fireAt := plan.Upcoming(in.key, from, st.GetFireSeq(), 1)[0].FireAt
	if fireAt.After(now) && !fireAt.After(due) {
		// The next occurrence, emitted ahead of its time. Only this
		// one: the catch-up below counts what is past, not what is
		// near.
		st.FireSeq++
		st.LastScheduledAt = timestamppb.New(from)
		d.fireScheduled(in, dec, occurrence{fireSeq: st.GetFireSeq(), attempt: 1, scheduledAt: from, fireAt: fireAt}, now)
		st.NextScheduledAt = nil
		if n, ok := plan.Next(from); ok {
			st.NextScheduledAt = timestamppb.New(n)
		}
	} else if !fireAt.After(now) && windowed(st.GetSpec()) {
		d.catchUpWindowed(in, dec, plan, from, now)
	} else if !fireAt.After(now) {
		// As a preview counts them (schedule.Preview).
		f, count, exact := plan.CatchUp(in.key, from, st.GetFireSeq(), now, d.cfg.CatchupScanLimit)
		last := f.ScheduledAt
		if count > 1 {
			lastSkipped, _, _ := plan.Latest(from, last.Add(-time.Nanosecond), d.cfg.CatchupScanLimit)
			sk := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED, now)
			sk.Count = count - 1
			sk.FirstScheduledAt = timestamppb.New(from)
			sk.LastScheduledAt = timestamppb.New(lastSkipped)
			sk.Detail = fmt.Sprintf("%d missed occurrences from %s to %s skipped; only the latest, %s, fires", count-1,
				from.Format(time.RFC3339), lastSkipped.Format(time.RFC3339), last.Format(time.RFC3339))
			if !exact {
				sk.Detail += " (count is a lower bound)"
			}
			sk.FireSeq = st.GetFireSeq() + count - 1
			dec.events = append(dec.events, sk)
			st.Skipped += count - 1
		}
		st.FireSeq = f.Seq
		st.LastScheduledAt = timestamppb.New(last)
		d.fireScheduled(in, dec, occurrence{fireSeq: st.GetFireSeq(), attempt: 1, scheduledAt: last, fireAt: f.FireAt}, now)
		st.NextScheduledAt = nil
		if n, ok := plan.Next(last); ok {
			st.NextScheduledAt = timestamppb.New(n)
		}
	}
}

// fireScheduled fires an occurrence of the schedule (not a trigger),
// under the job's overlap policy (overlap.go), counting it toward
// spec.max_fires when it goes out.
func (d *decider) fireScheduled(in *input, dec *decision, o occurrence, now time.Time) {
	st := dec.state
	if !d.overlap(in, dec, o, now) {
		return
	}
	before := st.GetFires()
	d.fire(in, dec, o, now)
	if st.GetFires() > before {
		st.ScheduledFires++
	}
}

// compilePlan compiles the row's schedule with the job's anchor.
func compilePlan(st *chimev1.JobState) (*schedule.Compiled, error) { return schedule.ForRow(st) }

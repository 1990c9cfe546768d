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
	// emitted up to FireLead early (its due carries its time; the
	// dispatcher calls then).
	due := now
	if d.leads(cur) {
		due = now.Add(d.cfg.FireLead)
	}
	if timer := cur.GetTimerAt(); timer == nil || timer.AsTime().After(due) {
		if !d.leftByAnother(cur) {
			if cur.GetRecoverAt() != nil {
				// The recovery tick of a row this incarnation wrote (its
				// partition came back): rewrite it unchanged so that the
				// index takes its timer again.
				return decision{state: cur}
			}
			return decision{} // stale or early tick: the row decides
		}
		// A recovery tick: the row holds what another incarnation emitted
		// and may have lost; it is re-sent below, nothing else is due.
	}
	st := cur
	var redo decision
	d.confirmDeliveries(in, st, &redo, now)
	if schema.JobEnded(st.GetStatus()) {
		// Terminal rows are kept for TerminalRetention so their state can
		// still be read, then removed from the table (not while a Kafka
		// write of theirs is unconfirmed).
		if len(st.GetUnconfirmed()) == 0 && d.cfg.TerminalRetention > 0 &&
			!st.GetUpdatedAt().AsTime().Add(d.cfg.TerminalRetention).After(now) {
			return decision{del: true, deliver: redo.deliver, events: redo.events}
		}
		d.setTimer(in.key, st)
		redo.state = st
		return redo
	}
	if st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED {
		d.setTimer(in.key, st)
		redo.state = st
		return redo
	}
	plan, err := compilePlan(st)
	if err != nil {
		// Cannot happen for a row written by this code (upsert compiles the
		// schedule); park the job rather than spin on it.
		st.Status = chimev1.JobStatus_JOB_STATUS_DEAD
		st.LastDetail = "schedule no longer compiles: " + err.Error()
		st.NextScheduledAt = nil
		d.setTimer(in.key, st)
		redo.state = st
		return redo
	}
	dec := redo
	dec.state = st

	// Retries and deferrals whose time has come.
	var later []*chimev1.Pending
	for _, p := range st.GetPending() {
		if p.GetNotBefore().AsTime().After(due) {
			later = append(later, p)
			continue
		}
		d.fire(in, st, &dec, p.GetFireSeq(), p.GetAttempt(), p.GetDeferrals(), p.GetHistory(), p.GetScheduledAt().AsTime(), p.GetNotBefore().AsTime(), now)
	}
	st.Pending = later

	// The next occurrence, catching up after downtime: only the most recent
	// missed occurrence may fire; older ones are skipped and reported.
	if next := st.GetNextScheduledAt(); next != nil {
		from := next.AsTime()
		fireAt := from.Add(d.jitter(in.key, st, st.GetFireSeq()+1))
		if fireAt.After(now) && !fireAt.After(due) {
			// The next occurrence, emitted ahead of its time. Only this
			// one: the catch-up below counts what is past, not what is
			// near.
			st.FireSeq++
			st.LastScheduledAt = timestamppb.New(from)
			d.fire(in, st, &dec, st.GetFireSeq(), 1, 0, nil, from, fireAt, now)
			st.NextScheduledAt = nil
			if n, ok := plan.Next(from); ok {
				st.NextScheduledAt = timestamppb.New(n)
			}
		} else if !fireAt.After(now) {
			last, count, exact := plan.Latest(from, now, d.cfg.CatchupScanLimit)
			if count > 1 && last.Add(d.jitter(in.key, st, st.GetFireSeq()+count)).After(now) {
				// The latest occurrence is not due yet with its jitter: it
				// fires on its own timer; the one before it is the latest
				// missed one.
				last, count, exact = plan.Latest(from, last.Add(-time.Nanosecond), d.cfg.CatchupScanLimit)
			}
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
				fireAt = last // jitter is not applied to a catch-up fire
			}
			st.FireSeq += count
			st.LastScheduledAt = timestamppb.New(last)
			d.fire(in, st, &dec, st.GetFireSeq(), 1, 0, nil, last, fireAt, now)
			st.NextScheduledAt = nil
			if n, ok := plan.Next(last); ok {
				st.NextScheduledAt = timestamppb.New(n)
			}
		}
	}

	// Fires emitted long ago with no answer: the due event may have been
	// lost when the process died between writing the row and Kafka
	// acknowledging the event. Emit it again, same fire_seq and emit_seq,
	// so a dispatcher that did handle it can tell.
	// A fire emitted by another incarnation is emitted again at once: its
	// process may have died after Kafka stored the row and before it stored
	// the due event, and the replayed input then finds nothing to do.
	inc := d.currentIncarnation()
	for _, em := range st.GetOpen() {
		if !d.redeliverable(st, em) {
			continue
		}
		restarted := em.GetIncarnation() != inc
		if !restarted && d.redeliverAt(em).After(due) {
			continue
		}
		detail := fmt.Sprintf("emission %d was made by a scheduler that has stopped since; emitted again", em.GetEmitSeq())
		if !restarted {
			em.Redeliveries++
			detail = fmt.Sprintf("no retry, defer or ack for emission %d within %s; emitted again (redelivery %d)", em.GetEmitSeq(), d.ackTimeout(em.GetRedeliveries()-1), em.GetRedeliveries())
		}
		em.EmittedAt = timestamppb.New(now)
		em.Incarnation = inc
		dec.dues = append(dec.dues, d.due(in, st, em, em.GetScheduledAt().AsTime(), now))
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_REDELIVERED, now)
		ev.FireSeq, ev.Attempt = em.GetFireSeq(), em.GetAttempt()
		ev.Detail = detail
		dec.events = append(dec.events, ev)
	}
	st.UpdatedAt = timestamppb.New(now)
	d.maybeComplete(in, st, plan, &dec, now)
	d.setTimer(in.key, st)
	return dec
}

// compilePlan compiles the row's schedule with the job's anchor.
func compilePlan(st *chimev1.JobState) (*schedule.Compiled, error) {
	c, err := schedule.Compile(st.GetSpec().GetSchedule())
	if err != nil {
		return nil, err
	}
	anchor := st.GetCreatedAt()
	if st.GetAnchor() != nil {
		anchor = st.GetAnchor()
	}
	return c.WithAnchor(anchor.AsTime()), nil
}

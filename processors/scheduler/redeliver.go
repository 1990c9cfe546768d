package scheduler

// Redelivery: a due event or Kafka-target write may be lost with the
// process that made it (the row was stored, the record perhaps not). An
// emission unanswered for its ack timeout, and whatever another scheduler
// incarnation left in the row, is sent again under the same fire_seq.

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// redeliver emits again the open fires emitted long ago with no answer
// (due is how far this tick reaches): the due event may have been lost
// when the process died between writing the row and Kafka acknowledging
// the event. It goes out again, same fire_seq and emit_seq, so a
// dispatcher that did handle it can tell.
// A fire emitted by another incarnation is emitted again at once: its
// process may have died after Kafka stored the row and before it stored
// the due event, and the replayed input then finds nothing to do.
func (d *decider) redeliver(in *input, dec *decision, due, now time.Time) {
	st := dec.state
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
}

// redeliverable reports whether an open fire is waiting for its answer
// (not re-armed) and may be emitted again.
func (d *decider) redeliverable(st *chimev1.JobState, em *chimev1.Emission) bool {
	return d.cfg.AckTimeout > 0 && em.GetEmittedAt() != nil && // else written by a version without redelivery
		!slices.ContainsFunc(st.GetPending(), func(p *chimev1.Pending) bool { return p.GetFireSeq() == em.GetFireSeq() })
}

// leftByAnother reports whether the row holds a fire or a Kafka write that
// another incarnation made and this one has not taken over.
func (d *decider) leftByAnother(st *chimev1.JobState) bool {
	inc := d.currentIncarnation()
	for _, u := range st.GetUnconfirmed() {
		if u.GetIncarnation() != inc {
			return true
		}
	}
	if st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED {
		return false // paused or ended: open fires wait (redelivery is only while scheduled)
	}
	for _, em := range st.GetOpen() {
		if d.redeliverable(st, em) && em.GetIncarnation() != inc {
			return true
		}
	}
	return false
}

// confirmDeliveries settles the row's Kafka-target writes: one written by
// another scheduler incarnation may have been lost with it (the row was
// stored, the write perhaps not), so it is written again, now; one written
// by this incarnation at least ConfirmAfter ago counts as stored, since a
// failed write fails the processor well before that, and the restarted
// processor is a new incarnation.
func (d *decider) confirmDeliveries(in *input, dec *decision, now time.Time) {
	st := dec.state
	if len(st.GetUnconfirmed()) == 0 {
		return
	}
	inc := d.currentIncarnation()
	keep := st.Unconfirmed[:0]
	for _, u := range st.GetUnconfirmed() {
		switch {
		case u.GetIncarnation() != inc:
			if k := deliveredTarget(st, u); k != nil && d.allowed[k.GetTopic()] {
				dec.deliver = append(dec.deliver, k)
				u.Incarnation, u.DeliveredAt = inc, timestamppb.New(now)
				u.Redeliveries++
				ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_REDELIVERED, now)
				ev.FireSeq = u.GetFireSeq()
				ev.Detail = fmt.Sprintf("kafka target write of fire %d to %q written again: the scheduler that wrote it stopped before it could count as stored", u.GetFireSeq(), k.GetTopic())
				dec.events = append(dec.events, ev)
				keep = append(keep, u)
			}
		case u.GetDeliveredAt().AsTime().Add(d.cfg.ConfirmAfter).After(now):
			keep = append(keep, u)
		}
	}
	st.Unconfirmed = keep
	if len(keep) == 0 {
		st.Unconfirmed = nil
	}
}

// ackTimeout is how long an emission waits for an answer before it is
// emitted again: AckTimeout, doubling per redelivery, at most an hour, so a
// stopped dispatcher does not flood the due topic.
func (d *decider) ackTimeout(redeliveries uint32) time.Duration {
	t := d.cfg.AckTimeout
	for range min(redeliveries, 16) {
		t *= 2
		if t >= time.Hour {
			return time.Hour
		}
	}
	return t
}

// redeliverAt is when an emission unanswered is emitted again: its ack
// timeout after it was emitted, plus the dispatchers' backlog (backlog.go):
// a due event queued behind one is late, not lost.
func (d *decider) redeliverAt(em *chimev1.Emission) time.Time {
	return em.GetEmittedAt().AsTime().Add(d.ackTimeout(em.GetRedeliveries()) + time.Duration(d.backlog.Load()))
}

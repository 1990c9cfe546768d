package scheduler

// An answer ahead of the row. A fire's row waits in the table store's
// write cache, not in Kafka, until its answer settles it (or MaxHold
// passes): a fired one-shot, its fire and its answer cost one changelog
// record (processors/jobstore, overlay.go). The stored row still holds
// the timer that fired, so if this process dies (or the partition moves)
// before the row is stored, the next owner fires the same occurrence
// again with the same fire_seq and emit_seq (they come from the stored
// row): the same idempotency key and emission, which the dispatcher
// suppresses when it can, as for any fire in flight at a crash.

import (
	"slices"
	"time"

	"github.com/chime-sched/chime/schema/chimev1"
)

// An answer (retry, defer, ack) can reach a row that has not recorded the
// emission it answers. The emission was made by a decision that was still
// in the write cache of a scheduler incarnation that then died or lost
// the partition. The stored row still holds the timer that fired, and its next
// owner fires the same occurrence again, with the same fire_seq and
// emit_seq (they come from the row's counters). But when the answer is
// read before that repeat is decided, it finds no open fire: it was
// dropped as a duplicate, and the repeat was then suppressed by the
// dispatcher that had answered it already, so the job waited AckTimeout
// for an answer that had come.
//
// So an answer ahead of the row first makes the row catch up: the tick the
// lost decision was is decided again now, and if it makes the emission
// answered (the same emit_seq for the same fire), that emission's due
// event is dropped (it was called and answered) and the answer applied to
// the caught-up row. Anything else the tick does (other fires due by now,
// the recovery of open fires) the next tick would have done too.
func (d *decider) answerAhead(in *input, cur *chimev1.JobState, fireSeq, emitSeq uint64, now time.Time, answer func(*chimev1.JobState) decision) decision {
	if cur == nil || emitSeq <= cur.GetEmitSeq() {
		return answer(cur)
	}
	seq := in.seq
	caught := d.tick(in, cur, now)
	made := caught.state != nil && slices.ContainsFunc(caught.state.GetOpen(), func(e *chimev1.Emission) bool {
		return e.GetFireSeq() == fireSeq && e.GetEmitSeq() == emitSeq
	})
	if !made {
		in.seq = seq       // the tick is not taken: its event ids are not used
		return answer(cur) // not an emission this row makes: a stray answer
	}
	caught.dues = slices.DeleteFunc(caught.dues, func(due *chimev1.Due) bool { return due.GetEmitSeq() == emitSeq })
	ans := answer(caught.state)
	if ans.state != nil {
		caught.state = ans.state
	}
	caught.events = append(caught.events, ans.events...)
	return caught
}

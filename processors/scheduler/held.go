package scheduler

// Fires held unwritten: the one place that keeps the invariant. A tick's
// decision that only fires is not written to the table; the row waits in
// memory for the dispatcher's answer, which writes fire and answer in one
// row write. This file owns taking a held row (current), putting it back
// (holdRow, hold), its timer (timers.hold), and the repair an answer ahead
// of the row needs (answerAhead).

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// unwritten holds rows whose last decision only fired: due events went out
// and the row now records the open fires, but the row was not written to
// the table. The dispatcher's answer (ack, retry or defer) follows within
// moments and writes the row once, with the fire and its answer together:
// a fired one-shot costs two table writes (created, settled) instead of
// three, and the tick's callback no longer encodes, stores and produces the
// row.
//
// Why that keeps every guarantee: the stored row still holds the timer
// that fired. If this process dies (or the partition moves) before the
// row is written, the next owner recovers the stored row and fires the
// same occurrence again with the same fire_seq and emit_seq (they come
// from the stored row), so the idempotency key and the emission are the
// same and the dispatcher suppresses the repeat when it can. That is what
// a crash did before too: a fire in flight at a crash is re-emitted
// (recover_at). An answer that reaches the next owner before the repeat
// makes the row catch up on the lost fire first (answerAhead, below).
//
// Rules:
//   - only a tick's decision that emits due events and nothing else (no
//     job event, no Kafka-target write, no rejection, no delete) is held;
//     commands are always written;
//   - a row holds at most one unwritten decision: the next decision on it
//     writes it (so a recurring job whose answers do not come is written
//     at its next fire);
//   - at most max rows are held (memory stays bounded when the
//     dispatchers are down); beyond that decisions are written;
//   - entries of partitions this processor no longer owns are dropped at
//     the rebalance, and all of them when the processor restarts.
//
// Only the partition's goroutine takes and puts a key; readers (the API)
// peek.
type unwritten struct {
	mu   sync.Mutex
	rows map[string]unwrittenRow
	max  int
}

type unwrittenRow struct {
	partition int32
	value     []byte // encoded by schema.JobStateCodec
	// stored is the row as the table's store holds it (its index entries),
	// when known: the write that ends the hold replaces it, and the store
	// then need not read it again (jobstore.Partition.Hint).
	stored   *jobstore.RowIndex
	storedOK bool
}

func newUnwritten(max int) *unwritten {
	return &unwritten{rows: map[string]unwrittenRow{}, max: max}
}

// take removes and returns the key's held row.
func (u *unwritten) take(key string, partition int32) (unwrittenRow, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.rows[key]
	if !ok || r.partition != partition {
		return unwrittenRow{}, false
	}
	delete(u.rows, key)
	return r, true
}

// put holds r for key; false when full.
func (u *unwritten) put(key string, r unwrittenRow) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.rows) >= u.max {
		return false
	}
	u.rows[key] = r
	return true
}

// peek returns the key's held row without taking it.
func (u *unwritten) peek(key string) ([]byte, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.rows[key]
	return r.value, ok
}

// has says whether key's row is held.
func (u *unwritten) has(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.rows[key]
	return ok
}

// keep drops the rows of partitions not in assigned (nil: every row).
func (u *unwritten) keep(assigned map[int32]bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, r := range u.rows {
		if !assigned[r.partition] {
			delete(u.rows, k)
		}
	}
}

func (u *unwritten) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.rows)
}

// timerOf is the timer in an encoded row's header (0: none).
func timerOf(value []byte) int64 {
	at, _ := schema.JobStateTimer(value)
	return at
}

// current is the row as last decided: the one held unwritten (taken out;
// apply writes it or puts it back) or the stored one.
func (s *Scheduler) current(ctx rowCtx) (st *chimev1.JobState, held []byte) {
	if r, ok := s.unwritten.take(ctx.Key(), ctx.Partition()); ok {
		if r.storedOK {
			// The store still holds the row as it was before it was
			// held: the write that ends the hold replaces that one.
			s.timers.hint(ctx.Partition(), ctx.Key(), r.stored)
		}
		v, err := schema.JobStateCodec{}.Decode(r.value)
		if err == nil {
			return v.(*chimev1.JobState), r.value
		}
		// Encoded by this process: cannot happen; the stored row decides.
		s.cfg.Logger.Error("scheduler: unwritten row does not decode; using the stored one", "key", ctx.Key(), "err", err)
	}
	st, _ = ctx.Value().(*chimev1.JobState)
	return st, nil
}

// holdRow holds raw as key's row unwritten, with what the store holds of
// it; false when the memory for held rows is full.
func (s *Scheduler) holdRow(ctx rowCtx, raw []byte) bool {
	r := unwrittenRow{partition: ctx.Partition(), value: raw}
	r.stored, r.storedOK = s.timers.stored(ctx.Partition(), ctx.Key())
	return s.unwritten.put(ctx.Key(), r)
}

// hold keeps a tick's decision unwritten, and points the timer index at
// the held row's timer: a fire on a row not held yet, or a tick that left
// a held row as it was (a stale tick, or the first tick after a rebalance
// kept the partition). false: it must be written (it does more, or the
// memory for held rows is full).
func (s *Scheduler) hold(ctx rowCtx, d decision, held []byte) bool {
	switch {
	case held == nil && d.onlyFires():
	case held != nil && d.emitsNothing():
	default:
		return false
	}
	raw, err := schema.JobStateCodec{}.Encode(d.state)
	if err != nil || (held != nil && !bytes.Equal(raw, held)) || !s.holdRow(ctx, raw) {
		return false
	}
	s.timers.hold(ctx.Partition(), ctx.Key(), timerOf(raw))
	return true
}

// current0 decodes a held row that must be written after all.
func current0(raw []byte) *chimev1.JobState {
	v, _ := schema.JobStateCodec{}.Decode(raw)
	st, _ := v.(*chimev1.JobState)
	return st
}

// An answer (retry, defer, ack) can reach a row that has not recorded the
// emission it answers. The emission was made by a decision held unwritten
// (held.go) in a scheduler incarnation that then died or lost the
// partition. The stored row still holds the timer that fired, and its next
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

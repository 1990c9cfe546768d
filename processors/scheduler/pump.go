package scheduler

// The pump turns due timers into ticks. A tick is not a Kafka record: the
// pump decides it itself, under the partition storage's writer lock
// (rowctx.go), so nothing is produced or consumed to look at a row, and
// nothing can be lost or repeated in between. A tick is a hint to look at
// the row; the row decides (decide.go).
//
// One pump per processor: each round takes what is due in every actively
// owned partition's window (storage.go) and ticks those rows, the
// partitions side by side. The sweep is the pump's safety net: every
// SweepInterval a round also takes the rows whose timer is more than
// SweepOverdue past that the window does not hold (nor a row held
// unwritten): a timer the window missed, logged at WARN with the count.

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/schema/chimev1"
)

// pump runs rounds of ticks through out until ctx ends.
func (s *Scheduler) pump(ctx context.Context, out *tickOut) {
	cfg := s.cfg
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	lastSweep := cfg.Now()
	for ctx.Err() == nil {
		if s.heldBack() {
			// The dispatchers are behind (FlowBacklog): nothing is taken,
			// the sweep included, until a sample of their backlog says
			// they are not. It is read every backlogBehindEvery; looking
			// a fifth of that apart, the gate opens at most 100 ms after
			// the sample that opens it, for an atomic load 10 times a
			// second while it is shut.
			idle.Reset(backlogBehindEvery / 5)
			select {
			case <-ctx.Done():
				return
			case <-idle.C:
			}
			continue
		}
		now := cfg.Now()
		sweep := cfg.SweepInterval > 0 && now.Sub(lastSweep) >= cfg.SweepInterval
		if sweep {
			lastSweep = now
		}
		s.tickMu.Lock()
		sts := s.timers.activeStorages()
		taken, missed := 0, 0
		for _, st := range sts {
			n, m, err := st.take(now, cfg.TickBatch, sweep)
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Error("scheduler: reading timers from the table store failed; retrying", "partition", st.partition, "err", err)
			}
			taken, missed = taken+n, missed+m
		}
		if missed > 0 {
			// One line per sweep, not per row.
			cfg.Logger.Warn("sweep found overdue timers the timer window did not hold, and ticked them", "rows", missed)
		}
		if taken > 0 {
			var wg sync.WaitGroup
			for _, st := range sts {
				wg.Go(func() { st.ticked(!s.tickAll(st, out), cfg.Now()) })
			}
			wg.Wait()
			s.tickMu.Unlock()
			continue
		}
		s.tickMu.Unlock()
		wait := cfg.PumpIdle
		at := now.UnixNano()
		for _, st := range sts {
			if n := st.next(); n > 0 && n < math.MaxInt64 {
				wait = min(wait, time.Duration(n-at))
			}
		}
		if cfg.SweepInterval > 0 {
			wait = min(wait, lastSweep.Add(cfg.SweepInterval).Sub(now))
		}
		idle.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-s.timers.wake:
		case <-idle.C:
		}
	}
}

// heldBack says the pump takes no timers now: every busy partition of
// the due topic has due events older than FlowBacklog that the
// dispatchers have not completed (backlog.go). It is a gate, not a delay:
// timers taken as if the clock were behind by the excess (the rule until
// December 2026) still took every row already overdue by more than that,
// so a pump behind its timers, as it is under any lasting overload, fired
// all it could and the dispatchers' queue grew without bound (34 s and
// 300,000 rows awaiting their answers at 4x, each written to Kafka twice
// once its answer took longer than the store's MaxHold). Shut, the rows
// wait pending, and what is queued stays about FlowBacklog of the
// dispatchers' work.
func (s *Scheduler) heldBack() bool {
	return s.cfg.FlowBacklog > 0 && time.Duration(s.decider.flow.Load()) > s.cfg.FlowBacklog
}

// tickAll ticks the rows taken in st, each under its writer lock; false
// if it could not (the storage closed meanwhile, no processor runs). The
// due events the round decided go out at its end, batched.
func (s *Scheduler) tickAll(st *timerStorage, out *tickOut) bool {
	defer s.sendTickDues(st, out)
	// One context for the round, pointed at each row in turn: a tick's
	// decision is applied before onTick returns, and nothing keeps the
	// context past it.
	c := newTickCtx(s, st, out, "")
	for _, it := range st.takenKeys() {
		st.writer.Lock()
		ok := !st.isClosed() && out.ready()
		if ok {
			c.key = it
			s.onTick(c)
		}
		st.writer.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// sendTickDues sends the due events st holds through the processor's
// producer.
func (s *Scheduler) sendTickDues(st *timerStorage, out *tickOut) {
	st.writer.Lock()
	defer st.writer.Unlock()
	if out.producer() == nil {
		return // no processor runs: its successor sends the rows' fires again
	}
	c := newTickCtx(s, st, out, "")
	topic := goka.Stream(s.cfg.Topics.Due())
	st.dues.flush(s.dueKeys.partitions.Load(), func(key string, due *chimev1.Due) {
		c.encode(topic, key, due)
	})
}

// onTick looks at a row now.
func (s *Scheduler) onTick(ctx rowCtx) {
	cur := ctx.row()
	// A tick's events are named after the row's timer: the same decision
	// made again (by the next owner of a row whose decision was lost) has
	// the same ids, which analytics deduplicates on.
	in := &input{key: ctx.Key(), topic: s.tickTopic, partition: ctx.Partition()}
	if t := cur.GetTimerAt(); t != nil {
		in.offset = t.AsTime().UnixNano()
	}
	s.namespaceOf(ctx, in)
	s.tick(ctx, in, cur, s.cfg.Now())
}

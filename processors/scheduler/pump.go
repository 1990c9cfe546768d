package scheduler

// The pump turns due timers into ticks. A tick is a goka visit of the row
// (Processor.VisitAll runs the tick visitor's callback on the partition's
// goroutine, like an input record), not a Kafka record: nothing is
// produced or consumed to look at a row, and nothing can be lost or
// repeated in between. A tick is a hint to look at the row; the row
// decides (decide.go).
//
// One pump per processor: each round takes what is due in every actively
// owned partition's window (storage.go), visits those rows, and waits for
// the visits (and what they emitted) to finish before the next round. The
// sweep is the pump's safety net: every SweepInterval a round also takes
// the rows whose timer is more than SweepOverdue past that the window does
// not hold (nor a row held unwritten): a timer the window missed, logged at
// WARN with the count.

import (
	"context"
	"math"
	"time"

	"github.com/lovoo/goka"
)

const tickVisitor = "tick"

// pump runs rounds of ticks on p until ctx ends.
func (s *Scheduler) pump(ctx context.Context, p *goka.Processor) {
	cfg := s.cfg
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	lastSweep := cfg.Now()
	for ctx.Err() == nil {
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
			err := p.VisitAll(ctx, tickVisitor, nil)
			if err != nil && ctx.Err() == nil {
				// Partitions move (goka aborts visits while it stops
				// them); the entries are taken again.
				cfg.Logger.Debug("scheduler: ticks interrupted", "err", err)
			}
			for _, st := range sts {
				st.ticked(err != nil, cfg.Now())
			}
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

// onTick is the tick visitor's callback: the row is looked at now.
func (s *Scheduler) onTick(ctx goka.Context, _ any) {
	cur, held := s.current(ctx)
	// A tick's events are named after the row's timer: the same decision
	// made again (by the next owner of a row whose decision was lost) has
	// the same ids, which analytics deduplicates on.
	in := &input{key: ctx.Key(), topic: s.cfg.Topics.SchedulerTable() + "-tick", partition: ctx.Partition()}
	if t := cur.GetTimerAt(); t != nil {
		in.offset = t.AsTime().UnixNano()
	}
	s.namespaceOf(ctx, in)
	s.tick(ctx, in, cur, held, s.cfg.Now())
}

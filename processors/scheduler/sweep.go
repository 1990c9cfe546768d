package scheduler

// The sweep is the pump's safety net: every SweepInterval it visits every
// row this instance owns and ticks those whose timer is long overdue.

import (
	"context"
	"strconv"
	"time"

	"github.com/lovoo/goka"
)

const sweepVisitor = "sweep"

// sweep visits every row this instance owns every SweepInterval.
func (s *Scheduler) sweep(ctx context.Context, p *goka.Processor) {
	if s.cfg.SweepInterval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !p.Recovered() {
			continue
		}
		// VisitAll fails while partitions move; the next sweep retries.
		if err := p.VisitAll(ctx, sweepVisitor, s.cfg.Now().UnixNano()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Debug("sweep interrupted", "err", err)
		}
		// One line per sweep, not per row: a broken pump can leave many.
		if n := s.swept.Swap(0); n > 0 {
			s.cfg.Logger.Warn("sweep found overdue timers and handled them; the pump missed them", "rows", n)
		}
	}
}

// onSweep handles a row the sweep visits: one whose timer is long overdue
// is treated as ticked. meta is the sweep's start (Unix ns), which names
// its events.
func (s *Scheduler) onSweep(ctx goka.Context, meta any) {
	cur, held := s.current(ctx)
	now := s.cfg.Now()
	if cur == nil || cur.GetTimerAt() == nil || cur.GetTimerAt().AsTime().After(now.Add(-s.cfg.SweepOverdue)) {
		if held != nil && !s.holdRow(ctx, held) {
			ctx.SetValue(cur)
		}
		return
	}
	id, _ := meta.(int64)
	in := &input{key: ctx.Key(), topic: "sweep-" + strconv.FormatInt(id, 10) + "-" + ctx.Key(), partition: ctx.Partition()}
	s.namespaceOf(ctx, in)
	s.swept.Add(1)
	s.tick(ctx, in, cur, held, now)
}

package scheduler

// This file is where a record meets its decision: the goka callbacks for
// commands and ticks read the row (held unwritten or stored) and the
// namespace, ask the decider (decide.go), and write what it decided through
// the goka context, holding a row unwritten when its decision only fired
// (unwritten.go).

import (
	"bytes"
	"fmt"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func (s *Scheduler) onCommand(ctx goka.Context, msg any) {
	in := &input{key: ctx.Key(), topic: string(ctx.Topic()), partition: ctx.Partition(), offset: ctx.Offset(), partitions: s.cmdPartitions.Load()}
	in.raw, _ = msg.([]byte)
	s.namespaceOf(ctx, in)
	cur, held := s.current(ctx)
	now := s.cfg.Now()
	dec := s.decider.onCommand(in, cur, now)
	if err := dec.oversized(); err != nil {
		// The row as it was stays; the command is refused, and the
		// partition goes on with the next one.
		s.refused(ctx, err)
		dec = s.decider.refuse(in, fmt.Sprintf("command not applied: %v", err), now)
		if held != nil && !s.holdRow(ctx, held) {
			ctx.SetValue(current0(held))
		}
		held = nil
	}
	s.apply(ctx, dec, held, false)
	// Its effect is in the storage now: reads waiting for it may go.
	s.serving.reach(ctx.Partition(), ctx.Offset())
}

// refused reports a decision that was not written because a record of it
// would not fit in Kafka.
func (s *Scheduler) refused(ctx goka.Context, err error) {
	s.oversized.Inc()
	s.cfg.Logger.Error("scheduler: decision not written", "key", ctx.Key(), "err", err)
}

func (s *Scheduler) onTick(ctx goka.Context, _ any) {
	in := &input{key: ctx.Key(), topic: string(ctx.Topic()), partition: ctx.Partition(), offset: ctx.Offset()}
	s.namespaceOf(ctx, in)
	cur, held := s.current(ctx)
	s.tick(ctx, in, cur, held, s.cfg.Now())
}

// tick applies a tick's decision (from the pump or the sweep). One that
// would not fit in Kafka is not written: the row stays as it was and is
// looked at again at its next tick.
func (s *Scheduler) tick(ctx goka.Context, in *input, cur *chimev1.JobState, held []byte, now time.Time) {
	dec := s.decider.onTick(in, cur, now)
	if err := dec.oversized(); err != nil {
		s.refused(ctx, err)
		dec = decision{}
	}
	s.apply(ctx, dec, held, true)
}

// namespaceOf reads what decisions take from the row's namespace config:
// its relevancy window and spread.
func (s *Scheduler) namespaceOf(ctx goka.Context, in *input) {
	in.nsSpread = 1
	ns, _, ok := schema.SplitJobKey(ctx.Key())
	if !ok {
		return
	}
	cfg, err := s.namespaces.Get(ns)
	in.ns = namespaceState(cfg, err)
	in.nsWindow = cfg.GetRelevancyWindow().AsDuration()
	in.nsSpread = schema.Spread(cfg)
}

// current is the row as last decided: the one held unwritten (taken out;
// apply writes it or puts it back) or the stored one.
func (s *Scheduler) current(ctx goka.Context) (st *chimev1.JobState, held []byte) {
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
func (s *Scheduler) holdRow(ctx goka.Context, raw []byte) bool {
	r := unwrittenRow{partition: ctx.Partition(), value: raw}
	r.stored, r.storedOK = s.timers.stored(ctx.Partition(), ctx.Key())
	return s.unwritten.put(ctx.Key(), r)
}

// apply writes a decision through the goka context: goka commits the input
// offset only after the table write and every emit are acknowledged, so a
// crash in between replays the input. The row and the emits are separate
// Kafka writes: if the row reached Kafka and an emit did not, the replayed
// input finds the row advanced and does nothing. Open fires and
// unconfirmed Kafka-target writes are then re-sent by the next incarnation
// (recover_at); job events are lost (docs/guarantees.md, Known gaps).
//
// A tick's decision that only fires is held unwritten (unwritten.go);
// held is the row current took out of it, put back when the decision
// changes nothing.
func (s *Scheduler) apply(ctx goka.Context, d decision, held []byte, tick bool) {
	t := s.cfg.Topics
	for _, due := range d.dues {
		ctx.Emit(goka.Stream(t.Due()), s.dueKeys.key(due), due)
		s.fireLag.Observe(due.GetEmittedAt().AsTime().Sub(due.GetFireAt().AsTime()).Seconds())
	}
	if len(d.dues) > 0 {
		s.fires.WithLabelValues("http").Add(float64(len(d.dues)))
	}
	if len(d.deliver) > 0 {
		s.fires.WithLabelValues("kafka").Add(float64(len(d.deliver)))
	}
	for _, k := range d.deliver {
		var opts []goka.ContextOption
		if len(k.GetHeaders()) > 0 {
			h := goka.Headers{}
			for hk, hv := range k.GetHeaders() {
				h[hk] = []byte(hv)
			}
			opts = append(opts, goka.WithCtxEmitHeaders(h))
		}
		ctx.Emit(goka.Stream(k.GetTopic()), string(k.GetKey()), k.GetValue(), opts...)
	}
	for _, ev := range d.events {
		ctx.Emit(goka.Stream(t.JobEvents()), ev.GetNamespace(), ev)
	}
	if r := d.rejection; r != nil {
		ctx.Emit(goka.Stream(t.Rejections()), ctx.Key(), r)
		s.cfg.Logger.Info("command rejected", "key", ctx.Key(), "reason", r.GetReason())
	}
	switch {
	case d.del:
		ctx.Delete()
	case d.state != nil:
		if tick && s.hold(ctx, d, held) {
			return
		}
		ctx.SetValue(d.state)
	case held != nil:
		// Nothing changed: the row stays held as it was.
		if !s.holdRow(ctx, held) {
			ctx.SetValue(current0(held))
		}
	}
}

// hold keeps a tick's decision unwritten, and points the timer index at
// the held row's timer: a fire on a row not held yet, or a tick that left
// a held row as it was (a stale tick, or the first tick after a rebalance
// kept the partition). false: it must be written (it does more, or the
// memory for held rows is full).
func (s *Scheduler) hold(ctx goka.Context, d decision, held []byte) bool {
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
	s.timers.noteTimer(ctx.Partition(), ctx.Key(), timerOf(raw))
	return true
}

// current0 decodes a held row that must be written after all.
func current0(raw []byte) *chimev1.JobState {
	v, _ := schema.JobStateCodec{}.Decode(raw)
	st, _ := v.(*chimev1.JobState)
	return st
}

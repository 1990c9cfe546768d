package scheduler

// This file is where a record meets its decision: a command's callback
// and a tick read the row and the namespace, ask the decider (decide.go),
// and write what it decided (rowctx.go).

import (
	"fmt"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func (s *Scheduler) onCommand(gctx goka.Context, msg any) {
	st := s.timers.storage(gctx.Partition())
	if st == nil {
		gctx.Fail(fmt.Errorf("scheduler: no storage for partition %d", gctx.Partition()))
		return
	}
	// The partition's rows have one writer at a time: this callback, or
	// the pump's tick (rowctx.go). The rows it writes hold its offset back
	// from the commit until they are in Kafka (the store's write cache).
	st.writer.Lock()
	defer st.writer.Unlock()
	st.SetInput(gctx.Offset())
	defer st.SetInput(-1)
	raw, _ := msg.([]byte)
	cmd := new(chimev1.JobCommand)
	if schema.UnmarshalInput(raw, cmd) != nil {
		cmd = nil // the decider rejects it
	}
	if b := cmd.GetBatch(); b != nil && schema.ValidateCommand(cmd, schema.ValidateOptions{AllowReserved: true}) == nil {
		// A batch: each command applied to its own row, as if it came
		// alone, in order (schema's Batch).
		for i, sub := range b.GetCommands() {
			s.decideCommand(newGokaRow(s, gctx, st), schema.JobKey(sub.GetNamespace(), sub.GetJobId()), &input{sub: i + 1, cmd: sub}, gctx)
		}
	} else {
		s.decideCommand(newGokaRow(s, gctx, st), gctx.Key(), &input{raw: raw, cmd: cmd}, gctx)
	}
	// Its due events go out batched, through goka, which commits the
	// record once they are stored (duebatch.go).
	topic := goka.Stream(s.cfg.Topics.Due())
	st.dues.flush(s.dueKeys.partitions.Load(), func(key string, due *chimev1.Due) {
		gctx.Emit(topic, key, due)
	})
	// Its effect is in the storage now: reads waiting for it may go.
	s.serving.reach(gctx.Partition(), gctx.Offset())
}

// decideCommand decides one command for key's row and applies it.
func (s *Scheduler) decideCommand(ctx gokaRow, key string, in *input, gctx goka.Context) {
	ctx.rowStore.key = key
	in.key, in.topic, in.partition, in.offset, in.partitions = key, string(gctx.Topic()), gctx.Partition(), gctx.Offset(), s.cmdPartitions.Load()
	s.namespaceOf(ctx, in)
	raw, ok := ctx.rawRow()
	now := s.cfg.Now()
	if ok && in.cmd != nil && len(raw) > 0 {
		// The commonest answer is settled on the encoded row (settle.go).
		// A command check refuses is left to the decider, which refuses
		// it again and writes the rejection.
		if _, reason := s.decider.check(in, in.cmd); reason == "" {
			in.checked = true
			if out, ok := s.decider.settleOnRow(in, raw, now); ok {
				ctx.setRaw(out)
				return
			}
		}
	}
	dec := s.decider.onCommand(in, ctx.decodeRow(raw), now)
	if err := dec.oversized(); err != nil {
		// The row as it was stays; the command is refused, and the
		// partition goes on with the next one.
		s.refused(ctx, err)
		dec = s.decider.refuse(in, fmt.Sprintf("command not applied: %v", err), now)
	}
	s.apply(ctx, dec)
}

// refused reports a decision that was not written because a record of it
// would not fit in Kafka.
func (s *Scheduler) refused(ctx rowCtx, err error) {
	s.oversized.Inc()
	s.cfg.Logger.Error("scheduler: decision not written", "key", ctx.Key(), "err", err)
}

// tick applies a tick's decision (from the pump or the sweep). One that
// would not fit in Kafka is not written: the row stays as it was and is
// looked at again at its next tick.
func (s *Scheduler) tick(ctx rowCtx, in *input, cur *chimev1.JobState, now time.Time) {
	dec := s.decider.onTick(in, cur, now)
	if err := dec.oversized(); err != nil {
		s.refused(ctx, err)
		dec = decision{}
	}
	s.apply(ctx, dec)
}

// namespaceOf reads what decisions take from the row's namespace config:
// its relevancy window and spread.
func (s *Scheduler) namespaceOf(ctx rowCtx, in *input) {
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

// apply writes a decision: its records first, then the row, in the
// storage. goka commits a command once its records are stored, and the
// commit gate no further than its rows are; a tick's records and row are
// made again from the stored row after a crash. The row and the records
// are separate Kafka writes: if the row reached Kafka and a record did
// not, a replayed command finds the row advanced and does nothing. Open
// fires and unconfirmed Kafka-target writes are then re-sent by the next
// incarnation (recover_at); job events are lost (docs/guarantees.md,
// Known gaps).
func (s *Scheduler) apply(ctx rowCtx, d decision) {
	t := s.cfg.Topics
	for _, due := range d.dues {
		ctx.holdDue(s.dueKeys.key(due), due)
		s.fireLag.Observe(due.GetEmittedAt().AsTime().Sub(due.GetFireAt().AsTime()).Seconds())
	}
	if len(d.dues) > 0 {
		s.fires.WithLabelValues("http").Add(float64(len(d.dues)))
	}
	for _, r := range d.recalls {
		ctx.holdDue(s.dueKeys.key(r), r)
	}
	s.recalls.Add(float64(len(d.recalls)))
	if len(d.deliver) > 0 {
		s.fires.WithLabelValues("kafka").Add(float64(len(d.deliver)))
	}
	for _, k := range d.deliver {
		var h goka.Headers
		if len(k.GetHeaders()) > 0 {
			h = goka.Headers{}
			for hk, hv := range k.GetHeaders() {
				h[hk] = []byte(hv)
			}
		}
		ctx.emitRaw(k.GetTopic(), string(k.GetKey()), k.GetValue(), h)
	}
	for _, ev := range d.events {
		ctx.Emit(goka.Stream(t.JobEvents()), ev.GetNamespace(), ev)
	}
	if r := d.rejection; r != nil {
		ctx.Emit(goka.Stream(t.Rejections()), ctx.Key(), r)
		s.cfg.Logger.Warn("command rejected", "key", ctx.Key(), "reason", r.GetReason())
	}
	switch {
	case d.del:
		ctx.deleteRow()
	case d.state != nil:
		ctx.setRow(d.state)
	}
}

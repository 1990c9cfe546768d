package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// This file is where chime decides that a job is due. The functions here are
// pure: given the row, the input and the time, they return a decision that
// the goka callbacks (apply.go) apply. Everything that must hold across
// crashes follows from two rules:
//
//   - the row is the only authority. A tick is a hint to look at the row; a
//     tick that finds nothing due does nothing, so lost, repeated and stale
//     ticks are harmless;
//   - fire_seq only grows. Every occurrence, fired or skipped, takes the
//     next number, and the idempotency key "ns/job/fire_seq" never names
//     two different occurrences, also across upserts.

// decision is what one input does to one row.
type decision struct {
	// state is the new row; nil leaves the row as it is.
	state *chimev1.JobState
	// del removes the row.
	del       bool
	dues      []*chimev1.Due
	deliver   []*chimev1.KafkaTarget
	events    []*chimev1.JobEvent
	rejection *chimev1.Rejection
}

// onlyFires says the decision emits due events and changes nothing else
// that must reach Kafka with the row: no job event, no Kafka-target write,
// no rejection, no delete. Such a tick's row may be held unwritten.
func (d decision) onlyFires() bool {
	return len(d.dues) > 0 && d.state != nil && !d.del && len(d.events) == 0 && len(d.deliver) == 0 && d.rejection == nil
}

// emitsNothing says the decision writes nothing to Kafka but the row.
func (d decision) emitsNothing() bool {
	return !d.del && len(d.dues) == 0 && len(d.events) == 0 && len(d.deliver) == 0 && d.rejection == nil
}

// input identifies the record being processed; event IDs derive from it so
// that replaying the record yields the same IDs (analytics deduplicates on
// them).
type input struct {
	key       string
	topic     string
	partition int32
	offset    int64
	raw       []byte
	seq       int
	commandID string
	// nsWindow is the namespace's relevancy window (0: none set), from the
	// namespace table the scheduler looks up.
	nsWindow time.Duration
	// partitions is the input topic's partition count (0: unknown), to
	// refuse a record written to another partition than its key's.
	partitions int32
	// nsSpread is the namespace's effective spread (schema.Spread; 1: not
	// spread).
	nsSpread uint32
	// ns says whether the namespace exists (nswait.go).
	ns nsState
}

func (in *input) eventID() string {
	in.seq++
	return in.topic + "-" + strconv.Itoa(int(in.partition)) + "-" + strconv.FormatInt(in.offset, 10) + "-" + strconv.Itoa(in.seq)
}

// decider holds what decisions depend on besides the row and the input.
type decider struct {
	cfg     Config
	allowed map[string]bool
	// incarnation names the running goka processor; a new one starts with
	// every processor (re)start. See chimev1.Delivery.
	incarnation atomic.Pointer[string]
}

func (d *decider) currentIncarnation() string {
	if p := d.incarnation.Load(); p != nil {
		return *p
	}
	return ""
}

// onCommand applies a job command. raw is the record's value; a command that
// does not decode or validate is answered with a rejection, never a crash.
// The row it leaves fits the row budget (bound.go).
func (d *decider) onCommand(in *input, cur *chimev1.JobState, now time.Time) decision {
	dec := d.command(in, cur, now)
	d.bound(in, &dec, now)
	return dec
}

func (d *decider) command(in *input, cur *chimev1.JobState, now time.Time) decision {
	cmd := new(chimev1.JobCommand)
	if err := proto.Unmarshal(in.raw, cmd); err != nil {
		return d.reject(in, cmd, "", fmt.Sprintf("command does not decode as chime.v1.JobCommand: %v", err), now)
	}
	in.commandID = cmd.GetCommandId()
	if err := schema.ValidateCommand(cmd, schema.ValidateOptions{AllowReserved: true}); err != nil {
		field := ""
		if ve, ok := err.(*schema.ValidationError); ok {
			field = ve.Field
		}
		return d.reject(in, cmd, field, err.Error(), now)
	}
	if strings.HasPrefix(cmd.GetJobId(), schema.ReservedJobIDPrefix) {
		// chime's own jobs: only timers into chime's own topics.
		k := cmd.GetUpsert().GetSpec().GetTarget().GetKafka()
		if k == nil || k.GetTopic() != d.cfg.Topics.BreakerTimers() {
			return d.reject(in, cmd, "job_id", fmt.Sprintf("job id %q is reserved for chime's own timers (prefix %q)", cmd.GetJobId(), schema.ReservedJobIDPrefix), now)
		}
	}
	if want := schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()); want != in.key {
		return d.reject(in, cmd, "", fmt.Sprintf("record key %q does not match the command's job %q; publish with key namespace/job_id", in.key, want), now)
	}
	// A job's row lives on its key's partition: a command written to
	// another one would make a second row there, and fire the job twice.
	if in.partitions > 0 {
		if want := processors.PartitionOf(in.key, in.partitions); want != in.partition {
			return d.reject(in, cmd, "", fmt.Sprintf("record on partition %d, but key %q belongs to partition %d of %d; publish with the key-hash partitioner (producer.GokaPartitioner)", in.partition, in.key, want, in.partitions), now)
		}
	}
	if heldRow(cur) {
		return d.onHeld(in, cur, cmd, now)
	}
	if cur == nil && cmd.GetUpsert() == nil {
		return d.reject(in, cmd, "job_id", fmt.Sprintf("job %q does not exist", in.key), now)
	}
	switch c := cmd.GetCommand().(type) {
	case *chimev1.JobCommand_Upsert:
		return d.upsert(in, cmd, c.Upsert.GetSpec(), cur, now)
	case *chimev1.JobCommand_Cancel:
		return d.cancel(in, cmd, c.Cancel, cur, now)
	case *chimev1.JobCommand_Pause:
		return d.pause(in, cmd, cur, now)
	case *chimev1.JobCommand_Resume:
		return d.resume(in, cmd, cur, now)
	case *chimev1.JobCommand_Trigger:
		return d.trigger(in, cmd, cur, now)
	case *chimev1.JobCommand_Retry:
		return d.rearm(in, cur, c.Retry.GetFireSeq(), c.Retry.GetEmitSeq(), c.Retry.GetAttempt(), c.Retry.GetNotBefore().AsTime(), false, c.Retry.GetReason(), c.Retry.GetOutcome(), now)
	case *chimev1.JobCommand_Defer:
		return d.rearm(in, cur, c.Defer.GetFireSeq(), c.Defer.GetEmitSeq(), 0, c.Defer.GetNotBefore().AsTime(), true, c.Defer.GetReason(), nil, now)
	case *chimev1.JobCommand_Ack:
		return d.ack(in, cur, c.Ack, now)
	}
	return d.reject(in, cmd, "command", "no command set", now)
}

// refuse rejects the command being processed after it was decided (its
// decision could not be written).
func (d *decider) refuse(in *input, reason string, now time.Time) decision {
	ns, id, _ := schema.SplitJobKey(in.key)
	in.seq = 0 // the refused decision's event IDs were never written
	return d.reject(in, &chimev1.JobCommand{CommandId: in.commandID, Namespace: ns, JobId: id}, "", reason, now)
}

func (d *decider) reject(in *input, cmd *chimev1.JobCommand, field, reason string, now time.Time) decision {
	dec := decision{rejection: &chimev1.Rejection{
		EventId:   in.eventID(),
		CommandId: cmd.GetCommandId(),
		Namespace: cmd.GetNamespace(),
		JobId:     cmd.GetJobId(),
		Reason:    reason,
		Field:     field,
		At:        timestamppb.New(now),
		Topic:     in.topic,
		Partition: in.partition,
		Offset:    in.offset,
		Command:   in.raw,
	}}
	if len(in.raw) > schema.MaxRejectedCommand {
		dec.rejection.Command = in.raw[:schema.MaxRejectedCommand]
		dec.rejection.CommandSize = uint32(len(in.raw))
	}
	return dec
}

func (d *decider) event(in *input, st *chimev1.JobState, typ chimev1.JobEventType, now time.Time) *chimev1.JobEvent {
	return &chimev1.JobEvent{
		EventId:   in.eventID(),
		Namespace: st.GetSpec().GetNamespace(),
		JobId:     st.GetSpec().GetId(),
		Type:      typ,
		At:        timestamppb.New(now),
		FireSeq:   st.GetFireSeq(),
		CommandId: in.commandID,
	}
}

func (d *decider) upsert(in *input, cmd *chimev1.JobCommand, spec *chimev1.JobSpec, cur *chimev1.JobState, now time.Time) decision {
	if k := spec.GetTarget().GetKafka(); k != nil && k.GetTopic() == d.cfg.Topics.BreakerTimers() && !strings.HasPrefix(spec.GetId(), schema.ReservedJobIDPrefix) {
		// The breaker takes what arrives there as its own timers.
		return d.reject(in, cmd, "upsert.spec.target.kafka.topic",
			fmt.Sprintf("kafka target topic %q is chime's own (the breaker's timers); only jobs under %q may write to it", k.GetTopic(), schema.ReservedJobIDPrefix), now)
	}
	if k := spec.GetTarget().GetKafka(); k != nil && !d.allowed[k.GetTopic()] {
		return d.reject(in, cmd, "upsert.spec.target.kafka.topic",
			fmt.Sprintf("kafka target topic %q is not on the scheduler's allowlist (%s); add it with --kafka-target-topics", k.GetTopic(), allowList(d.allowed)), now)
	}
	compiled, err := schedule.Compile(spec.GetSchedule())
	if err != nil {
		return d.reject(in, cmd, "upsert.spec.schedule", err.Error(), now)
	}
	if cur == nil && in.ns != nsKnown && !strings.HasPrefix(spec.GetId(), schema.ReservedJobIDPrefix) {
		// chime's own timers (the breaker's) need no namespace config.
		return d.holdForNamespace(in, nil, now)
	}
	if cur != nil {
		if cur.GetLastCommandId() == cmd.GetCommandId() {
			return decision{} // the same command again (producer retry, replay)
		}
		if !schema.JobEnded(cur.GetStatus()) && proto.Equal(cur.GetSpec(), spec) {
			// Same spec: nothing to reschedule. Keeping the schedule as it
			// is makes a re-sent upsert harmless.
			return decision{}
		}
	}
	anchor := now
	if cmd.GetIssuedAt().IsValid() && cmd.GetIssuedAt().AsTime().Before(now) {
		// The client's view of "when" counts: a command that waited in
		// Kafka during scheduler downtime is anchored when it was issued.
		anchor = cmd.GetIssuedAt().AsTime()
	}
	st := cur
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_UPDATED
	if st == nil {
		st = &chimev1.JobState{CreatedAt: timestamppb.New(now)}
		typ = chimev1.JobEventType_JOB_EVENT_TYPE_CREATED
	}
	oneShotInFlight := cur != nil && !schema.JobEnded(cur.GetStatus()) && cur.GetFires() > 0 &&
		cur.GetNextScheduledAt() == nil && !compiled.Recurring() &&
		proto.Equal(cur.GetSpec().GetSchedule(), spec.GetSchedule())
	keepDeliveredTargets(st, spec)
	st.Spec = spec
	st.Anchor = timestamppb.New(anchor)
	plan := compiled.WithAnchor(anchor)
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	if cur == nil || cur.GetStatus() != chimev1.JobStatus_JOB_STATUS_PAUSED {
		st.Status = chimev1.JobStatus_JOB_STATUS_SCHEDULED
	}
	st.NextScheduledAt = nil
	if !oneShotInFlight {
		first, ok := plan.First(anchor)
		if last := st.GetLastScheduledAt(); ok && plan.Recurring() && last != nil && !first.After(last.AsTime()) {
			// A replaced recurring spec continues after the last occurrence
			// already fired or skipped: no occurrence goes out twice under
			// two fire_seqs.
			first, ok = plan.Next(last.AsTime())
		}
		if ok {
			st.NextScheduledAt = timestamppb.New(first)
		}
	}
	dec := decision{state: st}
	dec.events = append(dec.events, d.event(in, st, typ, now))
	d.maybeComplete(in, st, plan, &dec, now)
	d.setTimer(in.key, st)
	return dec
}

func (d *decider) cancel(in *input, cmd *chimev1.JobCommand, c *chimev1.Cancel, cur *chimev1.JobState, now time.Time) decision {
	if schema.JobEnded(cur.GetStatus()) {
		return decision{} // nothing left to cancel; keep its retention clock
	}
	st := cur
	st.Status = chimev1.JobStatus_JOB_STATUS_CANCELLED
	st.NextScheduledAt = nil
	st.Pending = nil
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	st.LastDetail = c.GetReason()
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_CANCELLED, now)
	ev.Detail = c.GetReason()
	ev.CommandId = cmd.GetCommandId()
	d.setTimer(in.key, st)
	return decision{state: st, events: []*chimev1.JobEvent{ev}}
}

func (d *decider) pause(in *input, cmd *chimev1.JobCommand, cur *chimev1.JobState, now time.Time) decision {
	switch {
	case cur.GetStatus() == chimev1.JobStatus_JOB_STATUS_PAUSED:
		return decision{}
	case schema.JobEnded(cur.GetStatus()):
		return d.reject(in, cmd, "pause", fmt.Sprintf("job %q is %s and cannot be paused", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	st := cur
	st.Status = chimev1.JobStatus_JOB_STATUS_PAUSED
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	d.setTimer(in.key, st)
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_PAUSED, now)
	ev.CommandId = cmd.GetCommandId()
	return decision{state: st, events: []*chimev1.JobEvent{ev}}
}

// trigger fires the job once now. The fire takes the next fire_seq (its
// own idempotency key, retries and dead letter like any fire); the
// schedule is untouched: next_scheduled_at stays, so a one-shot still
// fires at its time, and the occurrences after a trigger are numbered
// after it. A paused job may be triggered (Temporal allows it too); the
// fire's retries then wait for the resume, as a paused job's do.
func (d *decider) trigger(in *input, cmd *chimev1.JobCommand, cur *chimev1.JobState, now time.Time) decision {
	if schema.JobEnded(cur.GetStatus()) {
		return d.reject(in, cmd, "trigger", fmt.Sprintf("job %q is %s and cannot be triggered; create it again to fire it", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	if n := len(cur.GetOpen()); n >= d.cfg.MaxOpenFires {
		// Each trigger opens a fire that stays in the row until its last
		// attempt: unbounded triggers of a failing job would grow the row
		// past what Kafka stores.
		return d.reject(in, cmd, "trigger", fmt.Sprintf("job %q has %d fires awaiting their outcome, the most one job may hold; trigger it again when some have finished (retried to the end or dead-lettered)", in.key, n), now)
	}
	st := cur
	st.FireSeq++
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	dec := decision{state: st}
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_TRIGGERED, now)
	ev.FireSeq, ev.CommandId = st.GetFireSeq(), cmd.GetCommandId()
	dec.events = append(dec.events, ev)
	d.fire(in, st, &dec, st.GetFireSeq(), 1, 0, nil, now, now, now)
	d.setTimer(in.key, st)
	return dec
}

func (d *decider) resume(in *input, cmd *chimev1.JobCommand, cur *chimev1.JobState, now time.Time) decision {
	switch {
	case cur.GetStatus() == chimev1.JobStatus_JOB_STATUS_SCHEDULED:
		return decision{}
	case schema.JobEnded(cur.GetStatus()):
		return d.reject(in, cmd, "resume", fmt.Sprintf("job %q is %s and cannot be resumed", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	st := cur
	st.Status = chimev1.JobStatus_JOB_STATUS_SCHEDULED
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_RESUMED, now)
	ev.CommandId = cmd.GetCommandId()
	dec := decision{state: st, events: []*chimev1.JobEvent{ev}}
	plan, err := compilePlan(st)
	if err == nil && plan.Recurring() && st.GetNextScheduledAt() != nil && !st.GetNextScheduledAt().AsTime().After(now) {
		// A recurring job continues on its schedule: the occurrences that
		// fell into the pause are skipped (and reported), none is made up.
		from := st.GetNextScheduledAt().AsTime()
		last, count, _ := plan.Latest(from, now, d.cfg.CatchupScanLimit)
		st.FireSeq += count
		st.Skipped += count
		sk := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED, now)
		sk.Count = count
		sk.FirstScheduledAt = timestamppb.New(from)
		sk.LastScheduledAt = timestamppb.New(last)
		sk.Detail = "occurrences fell into a pause"
		dec.events = append(dec.events, sk)
		st.LastScheduledAt = timestamppb.New(last)
		st.NextScheduledAt = nil
		if next, ok := plan.Next(last); ok {
			st.NextScheduledAt = timestamppb.New(next)
		}
	}
	if err == nil {
		d.maybeComplete(in, st, plan, &dec, now)
	}
	d.setTimer(in.key, st)
	return dec
}

// rearm handles Retry and Defer: the occurrence fires again at notBefore.
// Only an answer to the latest emission of an open fire is taken; anything
// else is a duplicate or arrived after the fire was settled.
func (d *decider) rearm(in *input, cur *chimev1.JobState, fireSeq, emitSeq uint64, attempt uint32, notBefore time.Time, isDefer bool, reason string, failed *chimev1.CallbackOutcome, now time.Time) decision {
	if schema.JobEnded(cur.GetStatus()) {
		return decision{}
	}
	i := slices.IndexFunc(cur.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == fireSeq })
	if i < 0 {
		return decision{}
	}
	open := cur.Open[i]
	if open.GetEmitSeq() != emitSeq {
		return decision{}
	}
	if slices.ContainsFunc(cur.GetPending(), func(p *chimev1.Pending) bool { return p.GetFireSeq() == fireSeq }) {
		return decision{} // already re-armed for this emission
	}
	p := &chimev1.Pending{
		FireSeq:     fireSeq,
		Attempt:     attempt,
		NotBefore:   timestamppb.New(notBefore),
		ScheduledAt: open.GetScheduledAt(),
		Deferrals:   open.GetDeferrals(),
		History:     open.GetHistory(),
	}
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_RETRY_SCHEDULED
	if isDefer {
		p.Attempt = open.GetAttempt()
		p.Deferrals++
		typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEFERRED
	} else if attempt <= open.GetAttempt() {
		return decision{}
	} else if failed != nil {
		p.History = appendHistory(p.History, compactOutcome(failed, cur.GetSpec()))
	}
	st := cur
	// The pending retry carries the fire's history on; the emission it
	// answers keeps none (a fire's history is in the row once).
	open.History = nil
	st.Pending = append(st.Pending, p)
	st.UpdatedAt = timestamppb.New(now)
	d.setTimer(in.key, st)
	ev := d.event(in, st, typ, now)
	ev.FireSeq = fireSeq
	ev.Attempt = p.Attempt
	ev.Detail = reason
	return decision{state: st, events: []*chimev1.JobEvent{ev}}
}

func (d *decider) ack(in *input, cur *chimev1.JobState, a *chimev1.Ack, now time.Time) decision {
	i := slices.IndexFunc(cur.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == a.GetFireSeq() })
	if i < 0 {
		return decision{} // already settled: a duplicate ack
	}
	st := cur
	st.Open = slices.Delete(st.Open, i, i+1)
	st.Pending = slices.DeleteFunc(st.Pending, func(p *chimev1.Pending) bool { return p.GetFireSeq() == a.GetFireSeq() })
	st.LastResult = a.GetResult()
	st.LastDetail = a.GetDetail()
	st.UpdatedAt = timestamppb.New(now)
	dec := decision{state: st}
	switch a.GetResult() {
	case chimev1.AckResult_ACK_RESULT_FAILED, chimev1.AckResult_ACK_RESULT_DEAD:
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_DEAD, now)
		ev.FireSeq, ev.Attempt, ev.Detail = a.GetFireSeq(), a.GetAttempt(), a.GetDetail()
		dec.events = append(dec.events, ev)
	case chimev1.AckResult_ACK_RESULT_EXPIRED:
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_EXPIRED, now)
		ev.FireSeq, ev.Attempt, ev.Detail = a.GetFireSeq(), a.GetAttempt(), a.GetDetail()
		dec.events = append(dec.events, ev)
	}
	if plan, err := compilePlan(st); err == nil {
		d.maybeComplete(in, st, plan, &dec, now)
		if !d.cfg.FireEvents && !plan.Recurring() && a.GetResult() == chimev1.AckResult_ACK_RESULT_SUCCEEDED &&
			st.GetStatus() == chimev1.JobStatus_JOB_STATUS_COMPLETED && len(dec.events) > 0 {
			// A one-shot that completes because its fire succeeded: the
			// successful outcome on the outcomes stream already says so,
			// like the FIRED events FireEvents turns on (a record per job
			// less on the busiest path).
			dec.events = dec.events[:len(dec.events)-1]
		}
	}
	d.setTimer(in.key, st)
	return dec
}

// maybeComplete ends a job that has nothing left to do: no next occurrence,
// nothing in flight, nothing waiting to be retried.
func (d *decider) maybeComplete(in *input, st *chimev1.JobState, plan *schedule.Compiled, dec *decision, now time.Time) {
	if st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED ||
		st.GetNextScheduledAt() != nil || len(st.GetOpen()) > 0 || len(st.GetPending()) > 0 {
		return
	}
	st.Status = chimev1.JobStatus_JOB_STATUS_COMPLETED
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_COMPLETED
	if !plan.Recurring() && (st.GetLastResult() == chimev1.AckResult_ACK_RESULT_FAILED || st.GetLastResult() == chimev1.AckResult_ACK_RESULT_DEAD) {
		st.Status = chimev1.JobStatus_JOB_STATUS_DEAD
		typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEAD
	}
	st.UpdatedAt = timestamppb.New(now)
	ev := d.event(in, st, typ, now)
	ev.Detail = st.GetLastDetail()
	dec.events = append(dec.events, ev)
}

// onTick fires whatever in the row is due at now. The row it leaves fits
// the row budget (bound.go).
func (d *decider) onTick(in *input, cur *chimev1.JobState, now time.Time) decision {
	dec := d.tick(in, cur, now)
	d.bound(in, &dec, now)
	return dec
}

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

// fire emits one occurrence (or expires it when its relevancy window has
// passed).
func (d *decider) fire(in *input, st *chimev1.JobState, dec *decision, fireSeq uint64, attempt, deferrals uint32, history []*chimev1.CallbackOutcome, scheduledAt, fireAt, now time.Time) {
	window := d.window(in, st)
	var deadline *timestamppb.Timestamp
	if window > 0 {
		deadline = timestamppb.New(scheduledAt.Add(window))
	}
	spec := st.GetSpec()
	k := spec.GetTarget().GetKafka()
	var why string
	switch {
	case deadline != nil && now.After(deadline.AsTime()):
		st.LastResult = chimev1.AckResult_ACK_RESULT_EXPIRED
		why = fmt.Sprintf("fire %d scheduled at %s expired: relevancy window %s passed at %s", fireSeq, scheduledAt.Format(time.RFC3339Nano), window, deadline.AsTime().Format(time.RFC3339Nano))
	case k != nil && !d.allowed[k.GetTopic()]:
		// The allowlist changed since the job was accepted; emitting would
		// fail the processor (goka only writes to declared outputs).
		st.LastResult = chimev1.AckResult_ACK_RESULT_FAILED
		why = fmt.Sprintf("fire %d not delivered: kafka target topic %q is no longer on the scheduler's allowlist (%s)", fireSeq, k.GetTopic(), allowList(d.allowed))
	}
	if why != "" {
		st.Open = slices.DeleteFunc(st.Open, func(e *chimev1.Emission) bool { return e.GetFireSeq() == fireSeq })
		st.LastDetail = why
		if attempt <= 1 && deferrals == 0 {
			st.Skipped++
		}
		typ := chimev1.JobEventType_JOB_EVENT_TYPE_EXPIRED
		if st.LastResult == chimev1.AckResult_ACK_RESULT_FAILED {
			typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEAD
		}
		ev := d.event(in, st, typ, now)
		ev.FireSeq, ev.Attempt, ev.Detail = fireSeq, attempt, why
		ev.FirstScheduledAt = timestamppb.New(scheduledAt)
		dec.events = append(dec.events, ev)
		return
	}
	if attempt <= 1 && deferrals == 0 {
		st.Fires++
	}
	st.LastFiredAt = timestamppb.New(now)
	if k != nil {
		// Kafka targets are delivered by the scheduler itself, beside the
		// row update; the row keeps the write until it counts as stored
		// (confirmDeliveries).
		dec.deliver = append(dec.deliver, k)
		st.LastResult = chimev1.AckResult_ACK_RESULT_SUCCEEDED
		// The delivery refers to the spec's target (Target unset) rather
		// than copying it: a 512 KiB value copied per unconfirmed write
		// would outgrow the row. upsert keeps a copy when it replaces the
		// spec (keepDeliveredTargets).
		st.Unconfirmed = append(st.Unconfirmed, &chimev1.Delivery{
			FireSeq: fireSeq, DeliveredAt: timestamppb.New(now), Incarnation: d.currentIncarnation(),
		})
		if n := len(st.Unconfirmed) - d.cfg.MaxOpenFires; n > 0 {
			// A recurring Kafka target firing faster than ConfirmAfter: keep
			// the row bounded; the oldest are the likeliest stored.
			st.Unconfirmed = st.Unconfirmed[n:]
		}
	} else {
		st.EmitSeq++
		em := &chimev1.Emission{FireSeq: fireSeq, EmitSeq: st.GetEmitSeq(), Attempt: attempt, ScheduledAt: timestamppb.New(scheduledAt),
			Deferrals: deferrals, EmittedAt: timestamppb.New(now), Deadline: deadline, History: history, Incarnation: d.currentIncarnation()}
		dec.dues = append(dec.dues, d.due(in, st, em, fireAt, now))
		if i := slices.IndexFunc(st.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == fireSeq }); i >= 0 {
			st.Open[i] = em
		} else {
			st.Open = append(st.Open, em)
		}
		if len(st.Open) > d.cfg.MaxOpenFires {
			// Hundreds of fires without a final outcome: no dispatcher is
			// running, or a recurring job fires faster than its retries
			// end. Close the oldest so the row stays bounded; its retries,
			// if any arrive, are then ignored.
			seq := st.Open[0].GetFireSeq()
			d.dropOpen(in, st, dec, seq, fmt.Sprintf("fire %d was never acknowledged and fell out of the %d most recent open fires; it is closed as dead", seq, d.cfg.MaxOpenFires), now)
		}
	}
	if d.cfg.FireEvents {
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_FIRED, now)
		ev.FireSeq, ev.Attempt = fireSeq, attempt
		ev.FirstScheduledAt = timestamppb.New(scheduledAt)
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
func (d *decider) confirmDeliveries(in *input, st *chimev1.JobState, dec *decision, now time.Time) {
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

// due builds the due event of an emission.
func (d *decider) due(in *input, st *chimev1.JobState, em *chimev1.Emission, fireAt, now time.Time) *chimev1.Due {
	spec := st.GetSpec()
	due := &chimev1.Due{
		Namespace:      spec.GetNamespace(),
		JobId:          spec.GetId(),
		FireSeq:        em.GetFireSeq(),
		EmitSeq:        em.GetEmitSeq(),
		Attempt:        em.GetAttempt(),
		ScheduledAt:    em.GetScheduledAt(),
		FireAt:         timestamppb.New(fireAt),
		EmittedAt:      timestamppb.New(now),
		Deadline:       em.GetDeadline(),
		Callback:       spec.GetTarget().GetHttp(),
		Retry:          spec.GetRetry(),
		Labels:         spec.GetLabels(),
		IdempotencyKey: in.key + "/" + strconv.FormatUint(em.GetFireSeq(), 10),
		Deferrals:      em.GetDeferrals(),
		History:        em.GetHistory(),
	}
	if w := d.window(in, st); w > 0 {
		due.RelevancyWindow = durationpb.New(w)
	}
	if in.nsSpread > 1 {
		due.Spread = in.nsSpread
		due.Shard = schema.ShardOf(spec.GetId(), in.nsSpread)
	}
	return due
}

// MaxAttemptHistory bounds the failed attempts a fire carries (the most
// recent ones): a policy with hundreds of attempts must not grow the row and
// every due event without limit. The outcomes topic and ClickHouse keep all.
const MaxAttemptHistory = 16

// compactOutcome is what a fire's history keeps of a failed attempt: what
// the row's spec already says (namespace, job, the callback's URL and
// method) is left out, and the error and body snippet are cut to
// schema.MaxHistoryError and schema.MaxHistorySnippet. A Retry command may
// come from anyone who can write to Kafka: its size is not trusted.
// The dispatcher fills the left-out fields back in when it writes a dead
// letter (dispatcher.attemptsOf).
func compactOutcome(o *chimev1.CallbackOutcome, spec *chimev1.JobSpec) *chimev1.CallbackOutcome {
	h := proto.CloneOf(o)
	h.Namespace, h.JobId = "", ""
	if cb := spec.GetTarget().GetHttp(); cb != nil {
		if h.GetUrl() == cb.GetUrl() {
			h.Url = ""
		}
		if h.GetMethod() == cb.GetMethod() || (cb.GetMethod() == "" && h.GetMethod() == "POST") {
			h.Method = ""
		}
	}
	h.Url = schema.Truncate(h.GetUrl(), schema.MaxURLLen)
	h.Method = schema.Truncate(h.GetMethod(), 16)
	h.Error = schema.Truncate(h.GetError(), schema.MaxHistoryError)
	h.ErrorKind = schema.Truncate(h.GetErrorKind(), 64)
	h.EventId = schema.Truncate(h.GetEventId(), 256)
	h.DispatcherId = schema.Truncate(h.GetDispatcherId(), 256)
	if len(h.BodySnippet) > schema.MaxHistorySnippet {
		h.BodySnippet = h.BodySnippet[:schema.MaxHistorySnippet]
	}
	return h
}

// appendHistory adds a failed attempt to a fire's history, keeping the most
// recent MaxAttemptHistory. It copies: the slice may be shared with the
// emission it came from.
func appendHistory(h []*chimev1.CallbackOutcome, o *chimev1.CallbackOutcome) []*chimev1.CallbackOutcome {
	out := make([]*chimev1.CallbackOutcome, 0, min(len(h)+1, MaxAttemptHistory))
	if drop := len(h) + 1 - MaxAttemptHistory; drop > 0 {
		h = h[drop:]
	}
	return append(append(out, h...), o)
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

func (d *decider) redeliverAt(em *chimev1.Emission) time.Time {
	return em.GetEmittedAt().AsTime().Add(d.ackTimeout(em.GetRedeliveries()))
}

// window is the fire's relevancy window: the job's own, else its
// namespace's (the dispatcher applies the same order); 0, none.
func (d *decider) window(in *input, st *chimev1.JobState) time.Duration {
	if w := st.GetSpec().GetRelevancyWindow(); w != nil && w.AsDuration() > 0 {
		return w.AsDuration()
	}
	return max(in.nsWindow, 0)
}

func (d *decider) jitter(key string, st *chimev1.JobState, fireSeq uint64) time.Duration {
	return schedule.Jitter(st.GetSpec().GetSchedule().GetJitter().AsDuration(), key, fireSeq)
}

// setTimer recomputes the row's timer: the earliest of the next occurrence
// (with its jitter) and the pending retries; for a terminal row, the time it
// is removed. The timer is what the storage indexes.
func (d *decider) setTimer(key string, st *chimev1.JobState) {
	// timer: when the row needs a tick; recover: when a recovering
	// scheduler must look at it, if it holds writes that may need
	// re-sending (recover_at, the earliest of them).
	var timer, recover time.Time
	scheduled := st.GetStatus() == chimev1.JobStatus_JOB_STATUS_SCHEDULED
	switch {
	case scheduled:
		if n := st.GetNextScheduledAt(); n != nil {
			earliest(&timer, n.AsTime().Add(d.jitter(key, st, st.GetFireSeq()+1)))
		}
		for _, p := range st.GetPending() {
			earliest(&timer, p.GetNotBefore().AsTime())
		}
		for _, em := range st.GetOpen() {
			if d.redeliverable(st, em) {
				earliest(&timer, d.redeliverAt(em))
				earliest(&recover, em.GetEmittedAt().AsTime())
			}
		}
	case schema.JobEnded(st.GetStatus()) && d.cfg.TerminalRetention > 0:
		earliest(&timer, st.GetUpdatedAt().AsTime().Add(d.cfg.TerminalRetention))
	}
	for _, u := range st.GetUnconfirmed() {
		earliest(&timer, u.GetDeliveredAt().AsTime().Add(d.cfg.ConfirmAfter))
		earliest(&recover, u.GetDeliveredAt().AsTime())
	}
	st.TimerAt, st.RecoverAt = timestampOrNil(timer), timestampOrNil(recover)
	st.TickAt = nil
	if !timer.IsZero() && d.leads(st) {
		st.TickAt = timestamppb.New(timer.Add(-d.cfg.FireLead))
	}
}

// leads says whether the row's timers are served FireLead early: those of
// a scheduled HTTP job, whose due events the dispatcher holds until their
// time. A Kafka target is written by the scheduler itself, at its time;
// retention and confirmation timers are not fires.
func (d *decider) leads(st *chimev1.JobState) bool {
	return d.cfg.FireLead > 0 && st.GetStatus() == chimev1.JobStatus_JOB_STATUS_SCHEDULED && st.GetSpec().GetTarget().GetHttp() != nil
}

// earliest lowers *at to t (a zero *at is unset).
func earliest(at *time.Time, t time.Time) {
	if at.IsZero() || t.Before(*at) {
		*at = t
	}
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func allowList(m map[string]bool) string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	slices.Sort(l)
	if len(l) == 0 {
		return "empty"
	}
	return fmt.Sprint(l)
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

package scheduler

// Commands: a job command is decoded, validated and routed here, and the
// commands that shape the job (upsert, cancel, pause, resume, trigger) are
// decided. The dispatcher's answers (retry, defer, ack) are in outcome.go.

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

func (d *decider) command(in *input, cur *chimev1.JobState, now time.Time) decision {
	cmd := in.cmd
	if cmd == nil {
		cmd = new(chimev1.JobCommand)
		if err := schema.UnmarshalInput(in.raw, cmd); err != nil {
			return d.reject(in, cmd, "", fmt.Sprintf("command does not decode as chime.v1.JobCommand: %v", err), now)
		}
		in.cmd = cmd
	}
	in.commandID = cmd.GetCommandId()
	if !in.checked {
		if field, reason := d.check(in, cmd); reason != "" {
			return d.reject(in, cmd, field, reason, now)
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
	case *chimev1.JobCommand_Backfill:
		return d.backfill(in, cmd, c.Backfill, cur, now)
	case *chimev1.JobCommand_Retry:
		r := retryRearming(c.Retry)
		return d.answerAhead(in, cur, r.fireSeq, r.emitSeq, now, func(st *chimev1.JobState) decision { return d.rearm(in, st, r, now) })
	case *chimev1.JobCommand_Defer:
		r := deferRearming(c.Defer)
		return d.answerAhead(in, cur, r.fireSeq, r.emitSeq, now, func(st *chimev1.JobState) decision { return d.rearm(in, st, r, now) })
	case *chimev1.JobCommand_Ack:
		a := c.Ack
		return d.answerAhead(in, cur, a.GetFireSeq(), a.GetEmitSeq(), now, func(st *chimev1.JobState) decision { return d.ack(in, st, a, now) })
	}
	return d.reject(in, cmd, "command", "no command set", now)
}

// check makes the checks a command passes before it touches a row: what
// fails is rejected, naming the field (if any) and the reason.
func (d *decider) check(in *input, cmd *chimev1.JobCommand) (field, reason string) {
	if err := schema.ValidateCommand(cmd, schema.ValidateOptions{AllowReserved: true}); err != nil {
		if ve, ok := err.(*schema.ValidationError); ok {
			field = ve.Field
		}
		return field, err.Error()
	}
	if cmd.GetBatch() != nil {
		// A valid batch is applied command by command (apply.go): this is
		// one inside a batch.
		return "batch", "a batch within a batch: batches do not nest"
	}
	if strings.HasPrefix(cmd.GetJobId(), schema.ReservedJobIDPrefix) {
		// chime's own jobs: only timers into chime's own topics.
		k := cmd.GetUpsert().GetSpec().GetTarget().GetKafka()
		if k == nil || k.GetTopic() != d.cfg.Topics.BreakerTimers() {
			return "job_id", fmt.Sprintf("job id %q is reserved for chime's own timers (prefix %q)", cmd.GetJobId(), schema.ReservedJobIDPrefix)
		}
	}
	if !schema.IsJobKey(in.key, cmd.GetNamespace(), cmd.GetJobId()) {
		return "", fmt.Sprintf("record key %q does not match the command's job %q; publish with key namespace/job_id", in.key, schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()))
	}
	// A job's row lives on its key's partition: a command written to
	// another one would make a second row there, and fire the job twice.
	if in.partitions > 0 {
		if want := processors.PartitionOf(in.key, in.partitions); want != in.partition {
			return "", fmt.Sprintf("record on partition %d, but key %q belongs to partition %d of %d; publish with the key-hash partitioner (producer.GokaPartitioner)", in.partition, in.key, want, in.partitions)
		}
	}
	return "", ""
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
	st := copyRow(cur)
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_UPDATED
	if st == nil {
		// Created when the client's command was issued, as the anchor: a
		// job accepted after another is newer in the listing even when
		// its partition applied it first (and the API's read-your-writes
		// row, stamped on acceptance, keeps its place when the row lands).
		st = &chimev1.JobState{CreatedAt: timestamppb.New(anchor)}
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
	ev := d.event(in, st, typ, now)
	dec.events = append(dec.events, ev)
	if cur != nil {
		// A fire emitted ahead of its time carries the old spec: it goes
		// out under the new one, or not at all (recall.go).
		recalled := d.recallEarly(in, &dec, now)
		ev.Detail = recalledDetail("", recalled)
		if st.GetStatus() == chimev1.JobStatus_JOB_STATUS_PAUSED {
			d.pauseRecalled(in, &dec, recalled, now)
		} else {
			d.updateRecalled(in, &dec, plan, recalled, now)
		}
	}
	d.maybeComplete(in, &dec, plan, now)
	d.setTimer(in.key, st)
	return dec
}

func (d *decider) cancel(in *input, cmd *chimev1.JobCommand, c *chimev1.Cancel, cur *chimev1.JobState, now time.Time) decision {
	if schema.JobEnded(cur.GetStatus()) {
		return decision{} // nothing left to cancel; keep its retention clock
	}
	st := copyRow(cur)
	dec := decision{state: st}
	recalled := d.recallEarly(in, &dec, now)
	for _, em := range recalled {
		if firstAttempt(em) {
			st.Fires-- // it never went out
		}
	}
	st.Status = chimev1.JobStatus_JOB_STATUS_CANCELLED
	st.NextScheduledAt = nil
	st.Pending = nil
	st.Buffered = nil
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	st.LastDetail = c.GetReason()
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_CANCELLED, now)
	ev.Detail = recalledDetail(c.GetReason(), recalled)
	ev.CommandId = cmd.GetCommandId()
	d.setTimer(in.key, st)
	dec.events = append(dec.events, ev)
	return dec
}

func (d *decider) pause(in *input, cmd *chimev1.JobCommand, cur *chimev1.JobState, now time.Time) decision {
	switch {
	case cur.GetStatus() == chimev1.JobStatus_JOB_STATUS_PAUSED:
		return decision{}
	case schema.JobEnded(cur.GetStatus()):
		return d.reject(in, cmd, "pause", fmt.Sprintf("job %q is %s and cannot be paused", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	st := copyRow(cur)
	dec := decision{state: st}
	recalled := d.recallEarly(in, &dec, now)
	st.Status = chimev1.JobStatus_JOB_STATUS_PAUSED
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_PAUSED, now)
	ev.CommandId = cmd.GetCommandId()
	ev.Detail = recalledDetail("", recalled)
	dec.events = append(dec.events, ev)
	d.pauseRecalled(in, &dec, recalled, now)
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
	st := copyRow(cur)
	st.Status = chimev1.JobStatus_JOB_STATUS_SCHEDULED
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_RESUMED, now)
	ev.CommandId = cmd.GetCommandId()
	dec := decision{state: st, events: []*chimev1.JobEvent{ev}}
	plan, err := compilePlan(st)
	if err == nil && plan.Recurring() && st.GetNextScheduledAt() != nil && !st.GetNextScheduledAt().AsTime().After(now) &&
		// Occurrences in a pause are skipped, unless the job asks for
		// them by a catch-up policy of its own (latest or all): then the
		// tick that follows catches up as after downtime.
		!catchupAfterPause(st.GetSpec()) {
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
		d.maybeComplete(in, &dec, plan, now)
	}
	d.setTimer(in.key, st)
	return dec
}

// trigger fires the job once now. The fire takes the next fire_seq (its
// own idempotency key, retries and dead letter like any fire); the
// schedule is untouched: next_scheduled_at stays, so a one-shot still
// fires at its time, and the occurrences after a trigger are numbered
// after it. A paused job may be triggered (Temporal allows it too); the
// fire's retries then wait for the resume, as a paused job's do.
func (d *decider) trigger(in *input, cmd *chimev1.JobCommand, cur *chimev1.JobState, now time.Time) decision {
	if cur.GetLastCommandId() == cmd.GetCommandId() {
		// The same trigger again (a producer's retry of its publish, a
		// replay): it fired once already.
		return decision{}
	}
	if schema.JobEnded(cur.GetStatus()) {
		return d.reject(in, cmd, "trigger", fmt.Sprintf("job %q is %s and cannot be triggered; create it again to fire it", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	if n := len(cur.GetOpen()); n >= d.cfg.MaxOpenFires {
		// Each trigger opens a fire that stays in the row until its last
		// attempt: unbounded triggers of a failing job would grow the row
		// past what Kafka stores.
		return d.reject(in, cmd, "trigger", fmt.Sprintf("job %q has %d fires awaiting their outcome, the most one job may hold; trigger it again when some have finished (retried to the end or dead-lettered)", in.key, n), now)
	}
	st := copyRow(cur)
	st.FireSeq++
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	dec := decision{state: st}
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_TRIGGERED, now)
	ev.FireSeq, ev.CommandId = st.GetFireSeq(), cmd.GetCommandId()
	dec.events = append(dec.events, ev)
	d.fire(in, &dec, occurrence{fireSeq: st.GetFireSeq(), attempt: 1, scheduledAt: now, fireAt: now}, now)
	d.setTimer(in.key, st)
	return dec
}

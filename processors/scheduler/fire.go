package scheduler

// Fires: one occurrence or retry of a job becomes a due event for the
// dispatcher (HTTP targets) or a write the scheduler makes itself (Kafka
// targets), unless its relevancy window has passed.

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// occurrence is one fire of a job: the first attempt of an occurrence, a
// retry or a deferral.
type occurrence struct {
	fireSeq            uint64
	attempt, deferrals uint32
	// history is the fire's failed attempts so far.
	history []*chimev1.CallbackOutcome
	// scheduledAt is the occurrence's time (its relevancy window counts
	// from it); fireAt is when it is due, with its jitter or at its retry.
	scheduledAt, fireAt time.Time
}

// retryOccurrence is the fire a pending retry or deferral asks for.
func retryOccurrence(p *chimev1.Pending) occurrence {
	return occurrence{fireSeq: p.GetFireSeq(), attempt: p.GetAttempt(), deferrals: p.GetDeferrals(), history: p.GetHistory(),
		scheduledAt: p.GetScheduledAt().AsTime(), fireAt: p.GetNotBefore().AsTime()}
}

// fire emits one occurrence into the decision and its row (or expires it
// when its relevancy window has passed).
func (d *decider) fire(in *input, dec *decision, o occurrence, now time.Time) {
	st := dec.state
	window := d.window(in, st)
	var deadline *timestamppb.Timestamp
	if window > 0 {
		deadline = timestamppb.New(o.scheduledAt.Add(window))
	}
	spec := st.GetSpec()
	k := spec.GetTarget().GetKafka()
	var why string
	switch {
	case deadline != nil && now.After(deadline.AsTime()):
		st.LastResult = chimev1.AckResult_ACK_RESULT_EXPIRED
		why = fmt.Sprintf("fire %d scheduled at %s expired: relevancy window %s passed at %s", o.fireSeq, o.scheduledAt.Format(time.RFC3339Nano), window, deadline.AsTime().Format(time.RFC3339Nano))
	case k != nil && !d.allowed[k.GetTopic()]:
		// The allowlist changed since the job was accepted; emitting would
		// fail the processor (goka only writes to declared outputs).
		st.LastResult = chimev1.AckResult_ACK_RESULT_FAILED
		why = fmt.Sprintf("fire %d not delivered: kafka target topic %q is no longer on the scheduler's allowlist (%s)", o.fireSeq, k.GetTopic(), allowList(d.allowed))
	}
	if why != "" {
		st.Open = slices.DeleteFunc(st.Open, func(e *chimev1.Emission) bool { return e.GetFireSeq() == o.fireSeq })
		st.LastDetail = why
		if o.attempt <= 1 && o.deferrals == 0 {
			st.Skipped++
		}
		typ := chimev1.JobEventType_JOB_EVENT_TYPE_EXPIRED
		if st.LastResult == chimev1.AckResult_ACK_RESULT_FAILED {
			typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEAD
		}
		ev := d.event(in, st, typ, now)
		ev.FireSeq, ev.Attempt, ev.Detail = o.fireSeq, o.attempt, why
		ev.FirstScheduledAt = timestamppb.New(o.scheduledAt)
		dec.events = append(dec.events, ev)
		return
	}
	if o.attempt <= 1 && o.deferrals == 0 {
		st.Fires++
	}
	firedAt := now
	if o.fireAt.After(now) {
		firedAt = o.fireAt // emitted ahead of its time: the call goes out then
	}
	st.LastFiredAt = timestamppb.New(firedAt)
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
			FireSeq: o.fireSeq, DeliveredAt: timestamppb.New(now), Incarnation: d.currentIncarnation(),
		})
		if n := len(st.Unconfirmed) - d.cfg.MaxOpenFires; n > 0 {
			// A recurring Kafka target firing faster than ConfirmAfter: keep
			// the row bounded; the oldest are the likeliest stored.
			st.Unconfirmed = st.Unconfirmed[n:]
		}
	} else {
		st.EmitSeq++
		// The emission's instants are mostly two (the occurrence's, and
		// now), shared rather than allocated again (sameInstant).
		scheduled := timestamppb.New(o.scheduledAt)
		em := &chimev1.Emission{FireSeq: o.fireSeq, EmitSeq: st.GetEmitSeq(), Attempt: o.attempt, ScheduledAt: scheduled,
			Deferrals: o.deferrals, EmittedAt: sameInstant(st.LastFiredAt, now), Deadline: deadline, History: o.history, Incarnation: d.currentIncarnation(),
			FireAt: sameInstant(scheduled, o.fireAt)}
		dec.dues = append(dec.dues, d.due(in, st, em, o.fireAt, now))
		if i := slices.IndexFunc(st.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == o.fireSeq }); i >= 0 {
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
			d.dropOpen(in, dec, seq, fmt.Sprintf("fire %d was never acknowledged and fell out of the %d most recent open fires; it is closed as dead", seq, d.cfg.MaxOpenFires), now)
		}
	}
	if d.cfg.FireEvents {
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_FIRED, now)
		ev.FireSeq, ev.Attempt = o.fireSeq, o.attempt
		ev.FirstScheduledAt = timestamppb.New(o.scheduledAt)
		dec.events = append(dec.events, ev)
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
		FireAt:         sameInstant(em.GetFireAt(), fireAt),
		EmittedAt:      sameInstant(em.GetEmittedAt(), now),
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

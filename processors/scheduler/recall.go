package scheduler

// Recalls: an HTTP fire's due event leaves up to FireLead before its time,
// and the dispatcher holds it until then. A cancel, pause or update that
// the scheduler applies in that time would otherwise come too late for the
// fire: the scheduler takes the emission back with a recall on the due
// topic, keyed like the emission so that it follows it on its partition,
// and the dispatcher drops the held due event (dispatcher/recall.go).
//
// Only emissions whose fire_at is more than RecallMargin away are
// recalled: nearer, the dispatcher may be calling already, and the fire
// goes out as emitted (the row keeps it open and takes its answer). What
// becomes of a recalled fire:
//
//   - cancel: it is dropped;
//   - pause: a one-shot's fire, or a retry or deferral, waits as a pending
//     fire (its attempt not charged) and goes out after the resume, if its
//     relevancy window still allows; a recurring job's occurrence fell
//     into the pause and is skipped, as those after it will be;
//   - update: it goes out again under the new spec (new URL, body,
//     headers), same fire_seq and time, if the new schedule still has that
//     occurrence; otherwise it is dropped and the new schedule decides.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// early says whether em's due event is still held by its dispatcher, as
// far as the scheduler can tell.
func (d *decider) early(em *chimev1.Emission, now time.Time) bool {
	fa := em.GetFireAt()
	return d.cfg.FireLead > 0 && fa != nil && fa.AsTime().Sub(now) > d.cfg.RecallMargin
}

// recallEarly takes the row's early emissions back: each gets a recall,
// and leaves the row's open fires. It returns them.
func (d *decider) recallEarly(in *input, dec *decision, now time.Time) []*chimev1.Emission {
	st := dec.state
	var recalled []*chimev1.Emission
	st.Open = slices.DeleteFunc(st.Open, func(em *chimev1.Emission) bool {
		if !d.early(em, now) {
			return false
		}
		recalled = append(recalled, em)
		spec := st.GetSpec()
		r := &chimev1.Due{
			Namespace: spec.GetNamespace(), JobId: spec.GetId(), FireSeq: em.GetFireSeq(), EmitSeq: em.GetEmitSeq(),
			IdempotencyKey: d.due(in, st, em, em.GetFireAt().AsTime(), now).GetIdempotencyKey(),
			EmittedAt:      timestamppb.New(now), FireAt: em.GetFireAt(), Recall: true,
		}
		if in.nsSpread > 1 {
			r.Spread, r.Shard = in.nsSpread, schema.ShardOf(spec.GetId(), in.nsSpread)
		}
		dec.recalls = append(dec.recalls, r)
		return true
	})
	if len(st.Open) == 0 {
		st.Open = nil
	}
	return recalled
}

// firstAttempt says whether em is an occurrence's first attempt (not a
// retry or deferral).
func firstAttempt(em *chimev1.Emission) bool { return em.GetAttempt() <= 1 && em.GetDeferrals() == 0 }

// recalledDetail names the recalled fires in an event's detail.
func recalledDetail(detail string, recalled []*chimev1.Emission) string {
	if len(recalled) == 0 {
		return detail
	}
	var parts []string
	for _, em := range recalled {
		parts = append(parts, fmt.Sprintf("fire %d due at %s", em.GetFireSeq(), em.GetFireAt().AsTime().Format(time.RFC3339Nano)))
	}
	s := "recalled before its time: " + strings.Join(parts, ", ")
	if detail != "" {
		s = detail + "; " + s
	}
	return s
}

// pauseRecalled keeps a paused job's recalled fires for after the resume
// (see the file comment).
func (d *decider) pauseRecalled(in *input, dec *decision, recalled []*chimev1.Emission, now time.Time) {
	st := dec.state
	plan, err := compilePlan(st)
	for _, em := range recalled {
		if err == nil && plan.Recurring() && firstAttempt(em) {
			st.Fires--
			st.Skipped++
			sk := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED, now)
			sk.Count, sk.FireSeq = 1, em.GetFireSeq()
			sk.FirstScheduledAt, sk.LastScheduledAt = em.GetScheduledAt(), em.GetScheduledAt()
			sk.Detail = "occurrence fell into a pause (recalled before its time)"
			dec.events = append(dec.events, sk)
			continue
		}
		st.Pending = append(st.Pending, &chimev1.Pending{
			FireSeq: em.GetFireSeq(), Attempt: em.GetAttempt(), NotBefore: em.GetFireAt(), ScheduledAt: em.GetScheduledAt(),
			Deferrals: em.GetDeferrals(), History: em.GetHistory(),
		})
	}
}

// updateRecalled sends an updated job's recalled fires again under its new
// spec, those the new plan still has (see the file comment).
func (d *decider) updateRecalled(in *input, dec *decision, plan *schedule.Compiled, recalled []*chimev1.Emission, now time.Time) {
	st := dec.state
	for _, em := range recalled {
		at := em.GetScheduledAt().AsTime()
		if !firstAttempt(em) || occurs(plan, at) {
			ne := proto.CloneOf(em)
			st.EmitSeq++
			ne.EmitSeq, ne.EmittedAt, ne.Incarnation = st.GetEmitSeq(), timestamppb.New(now), d.currentIncarnation()
			ne.Deadline = nil
			if w := d.window(in, st); w > 0 {
				ne.Deadline = timestamppb.New(at.Add(w))
			}
			st.Open = append(st.Open, ne)
			dec.dues = append(dec.dues, d.due(in, st, ne, em.GetFireAt().AsTime(), now))
			continue
		}
		st.Fires-- // it never went out
	}
}

// occurs says whether plan has an occurrence at t.
func occurs(plan *schedule.Compiled, t time.Time) bool {
	next, ok := plan.Next(t.Add(-time.Nanosecond))
	return ok && next.Equal(t)
}

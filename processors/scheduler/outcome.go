package scheduler

// Outcomes: the dispatcher answers each emission with a retry, a defer or
// an ack; the fire is re-armed or settled, and a job with nothing left to do
// ends.

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

// rearming is a Retry or a Defer: the dispatcher's answer to emission
// emitSeq of fire fireSeq, asking for the fire again at notBefore.
type rearming struct {
	fireSeq, emitSeq uint64
	// attempt is the retry's attempt number; a deferral keeps the
	// emission's.
	attempt   uint32
	notBefore time.Time
	deferral  bool
	reason    string
	// failed is the failed attempt a retry reports (its fire's history
	// keeps it).
	failed *chimev1.CallbackOutcome
}

func retryRearming(r *chimev1.Retry) rearming {
	return rearming{fireSeq: r.GetFireSeq(), emitSeq: r.GetEmitSeq(), attempt: r.GetAttempt(), notBefore: r.GetNotBefore().AsTime(),
		reason: r.GetReason(), failed: r.GetOutcome()}
}

func deferRearming(df *chimev1.Defer) rearming {
	return rearming{fireSeq: df.GetFireSeq(), emitSeq: df.GetEmitSeq(), notBefore: df.GetNotBefore().AsTime(),
		deferral: true, reason: df.GetReason()}
}

// rearm handles Retry and Defer: the occurrence fires again at notBefore.
// Only an answer to the latest emission of an open fire is taken; anything
// else is a duplicate or arrived after the fire was settled.
func (d *decider) rearm(in *input, cur *chimev1.JobState, r rearming, now time.Time) decision {
	if schema.JobEnded(cur.GetStatus()) {
		return decision{}
	}
	i := slices.IndexFunc(cur.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == r.fireSeq })
	if i < 0 {
		return decision{}
	}
	open := cur.Open[i]
	if open.GetEmitSeq() != r.emitSeq {
		return decision{}
	}
	if slices.ContainsFunc(cur.GetPending(), func(p *chimev1.Pending) bool { return p.GetFireSeq() == r.fireSeq }) {
		return decision{} // already re-armed for this emission
	}
	p := &chimev1.Pending{
		FireSeq:     r.fireSeq,
		Attempt:     r.attempt,
		NotBefore:   timestamppb.New(r.notBefore),
		ScheduledAt: open.GetScheduledAt(),
		Deferrals:   open.GetDeferrals(),
		History:     open.GetHistory(),
	}
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_RETRY_SCHEDULED
	if r.deferral {
		p.Attempt = open.GetAttempt()
		p.Deferrals++
		typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEFERRED
	} else if r.attempt <= open.GetAttempt() {
		return decision{}
	} else if r.failed != nil {
		p.History = appendHistory(p.History, compactOutcome(r.failed, cur.GetSpec()))
	}
	st := copyRow(cur)
	// The pending retry carries the fire's history on; the emission it
	// answers keeps none (a fire's history is in the row once).
	st.Open[i].History = nil
	st.Pending = append(st.Pending, p)
	st.UpdatedAt = timestamppb.New(now)
	d.setTimer(in.key, st)
	ev := d.event(in, st, typ, now)
	ev.FireSeq = r.fireSeq
	ev.Attempt = p.Attempt
	ev.Detail = r.reason
	return decision{state: st, events: []*chimev1.JobEvent{ev}}
}

func (d *decider) ack(in *input, cur *chimev1.JobState, a *chimev1.Ack, now time.Time) decision {
	i := slices.IndexFunc(cur.GetOpen(), func(e *chimev1.Emission) bool { return e.GetFireSeq() == a.GetFireSeq() })
	if i < 0 {
		return decision{} // already settled: a duplicate ack
	}
	st := copyRow(cur)
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
		d.pauseOnFailure(in, &dec, plan, a, now)
		d.releaseBuffered(in, &dec, now)
		d.maybeComplete(in, &dec, plan, now)
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

// pauseOnFailure pauses a recurring job with spec.pause_on_failure whose
// fire ended FAILED or DEAD, while it has occurrences left: the reason in
// its last detail and a PAUSED event naming the fire. Fires emitted ahead
// of their time are recalled, as a paused job's are.
func (d *decider) pauseOnFailure(in *input, dec *decision, plan *schedule.Compiled, a *chimev1.Ack, now time.Time) {
	st := dec.state
	res := a.GetResult()
	if !st.GetSpec().GetPauseOnFailure() || !plan.Recurring() || st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED ||
		st.GetNextScheduledAt() == nil || (res != chimev1.AckResult_ACK_RESULT_FAILED && res != chimev1.AckResult_ACK_RESULT_DEAD) {
		return
	}
	recalled := d.recallEarly(in, dec, now)
	st.Status = chimev1.JobStatus_JOB_STATUS_PAUSED
	reason := fmt.Sprintf("paused on failure (pause_on_failure): fire %d ended %s", a.GetFireSeq(), strings.ToLower(strings.TrimPrefix(res.String(), "ACK_RESULT_")))
	if detail := a.GetDetail(); detail != "" {
		reason += ": " + detail
	}
	st.LastDetail = reason
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_PAUSED, now)
	ev.FireSeq, ev.Detail = a.GetFireSeq(), recalledDetail(reason, recalled)
	dec.events = append(dec.events, ev)
	d.pauseRecalled(in, dec, recalled, now)
}

// maybeComplete ends a job that has nothing left to do: no next occurrence,
// nothing in flight, nothing waiting to be retried.
func (d *decider) maybeComplete(in *input, dec *decision, plan *schedule.Compiled, now time.Time) {
	st := dec.state
	if m := st.GetSpec().GetMaxFires(); m > 0 && st.GetScheduledFires() >= uint64(m) {
		// Its schedule has fired max_fires times: no occurrence is left.
		st.NextScheduledAt = nil
	}
	if st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED ||
		st.GetNextScheduledAt() != nil || len(st.GetOpen()) > 0 || len(st.GetPending()) > 0 || st.GetBuffered() != nil {
		return
	}
	st.Status = chimev1.JobStatus_JOB_STATUS_COMPLETED
	typ := chimev1.JobEventType_JOB_EVENT_TYPE_COMPLETED
	if !plan.Recurring() && (st.GetLastResult() == chimev1.AckResult_ACK_RESULT_FAILED || st.GetLastResult() == chimev1.AckResult_ACK_RESULT_DEAD) {
		st.Status = chimev1.JobStatus_JOB_STATUS_DEAD
		typ = chimev1.JobEventType_JOB_EVENT_TYPE_DEAD
	}
	st.UpdatedAt = sameInstant(st.GetUpdatedAt(), now)
	ev := d.event(in, st, typ, now)
	ev.Detail = st.GetLastDetail()
	dec.events = append(dec.events, ev)
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

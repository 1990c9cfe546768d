package scheduler

// Overlap policies (chimev1.OverlapPolicy): what an occurrence of a
// recurring job does when it falls due while an earlier fire is still open
// (sent and awaiting its outcome, or waiting for a retry). Decided from
// the row alone, so a replay decides the same.

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

func hasOverlapPolicy(spec *chimev1.JobSpec) bool {
	switch spec.GetOverlap() {
	case chimev1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED, chimev1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL:
		return false
	}
	return true
}

func seqList(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

// overlap applies the job's overlap policy to occurrence o and says
// whether it fires now.
func (d *decider) overlap(in *input, dec *decision, o occurrence, now time.Time) bool {
	st := dec.state
	open := fireSeqsOf(st)
	if len(open) == 0 || !hasOverlapPolicy(st.GetSpec()) {
		return true
	}
	switch st.GetSpec().GetOverlap() {
	case chimev1.OverlapPolicy_OVERLAP_POLICY_SKIP:
		d.overlapSkip(in, dec, o, fmt.Sprintf("overlap policy skip: fire %s still open", seqList(open)), now)
		return false
	case chimev1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:
		if b := st.GetBuffered(); b != nil {
			d.overlapSkip(in, dec, o, fmt.Sprintf("overlap policy buffer_one: fire %s still open and occurrence %d already waiting", seqList(open), b.GetFireSeq()), now)
			return false
		}
		st.Buffered = &chimev1.Buffered{FireSeq: o.fireSeq, ScheduledAt: timestamppb.New(o.scheduledAt)}
		return false
	case chimev1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER:
		// The calls in flight cannot be taken back; what is dropped is
		// every attempt after them: their answers (a retry, an ack) find
		// no open fire and change nothing.
		st.Open, st.Pending = nil, nil
		ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SUPERSEDED, now)
		ev.FireSeq = o.fireSeq
		ev.Count = uint64(len(open))
		ev.Detail = fmt.Sprintf("overlap policy cancel_other: the remaining attempts of fire %s are dropped; fire %d goes out", seqList(open), o.fireSeq)
		dec.events = append(dec.events, ev)
	}
	return true
}

// overlapSkip records occurrence o as skipped: it keeps its number.
func (d *decider) overlapSkip(in *input, dec *decision, o occurrence, why string, now time.Time) {
	st := dec.state
	st.Skipped++
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED, now)
	ev.Count, ev.FireSeq, ev.Detail = 1, o.fireSeq, why
	ev.FirstScheduledAt = timestamppb.New(o.scheduledAt)
	ev.LastScheduledAt = ev.FirstScheduledAt
	dec.events = append(dec.events, ev)
}

// releaseBuffered fires the occurrence buffer_one held back once no fire
// is open, at once: it is late by the time the open ones took.
func (d *decider) releaseBuffered(in *input, dec *decision, now time.Time) {
	st := dec.state
	b := st.GetBuffered()
	if b == nil || st.GetStatus() != chimev1.JobStatus_JOB_STATUS_SCHEDULED || len(fireSeqsOf(st)) > 0 {
		return
	}
	st.Buffered = nil
	d.fireScheduled(in, dec, occurrence{fireSeq: b.GetFireSeq(), attempt: 1, scheduledAt: b.GetScheduledAt().AsTime(), fireAt: now}, now)
}

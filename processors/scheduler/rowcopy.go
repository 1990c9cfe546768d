package scheduler

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/chime-sched/chime/schema/chimev1"
)

// The decider does not change the row it is given: a decision that changes
// the row works on copyRow's copy and returns it as decision.state.
//
// copyRow copies what decisions change and shares what they only replace.
// Decisions set the row's fields, edit its lists (open fires, pending
// retries, unconfirmed writes) in place and set fields of their elements,
// so those are copied, one level deep. They never change the spec, a
// timestamp, an attempt's outcome, a history list or the held command in
// place (they put a new one in the field), so those are shared with the
// input. proto.Clone would copy them all, at several times the cost of a
// whole decision (BenchmarkDecide).
//
// A field added to these messages must be added here too:
// TestCopyRowCopiesEveryField fails until it is.
func copyRow(st *chimev1.JobState) *chimev1.JobState {
	if st == nil {
		return nil
	}
	c := &chimev1.JobState{
		Spec:            st.Spec,
		Status:          st.Status,
		FireSeq:         st.FireSeq,
		NextScheduledAt: st.NextScheduledAt,
		TimerAt:         st.TimerAt,
		Pending:         copyList(st.Pending, copyPending),
		Open:            copyList(st.Open, copyEmission),
		EmitSeq:         st.EmitSeq,
		CreatedAt:       st.CreatedAt,
		UpdatedAt:       st.UpdatedAt,
		Anchor:          st.Anchor,
		Fires:           st.Fires,
		Skipped:         st.Skipped,
		LastResult:      st.LastResult,
		LastFiredAt:     st.LastFiredAt,
		LastCommandId:   st.LastCommandId,
		LastDetail:      st.LastDetail,
		LastScheduledAt: st.LastScheduledAt,
		Unconfirmed:     copyList(st.Unconfirmed, copyDelivery),
		RecoverAt:       st.RecoverAt,
		HeldCommand:     st.HeldCommand,
		HeldUntil:       st.HeldUntil,
		TickAt:          st.TickAt,
		ScheduledFires:  st.ScheduledFires,
		Buffered:        st.Buffered,
	}
	copyUnknown(c, st)
	return c
}

func copyEmission(e *chimev1.Emission) *chimev1.Emission {
	c := &chimev1.Emission{
		FireSeq:      e.FireSeq,
		EmitSeq:      e.EmitSeq,
		Attempt:      e.Attempt,
		ScheduledAt:  e.ScheduledAt,
		Deferrals:    e.Deferrals,
		EmittedAt:    e.EmittedAt,
		Redeliveries: e.Redeliveries,
		Deadline:     e.Deadline,
		History:      e.History,
		Incarnation:  e.Incarnation,
		FireAt:       e.FireAt,
	}
	copyUnknown(c, e)
	return c
}

func copyPending(p *chimev1.Pending) *chimev1.Pending {
	c := &chimev1.Pending{
		FireSeq:     p.FireSeq,
		Attempt:     p.Attempt,
		NotBefore:   p.NotBefore,
		ScheduledAt: p.ScheduledAt,
		Deferrals:   p.Deferrals,
		History:     p.History,
	}
	copyUnknown(c, p)
	return c
}

func copyDelivery(u *chimev1.Delivery) *chimev1.Delivery {
	c := &chimev1.Delivery{
		FireSeq:      u.FireSeq,
		Target:       u.Target,
		DeliveredAt:  u.DeliveredAt,
		Incarnation:  u.Incarnation,
		Redeliveries: u.Redeliveries,
	}
	copyUnknown(c, u)
	return c
}

// copyList copies a list and each of its elements; nil stays nil.
func copyList[M any](l []*M, copyOne func(*M) *M) []*M {
	if l == nil {
		return nil
	}
	c := make([]*M, len(l))
	for i, m := range l {
		if m != nil {
			c[i] = copyOne(m)
		}
	}
	return c
}

// copyUnknown keeps the fields a newer chime wrote that this one does not
// know: the row is written back with them, as before it was copied.
func copyUnknown(dst, src interface{ ProtoReflect() protoreflect.Message }) {
	if u := src.ProtoReflect().GetUnknown(); len(u) > 0 {
		dst.ProtoReflect().SetUnknown(u)
	}
}

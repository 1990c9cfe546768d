package scheduler

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// backfill fires now the occurrences of the job's schedule in [from, to),
// each with a fire number of its own (after the job's last), under its
// overlap policy. They do not count toward max_fires, and the schedule's
// own next occurrence is unchanged.
func (d *decider) backfill(in *input, cmd *chimev1.JobCommand, b *chimev1.Backfill, cur *chimev1.JobState, now time.Time) decision {
	if cur.GetLastCommandId() == cmd.GetCommandId() {
		return decision{} // the same backfill again: it fired once
	}
	if schema.JobEnded(cur.GetStatus()) {
		return d.reject(in, cmd, "backfill", fmt.Sprintf("job %q is %s and cannot be backfilled; create it again", in.key, schema.JobStatusName(cur.GetStatus())), now)
	}
	plan, err := compilePlan(cur)
	if err != nil || !plan.Recurring() {
		return d.reject(in, cmd, "backfill", fmt.Sprintf("job %q is a one-shot; backfill fires the occurrences of a recurring schedule (trigger fires a one-shot now)", in.key), now)
	}
	from, to := b.GetFrom().AsTime(), b.GetTo().AsTime()
	if to.After(now) {
		return d.reject(in, cmd, "backfill.to", fmt.Sprintf("%s is after now (%s); a backfill fires past occurrences, the schedule fires those to come", to.Format(time.RFC3339), now.Format(time.RFC3339)), now)
	}
	occ := plan.Between(from, to, schema.MaxBackfill+1)
	switch {
	case len(occ) == 0:
		return d.reject(in, cmd, "backfill", fmt.Sprintf("job %q has no occurrence from %s to %s", in.key, from.Format(time.RFC3339), to.Format(time.RFC3339)), now)
	case len(occ) > schema.MaxBackfill:
		return d.reject(in, cmd, "backfill", fmt.Sprintf("more than %d occurrences from %s to %s; backfill a shorter range at a time", schema.MaxBackfill, from.Format(time.RFC3339), to.Format(time.RFC3339)), now)
	case len(cur.GetOpen())+len(occ) > d.cfg.MaxOpenFires:
		return d.reject(in, cmd, "backfill", fmt.Sprintf("job %q holds %d open fires; %d more would pass the %d one job may hold", in.key, len(cur.GetOpen()), len(occ), d.cfg.MaxOpenFires), now)
	}
	st := copyRow(cur)
	st.UpdatedAt = timestamppb.New(now)
	st.LastCommandId = cmd.GetCommandId()
	dec := decision{state: st}
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_TRIGGERED, now)
	ev.CommandId, ev.Count = cmd.GetCommandId(), uint64(len(occ))
	ev.FirstScheduledAt, ev.LastScheduledAt = timestamppb.New(occ[0]), timestamppb.New(occ[len(occ)-1])
	ev.Detail = fmt.Sprintf("backfill of %d occurrences from %s to %s", len(occ), occ[0].Format(time.RFC3339), occ[len(occ)-1].Format(time.RFC3339))
	dec.events = append(dec.events, ev)
	for _, t := range occ {
		st.FireSeq++
		o := occurrence{fireSeq: st.GetFireSeq(), attempt: 1, scheduledAt: t, fireAt: now}
		if d.overlap(in, &dec, o, now) {
			d.fire(in, &dec, o, now)
		}
	}
	ev.FireSeq = st.GetFireSeq()
	d.setTimer(in.key, st)
	return dec
}
